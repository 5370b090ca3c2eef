"""Training loops for the built-in architectures, shared by the CLI and the app's Models page.

    python -m explorer.training.train lstm-lm        # reproduce one shipped checkpoint in assets/builtin/
    python -m explorer.training.train all            # all of them, one after the other
    python -m explorer.training.train --list

`train_model(spec, progress, should_stop, cancel)` is the single entry point: it builds the corpus (generated and
seeded, or the user's token lists), the vocabulary and the model, trains with Adam (warmup + cosine decay,
gradient clipping), reports TrainProgress, honours stop requests and max_seconds by ending cleanly, and
returns the model with a checkpoint meta dict (see explorer.loading.checkpoint) including held-out metrics.

Budgets (set by the app from explorer.training.budget; None for the CLI): max_seconds bounds the whole run, every
phase included: corpus generation, encoding, each batch, each held-out evaluation batch (training stops at
TRAIN_SHARE of it so the held-out evaluation has the rest; an evaluation cut short says over how much it ran);
max_vocab keeps the most frequent tokens; max_params and max_memory_mb are checked once the vocabulary is known,
before the model is built (the batch size is lowered to fit). `cancel()` (the session that asked has gone) is
checked in every phase too and ends the run within a batch, raising TrainingCancelled.
"""
from __future__ import annotations

import argparse
import importlib
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from explorer.metrics import held_out as M
from explorer.models.build import build_model
from explorer.training.budget import fit_batch

ARCH_CORPORA = {"rnn_lm": ("english", "user"), "tiny_gpt": ("english", "user"), "word2vec": ("english", "user"),
                "seq2seq": ("translation", "dates"), "masked_lm": ("english", "user")}
LIMITS = dict(epochs=100, hidden_size=1024, emb_dim=1024, num_layers=4, n_head=16, batch_size=1024,
              n_train=200_000, n_heldout=20_000, max_seconds=6 * 3600, max_len=512, vocab=200_000)
PAD, UNK, BOS, EOS = 0, 1, 2, 3
MASK, MASK_TOKEN = 4, "<mask>"  # masked_lm: the mask token follows the four specials


@dataclass
class TrainSpec:
    """Everything that defines a training run (all JSON-able). Unused fields are ignored per architecture."""
    architecture: str = "rnn_lm"           # rnn_lm | seq2seq | tiny_gpt | word2vec | masked_lm
    corpus: str = "english"                # english | translation | dates | user
    user_tokens: list[list[str]] | None = None   # corpus="user": token lists (explorer.data.user_text)
    level: str = "word"                    # word | char (english: char splits the sentence into characters)
    n_train: int = 20_000
    n_heldout: int = 1_000
    # size
    cell: str = "lstm"                     # rnn_lm: rnn | gru | lstm
    attention: str = "bahdanau"            # seq2seq: none | bahdanau | luong-dot | luong-general | luong-concat
    bidirectional: bool = False            # seq2seq: bidirectional GRU encoder (H/2 units each way)
    input_feeding: bool = False            # seq2seq, Luong attention: feed h~_{t-1} to the decoder
    num_layers: int = 1                    # rnn_lm/seq2seq layers, tiny_gpt n_layer
    hidden_size: int = 256                 # rnn hidden / tiny_gpt n_embd / word2vec dim
    emb_dim: int = 128
    n_head: int = 4
    block_size: int = 64                   # tiny_gpt context; also max training sequence length for LMs
    dropout: float = 0.0
    # optimisation
    epochs: int = 5
    lr: float = 3e-3
    batch_size: int = 64
    weight_decay: float = 0.0
    warmup_steps: int = 50
    grad_clip: float = 1.0
    seed: int = 0
    max_seconds: float | None = None       # the whole run: data, training, held-out evaluation
    max_params: int | None = None          # refused above it (explorer.training.budget)
    max_memory_mb: float | None = None     # weights + Adam state + one batch: the batch size is lowered to fit
    # vocabulary / word2vec
    min_freq: int = 1
    max_vocab: int | None = None
    window: int = 2
    negatives: int = 5
    subsample: float | None = None         # word2vec subsampling threshold t (None = off)
    # evaluation
    full_metrics: bool = False             # bigram baseline, agreement, length buckets, precision@5
    name: str = "custom"
    description: str = ""

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("user_tokens")
        return d


@dataclass
class TrainProgress:
    epoch: int                   # 1-based
    step: int                    # optimiser steps done so far
    total_steps: int
    train_loss: float            # running mean of the current epoch
    heldout_loss: float | None   # set at the end of each epoch
    elapsed: float               # seconds


@dataclass
class TrainResult:
    model: nn.Module
    meta: dict
    history: list[dict] = field(default_factory=list)
    stopped: bool = False        # ended by should_stop or max_seconds


