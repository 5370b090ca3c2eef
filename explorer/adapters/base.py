"""The activation record and the one interface every model family implements.

An adapter is attached to a model once, when it is loaded (`LoadedModel.adapter`). It decides how text is fed
to the model (`encode`: which special tokens, which tokenizer; the same in every view), runs the model ONCE for
an input and returns a `Record`, and steps it for generation (`start` / `step` / `reorder`). Probes read the
record; they never walk a model themselves. Nothing is attached to, or removed from, a shared model per call.

Record names (TransformerLens hook names where they exist). Shapes are for one input: T tokens, C width,
H heads, d head size, V vocabulary, S source tokens, L layers:

  embed                     (T, C)      token embeddings (word2vec: the word vectors)
  pos_embed                 (T, C)      position vectors added to them (models with a position table)
  blocks.{l}.resid_pre      (T, C)      the residual stream entering block l
  blocks.{l}.ln1            (T, C)      what block l's attention reads (after the pre-norm; post-LN: resid_pre)
  blocks.{l}.attn.q|k|v     (H, T, d)   per head, as the model multiplies them (after RoPE; GQA: k, v repeated)
  blocks.{l}.attn.kv_head   (H,)        the key/value head each query head reads
  blocks.{l}.attn.bias      (H, T, T)   a position term on the scores (T5 relative bias, BLOOM ALiBi)
  blocks.{l}.attn.softcap   ()          the soft-cap on the scores (models that have one)
  blocks.{l}.attn.q_pre|k_pre (H, T, d) rotary models: q and k before the rotation
  rope.cos|sin (T, r), rope.inv_freq (r/2,)  the model's own rotary tables
  blocks.{l}.attn.scale     ()          the factor on q·k (1/√d unless the model says otherwise)
  blocks.{l}.attn.mask      (T, T)      the additive mask: 0, or −inf where masked (causal, padding)
  blocks.{l}.attn.pattern   (H, T, T)   the softmax weights, as the model returns them
  blocks.{l}.resid_post     (T, C)      the residual stream leaving block l
  ln_final                  (T, C)      after the final norm (models that have one)
  logits                    (T, V)      row t: the next-token logits after token t (decoders, LMs)
  rnn.{l}.{dir}.{gate}      (T, H)      dir "fwd" | "bwd"; LSTM i f g o c h, GRU r z n h, Elman h
  rnn.{l}.{dir}.x_part      (T, G·H)    W_ih x_t + b_ih, every gate (G = 4, 3, 1)
  rnn.{l}.{dir}.h_part      (T, G·H)    W_hh h_{t−1} + b_hh (h_{−1} = 0)
  rnn.{l}.out               (T, D·H)    what layer l passes up: [h_fwd; h_bwd]
  encoder.<name> / decoder.<name>       the entries of an encoder-decoder's two halves
  cross.{l}.pattern         (H, T, S)   decoder queries over encoder keys (built-in RNN seq2seq: H = 1)
  cross.{l}.scores          (H, T, S)   before the softmax (built-in RNN seq2seq)
  cross.{l}.q, cross.{l}.k  (T, A), (S, A)  the two sides of the score (built-in RNN seq2seq, see seq2seq_rnn)
  cross.{l}.context         (T, C)      c_t = Σ_j a_tj h_j (built-in RNN seq2seq)
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Self, Sequence

import numpy as np
import torch

from explorer.adapters import examples as _examples
from explorer.data.examples import Examples
from explorer.runtime import model_state
from explorer.runtime.errors import ViewError
from explorer.adapters.text import Encoded, model_max_tokens

if TYPE_CHECKING:
    from explorer.adapters.task_head import TaskHead
    from explorer.data.vocab import Vocab


class Unsupported(ViewError, ValueError):
    """The model cannot do what a view asks (no attention, cannot generate, ...); str() is for the user."""

    alert = "info"


Names = Sequence[str] | None  # glob patterns of record names to compute; None: everything the adapter records


def wants(names: Names, *candidates: str) -> bool:
    """Whether one of the record names (or glob patterns) `candidates` overlaps one of the glob patterns `names`
    (None: every name is wanted)."""
    if names is None:
        return True
    return any(fnmatch.fnmatchcase(c, p) or fnmatch.fnmatchcase(p, c) for c in candidates for p in names)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor as a numpy array on the host: half precision becomes float32, float64 stays float64."""
    t = t.detach()
    if t.is_floating_point() and t.dtype != torch.float64:
        t = t.float()
    return t.cpu().numpy()


