"""The four training tasks, one class each behind the small `Task` protocol that train_model drives:

  LanguageModelTask  rnn_lm, tiny_gpt: next-token prediction on <bos> s <eos>
  Seq2SeqTask        seq2seq: the target given the source, teacher-forced (<bos> t -> t <eos>)
  MaskedLMTask       masked_lm: BERT's masked-LM objective, masks drawn anew every epoch (RoBERTa's dynamic masking)
  SkipGramTask       word2vec: skip-gram with negative sampling (Mikolov et al. 2013)

Each builds its vocabulary and model from the spec and corpus (the model checked against the spec's budget first,
the batch size lowered to fit), yields batches, computes the loss of one, and evaluates on the held-out part in
batches that stop when the run's time is up.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import torch
import torch.nn as nn
import torch.nn.functional as F

from explorer.data.vocab import Vocab
from explorer.metrics import held_out as M
from explorer.models.build import ModelConfig, build_model
from explorer.training.budget import fit_batch
from explorer.training.clock import NO_CLOCK, Clock
from explorer.training.corpus import (BOS, EOS, MASK, MASK_TOKEN, PAD, REAL_ENGLISH, Corpus, E, Pair, Sentence,
                                      bucketed_batches, chunks, data_module)
from explorer.training.evaluation import (agreement_eval, masked_word_accuracy, natural_agreement_eval,
                                          natural_masked_agreement)
from explorer.training.spec import TrainSpec

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSONDict

B = TypeVar("B")
T = TypeVar("T")


class Task(Protocol[B]):
    """What train_model asks of a task. `B` is one batch as `loss` reads it."""

    model: nn.Module
    config: ModelConfig      # the model's constructor arguments (checkpoint meta "config")
    notes: list[str]         # for the page: a lowered batch size, an evaluation cut short

    def steps_per_epoch(self) -> int: ...

    def batches(self, rng: random.Random, epoch: int) -> Iterator[B]: ...

    def loss(self, batch: B) -> torch.Tensor:
        """The mean training loss of `batch`, a scalar with gradients."""
        ...

    def heldout_loss(self) -> float | None:
        """The mean loss over the held-out examples (None: none evaluated)."""
        ...

    def evaluate(self, full: bool) -> JSONDict:
        """Held-out metrics of the trained model (full: the slower ones too)."""
        ...

    def vocab_meta(self) -> JSONDict:
        """The vocabularies as the checkpoint stores them ("vocab", or "src_vocab" and "tgt_vocab")."""
        ...


class TaskBase(Generic[E]):
    """What the four tasks share: the run's clock, notes for the page, the batch size that fits the budget, and
    held-out evaluation in batches that stop when the run's time is up. `E`: one example of the corpus."""

    model: nn.Module
    config: ModelConfig
    corpus: Corpus[E]

    def __init__(self, spec: TrainSpec, corpus: Corpus[E], device: str, clock: Clock | None) -> None:
        self.spec, self.corpus, self.device = spec, corpus, device
        self.clock = clock or NO_CLOCK
        self.notes: list[str] = []
        self.batch_size = spec.batch_size

    def _build(self, length: int) -> None:
        """Check the model against the spec's budget for examples of `length` tokens (lowering the batch size to
        fit), then build it."""
        self.batch_size, note = fit_batch(self.spec.architecture, self.config, length, self.spec.batch_size,
                                          self.spec.max_params, self.spec.max_memory_mb, self.spec.negatives)
        if note:
            self.notes.append(note)
        self.clock.check("checking the model's size")
        self.model = build_model(self.spec.architecture, self.config)

    def _eval_batches(self, items: Sequence[T], size: int, what: str) -> Iterator[Sequence[T]]:
        """Consecutive slices of `items` of `size`, until the run's time is up (then a note says how far it got)."""
        for i in range(0, len(items), size):
            if self.clock.over():
                if not self.clock.cancelled():
                    self.notes.append(f"The {what} covers {i:,} of {len(items):,} held-out examples: the time "
                                      "limit ran out.")
                return
            yield items[i:i + size]

    def _eval_size(self, usual: int) -> int:
        """Evaluation batch: the usual one, or, under a memory budget, at most twice the training batch that fits
        (no gradients are kept)."""
        return usual if self.spec.max_memory_mb is None else max(1, min(usual, 2 * self.batch_size))