# ============================================================================================== validation
def _check_int(name: str, v, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")


def validate_spec(spec: TrainSpec) -> None:
    """Raise ValueError with a readable message when the spec is unusable or out of bounds."""
    if spec.architecture not in ARCH_CORPORA:
        raise ValueError(f"architecture must be one of {sorted(ARCH_CORPORA)}, got {spec.architecture!r}")
    if spec.corpus not in ARCH_CORPORA[spec.architecture]:
        raise ValueError(f"{spec.architecture} trains on corpus {ARCH_CORPORA[spec.architecture]}, not {spec.corpus!r}")
    if spec.level not in ("word", "char"):
        raise ValueError(f"level must be 'word' or 'char', got {spec.level!r}")
    if spec.corpus == "user":
        toks = spec.user_tokens
        if not toks or not isinstance(toks, list) or not all(isinstance(s, (list, tuple)) for s in toks):
            raise ValueError("corpus 'user' needs user_tokens: a non-empty list of token lists")
        if sum(1 for s in toks if len(s)) < 2:
            raise ValueError("the text is too short to train on: it needs at least 2 non-empty sentences")
    else:
        _check_int("n_train", spec.n_train, 10, LIMITS["n_train"])
        _check_int("n_heldout", spec.n_heldout, 1, LIMITS["n_heldout"])
    for name, lo, hi in (("epochs", 1, LIMITS["epochs"]), ("hidden_size", 2, LIMITS["hidden_size"]),
                         ("emb_dim", 2, LIMITS["emb_dim"]), ("num_layers", 1, LIMITS["num_layers"]),
                         ("batch_size", 1, LIMITS["batch_size"]), ("block_size", 4, LIMITS["max_len"]),
                         ("seed", 0, 2**31 - 1), ("min_freq", 1, 1000), ("window", 1, 10), ("negatives", 1, 50),
                         ("warmup_steps", 0, 100_000)):
        _check_int(name, getattr(spec, name), lo, hi)
    if spec.max_vocab is not None:
        _check_int("max_vocab", spec.max_vocab, 5, LIMITS["vocab"])
    if not isinstance(spec.lr, (int, float)) or not 0 < spec.lr <= 1:
        raise ValueError(f"lr must be in (0, 1], got {spec.lr!r}")
    if not 0 <= spec.dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {spec.dropout!r}")
    if not 0 <= spec.weight_decay <= 1:
        raise ValueError(f"weight_decay must be in [0, 1], got {spec.weight_decay!r}")
    if spec.max_seconds is not None and not 0 < spec.max_seconds <= LIMITS["max_seconds"]:
        raise ValueError(f"max_seconds must be in (0, {LIMITS['max_seconds']}], got {spec.max_seconds!r}")
    if spec.max_params is not None:
        _check_int("max_params", spec.max_params, 1, 10**12)
    if spec.max_memory_mb is not None and not (isinstance(spec.max_memory_mb, (int, float)) and spec.max_memory_mb > 0):
        raise ValueError(f"max_memory_mb must be a positive number, got {spec.max_memory_mb!r}")
    if spec.architecture == "rnn_lm" and spec.cell not in ("rnn", "gru", "lstm"):
        raise ValueError(f"cell must be 'rnn', 'gru' or 'lstm', got {spec.cell!r}")
    if spec.architecture == "seq2seq" and spec.attention not in (
            "none", "bahdanau", "luong-dot", "luong-general", "luong-concat"):
        raise ValueError(f"unknown attention {spec.attention!r}")
    if spec.architecture == "tiny_gpt":
        _check_int("n_head", spec.n_head, 1, LIMITS["n_head"])
        if spec.hidden_size % spec.n_head:
            raise ValueError(f"hidden_size (n_embd = {spec.hidden_size}) must be divisible by n_head = {spec.n_head}")
    if spec.architecture == "masked_lm":
        _check_int("n_head", spec.n_head, 1, LIMITS["n_head"])
        if spec.hidden_size % spec.n_head:
            raise ValueError(f"hidden_size (n_embd = {spec.hidden_size}) must be divisible by n_head = {spec.n_head}")


# ============================================================================================== time
TRAIN_SHARE = 0.85  # of max_seconds for data and training; the held-out evaluation may use the rest


class TrainingCancelled(RuntimeError):
    """The run ended before it trained anything: cancelled, or its time limit ran out while preparing the data."""


class _Clock:
    """When each phase of a run must end. `over()`: cancelled, or max_seconds used (evaluations stop, keeping what
    they computed); `train_over()`: that, a stop request, or TRAIN_SHARE of max_seconds used (the training loop
    stops); `check(doing)`: raise TrainingCancelled when over() (phases before training)."""

    def __init__(self, max_seconds: float | None, should_stop: Callable[[], bool] | None,
                 cancel: Callable[[], bool] | None) -> None:
        self.t0, self.max_seconds = time.perf_counter(), max_seconds
        self.should_stop, self.cancel = should_stop, cancel

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def cancelled(self) -> bool:
        return self.cancel is not None and bool(self.cancel())

    def over(self) -> bool:
        return self.cancelled() or (self.max_seconds is not None and self.elapsed() > self.max_seconds)

    def train_over(self) -> bool:
        return (self.over() or (self.should_stop is not None and bool(self.should_stop()))
                or (self.max_seconds is not None and self.elapsed() > TRAIN_SHARE * self.max_seconds))

    def check(self, doing: str) -> None:
        if self.cancelled():
            raise TrainingCancelled(f"Training was cancelled while {doing}.")
        if self.over():
            raise TrainingCancelled(f"The time limit ({self.max_seconds:g} s) ran out while {doing}, before any "
                                    "training: ask for more time or less data.")

    def each(self, items, doing: str, every: int = 2000):
        """`items`, checking the clock every `every` items (long loops before training)."""
        for i, item in enumerate(items):
            if i % every == 0:
                self.check(doing)
            yield item


_NO_CLOCK = _Clock(None, None, None)


# ============================================================================================== data
@dataclass
class Corpus:
    """Token-level data of one run: sentences (LMs, word2vec) or (src, tgt) pairs (seq2seq)."""
    train: list
    heldout: list
    generator: str
    seed: int | None
    level: str


def _data_module(name: str):
    return importlib.import_module(f"explorer.data.{name}")


def load_corpus(spec: TrainSpec, stop: Callable[[], bool] | None = None) -> Corpus:
    """The run's data. stop(): generation ends early (fewer examples) when it returns True (a run out of time)."""
    if spec.corpus == "user":
        sents = [list(s) for s in spec.user_tokens if len(s)]
        rng = random.Random(spec.seed)
        order = list(range(len(sents)))
        rng.shuffle(order)
        n_held = max(1, len(sents) // 10)
        held = [sents[i] for i in sorted(order[:n_held])]
        train = [sents[i] for i in sorted(order[n_held:])]
        return Corpus(train, held, "user", None, spec.level)
    mod = _data_module(spec.corpus)
    if spec.corpus == "english":
        train = mod.generate_sentences(spec.n_train, mod.TRAIN_SEED, stop=stop)
        held = mod.generate_sentences(spec.n_heldout, mod.HELDOUT_SEED, stop=stop)
        if spec.level == "char":
            train = [list(" ".join(s)) for s in train]
            held = [list(" ".join(s)) for s in held]
    else:
        train = mod.generate_pairs(spec.n_train, mod.TRAIN_SEED, stop=stop)
        held = mod.generate_pairs(spec.n_heldout, mod.HELDOUT_SEED, stop=stop)
        train = [(list(s), list(t)) for s, t in train]
        held = [(list(s), list(t)) for s, t in held]
    return Corpus(train, held, spec.corpus, mod.TRAIN_SEED, spec.level)


def _vocab_cls():
    return _data_module("vocab").Vocab


def _chunks(ids: list[int], size: int) -> list[list[int]]:
    """Split a long sequence into windows of at most `size` tokens (for LM training)."""
    return [ids[i:i + size] for i in range(0, max(len(ids), 1), size)] if len(ids) > size else [ids]


def _bucketed_batches(n: int, lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length (sort within pools of 50 batches), in shuffled order."""
    order = list(range(n))
    rng.shuffle(order)
    pool = batch_size * 50
    batches = []
    for p in range(0, n, pool):
        chunk = sorted(order[p:p + pool], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


# ============================================================================================== main loop
def _lr_at(step: int, total: int, spec: TrainSpec) -> float:
    warm = min(spec.warmup_steps, max(total // 10, 1))
    if step < warm:
        return spec.lr * (step + 1) / warm
    frac = (step - warm) / max(total - warm, 1)
    return spec.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def train_model(spec: TrainSpec, progress: Callable[[TrainProgress], None] | None = None,
                should_stop: Callable[[], bool] | None = None, device: str = "cpu",
                cancel: Callable[[], bool] | None = None) -> TrainResult:
    """Train `spec` from scratch (seeded). Stop requests / max_seconds end training cleanly: the model
    trained so far is evaluated (within max_seconds) and returned with meta["train"]["stopped"] = True.
    cancel() ends every phase within a batch and raises TrainingCancelled, as does max_seconds running out before
    training starts; a model over spec.max_params / max_memory_mb raises explorer.training.budget.TrainBudgetError."""
    validate_spec(spec)
    clock = _Clock(spec.max_seconds, should_stop, cancel)
    t0 = clock.t0
    random.seed(spec.seed)
    torch.manual_seed(spec.seed)
    corpus = load_corpus(spec, stop=clock.over)
    clock.check("preparing the corpus")
    task_class = {"rnn_lm": _LMTask, "tiny_gpt": _LMTask, "seq2seq": _Seq2SeqTask,
                  "masked_lm": _MaskedLMTask}.get(spec.architecture, _Word2VecTask)
    task = task_class(spec, corpus, device, clock)
    clock.check("building the model")
    model = task.model.to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and spec.weight_decay > 0]
    other = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and spec.weight_decay > 0)]
    groups = [{"params": other, "weight_decay": 0.0}]
    if decay:
        groups.append({"params": decay, "weight_decay": spec.weight_decay})
    opt = torch.optim.AdamW(groups, lr=spec.lr)
    rng = random.Random(spec.seed)
    steps_per_epoch = task.steps_per_epoch()
    total_steps = steps_per_epoch * spec.epochs
    step, stopped, history = 0, False, []
    report_every = max(1, steps_per_epoch // 20)
    epoch = 0
    for epoch in range(1, spec.epochs + 1):
        model.train()
        run_loss, run_n = 0.0, 0
        for batch in task.batches(rng, epoch):
            if clock.train_over():
                stopped = True
                break
            for g in opt.param_groups:
                g["lr"] = _lr_at(step, total_steps, spec)
            loss = task.loss(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if spec.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
            opt.step()
            step += 1
            run_loss += loss.item()
            run_n += 1
            if progress is not None and step % report_every == 0:
                progress(TrainProgress(epoch, step, total_steps, run_loss / run_n, None, time.perf_counter() - t0))
        if clock.cancelled():
            raise TrainingCancelled("Training was cancelled.")
        held = task.heldout_loss()
        history.append({"epoch": epoch, "train_loss": run_loss / max(run_n, 1), "heldout_loss": held,
                        "elapsed": round(time.perf_counter() - t0, 2)})
        if progress is not None:
            progress(TrainProgress(epoch, step, total_steps, run_loss / max(run_n, 1), held, time.perf_counter() - t0))
        if stopped:
            break
    train_seconds = time.perf_counter() - t0
    model.eval()
    metrics = task.evaluate(full=spec.full_metrics)
    if clock.cancelled():
        raise TrainingCancelled("Training was cancelled.")
    metrics["heldout_loss"] = history[-1]["heldout_loss"] if history else None
    meta = {
        "name": spec.name,
        "architecture": spec.architecture,
        "config": task.config,
        **task.vocab_meta(),
        "corpus": {"generator": corpus.generator, "seed": corpus.seed, "n_train": len(corpus.train),
                   "n_heldout": len(corpus.heldout), "level": corpus.level,
                   "heldout_seed": getattr(_data_module(spec.corpus), "HELDOUT_SEED", None)
                   if spec.corpus != "user" else None},
        "metrics": metrics,
        "train": {"epochs": epoch if history else 0, "steps": step, "seconds": round(train_seconds, 1),
                  "eval_seconds": round(time.perf_counter() - t0 - train_seconds, 1),
                  "device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
                  "stopped": stopped, "spec": spec.to_json(), "history": history},
        "description": spec.description or f"{spec.architecture} trained on the {corpus.generator} corpus.",
    }
    if task.notes:
        meta["train"]["notes"] = list(dict.fromkeys(task.notes))
    return TrainResult(model=model, meta=meta, history=history, stopped=stopped)


class _Task:
    """What the four tasks share: the run's clock, notes for the page, the batch size that fits the budget, and
    held-out evaluation in batches that stop when the run's time is up."""

    spec: TrainSpec
    clock: _Clock
    config: dict

    def _setup(self, spec: TrainSpec, corpus: Corpus, device: str, clock: _Clock | None) -> None:
        self.spec, self.corpus, self.device = spec, corpus, device
        self.clock = clock or _NO_CLOCK
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

    def _eval_batches(self, items: list, size: int, what: str):
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


# ============================================================================================== tasks
class _LMTask(_Task):
    """rnn_lm / tiny_gpt: next-token prediction on <bos> s <eos>."""

    def __init__(self, spec: TrainSpec, corpus: Corpus, device: str, clock: _Clock | None = None) -> None:
        Vocab = _vocab_cls()
        self._setup(spec, corpus, device, clock)
        self.vocab = Vocab.build(corpus.train, min_freq=spec.min_freq, max_size=spec.max_vocab)
        V = len(self.vocab)
        if spec.architecture == "rnn_lm":
            self.config = dict(vocab_size=V, emb_dim=spec.emb_dim, hidden_size=spec.hidden_size,
                               num_layers=spec.num_layers, cell=spec.cell, dropout=spec.dropout)
        else:
            self.config = dict(vocab_size=V, block_size=spec.block_size, n_layer=spec.num_layers,
                               n_head=spec.n_head, n_embd=spec.hidden_size, dropout=spec.dropout)
        max_len = spec.block_size + 1
        each = self.clock.each
        self.train_ids = [c for s in each(corpus.train, "encoding the corpus")
                          for c in _chunks([BOS, *self.vocab.encode(s), EOS], max_len)]
        self.held_ids = [self.vocab.encode(s) for s in each(corpus.heldout, "encoding the held-out text")]
        self.lengths = [len(s) for s in self.train_ids]
        self._build(max(self.lengths, default=2) - 1)
        self._last_nll: tuple[float, int] | None = None

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_ids) / self.batch_size)

    def batches(self, rng, epoch):
        for idx in _bucketed_batches(len(self.train_ids), self.lengths, self.batch_size, rng):
            yield M.pad_batch([self.train_ids[i] for i in idx]).to(self.device)

    def loss(self, batch):
        logits = M.lm_logits(self.model, batch[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1), ignore_index=PAD)

    def _held_eval_ids(self):
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

    def evaluate(self, full: bool) -> dict:
        held = self._held_eval_ids()
        # the final model's held-out loss was just computed (train_model evaluates after the last epoch)
        total, n = self._last_nll if self._last_nll is not None else self._held_nll()
        out = {"heldout_perplexity": math.exp(total / n) if n else None}
        if full and n and not self.clock.over():
            train_ids = [self.vocab.encode(s) for s in self.corpus.train]
            ppl, k = M.bigram_perplexity(train_ids, held, len(self.vocab))
            out["bigram_perplexity"], out["bigram_k"] = ppl, k
            out["perplexity_reduction_vs_bigram"] = 1 - out["heldout_perplexity"] / ppl
            if self.corpus.generator == "english" and self.corpus.level == "word":
                out["agreement"] = agreement_eval(self.model, self.vocab, device=self.device)
        return out

    def vocab_meta(self) -> dict:
        return {"vocab": list(self.vocab.itos)}


def agreement_items(vocab, n: int = 1000, seed: int | None = None, min_distance: int = 1):
    """Encode explorer.data.english.agreement_pairs(n, HELDOUT_SEED) as (prefix ids, correct, wrong, distance)."""
    english = _data_module("english")
    pairs = english.agreement_pairs(n, english.HELDOUT_SEED if seed is None else seed, min_distance=min_distance)
    items = []
    for p in pairs:
        correct, wrong = vocab.encode([p.correct])[0], vocab.encode([p.wrong])[0]
        if UNK in (correct, wrong):
            continue
        items.append((vocab.encode(list(p.prefix)), correct, wrong, int(p.distance)))
    return items


def agreement_eval(model, vocab, n: int = 1000, device="cpu") -> dict:
    """Agreement accuracy on all distances (min_distance=1) and on long-range pairs (min_distance=4)."""
    res = M.agreement_accuracy(model, agreement_items(vocab, n, min_distance=1), device=device)
    long = M.agreement_accuracy(model, agreement_items(vocab, n, min_distance=4), device=device)
    res.update(long_range_accuracy=long["accuracy"], long_range_by_distance=long["by_distance"], long_range_n=long["n"])
    return res


def mask_tokens(ids: torch.Tensor, gen: torch.Generator, vocab_size: int,
                rate: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of a padded batch ids (B, T): `rate` of the word positions (ids > MASK: not <pad>, <unk>,
    <bos>, <eos>, <mask>) are chosen, at least one per sentence; 80 % of the chosen become <mask>, 10 % a random
    word, 10 % stay. Returns (inputs (B, T), labels (B, T): the original id at chosen positions, PAD elsewhere)."""
    word = ids > MASK
    chosen = (torch.rand(ids.shape, generator=gen) < rate) & word
    none = (chosen.sum(1) == 0) & word.any(1)
    pick = torch.rand(ids.shape, generator=gen).masked_fill(~word, -1.0).argmax(1)
    chosen[none, pick[none]] = True
    labels = torch.where(chosen, ids, torch.full_like(ids, PAD))
    r = torch.rand(ids.shape, generator=gen)
    inputs = ids.masked_fill(chosen & (r < 0.8), MASK)
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = torch.randint(MASK + 1, vocab_size, (int(swap.sum()),), generator=gen)
    return inputs, labels


class _MaskedLMTask(_Task):
    """masked_lm: BERT's masked-LM task on <bos> s <eos> (mask_tokens), masks drawn anew every epoch (dynamic
    masking, as in RoBERTa); the loss is the cross-entropy at the chosen positions only."""

    def __init__(self, spec: TrainSpec, corpus: Corpus, device: str, clock: _Clock | None = None) -> None:
        Vocab = _vocab_cls()
        self._setup(spec, corpus, device, clock)
        base = Vocab.build(corpus.train, min_freq=spec.min_freq,
                           max_size=spec.max_vocab - 1 if spec.max_vocab else None)
        self.vocab = Vocab([MASK_TOKEN, *base.itos[MASK:]], freq=base.freq)  # <mask> at id 4, then the words
        self.config = dict(vocab_size=len(self.vocab), block_size=spec.block_size, n_layer=spec.num_layers,
                           n_head=spec.n_head, n_embd=spec.hidden_size, dropout=spec.dropout)
        wrap = lambda sents, doing: [[BOS, *c, EOS] for s in self.clock.each(sents, doing)  # noqa: E731
                                     for c in _chunks(self.vocab.encode(s), spec.block_size - 2)]
        self.train_ids = wrap(corpus.train, "encoding the corpus")
        self.held_ids = wrap(corpus.heldout, "encoding the held-out text")
        self.lengths = [len(s) for s in self.train_ids]
        self._build(max(self.lengths, default=2))

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_ids) / self.batch_size)

    def batches(self, rng, epoch):
        gen = torch.Generator().manual_seed(self.spec.seed * 1000 + epoch)
        for idx in _bucketed_batches(len(self.train_ids), self.lengths, self.batch_size, rng):
            yield M.pad_batch([self.train_ids[i] for i in idx]), gen

    def _loss(self, ids: torch.Tensor, gen: torch.Generator, reduction: str) -> tuple[torch.Tensor, int]:
        """(cross-entropy at the chosen positions of the masked batch, how many were chosen)."""
        inputs, labels = mask_tokens(ids, gen, len(self.vocab))
        logits = self.model(inputs.to(self.device), attention_mask=(ids != PAD).to(self.device))
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.to(self.device).reshape(-1),
                               ignore_index=PAD, reduction=reduction)
        return loss, int((labels != PAD).sum())

    def loss(self, batch):
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

    def evaluate(self, full: bool) -> dict:
        out: dict = {}
        if self.corpus.generator == "english" and self.corpus.level == "word":
            out["masked_accuracy"] = masked_word_accuracy(self.model, self.vocab, self.corpus.heldout,
                                                          device=self.device, train_freq=self.vocab.freq,
                                                          stop=self.clock.over)
        return out

    def vocab_meta(self) -> dict:
        return {"vocab": list(self.vocab.itos)}


MASKED_CLASSES = ("noun", "verb", "auxiliary")


def masked_class(word: str) -> str | None:
    """"noun", "verb" (a form of a lexical verb), "auxiliary" (is, are, was, has, do, …) or None, from the word
    classes of explorer.data.english (a word in several classes counts in the first listed, e.g. "clean" is an
    adjective)."""
    cls = _data_module("english").word_class(word)
    if cls is None:
        return None
    if cls in _data_module("english").NOUNS:
        return "noun"
    return "auxiliary" if cls == "verbs_auxiliary" else "verb" if cls.startswith("verbs_") else None


@torch.no_grad()
def masked_word_accuracy(model, vocab, sentences, device="cpu", train_freq: dict | None = None,
                         stop: Callable[[], bool] | None = None) -> dict:
    """Every noun, lexical verb and auxiliary of each sentence replaced by <mask> in turn (one at a time, the rest of
    <bos> s <eos> visible): top-1 and top-5 accuracy of the model's logits at the mask, per class (`n` masked
    words). With train_freq (training counts): `baseline`, the top-1 accuracy of always answering the class's most
    frequent training word. `verb_number` (under "verb" and "auxiliary"): the share of masked present-tense /
    was-were forms where the model's probability mass on forms of the right number (VERB_NUMBER) exceeds the
    wrong number's. stop(): asked before each sentence; True ends the count there (a run out of time)."""
    english = _data_module("english")
    model.eval()
    hits = {c: [0, 0, 0] for c in MASKED_CLASSES}  # top-1, top-5, n
    number = {c: [0, 0] for c in MASKED_CLASSES}   # right, n
    forms = {n: torch.tensor([vocab.stoi[w] for w, k in english.VERB_NUMBER.items() if k == n and w in vocab.stoi],
                             dtype=torch.long) for n in ("sg", "pl")}
    targets: dict[str, list[str]] = {c: [] for c in MASKED_CLASSES}
    for s in sentences:
        if stop is not None and stop():
            break
        ids = [BOS, *vocab.encode(s), EOS][: getattr(model.config, "block_size", 10**6)]
        where = [(t, c) for t, w in enumerate(s, start=1) if t < len(ids) - 1 and ids[t] != UNK
                 and (c := masked_class(w)) is not None]
        if not where:
            continue
        batch = torch.tensor([ids] * len(where), dtype=torch.long)
        rows = torch.arange(len(where))
        cols = torch.tensor([t for t, _ in where])
        batch[rows, cols] = MASK
        logits = model(batch.to(device))[rows, cols].float().cpu()           # (n, V)
        top = logits.topk(5, dim=-1).indices
        probs = logits.softmax(-1)
        for i, (t, c) in enumerate(where):
            hits[c][0] += int(top[i, 0] == ids[t])
            hits[c][1] += int((top[i] == ids[t]).any())
            hits[c][2] += 1
            targets[c].append(s[t - 1])
            n = english.VERB_NUMBER.get(s[t - 1])
            if n is not None and c != "noun":
                other = "pl" if n == "sg" else "sg"
                number[c][0] += int(probs[i, forms[n]].sum() > probs[i, forms[other]].sum())
                number[c][1] += 1
    out = {}
    for c in MASKED_CLASSES:
        h1, h5, n = hits[c]
        out[c] = {"top1": h1 / max(n, 1), "top5": h5 / max(n, 1), "n": n}
        if train_freq:
            members = [w for w in train_freq if masked_class(w) == c]
            best = max(members, key=lambda w: train_freq[w]) if members else None
            out[c]["baseline"] = sum(w == best for w in targets[c]) / max(n, 1)
            out[c]["baseline_word"] = best
        if c != "noun":
            out[c]["verb_number"] = number[c][0] / max(number[c][1], 1)
            out[c]["verb_number_n"] = number[c][1]
    return out