@dataclass(frozen=True)
class Record:
    """What one forward pass computed: the input as fed and the activations under stable names (module docstring).

    input: the tokens as fed, special tokens included and flagged (`input.special`); target: what the decoder of
    an encoder-decoder read (its start token first), else None. acts: name -> float32 array.
    """

    input: Encoded
    acts: dict[str, np.ndarray]
    target: Encoded | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.input.tokens

    def __contains__(self, name: str) -> bool:
        return name in self.acts

    def __getitem__(self, name: str) -> np.ndarray:
        return self.acts[name]

    def get(self, name: str, default: np.ndarray | None = None) -> np.ndarray | None:
        return self.acts.get(name, default)

    def layers(self, pattern: str) -> list[int]:
        """The l for which `pattern` (with "{l}") names an entry, ascending."""
        rx = re.compile("^" + re.escape(pattern).replace(r"\{l\}", r"(\d+)") + "$")
        return sorted(int(m.group(1)) for name in self.acts if (m := rx.match(name)))

    def stack(self, pattern: str) -> np.ndarray:
        """The entries `pattern.format(l=l)` for every layer l, stacked: (L, ...)."""
        return np.stack([self.acts[pattern.format(l=layer)] for layer in self.layers(pattern)])


@dataclass(frozen=True)
class Table:
    """An embedding table of a model: (V, D) weights with the token of each row.

    words (V,); special (V,) True for special/unused entries; freq: corpus counts (or None); subword: word pieces;
    ranked: the rows are already most frequent first (a published table such as GloVe's)."""

    label: str
    weight: torch.Tensor
    words: tuple[str, ...]
    special: tuple[bool, ...]
    freq: dict[str, int] | None = None
    subword: bool = False
    notes: tuple[str, ...] = ()
    ranked: bool = False


@dataclass(frozen=True)
class PositionTable:
    """A model's own position table: weight (P, C), row offset + p is added at position p; kind "learned" or
    "sinusoidal" (a fixed table); source: where it lives in the model."""

    source: str
    kind: str
    weight: torch.Tensor
    offset: int = 0


@dataclass(frozen=True)
class CrossForm:
    """What an encoder-decoder's attention computes, read from the checkpoint (the page prints it as a formula).

    kind: none | bahdanau | luong-dot | luong-general | luong-concat | cross (a transformer's cross-attention);
    query: the decoder state the score reads ("s_{t-1}" or "s_t"); inputs: (symbol, size) parts of the decoder
    RNN's input, in order, summing to its W_ih width; output: what the output layer reads; scaling: per layer,
    the factor on the dot products (transformers; None where it could not be read); source: where it was read.
    """

    kind: str
    query: str = ""
    inputs: tuple[tuple[str, int], ...] = ()
    output: tuple[str, ...] = ()
    scaling: tuple[float | None, ...] = ()
    head_dim: int = 0
    source: str = ""


@dataclass(frozen=True)
class PositionScheme:
    """How a model knows word order, read from it. kind: "learned" / "sinusoidal" (a table added to the input, see
    PositionTable), "rotary" (q and k turned inside attention), "alibi" (a per-head linear bias on the scores),
    "relative" (a learned bias per head and distance bucket) or "none"; rows: (what, value) pairs read from it."""

    kind: str
    rows: tuple[tuple[str, str], ...] = ()