# ============================================================================================== language modelling
class LanguageModelTask(TaskBase[Sentence]):
    """rnn_lm / tiny_gpt: next-token prediction on <bos> s <eos>. A batch: ids (B, T+1), PAD-padded."""

    def __init__(self, spec: TrainSpec, corpus: Corpus[Sentence], device: str, clock: Clock | None = None) -> None:
        super().__init__(spec, corpus, device, clock)
        self.vocab = Vocab.build(corpus.train, min_freq=spec.min_freq, max_size=spec.max_vocab)
        V = len(self.vocab)
        if spec.architecture == "rnn_lm":
            self.config = dict(vocab_size=V, emb_dim=spec.emb_dim, hidden_size=spec.hidden_size,
                               num_layers=spec.num_layers, cell=spec.cell, dropout=spec.dropout)
            if spec.tie_weights:
                self.config["tie_weights"] = True
        else:
            self.config = dict(vocab_size=V, block_size=spec.block_size, n_layer=spec.num_layers,
                               n_head=spec.n_head, n_embd=spec.hidden_size, dropout=spec.dropout)
        max_len = spec.block_size + 1
        each = self.clock.each
        self.train_ids = [c for s in each(corpus.train, "encoding the corpus")
                          for c in chunks([BOS, *self.vocab.encode(s), EOS], max_len)]
        self.held_ids = [self.vocab.encode(s) for s in each(corpus.heldout, "encoding the held-out text")]
        self.lengths = [len(s) for s in self.train_ids]
        self._build(max(self.lengths, default=2) - 1)
        self._last_nll: tuple[float, int] | None = None

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_ids) / self.batch_size)

    def batches(self, rng: random.Random, epoch: int) -> Iterator[torch.Tensor]:
        for idx in bucketed_batches(len(self.train_ids), self.lengths, self.batch_size, rng):
            yield M.pad_batch([self.train_ids[i] for i in idx]).to(self.device)

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        logits = M.lm_logits(self.model, batch[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1), ignore_index=PAD)

    def _held_eval_ids(self) -> list[list[int]]:
        # the LM scores <bos> s <eos>; sequences longer than the context are cut to fit
        return [s[: self.spec.block_size - 1] for s in self.held_ids]

    def _held_nll(self) -> tuple[float, int]:
        """M.lm_nll over the held-out sentences, shortest first in batches of 128 (the batches lm_nll makes), until
        the run's time is up."""
        held = sorted(self._held_eval_ids(), key=len)
        total, n = 0.0, 0
        size = self._eval_size(128)
        for part in self._eval_batches(held, size, "held-out loss"):
            t, c = M.lm_nll(self.model, part, batch_size=size, device=self.device)
            total, n = total + t, n + c
        self._last_nll = (total, n)
        return total, n

    def heldout_loss(self) -> float | None:
        total, n = self._held_nll()
        return total / n if n else None

    def evaluate(self, full: bool) -> JSONDict:
        held = self._held_eval_ids()
        # the final model's held-out loss was just computed (train_model evaluates after the last epoch)
        total, n = self._last_nll if self._last_nll is not None else self._held_nll()
        perplexity = math.exp(total / n) if n else None
        out: JSONDict = {"heldout_perplexity": perplexity}
        if full and perplexity is not None and not self.clock.over():
            train_ids = [self.vocab.encode(s) for s in self.corpus.train]
            ppl, k = M.bigram_perplexity(train_ids, held, len(self.vocab))
            out["bigram_perplexity"], out["bigram_k"] = ppl, k
            out["perplexity_reduction_vs_bigram"] = 1 - perplexity / ppl
            if self.corpus.generator == "english" and self.corpus.level == "word":
                out["agreement"] = agreement_eval(self.model, self.vocab, device=self.device)
            elif self.corpus.generator in REAL_ENGLISH and self.corpus.level == "word":
                out["natural_agreement"] = natural_agreement_eval(self.model, self.vocab, device=self.device)
        return out

    def vocab_meta(self) -> JSONDict:
        return {"vocab": list(self.vocab.itos)}