class _Seq2SeqTask(_Task):
    def __init__(self, spec: TrainSpec, corpus: Corpus, device: str, clock: _Clock | None = None) -> None:
        Vocab = _vocab_cls()
        self._setup(spec, corpus, device, clock)
        self.src_vocab = Vocab.build([s for s, _ in corpus.train], min_freq=spec.min_freq, max_size=spec.max_vocab)
        self.tgt_vocab = Vocab.build([t for _, t in corpus.train], min_freq=spec.min_freq, max_size=spec.max_vocab)
        self.config = dict(src_vocab_size=len(self.src_vocab), tgt_vocab_size=len(self.tgt_vocab),
                           emb_dim=spec.emb_dim, hidden_size=spec.hidden_size, attention=spec.attention,
                           num_layers=spec.num_layers, dropout=spec.dropout)
        if spec.bidirectional:
            self.config["bidirectional"] = True
        if spec.input_feeding:
            self.config["input_feeding"] = True
        enc = lambda pairs, doing: [(self.src_vocab.encode(s), self.tgt_vocab.encode(t))  # noqa: E731
                                    for s, t in self.clock.each(pairs, doing)]
        self.train_pairs = enc(corpus.train, "encoding the corpus")
        self.held_pairs = enc(corpus.heldout, "encoding the held-out pairs")
        self.lengths = [len(s) for s, _ in self.train_pairs]
        self.max_len = max(len(t) for _, t in self.train_pairs + self.held_pairs) + 5
        self._build(max(self.lengths, default=1) + self.max_len - 4)

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.train_pairs) / self.batch_size)

    def _tensors(self, pairs):
        src = M.pad_batch([s for s, _ in pairs]).to(self.device)
        tin = M.pad_batch([[BOS, *t] for _, t in pairs]).to(self.device)
        tout = M.pad_batch([[*t, EOS] for _, t in pairs]).to(self.device)
        return src, tin, tout

    def batches(self, rng, epoch):
        for idx in _bucketed_batches(len(self.train_pairs), self.lengths, self.batch_size, rng):
            yield self._tensors([self.train_pairs[i] for i in idx])

    def loss(self, batch, reduction="mean"):
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

    def evaluate(self, full: bool) -> dict:
        size = self._eval_size(256)
        preds, done = [], []
        held = sorted(self.held_pairs, key=lambda p: len(p[0]))  # the batches greedy_batch would make of them all
        for part in self._eval_batches(held, size, "exact-match evaluation"):
            preds += M.seq2seq_predictions(self.model, [s for s, _ in part], max_len=self.max_len,
                                           batch_size=size, device=self.device)
            done += part
        srcs = [s for s, _ in done]
        refs = [t for _, t in done]
        if not done:
            return {"exact_match": None, "token_accuracy": None}
        out = {"exact_match": M.exact_match(preds, refs), "token_accuracy": M.token_accuracy(preds, refs)}
        if full:
            out["exact_match_by_source_length"] = M.accuracy_by_length(preds, refs, srcs)
        return out

    def vocab_meta(self) -> dict:
        return {"src_vocab": list(self.src_vocab.itos), "tgt_vocab": list(self.tgt_vocab.itos)}