class Adapter:
    """The interface. Subclasses set the capabilities below and implement what they support.

    Capabilities: `streams` (attention streams: stream -> record prefix, e.g. {"decoder": "blocks.{l}.attn"}),
    `recurrent` (rnn.* entries), `can_generate` (start/step), `layer_prefix` (where the per-layer states live).
    """

    name = "model"
    family = ""
    streams: dict[str, str] = {}
    causal = False
    recurrent = False
    can_generate = False
    is_encoder_decoder = False
    reason = ""  # why this model can only be read in part (shown by the views it does not support)
    # generation (set by adapters that can generate)
    vocab_size = 0
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()
    pad_id: int | None = None
    decoder_start: tuple[int, ...] = ()
    context_len: int | None = None
    sliding = False  # beyond context_len the oldest tokens are dropped (built-in GPT, as nanoGPT's generate)
    # a task model's head (explorer.adapters.task_head.TaskHead) and its two functions, ids (B, T) -> embeddings
    # (B, T, E) and embeddings [, segments] -> logits (B, C) or (B, T, C): set by the adapters that read one, made
    # the `decision` capability by explorer.adapters.capabilities
    task_head: TaskHead | None = None
    decision_fns: Any = None

    def __init__(self, loaded: Any) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self._id = str(loaded.id)
        self.device = torch.device(loaded.device)

    @property
    def id(self) -> str:
        """The model's id (explorer.loading.catalogue), as the views name it."""
        return self._id

    @classmethod
    def of(cls, model: torch.nn.Module, **vocabs: Vocab) -> Self:
        """The adapter of a model that is not in the catalogue (e.g. during training)."""
        from types import SimpleNamespace

        device = str(next(model.parameters()).device)
        return cls(SimpleNamespace(id="model", model=model, device=device, vocabs=vocabs, meta={}, tokenizer=None,
                                   family="", state_dict=None, config=getattr(model, "config", None)))

    @property
    def max_tokens(self) -> int:
        """The longest input the model reads (its positions), or DEFAULT_MAX_TOKENS when unbounded."""
        return model_max_tokens(self.loaded)

    # ------------------------------------------------------------------ input convention
    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        """Text -> the tokens this model is fed, special tokens included (side "target": an encoder-decoder's
        decoder side). The one place that decides the input convention."""
        raise Unsupported(f"{self.id} has no vocabulary or tokenizer to read text with.")

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """One display string per id (unknown ids as #id)."""
        return [f"#{i}" for i in ids]

    def sequence_strings(self, ids: Iterable[int]) -> list[str]:
        """The ids of one sequence shown as in a sentence (explorer.text.token_text: a character whose bytes
        span several tokens is shown in each with its part)."""
        return self.token_strings(ids)

    def piece_strings(self, ids: Iterable[int]) -> list[str]:
        """The tokenizer's own name of each id (word pieces keep their ##, Ġ, ▁ markers)."""
        return self.token_strings(ids)

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of generated ids."""
        return " ".join(self.token_strings(ids))

    # ------------------------------------------------------------------ one forward pass
    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: Any) -> Record:
        """Run the model once on `enc` (and the decoder on `target`) and record the `names` asked for."""
        raise Unsupported(f"{self.id} cannot be run by this explorer.")

    # ------------------------------------------------------------------ generation
    # start / step / reorder (Generates) are the generating adapters' own: the built-in GPT and masked LM, RNN LMs
    # and seq2seq, Hugging Face. The special ids above are every model's (empty where it has none).
    def generation_settings(self) -> dict[str, Any]:
        """The model's own generation settings that every strategy honours (forced BOS/EOS, bad words, ...):
        GenerationConfig field -> value. Built-in models have none."""
        return {}

    # ------------------------------------------------------------------ tables
    def position_scheme(self) -> PositionScheme:
        """How this model knows positions (kind and what was read): "none" here; the transformer adapters
        (`Positions`) read it."""
        return PositionScheme("none")

    def describe(self) -> tuple[tuple[str, str], ...]:
        """(what, value) rows: what the adapter read from the model (shown on the pages): a task model's head."""
        return tuple(self.task_head.rows()) if self.task_head is not None else ()

    # ------------------------------------------------------------------ example sentences
    def examples(self, purpose: str) -> Examples:
        """This model's example sentences for a view's purpose (explorer.data.examples.PURPOSES): sentences of the
        language it was trained on that it reads without an unknown token. Computed once per adapter."""
        return model_state.kept(self, "examples", purpose, lambda: _examples.for_model(self, purpose))