# ============================================================================================== sequence to sequence
class Seq2SeqTask(TaskBase[Pair]):
    """seq2seq: cross-entropy of the target given the source, teacher-forced. A batch: src (B, S), the decoder's
    input <bos> t (B, T+1) and its labels t <eos> (B, T+1), PAD-padded."""

    def __init__(self, spec: TrainSpec, corpus: Corpus[Pair], device: str, clock: Clock | None = None) -> None:
        super().__init__(spec, corpus, device, clock)
        self.src_vocab = Vocab.build([s for s, _ in corpus.train], min_freq=spec.min_freq, max_size=spec.max_vocab)
        self.tgt_vocab = Vocab.build([t for _, t in corpus.train], min_freq=spec.min_freq, max_size=spec.max_vocab)
        self.config = dict(src_vocab_size=len(self.src_vocab), tgt_vocab_size=len(self.tgt_vocab),
                           emb_dim=spec.emb_dim, hidden_size=spec.hidden_size, attention=spec.attention,
                           num_layers=spec.num_layers, dropout=spec.dropout)
        if spec.bidirectional:
            self.config["bidirectional"] = True
        if spec.input_feeding:
            self.config["input_feeding"] = True
        self.train_pairs = self._encode(corpus.train, "encoding the corpus")
        self.held_pairs = self._encode(corpus.heldout, "encoding the held-out pairs")
        self.lengths = [len(s) for s, _ in self.train_pairs]
        self.max_len = max(len(t) for _, t in self.train_pairs + self.held_pairs) + 5
        self._build(max(self.lengths, default=1) + self.max_len - 4)

    def _encode(self, pairs: list[Pair], doing: str) -> list[tuple[list[int], list[int]]]:
        return [(self.src_vocab.encode(s), self.tgt_vocab.encode(t)) for s, t in self.clock.each(pairs, doing)]

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_pairs) / self.batch_size)

    def _tensors(self, pairs: Sequence[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor,
                                                                              torch.Tensor]:
        src = M.pad_batch([s for s, _ in pairs]).to(self.device)
        tin = M.pad_batch([[BOS, *t] for _, t in pairs]).to(self.device)
        tout = M.pad_batch([[*t, EOS] for _, t in pairs]).to(self.device)
        return src, tin, tout

    def batches(self, rng: random.Random, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        for idx in bucketed_batches(len(self.train_pairs), self.lengths, self.batch_size, rng):
            yield self._tensors([self.train_pairs[i] for i in idx])

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor], reduction: str = "mean") -> torch.Tensor:
        src, tin, tout = batch
        logits, _ = self.model(src, tin)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tout.reshape(-1), ignore_index=PAD,
                               reduction=reduction)

    @torch.no_grad()
    def heldout_loss(self) -> float | None:
        self.model.eval()
        total, n = 0.0, 0
        for part in self._eval_batches(self.held_pairs, self._eval_size(256), "held-out loss"):
            batch = self._tensors(part)
            total += float(self.loss(batch, reduction="sum"))
            n += int((batch[2] != PAD).sum())
        return total / n if n else None

    def evaluate(self, full: bool) -> JSONDict:
        size = self._eval_size(256)
        preds: list[list[int]] = []
        done: list[tuple[list[int], list[int]]] = []
        held = sorted(self.held_pairs, key=lambda p: len(p[0]))  # the batches greedy_batch would make of them all
        for part in self._eval_batches(held, size, "exact-match evaluation"):
            preds += M.seq2seq_predictions(self.model, [s for s, _ in part], max_len=self.max_len,
                                           batch_size=size, device=self.device)
            done += part
        srcs = [s for s, _ in done]
        refs = [t for _, t in done]
        if not done:
            return {"exact_match": None, "token_accuracy": None}
        out: JSONDict = {"exact_match": M.exact_match(preds, refs),
                         "token_accuracy": M.token_accuracy(preds, refs)}
        if full:
            out["exact_match_by_source_length"] = {b: {"exact_match": v["exact_match"], "n": v["n"]}
                                                   for b, v in M.accuracy_by_length(preds, refs, srcs).items()}
        return out

    def vocab_meta(self) -> JSONDict:
        return {"src_vocab": list(self.src_vocab.itos), "tgt_vocab": list(self.tgt_vocab.itos)}