class _Word2VecTask(_Task):
    def __init__(self, spec: TrainSpec, corpus: Corpus, device: str, clock: _Clock | None = None) -> None:
        from explorer.models.word2vec import keep_probability, noise_distribution, skipgram_pairs
        Vocab = _vocab_cls()
        self._setup(spec, corpus, device, clock)
        self.vocab = Vocab.build(corpus.train, min_freq=spec.min_freq, max_size=spec.max_vocab)
        counts = [self.vocab.freq.get(t, 0) for t in self.vocab.itos]
        self.noise = noise_distribution(counts).to(device)
        keep = keep_probability(counts, spec.subsample) if spec.subsample else None
        self.config = dict(vocab_size=len(self.vocab), dim=spec.hidden_size)
        ids = [self.vocab.encode(s) for s in self.clock.each(corpus.train, "encoding the corpus")]
        self.pairs = skipgram_pairs(ids, spec.window, keep=keep, seed=spec.seed)
        self.clock.check("making the skip-gram pairs")
        self.held_pairs = skipgram_pairs([self.vocab.encode(s) for s in corpus.heldout], spec.window,
                                         seed=spec.seed + 1)[:20000]
        self.gen = torch.Generator().manual_seed(spec.seed)
        self._build(1)

    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.pairs) / self.batch_size)

    def _negatives(self, n: int, gen) -> torch.Tensor:
        return torch.multinomial(self.noise.cpu(), n * self.spec.negatives, replacement=True,
                                 generator=gen).view(n, -1).to(self.device)

    def batches(self, rng, epoch):
        perm = torch.randperm(len(self.pairs), generator=self.gen)
        for i in range(0, len(perm), self.batch_size):
            b = self.pairs[perm[i:i + self.batch_size]].to(self.device)
            yield b[:, 0], b[:, 1], self._negatives(len(b), self.gen)

    def loss(self, batch):
        return self.model(*batch)

    @torch.no_grad()
    def heldout_loss(self) -> float:
        if len(self.held_pairs) == 0:
            return float("nan")
        gen = torch.Generator().manual_seed(12345)
        b = self.held_pairs.to(self.device)
        return float(self.model(b[:, 0], b[:, 1], self._negatives(len(b), gen)))

    def evaluate(self, full: bool) -> dict:
        out: dict = {}
        if self.corpus.generator == "english" and self.corpus.level == "word" and not self.clock.over():
            english = _data_module("english")
            out["precision_at_5"] = M.precision_at_k(self.model.in_embed.weight, self.vocab.itos,
                                                     english.word_class, k=5)
        return out

    def vocab_meta(self) -> dict:
        return {"vocab": list(self.vocab.itos)}


