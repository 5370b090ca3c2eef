"""A task model's decision as one capability (explorer.adapters.protocols.Decides): what it decides
(explorer.adapters.task_head.TaskHead), the input embeddings of ids, and the model's own head logits from input
embeddings (differentiable), so that a probe reads the decision, each prefix's decision and the attribution of a
label to the input tokens through one function. The adapters that read a task model make one: the recurrent adapter
(a student's classifier or tagger, the built-in ones) and the Hugging Face adapter (*ForSequenceClassification,
*ForTokenClassification)."""
from __future__ import annotations

from typing import Callable

import torch

from explorer.adapters.parts import Part, Whole
from explorer.adapters.task_head import TaskHead

Logits = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]


class Decider(Part[Whole]):
    """A task model's decision, as one capability: `head` (TaskHead), `embed_ids(ids)` (B, T) -> (B, T, E) the input
    embeddings the model adds, and `decision_logits(embeds, segments=None)` (B, T, E) -> (B, C) or (B, T, C): the
    model's own head on them (differentiable). Reads and Records are its adapter's (`core`: explorer.adapters.parts)."""

    def __init__(self, core: Whole, head: TaskHead, embed: Callable[[torch.Tensor], torch.Tensor],
                 logits: Logits) -> None:
        super().__init__(core)
        self.head = head
        self._embed, self._logits = embed, logits

    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, E) the embeddings the model adds for them."""
        return self._embed(ids)

    def decision_logits(self, embeds: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, E) input embeddings [, (B, T) segment ids of a pair] -> (B, C) or (B, T, C) the head's logits."""
        return self._logits(embeds, segments)