# ============================================================================================== masked LM
def mask_tokens(ids: torch.Tensor, gen: torch.Generator, vocab_size: int,
                rate: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (bert_masking) of a padded batch ids (B, T) of this project's vocabularies: the word positions
    (ids > MASK: not <pad>, <unk>, <bos>, <eos>, <mask>) may be chosen, a random replacement is a word; labels are
    PAD where nothing was chosen."""
    return bert_masking(ids, ids > MASK, gen, MASK, (MASK + 1, vocab_size), PAD, rate)


def bert_masking(ids: torch.Tensor, word: torch.Tensor, gen: torch.Generator, mask_id: int,
                 replacements: tuple[int, int], ignore: int, rate: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of a padded batch ids (B, T): `rate` of the positions where `word` (B, T) is true are chosen,
    at least one per sentence; 80 % of the chosen become `mask_id`, 10 % a random id in [replacements), 10 % stay.
    Returns (inputs (B, T), labels (B, T): the original id at chosen positions, `ignore` elsewhere)."""
    chosen = (torch.rand(ids.shape, generator=gen) < rate) & word
    none = (chosen.sum(1) == 0) & word.any(1)
    pick = torch.rand(ids.shape, generator=gen).masked_fill(~word, -1.0).argmax(1)
    chosen[none, pick[none]] = True
    labels = torch.where(chosen, ids, torch.full_like(ids, ignore))
    r = torch.rand(ids.shape, generator=gen)
    inputs = ids.masked_fill(chosen & (r < 0.8), mask_id)
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = torch.randint(*replacements, (int(swap.sum()),), generator=gen)
    return inputs, labels


class MaskedLMTask(TaskBase[Sentence]):
    """masked_lm: BERT's masked-LM task on <bos> s <eos> (mask_tokens), masks drawn anew every epoch (dynamic
    masking, as in RoBERTa); the loss is the cross-entropy at the chosen positions only. A batch: ids (B, T),
    PAD-padded and not yet masked, with the epoch's generator of masks."""

    def __init__(self, spec: TrainSpec, corpus: Corpus[Sentence], device: str, clock: Clock | None = None) -> None:
        super().__init__(spec, corpus, device, clock)
        base = Vocab.build(corpus.train, min_freq=spec.min_freq,
                           max_size=spec.max_vocab - 1 if spec.max_vocab else None)
        self.vocab = Vocab([MASK_TOKEN, *base.itos[MASK:]], freq=base.freq)  # <mask> at id 4, then the words
        self.config = dict(vocab_size=len(self.vocab), block_size=spec.block_size, n_layer=spec.num_layers,
                           n_head=spec.n_head, n_embd=spec.hidden_size, dropout=spec.dropout)
        self.train_ids = self._wrap(corpus.train, "encoding the corpus")
        self.held_ids = self._wrap(corpus.heldout, "encoding the held-out text")
        self.lengths = [len(s) for s in self.train_ids]
        self._build(max(self.lengths, default=2))

    def _wrap(self, sents: list[Sentence], doing: str) -> list[list[int]]:
        """<bos> c <eos> for each chunk c of block_size - 2 tokens of each sentence."""
        return [[BOS, *c, EOS] for s in self.clock.each(sents, doing)
                for c in chunks(self.vocab.encode(s), self.spec.block_size - 2)]

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_ids) / self.batch_size)

    def batches(self, rng: random.Random, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Generator]]:
        gen = torch.Generator().manual_seed(self.spec.seed * 1000 + epoch)
        for idx in bucketed_batches(len(self.train_ids), self.lengths, self.batch_size, rng):
            yield M.pad_batch([self.train_ids[i] for i in idx]), gen

    def _loss(self, ids: torch.Tensor, gen: torch.Generator, reduction: str) -> tuple[torch.Tensor, int]:
        """(cross-entropy at the chosen positions of the masked batch, how many were chosen)."""
        inputs, labels = mask_tokens(ids, gen, len(self.vocab))
        chosen = (labels != PAD).to(self.device)
        logits = self.model(inputs.to(self.device), attention_mask=(ids != PAD).to(self.device), at=chosen)  # (K, V)
        loss = F.cross_entropy(logits, labels.to(self.device)[chosen], reduction=reduction)
        return loss, int(chosen.sum())

    def loss(self, batch: tuple[torch.Tensor, torch.Generator]) -> torch.Tensor:
        return self._loss(*batch, reduction="mean")[0]

    @torch.no_grad()
    def heldout_loss(self) -> float | None:
        """Mean cross-entropy at the chosen positions of the held-out sentences, masked with fixed seeds."""
        self.model.eval()
        total, n = 0.0, 0
        size = self._eval_size(256)
        for k, part in enumerate(self._eval_batches(self.held_ids, size, "held-out loss")):
            loss, chosen = self._loss(M.pad_batch(part), torch.Generator().manual_seed(12345 + k * size), "sum")
            total, n = total + float(loss), n + chosen
        return total / n if n else None

    def evaluate(self, full: bool) -> JSONDict:
        out: JSONDict = {}
        if self.corpus.generator == "english" and self.corpus.level == "word":
            out["masked_accuracy"] = masked_word_accuracy(self.model, self.vocab, self.corpus.heldout,
                                                          device=self.device, train_freq=self.vocab.freq,
                                                          stop=self.clock.over)
        elif self.corpus.generator in REAL_ENGLISH and self.corpus.level == "word" and full:
            out["natural_agreement"] = natural_masked_agreement(self.model, self.vocab, device=self.device)
        return out

    def vocab_meta(self) -> JSONDict:
        return {"vocab": list(self.vocab.itos)}


