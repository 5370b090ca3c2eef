"""A capability as its own object: an adapter composed of parts (explorer.adapters.hf) gives each capability it has
as a small class that reads the model through the adapter it belongs to, its `core`.

A part answers what every adapter answers (Reads, Records: the input convention, tokens as text, one forward pass)
with its core's answers, so a part typed as a capability's protocol (explorer.adapters.protocols: Unembeds extends
Records, ...) is the whole interface a probe needs; it adds only its own capability's methods. Parts that a
protocol combines are combined by inheritance (Differentiates = HasTables + Generates: `class Gradient(Tables,
Stepper)`); every part of one adapter shares its core, and holds nothing else.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Iterable, Protocol, Sequence, TypeVar

import torch

from explorer.adapters.protocols import Records, SpecialIds

if TYPE_CHECKING:
    from explorer.adapters.base import Names, Record
    from explorer.adapters.text import Encoded
    from explorer.data.examples import Examples


class Whole(Records, SpecialIds, Protocol):
    """What a part reads from the adapter it belongs to: Records, the special ids every adapter has, the model."""

    @property
    def model(self) -> Any: ...  # the family's own module, read by name (Hugging Face: a PreTrainedModel)


Core = TypeVar("Core", bound=Whole)


class Part(Generic[Core]):
    """One capability of the adapter `core`: Reads and Records are the core's (below); subclasses add their own."""

    def __init__(self, core: Core) -> None:
        self.core = core

    # ------------------------------------------------------------------ Reads: the core's
    @property
    def model(self) -> torch.nn.Module | None:
        """The torch module the core reads (None for a bare state dict)."""
        model = self.core.model
        return model if isinstance(model, torch.nn.Module) else None

    @property
    def id(self) -> str:
        return self.core.id

    @property
    def name(self) -> str:
        return self.core.name

    @property
    def device(self) -> torch.device:
        return self.core.device

    @property
    def family(self) -> str:
        return self.core.family

    @property
    def reason(self) -> str:
        return self.core.reason

    @property
    def streams(self) -> dict[str, str]:
        return self.core.streams

    @property
    def causal(self) -> bool:
        return self.core.causal

    @property
    def recurrent(self) -> bool:
        return self.core.recurrent

    @property
    def can_generate(self) -> bool:
        return self.core.can_generate

    @property
    def is_encoder_decoder(self) -> bool:
        return self.core.is_encoder_decoder

    @property
    def max_tokens(self) -> int:
        return self.core.max_tokens

    # the special ids every adapter has (empty where the model has none)
    @property
    def vocab_size(self) -> int:
        return self.core.vocab_size

    @property
    def bos_id(self) -> int | None:
        return self.core.bos_id

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self.core.eos_ids

    @property
    def pad_id(self) -> int | None:
        return self.core.pad_id

    @property
    def decoder_start(self) -> tuple[int, ...]:
        return self.core.decoder_start

    @property
    def context_len(self) -> int | None:
        return self.core.context_len

    @property
    def sliding(self) -> bool:
        return self.core.sliding

    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        return self.core.encode(text, side, pair, max_tokens)

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        return self.core.token_strings(ids)

    def sequence_strings(self, ids: Iterable[int]) -> list[str]:
        return self.core.sequence_strings(ids)

    def piece_strings(self, ids: Iterable[int]) -> list[str]:
        return self.core.piece_strings(ids)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.core.detokenize(ids)

    def examples(self, purpose: str) -> Examples:
        return self.core.examples(purpose)

    # ------------------------------------------------------------------ Records: the core's
    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: object) -> Record:
        return self.core.run(enc, names, target, **options)

    def describe(self) -> tuple[tuple[str, str], ...]:
        return self.core.describe()
