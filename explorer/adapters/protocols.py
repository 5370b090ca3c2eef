"""What a view may read from a model, as small typed contracts.

`Loaded` is what every probe receives (explorer.loading.loaders.LoadedModel is one): the model placed on a device,
with its adapter. Every adapter subclasses explorer.adapters.base.Adapter, so it has the whole interface (what it
cannot do raises Unsupported); the protocols below group that interface by what a view reads, so a probe's helper
names the part it needs, and a new view that needs something new adds a small protocol here (implemented by the
adapters that can do it) rather than a method on every adapter:

  protocol        what it reads                                                      views
  Reads           id, device, the capability flags, encode, tokens shown as text     every view
  Records         one forward pass -> Record, what the adapter read from the model   every view of internals
  Generates       start / step / reorder, the special ids, the context length        decoding strategies, seq2seq
  Unembeds        each layer's state through the final norm and output layer        logit lens
  Differentiates  input embeddings -> logits, differentiable; the embedding tables   token attribution
  HasAttention    what the attention record holds: per-layer scalings, head size     self-attention
  KnowsPositions  the position table or scheme, rotary, ALiBi, relative bias         positional encodings
  HasTables       the embedding tables                                               word embeddings
  Aligns          the encoder-decoder's attention and what it computes               seq2seq
  Recurrent       the cell's weights and network (adapters whose `recurrent` is set) LSTM gates, gradients
  Intervenes      runs with activations patched at named sites                       interventions
  Decides         a task model's head: labels per sentence or per token, from embeddings  decision

Shapes: T tokens, C width, V vocabulary, H heads, B batch.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence, TypeGuard

import numpy as np
import torch
from numpy.typing import NDArray

if TYPE_CHECKING:
    from explorer.adapters.base import Adapter, CrossForm, Names, PositionScheme, PositionTable, Record, Table
    from explorer.adapters.task_head import TaskHead
    from explorer.adapters.interventions import BlockCall, Layout, Metric, Patch, PatchedRun
    from explorer.adapters.recurrent import RecurrentWeights
    from explorer.adapters.text import Encoded
    from explorer.data.examples import Examples
    from explorer.data.vocab import Vocab


class Loaded(Protocol):
    """A model placed on a device, read through its adapter (attached once, at load).

    model: the torch module in eval mode (None for a bare state dict); tokenizer: a Hugging Face tokenizer (HF
    models) or None; vocabs: the explorer vocabularies of a built-in ("vocab"; seq2seq: "src_vocab", "tgt_vocab");
    meta: the checkpoint's JSON meta (config, corpus, metrics); state_dict: the raw tensors of a user checkpoint."""

    @property
    def id(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def model(self) -> torch.nn.Module | None: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def tokenizer(self) -> Any: ...
    @property
    def vocabs(self) -> dict[str, Vocab]: ...
    @property
    def state_dict(self) -> dict[str, torch.Tensor] | None: ...
    @property
    def adapter(self) -> Adapter: ...
    @property
    def caps(self) -> Capabilities: ...  # what it can do: each capability the adapter typed as its protocol, or None


class Reads(Protocol):
    """What every adapter has: the input convention (`encode`, the one place that decides what the model is fed),
    tokens shown as text (explorer.text.token_text), and the flags that say what else it can do."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...  # what reads the model, e.g. "built-in GPT", "Hugging Face llama"
    @property
    def device(self) -> torch.device: ...
    @property
    def family(self) -> str: ...
    @property
    def reason(self) -> str: ...  # why the model can be read only in part ("" when it can be read in full)
    @property
    def streams(self) -> dict[str, str]: ...  # attention stream -> record prefix, e.g. {"decoder": "blocks.{l}.attn"}
    @property
    def causal(self) -> bool: ...
    @property
    def recurrent(self) -> bool: ...
    @property
    def can_generate(self) -> bool: ...
    @property
    def is_encoder_decoder(self) -> bool: ...
    @property
    def max_tokens(self) -> int: ...

    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        """Text -> the T tokens the model is fed, special tokens included and flagged."""
    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """Each id shown on its own."""
    def sequence_strings(self, ids: Iterable[int]) -> list[str]:
        """The ids of one sequence shown as in a sentence."""
    def piece_strings(self, ids: Iterable[int]) -> list[str]:
        """The tokenizer's own name of each id (for lookups, never for the screen)."""
    def detokenize(self, ids: Sequence[int]) -> str:
        """The plain text of generated ids."""
    def examples(self, purpose: str) -> Examples:
        """The model's example sentences for a view's purpose."""


class Records(Reads, Protocol):
    """One forward pass -> a Record of named activations (explorer.adapters.base lists the names and shapes)."""

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: Any) -> Record:
        """Run the model once on `enc` (an encoder-decoder's decoder on `target`), recording the `names` asked for."""
    def describe(self) -> tuple[tuple[str, str], ...]:
        """(what, value) rows: what the adapter read from the model."""