# ============================================================================================== built-ins
_LM = dict(architecture="rnn_lm", corpus="english", n_train=20_000, n_heldout=1_000, full_metrics=True)
_S2S = dict(architecture="seq2seq", corpus="translation", n_train=20_000, n_heldout=1_000, full_metrics=True,
            emb_dim=64, hidden_size=128, epochs=5, lr=3e-3, batch_size=64)

# Luong attention learns this task more slowly than Bahdanau's (same recipe, after 3 epochs: held-out loss 0.16
# vs 0.017), so the Luong models use input feeding (Luong et al. 3.3), a bidirectional encoder and 10 epochs.
_LUONG = {**_S2S, "epochs": 10, "input_feeding": True, "bidirectional": True}

BUILTINS: dict[str, TrainSpec] = {
    "rnn-lm": TrainSpec(**_LM, cell="rnn", emb_dim=128, hidden_size=256, epochs=6, lr=2e-3,
                        description="Elman RNN word-level language model on the generated English corpus."),
    "gru-lm": TrainSpec(**_LM, cell="gru", emb_dim=128, hidden_size=256, epochs=6, lr=3e-3,
                        description="GRU word-level language model on the generated English corpus."),
    "lstm-lm": TrainSpec(**_LM, cell="lstm", emb_dim=128, hidden_size=256, epochs=6, lr=3e-3,
                         description="LSTM word-level language model on the generated English corpus."),
    "tiny-gpt": TrainSpec(architecture="tiny_gpt", corpus="english", n_train=20_000, n_heldout=1_000,
                          full_metrics=True, num_layers=2, n_head=4, hidden_size=128, block_size=64, epochs=4,
                          lr=2e-3, batch_size=64, warmup_steps=100,
                          description="2-layer, 4-head decoder-only transformer (learned positions) on the English corpus."),
    "word2vec": TrainSpec(architecture="word2vec", corpus="english", n_train=20_000, n_heldout=1_000,
                          hidden_size=64, window=2, negatives=5, epochs=3, lr=5e-3, batch_size=1024,
                          warmup_steps=0, grad_clip=0.0, full_metrics=True,
                          description="Skip-gram with negative sampling word vectors from the English corpus."),
    "seq2seq-none": TrainSpec(**_S2S, attention="none",
                              description="GRU encoder-decoder without attention: one context vector carries the whole source."),
    "seq2seq-bahdanau": TrainSpec(**_S2S, attention="bahdanau",
                                  description="GRU encoder-decoder with Bahdanau (additive) attention on the toy translation task."),
    "seq2seq-luong-dot": TrainSpec(**_LUONG, attention="luong-dot",
                                   description="GRU encoder-decoder with Luong dot attention (bidirectional encoder, input feeding) on the toy translation task."),
    "seq2seq-luong-general": TrainSpec(**_LUONG, attention="luong-general",
                                       description="GRU encoder-decoder with Luong general attention (bidirectional encoder, input feeding) on the toy translation task."),
    "seq2seq-luong-concat": TrainSpec(**_LUONG, attention="luong-concat",
                                      description="GRU encoder-decoder with Luong concat attention (bidirectional encoder, input feeding) on the toy translation task."),
    "seq2seq-dates": TrainSpec(**{**_S2S, "corpus": "dates", "epochs": 6}, attention="luong-general", bidirectional=True,
                               description="Character-level encoder-decoder with Luong (general) attention that rewrites written dates as ISO dates."),
    # Two layers learn agreement sooner than four: after 10 epochs of 30,000 sentences, four layers put the right
    # number on a masked verb 75 % of the time; two layers reached 90 % after 8 epochs of 20,000.
    "masked-lm": TrainSpec(architecture="masked_lm", corpus="english", n_train=30_000, n_heldout=1_000,
                           full_metrics=True, num_layers=2, n_head=4, hidden_size=128, block_size=64, epochs=20,
                           lr=2e-3, batch_size=64, warmup_steps=200,
                           description="2-layer, 4-head BERT-style masked language model (bidirectional encoder, "
                                       "output tied to the embeddings) on the English corpus."),
}
for _name, _spec in BUILTINS.items():
    _spec.name = _name


