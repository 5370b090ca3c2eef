"""ClassifierTask: a recurrent classifier or tagger (explorer.models.rnn_classifier) trained by the shared loop.

The Models page's "LSTM sentiment classifier" and "BiLSTM tagger" recipes run here, on a shipped corpus or on the
user's labelled text (explorer.data.labelled_text), with the loop's live loss, snapshots and budgets. A sentence is
read as the shipped task models read it (explorer.training.task_models): <bos>, then its words; a sentence's label is
the pooled states' (spec.pooling), a word's the state at it. The checkpoint keeps the label names
("task_settings"), so the decision view shows them.
"""
from __future__ import annotations

import random
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from explorer.data.vocab import Vocab
from explorer.training.clock import Clock
from explorer.training.corpus import Corpus, Labelled
from explorer.training.spec import TrainSpec
from explorer.training.task_models import logits_of
from explorer.training.tasks import TaskBase
from explorer.runtime.json_value import JSONDict

GLOVE_DIM = 50
Batch = tuple[list[list[int]], torch.Tensor, list[tuple[int, int]]]  # ids per sentence, (N,) labels, (row, position)


class LabelledTask(TaskBase[Labelled]):
    """What a classifier's and a tagger's tasks share (recurrent, or MiniLM fine-tuned): the held-out loss and
    accuracy over every label the held-out examples teach, and the label names the checkpoint keeps."""

    labels: tuple[str, ...]

    def _held_logits(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(N, C) logits and (N,) labels of the held-out targets, batch by batch, until the time is up."""
        raise NotImplementedError

    def _held(self) -> tuple[float, int, int]:
        """(summed loss, right, count) over the held-out targets."""
        total, right, count = 0.0, 0, 0
        with torch.no_grad():
            for logits, gold in self._held_logits():
                total += float(F.cross_entropy(logits, gold, reduction="sum"))
                right += int((logits.argmax(-1) == gold).sum())
                count += len(gold)
        return total, right, count

    def heldout_loss(self) -> float | None:
        total, _, count = self._held()
        return total / count if count else None

    def heldout_measures(self) -> dict[str, float | None]:
        """The held-out loss and accuracy in one pass (what each snapshot records)."""
        total, right, count = self._held()
        return {"heldout_loss": total / count if count else None, "heldout_accuracy": right / count if count else None}

    def evaluate(self, full: bool) -> JSONDict:
        _, right, count = self._held()
        return {"heldout_accuracy": right / count if count else None, "heldout_targets": count}


class ClassifierTask(LabelledTask):
    """rnn_classifier: cross-entropy of the label of each (sentence, position) an example teaches."""

    def __init__(self, spec: TrainSpec, corpus: Corpus[Labelled], device: str, clock: Clock | None = None) -> None:
        super().__init__(spec, corpus, device, clock)
        self.labels = corpus.labels
        self.vocab = Vocab.build([w for w, _ in corpus.train], min_freq=spec.min_freq, max_size=spec.max_vocab)
        self.config = dict(vocab_size=len(self.vocab), emb_dim=GLOVE_DIM if spec.glove else spec.emb_dim,
                           hidden_size=spec.hidden_size, num_labels=len(self.labels), num_layers=spec.num_layers,
                           cell=spec.cell, bidirectional=spec.bidirectional, task=spec.task, pooling=spec.pooling,
                           dropout=spec.dropout)
        self.train_ids = self._encode(corpus.train)
        self.held_ids = self._encode(corpus.heldout)
        self._build(max((len(ids) for ids, _ in self.train_ids), default=2))
        self.glove_words = self._glove() if spec.glove else 0

    def _encode(self, examples: list[Labelled]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """<bos> + each sentence's word ids, and its targets with positions moved past <bos> (-1 stays)."""
        bos = self.vocab.bos_id
        assert bos is not None
        return [([bos, *self.vocab.encode(list(words))], [(p + 1 if p >= 0 else -1, lab) for p, lab in targets])
                for words, targets in examples]

    def _glove(self) -> int:
        """Put GloVe 6B 50-d's vector of each vocabulary word that it has into the embedding; how many it had."""
        from explorer.training.task_models import glove, start_from_glove

        emb = self.model.get_submodule("embedding")
        assert isinstance(emb, torch.nn.Embedding)
        found = start_from_glove(emb, list(self.vocab.itos), *glove())
        self.notes.append(f"Word vectors started from GloVe 6B 50-d for {found:,} of the "
                          f"{len(self.vocab):,} vocabulary entries.")
        return found

    def steps_per_epoch(self) -> int:
        return max(1, -(-len(self.train_ids) // self.batch_size))

    def _batches(self, rows: list[tuple[list[int], list[tuple[int, int]]]], order: list[int],
                 size: int) -> Iterator[Batch]:
        for s in range(0, len(order), size):
            chunk = [rows[i] for i in order[s:s + size]]
            read = [(b, p, lab) for b, (_, targets) in enumerate(chunk) for p, lab in targets]
            yield ([ids for ids, _ in chunk], torch.tensor([lab for _, _, lab in read], device=self.device),
                   [(b, p) for b, p, _ in read])

    def batches(self, rng: random.Random, epoch: int) -> Iterator[Batch]:
        order = list(range(len(self.train_ids)))
        rng.shuffle(order)
        return self._batches(self.train_ids, order, self.batch_size)

    def _logits(self, batch: Batch) -> torch.Tensor:
        seqs, _, where = batch
        return logits_of(self.model, seqs, where)  # type: ignore[arg-type]

    def loss(self, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(self._logits(batch), batch[1])

    def _held_logits(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for part in self._eval_batches(list(range(len(self.held_ids))), self._eval_size(256), "held-out loss"):
            for batch in self._batches(self.held_ids, list(part), len(part)):
                yield self._logits(batch), batch[1]

    def vocab_meta(self) -> JSONDict:
        """The vocabulary, and the label names the checkpoint keeps beside it (explorer.adapters.task_head)."""
        return {"vocab": list(self.vocab.itos), "task_settings": {"labels": list(self.labels)}}