class Attends:
    """What a transformer adapter says about the attention its record holds (HasAttention): the defaults of what
    each transformer adapter (the built-in GPT and masked LM, Hugging Face) may set. The other adapters do not have
    it."""

    arithmetic_note = ""  # why q/k/v are not recorded, when they are not
    bias_name = ""  # what the recorded attention bias (blocks.{l}.attn.bias) is
    supports_padding = False  # run(..., pad=n) appends n padding tokens with attention_mask 0

    def scalings(self, stream: str) -> tuple[float | None, ...]:
        """Per layer of attention stream `stream`, the factor the model multiplies q·k by (None: not read)."""
        return ()

    def head_size(self, stream: str) -> int:
        """The size d of one head's q and k in attention stream `stream` (0: not read)."""
        return 0


class Positions:
    """What a transformer adapter reads about how its model knows word order (KnowsPositions), with what each
    method says where the model has no such thing (it raises Unsupported). Mixed into the transformer adapters (the
    built-in GPT and masked LM, Hugging Face) before Adapter; the other adapters do not have it."""

    if TYPE_CHECKING:
        @property
        def id(self) -> str: ...

    def position_scheme(self) -> PositionScheme:
        """How this model knows positions: its position table's kind, or "none"."""
        try:
            table = self.position_table()
        except Unsupported:
            return PositionScheme("none")
        return PositionScheme(table.kind, (("table", f"{table.source} {tuple(table.weight.shape)}"),))

    def position_table(self) -> PositionTable:
        """The model's own table of position vectors."""
        raise Unsupported(f"{self.id} has no learned position table this view can read (BERT-family "
                          "embeddings.position_embeddings, GPT-2-family wpe or builtin:tiny-gpt). Recurrent models "
                          "know order from the recurrence, not from position vectors.")

    def input_note(self) -> str:
        """What the model does to token + position vectors before its first layer, read from it ("" if nothing)."""
        return ""

    def rotary(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(cos, sin), each (n, r): the model's own rotary tables for positions 0..n−1 (rotary models)."""
        raise Unsupported(f"{self.id} has no rotary position embedding.")

    def alibi_slopes(self) -> np.ndarray:
        """(H,) the slope m_h of each head's ALiBi bias m_h · key position (ALiBi models)."""
        raise Unsupported(f"{self.id} has no ALiBi bias.")

    def relative_bias(self, n: int) -> np.ndarray:
        """(H, n, n) the learned relative position bias b_h(j − i) the first layer adds (T5 family)."""
        raise Unsupported(f"{self.id} has no relative position bias.")

    def first_attention(self, enc: Encoded, positions: bool, causal: bool) -> tuple[np.ndarray, str]:
        """(T, C) output of layer 0's attention on the input embeddings, with or without the position vectors and
        the causal mask (an experiment), and a description of what was run."""
        raise Unsupported(f"The shuffle test runs layer 0 of the BERT and GPT-2 families and the built-in GPT; "
                          f"{self.id} is not one of them.")


@dataclass
class Acts:
    """A builder for a record's activations: keeps only the names asked for, converts to numpy once."""

    names: Names
    out: dict[str, np.ndarray] = field(default_factory=dict)

    def want(self, *candidates: str) -> bool:
        return wants(self.names, *candidates)

    def put(self, name: str, value: torch.Tensor | np.ndarray) -> None:
        if wants(self.names, name):
            self.out[name] = to_numpy(value) if isinstance(value, torch.Tensor) else np.asarray(value)


def causal_mask(T: int) -> torch.Tensor:
    """(T, T) additive mask: 0 on and below the diagonal, −inf above (future tokens)."""
    return torch.full((T, T), float("-inf")).triu(1)