def train_builtin(name: str, folder=None, progress=None, save: bool = True, threads: int | None = 1) -> TrainResult:
    """Train the built-in `name` from scratch with its recipe and (by default) save it to assets/builtin.

    threads: torch CPU threads (1 by default: on an oversubscribed 2-core machine two OpenMP threads wait on
    each other and run up to 10x slower). Results agree across thread counts up to float rounding."""
    from explorer.loading.catalogue import BUILTIN_DIR
    from explorer.loading.checkpoint import save_checkpoint
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in {name!r}; expected one of {sorted(BUILTINS)}")
    if threads:
        torch.set_num_threads(threads)
    result = train_model(replace(BUILTINS[name]), progress=progress)
    if save:
        save_checkpoint(result.model, result.meta, folder or BUILTIN_DIR, name)
    return result


def _print_metrics(metrics: dict, indent: str = "  ") -> None:
    for k, v in metrics.items():
        if isinstance(v, dict):
            print(f"{indent}{k}:")
            _print_metrics(v, indent + "  ")
        else:
            print(f"{indent}{k}: {v:.4g}" if isinstance(v, float) else f"{indent}{k}: {v}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m explorer.training.train", description=__doc__.split("\n")[0])
    ap.add_argument("name", nargs="?", help=f"built-in to train: {', '.join(BUILTINS)} or 'all'")
    ap.add_argument("--list", action="store_true", help="list built-in names")
    ap.add_argument("--out", default=None, help="folder to write to (default assets/builtin)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a shared 2-core machine 2 OpenMP threads can be 10x "
                         "slower because they wait on each other; results agree across thread counts)")
    args = ap.parse_args(argv)
    if args.list or not args.name:
        print("\n".join(BUILTINS))
        return 0
    names = list(BUILTINS) if args.name == "all" else [args.name]
    for n in names:
        if n not in BUILTINS:
            print(f"unknown built-in {n!r}; choose from: {', '.join(BUILTINS)}, all", file=sys.stderr)
            return 2

    def show(p: TrainProgress) -> None:
        if p.heldout_loss is not None:
            print(f"  epoch {p.epoch} step {p.step}/{p.total_steps} train {p.train_loss:.4f} "
                  f"heldout {p.heldout_loss:.4f} ({p.elapsed:.0f}s)", flush=True)

    for n in names:
        print(f"== {n}", flush=True)
        res = train_builtin(n, folder=args.out, progress=show, save=not args.no_save, threads=args.threads)
        _print_metrics(res.meta["metrics"])
        print(f"  time: train {res.meta['train']['seconds']}s, eval {res.meta['train']['eval_seconds']}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