class SpecialIds(Protocol):
    """The special ids and context every adapter has (empty where its model has none)."""

    @property
    def vocab_size(self) -> int: ...
    @property
    def bos_id(self) -> int | None: ...
    @property
    def eos_ids(self) -> tuple[int, ...]: ...
    @property
    def pad_id(self) -> int | None: ...
    @property
    def decoder_start(self) -> tuple[int, ...]: ...  # what an encoder-decoder's decoder reads first
    @property
    def context_len(self) -> int | None: ...
    @property
    def sliding(self) -> bool: ...  # beyond context_len the oldest tokens are dropped


class Generates(Reads, SpecialIds, Protocol):
    """The stepping interface the one generation loop drives (explorer.adapters.generation)."""

    def start(self, ids: torch.Tensor, record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """ids (B, T) -> next-token logits (B, V), the generation state, (record=True) what the pass computed."""
    def step(self, state: Any, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """tokens (B,) appended -> logits (B, V), the new state, (record=True) the step's activations."""
    def reorder(self, state: Any, idx: torch.Tensor) -> Any:
        """The state of rows idx (K,) (beam search)."""
    def generation_settings(self) -> dict[str, Any]:
        """The model's own generation settings every strategy honours (GenerationConfig field -> value)."""


class Unembeds(Records, Protocol):
    """The logit lens: each layer's state read through the model's own final norm and output layer."""

    @property
    def lens_names(self) -> tuple[str, ...]: ...  # the record names `lens_states` reads (empty: no lens)

    def lens_states(self, rec: Record) -> list[tuple[str, torch.Tensor, bool]]:
        """(layer name, (T, C) state, already after the final norm), first layer to last."""
    def unembed(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor:
        """(T, C) hidden states -> (T, V) logits."""


class HasTables(Reads, Protocol):
    """The model's embedding tables."""

    def tables(self) -> dict[str, Table]:
        """key -> Table of (V, C) weights with the token of each row (the first is the default)."""


class Differentiates(HasTables, Generates, Protocol):
    """Logits as a differentiable function of the input token embeddings (token attribution)."""

    @property
    def decoder_start(self) -> tuple[int, ...]: ...

    def embed_ids(self, ids: torch.Tensor, side: str = "input") -> torch.Tensor:
        """(T,) ids -> (T, C) the token embeddings the model adds."""
    def logits_from_embeddings(self, embeds: torch.Tensor, target: torch.Tensor | None = None,
                               keep: Sequence[int] | None = None) -> torch.Tensor:
        """(B, T, C) token embeddings -> (B, T, V) logits, or (B, len(keep), V) at positions `keep` (encoder-decoders:
        target (B, T', C) -> (B, T', V))."""
    def position_scheme(self) -> PositionScheme:
        """How the model knows positions (the baseline depends on it)."""


class HasAttention(Records, Protocol):
    """What the attention entries of the record (blocks.{l}.attn.*) hold and how to read them."""

    @property
    def supports_padding(self) -> bool: ...  # run(..., pad=n) appends n padding tokens
    @property
    def arithmetic_note(self) -> str: ...  # why q/k/v are not recorded, when they are not
    @property
    def bias_name(self) -> str: ...  # what blocks.{l}.attn.bias is

    def scalings(self, stream: str) -> tuple[float | None, ...]:
        """Per layer of `stream`, the factor on q·k (None: not read)."""
    def head_size(self, stream: str) -> int:
        """The size d of one head's q and k in `stream` (0: not read)."""


class KnowsPositions(HasAttention, Protocol):
    """How the model knows word order, read from its weights."""

    def position_table(self) -> PositionTable:
        """The model's own (P, C) table of position vectors."""
    def position_scheme(self) -> PositionScheme:
        """learned / sinusoidal / rotary / alibi / relative / none, with what was read."""
    def input_note(self) -> str:
        """What the model does to token + position vectors before its first layer ("" if nothing)."""
    def rotary(self, n: int) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
        """(cos, sin), each (n, r): the model's own rotary tables."""
    def alibi_slopes(self) -> NDArray[np.floating]:
        """(H,) each head's ALiBi slope."""
    def relative_bias(self, n: int) -> NDArray[np.floating]:
        """(H, n, n) the relative position bias the first layer adds."""
    def first_attention(self, enc: Encoded, positions: bool, causal: bool) -> tuple[NDArray[np.floating], str]:
        """(T, C) layer 0's attention output with or without positions and the causal mask, and what was run."""


class Aligns(Records, Generates, Protocol):
    """An encoder-decoder's attention between the output and the source."""

    @property
    def attention_kind(self) -> str: ...  # none | bahdanau | luong-* (built-in RNN) | cross (a transformer)

    def cross_form(self) -> CrossForm:
        """What the attention computes, read from the modules and weight shapes."""


class RecurrentLM(Protocol):
    """embedding -> rnn -> decoder: explorer.models.rnn_lm.RNNLanguageModel, or the network a recurrent adapter
    builds from a user's state dict (explorer.adapters.recurrent.RecurrentNet)."""

    @property
    def embedding(self) -> torch.nn.Embedding: ...  # (V, E)
    @property
    def rnn(self) -> torch.nn.RNNBase: ...
    @property
    def decoder(self) -> torch.nn.Module | None: ...  # (D·H) -> (V); None: the checkpoint has no output layer


class Recurrent(Records, Protocol):
    """A recurrent network's own cell: its weights (PyTorch's gate order) and the network that runs them."""

    @property
    def weights(self) -> RecurrentWeights: ...
    @property
    def net(self) -> RecurrentLM: ...


class Intervenes(Reads, Protocol):
    """Runs with some activations replaced, at the record's names (explorer.adapters.interventions): decoders whose
    blocks were found (resid, attn, mlp, heads) and recurrent networks (h, c) with an output layer or a task head
    (task_head set: the logits are then its labels')."""

    @property
    def eos_ids(self) -> tuple[int, ...]: ...
    @property
    def task_head(self) -> TaskHead | None: ...

    def intervention_layout(self) -> Layout | None:
        """What can be patched (None: nothing)."""
    def patched_logits(self, ids: torch.Tensor, patches: Sequence[Patch] = (), keep: Names = (),
                       calls: bool = False) -> PatchedRun:
        """ids (B, T) run with `patches` -> logits (B, V) after the last token, the kept sites (B, T, ...)."""
    def resume_logits(self, layer: int, hidden: torch.Tensor, patches: Sequence[Patch],
                      calls: dict[int, BlockCall]) -> torch.Tensor:
        """hidden (B, T, C) entering block `layer` -> (B, V), the blocks before it not run (decoders)."""
    def site_gradients(self, ids: torch.Tensor, keep: Names, metric: Metric
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """ids (1, T): metric(logits (1, V)), the kept sites' values and their gradients, each (T, ...)."""


class Decides(Records, Protocol):
    """A task model (explorer.adapters.decision): what it decides, and its head's logits from input embeddings."""

    @property
    def head(self) -> TaskHead: ...
    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, E) the input embeddings the model adds."""
    def decision_logits(self, embeds: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, E) [, (B, T) segment ids] -> (B, C) labels of the input, or (B, T, C) of each token."""


@dataclass(frozen=True)
class Capabilities:
    """What a loaded model can do: each capability the adapter typed as its protocol, or None
    (explorer.adapters.capabilities says which is which and decides them)."""

    stepper: Generates | None
    lens: Unembeds | None
    gradient: Differentiates | None
    attention: HasAttention | None
    positions: KnowsPositions | None
    fill_in: Records | None
    alignment: Aligns | None
    recurrence: Recurrent | None
    patching: Intervenes | None
    tables: HasTables | None
    decision: Decides | None = None

    @property
    def names(self) -> frozenset[str]:
        """The names of the capabilities present."""
        return frozenset(f.name for f in fields(self) if getattr(self, f.name) is not None)


class Composed(Protocol):
    """An adapter composed of parts (explorer.adapters.parts: the Hugging Face adapter): each capability is read from
    its part of that name."""

    def part(self, name: str) -> Reads:
        """Its part for the capability `name` (explorer.adapters.capabilities.NAMES), itself where it has none."""


def is_composed(adapter: Adapter) -> TypeGuard[Composed]:
    """Whether `adapter` is composed of parts (it implements Composed; the Adapter base does not)."""
    return callable(getattr(adapter, "part", None))


def can_intervene(adapter: Reads) -> TypeGuard[Intervenes]:
    """Whether `adapter` can run with patched activations (it implements Intervenes and found its sites)."""
    layout = getattr(adapter, "intervention_layout", None)
    return callable(layout) and layout() is not None


def unembeds(adapter: Reads) -> TypeGuard[Unembeds]:
    """Whether `adapter` names the states a logit lens reads and has the output layer to read them through (it
    implements Unembeds: the built-in GPT and masked LM, the recurrent LMs and Hugging Face models; the Adapter base
    does not)."""
    return bool(getattr(adapter, "lens_names", ())) and callable(getattr(adapter, "unembed", None))


def generates(adapter: Reads) -> TypeGuard[Generates]:
    """Whether `adapter` can generate token by token (it implements Generates' start / step / reorder and its model
    has a head that predicts the next token; the Adapter base does not)."""
    return adapter.can_generate and callable(getattr(adapter, "step", None))


def has_tables(adapter: Reads) -> TypeGuard[HasTables]:
    """Whether `adapter` gives embedding tables (it implements HasTables: every adapter of the explorer does; the
    Adapter base does not)."""
    return callable(getattr(adapter, "tables", None))


def differentiates(adapter: Reads) -> TypeGuard[Differentiates]:
    """Whether `adapter` gives a generated output's logits as a differentiable function of its input embeddings (it
    implements Differentiates: the built-in GPT, RNN LMs and seq2seq, Hugging Face; the Adapter base does not)."""
    return adapter.can_generate and all(callable(getattr(adapter, name, None))
                                        for name in ("step", "tables", "logits_from_embeddings"))


def has_attention(adapter: Reads) -> TypeGuard[HasAttention]:
    """Whether `adapter` records per-head attention and says how to read it (it implements HasAttention: the
    transformer adapters, explorer.adapters.base.Attends; the Adapter base does not)."""
    return bool(adapter.streams) and callable(getattr(adapter, "scalings", None))


def knows_positions(adapter: Reads) -> TypeGuard[KnowsPositions]:
    """Whether `adapter` reads how a transformer knows word order (it implements KnowsPositions: the transformer
    adapters, explorer.adapters.base.Positions; the Adapter base does not)."""
    return callable(getattr(adapter, "first_attention", None)) and callable(getattr(adapter, "rotary", None))


def aligns(adapter: Reads) -> TypeGuard[Aligns]:
    """Whether `adapter` reads an encoder-decoder whose attention it can describe (it implements Aligns: only the
    encoder-decoder adapters have `attention_kind` and `cross_form`; the Adapter base does not)."""
    return adapter.is_encoder_decoder and callable(getattr(adapter, "cross_form", None))


def is_recurrent(adapter: Reads) -> TypeGuard[Recurrent]:
    """Whether `adapter` reads a recurrent network (its `recurrent` flag): then it has `weights` and `net`."""
    return bool(getattr(adapter, "recurrent", False))


def decides(part: object) -> TypeGuard[Decides]:
    """Whether `part` is a task model's decision (explorer.adapters.decision.Decider)."""
    return part is not None and callable(getattr(part, "decision_logits", None)) and hasattr(part, "head")


if TYPE_CHECKING:
    def _every_adapter_has_the_interface(a: Adapter) -> tuple[Reads, Records]:
        """Never called: mypy checks here that the Adapter base implements these protocols (every other one is
        implemented by the adapters that have it only: see generates, has_tables, differentiates, unembeds,
        has_attention, knows_positions, aligns, is_recurrent, can_intervene)."""
        return a, a