# ============================================================================================== skip-gram
class SkipGramTask(TaskBase[Sentence]):
    """word2vec: skip-gram with negative sampling. A batch: centre ids (B,), context ids (B,) and `negatives` noise
    ids per pair (B, K) drawn from the unigram distribution to the 3/4 power."""

    def __init__(self, spec: TrainSpec, corpus: Corpus[Sentence], device: str, clock: Clock | None = None) -> None:
        from explorer.models.word2vec import keep_probability, noise_distribution, skipgram_pairs
        super().__init__(spec, corpus, device, clock)
        self.vocab = Vocab.build(corpus.train, min_freq=spec.min_freq, max_size=spec.max_vocab)
        counts = [self.vocab.freq.get(t, 0) for t in self.vocab.itos]
        self.noise = noise_distribution(counts).to(device)
        keep = keep_probability(counts, spec.subsample) if spec.subsample else None
        self.config = dict(vocab_size=len(self.vocab), dim=spec.hidden_size)
        ids = [self.vocab.encode(s) for s in self.clock.each(corpus.train, "encoding the corpus")]
        self.pairs = skipgram_pairs(ids, spec.window, keep=keep, seed=spec.seed)    # (N, 2) centre, context
        self.clock.check("making the skip-gram pairs")
        self.held_pairs = skipgram_pairs([self.vocab.encode(s) for s in corpus.heldout], spec.window,
                                         seed=spec.seed + 1)[:20000]
        self.gen = torch.Generator().manual_seed(spec.seed)
        self._build(1)

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.pairs) / self.batch_size)

    def _negatives(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return torch.multinomial(self.noise.cpu(), n * self.spec.negatives, replacement=True,
                                 generator=gen).view(n, -1).to(self.device)

    def batches(self, rng: random.Random, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        perm = torch.randperm(len(self.pairs), generator=self.gen)
        for i in range(0, len(perm), self.batch_size):
            b = self.pairs[perm[i:i + self.batch_size]].to(self.device)
            yield b[:, 0], b[:, 1], self._negatives(len(b), self.gen)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        loss: torch.Tensor = self.model(*batch)
        return loss

    @torch.no_grad()
    def heldout_loss(self) -> float | None:
        if len(self.held_pairs) == 0:
            return float("nan")
        gen = torch.Generator().manual_seed(12345)
        b = self.held_pairs.to(self.device)
        return float(self.model(b[:, 0], b[:, 1], self._negatives(len(b), gen)))

    def evaluate(self, full: bool) -> JSONDict:
        out: JSONDict = {}
        if self.corpus.generator == "english" and self.corpus.level == "word" and not self.clock.over():
            english = data_module("english")
            in_embed = self.model.get_submodule("in_embed")
            assert isinstance(in_embed, nn.Embedding)
            out["precision_at_5"] = M.precision_at_k(in_embed.weight, self.vocab.itos, english.word_class, k=5)
        return out

    def vocab_meta(self) -> JSONDict:
        return {"vocab": list(self.vocab.itos)}


# The batch type and the corpus's examples depend on the architecture, a run-time string: here, and only here, they
# are not known statically (each task class is fully typed).
TASKS: dict[str, Callable[[TrainSpec, Corpus[Any], str, Clock | None], Task[Any]]] = {
    "rnn_lm": LanguageModelTask, "tiny_gpt": LanguageModelTask, "seq2seq": Seq2SeqTask, "masked_lm": MaskedLMTask,
    "word2vec": SkipGramTask}


def task_for(spec: TrainSpec, corpus: Corpus[Sentence] | Corpus[Pair], device: str,
             clock: Clock | None = None) -> Task[Any]:
    """The task that trains spec.architecture on `corpus`, its vocabulary encoded and its model built."""
    return TASKS[spec.architecture](spec, corpus, device, clock)
