"""Positional encodings of a loaded model, read from its own weights and modules: its learned (or fixed) position
table, its position scheme with its own numbers (rotary frequencies and the model's q·k turned, ALiBi slopes, T5's
relative bias), the vectors it adds for a sentence, and the permutation test of its first self-attention layer.

Pure functions (no streamlit, no plotly): each takes a `LoadedModel` and reads it through `loaded.adapter`. The
formula illustrations (sinusoidal, rotary, computed from the papers' equations) are explorer.probes.position_formulas.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from explorer.adapters.protocols import KnowsPositions, Loaded
from explorer.runtime import budget
from explorer.adapters.base import PositionTable, Unsupported
from explorer.probes.position_formulas import similarity
from explorer.probes.self_attention import rotate


# ---------------------------------------------------------------------------------------------- models
def _positions(loaded: Loaded) -> KnowsPositions:
    """The model's positions capability; Unsupported (the panel's message) for a model without one."""
    mid = getattr(loaded, "id", "This model")
    if getattr(loaded, "model", None) is None:
        raise Unsupported(f"{mid} is a bare state dict: load it as a model to see its positions.")
    if (positions := loaded.caps.positions) is None:
        raise Unsupported(f"{mid} is not a transformer whose positions this view reads (the built-in GPT and masked "
                          "LM, Hugging Face encoders, decoders and encoder–decoders). Recurrent models know order "
                          "from the recurrence, not from position vectors.")
    return positions


def _table(loaded: Loaded) -> PositionTable:
    return _positions(loaded).position_table()


@dataclass(frozen=True)
class LearnedTrace:
    """The model's own position table.

    weight: (P, d) float32, row p is the vector added at position p (P = max positions);
    source: where it lives in the model; kind: "learned" or "sinusoidal" (fixed table of a built-in model).
    """

    model_id: str
    source: str
    kind: str
    weight: np.ndarray
    offset: int = 0  # first row used for position 0 (RoBERTa: padding_idx + 1)


def learned_positions(loaded: Loaded) -> LearnedTrace:
    table = _table(loaded)
    with torch.inference_mode():
        w = table.weight.detach().float().cpu().numpy()
    return LearnedTrace(str(loaded.id), table.source, table.kind, w, table.offset)


@dataclass(frozen=True)
class LearnedAnalysis:
    """Similarities and PCA of a (P, d) position table: dot, cosine (P, P); coords (P, 3); explained (3,): the share
    of the table's variance along each axis. on_reference: the axes are another table's principal axes (the trained
    model's, for a training step), not this table's own."""

    dot: np.ndarray
    cosine: np.ndarray
    coords: np.ndarray
    explained: np.ndarray
    on_reference: bool = False

    @property
    def neighbours(self) -> tuple[float, float]:
        """(mean cosine of positions p and p + 1, mean cosine of positions more than a quarter of the table apart)."""
        n = self.cosine.shape[0]
        near = float(np.diagonal(self.cosine, 1).mean()) if n > 1 else 1.0
        far_apart = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) > n // 4
        return near, float(self.cosine[far_apart].mean()) if far_apart.any() else near


def principal_axes(table: np.ndarray, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The mean (d,) and top-k principal axes (k, d) of `table` (P, d), each axis signed so that its largest
    component is positive (the same axes whatever the SVD's signs)."""
    ref = np.asarray(table, dtype=np.float64)
    mean = ref.mean(axis=0)
    _, _, vt = np.linalg.svd(ref - mean, full_matrices=False)
    axes = vt[:min(k, *ref.shape)]
    signs = np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])
    return mean, axes * signs[:, None]


def analyse_table(weight: np.ndarray, reference: np.ndarray | None = None) -> LearnedAnalysis:
    """Similarities and PCA of `weight` (P, d). reference: a table of the same shape whose principal axes (and
    mean) the rows are projected on, so that every training step is seen in the trained model's frame (default:
    the table's own axes)."""
    on_reference = reference is not None and reference.shape == weight.shape
    coords, explained = positions_pca(weight, reference if on_reference else None)
    return LearnedAnalysis(similarity(weight, "dot"), similarity(weight, "cosine"), coords, explained,
                           on_reference=on_reference)


def positions_pca(weight: np.ndarray, reference: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `weight` (P, d) on the top principal axes of `reference` (default: its own), centred on the
    reference's mean: coords (P, 3) and each axis's share of `weight`'s variance (3,)."""
    mean, axes = principal_axes(weight if reference is None else reference)
    centred = np.asarray(weight, dtype=np.float64) - mean
    coords = centred @ axes.T
    return coords, (coords ** 2).sum(axis=0) / (float((centred ** 2).sum()) or 1.0)


def learned_analysis(loaded: Loaded, reference: Loaded | None = None) -> LearnedAnalysis:
    """Similarities and PCA of the model's own position table; reference: a model (the trained one) whose table's
    principal axes the PCA uses (analyse_table)."""
    weight = learned_positions(loaded).weight
    return analyse_table(weight, None if reference is None else learned_positions(reference).weight)


@dataclass(frozen=True)
class ModelPositions:
    """How a loaded model knows word order, with its own numbers (the adapter's PositionScheme).

    kind: "learned" | "sinusoidal" | "rotary" | "alibi" | "relative" | "none"; rows: (what, value) read from it.
    rotary: inv_freq (r/2,) its θ_i (the angle its own cos/sin table turns by at position 1); d, the head size;
      tokens (2,) the query and key words of the demonstration;
      offsets (K,), starts (S,), scores (S, K): the model's own layer-0, head-0 q of tokens[0] and k of tokens[1],
      before the rotation, turned with its own cos/sin to positions m and m + Δ: score = rot(q, m)·rot(k, m + Δ)
      (no 1/√d); spread: max over Δ of (max − min over m), 0 when the score depends on the offset alone.
    alibi: slopes (H,); bias (H, n) the term m_h · j added for key position j.
    relative: offsets (2n − 1,) Δ = j − i; bias (H, 2n − 1) the learned b_h(Δ) (from row n − 1 of its n × n table).
    """

    model_id: str
    kind: str
    rows: tuple[tuple[str, str], ...]
    inv_freq: np.ndarray | None = None
    d: int = 0
    tokens: tuple[str, ...] = ()
    offsets: np.ndarray | None = None
    starts: np.ndarray | None = None
    scores: np.ndarray | None = None
    slopes: np.ndarray | None = None
    bias: np.ndarray | None = None
    notes: tuple[str, ...] = ()

    @property
    def wavelength(self) -> np.ndarray | None:
        """(r/2,) 2π/θ_i in positions (rotary)."""
        return 2 * np.pi / self.inv_freq if self.inv_freq is not None else None

    @property
    def key_positions(self) -> np.ndarray | None:
        """(n,) the key positions j of an ALiBi bias."""
        return np.arange(self.bias.shape[1]) if self.bias is not None else None

    @property
    def spread(self) -> float:
        return float((self.scores.max(axis=0) - self.scores.min(axis=0)).max()) if self.scores is not None else 0.0


def model_positions(loaded: Loaded, text: str, n: int = 48) -> ModelPositions:
    """The model's own position scheme and numbers (see ModelPositions). Raises Unsupported for a bare state dict."""
    adapter, mid = _positions(loaded), str(loaded.id)
    scheme = adapter.position_scheme()
    if scheme.kind == "alibi":
        slopes = adapter.alibi_slopes().astype(np.float64)
        return ModelPositions(mid, "alibi", scheme.rows, slopes=slopes, bias=slopes[:, None] * np.arange(n))
    if scheme.kind == "relative":
        table = adapter.relative_bias(n).astype(np.float64)                                   # (H, n, n)
        return ModelPositions(mid, "relative", scheme.rows, offsets=np.arange(-(n - 1), n),
                              bias=np.concatenate([table[:, n - 1, :], table[:, 0, 1:]], axis=1))
    if scheme.kind != "rotary":
        return ModelPositions(mid, scheme.kind, scheme.rows)
    cos, sin = (x.astype(np.float64) for x in adapter.rotary(2 * n))
    inv_freq = np.arctan2(sin[1, :sin.shape[1] // 2], cos[1, :cos.shape[1] // 2])  # θ_i: the angle at position 1
    enc = adapter.encode(text, max_tokens=budget.cap_tokens(loaded.model, adapter.max_tokens))
    prefix = next(iter(adapter.streams.values())).format(l=0)
    rec = adapter.run(enc, names=(prefix + ".q_pre", prefix + ".k_pre")) if len(enc.ids) >= 2 else None
    if rec is None or prefix + ".q_pre" not in rec:
        why = adapter.arithmetic_note or "Type a sentence of two tokens or more to see the model's own q and k turned."
        return ModelPositions(mid, "rotary", scheme.rows, inv_freq=inv_freq, notes=(why,))
    words = [t for t, special in enumerate(enc.special or (False,) * len(enc.ids)) if not special] or [0, 1]
    i, j = words[-1], words[-2] if len(words) > 1 else words[-1]
    q, k = rec[prefix + ".q_pre"][0, i].astype(np.float64), rec[prefix + ".k_pre"][0, j].astype(np.float64)
    offsets, starts = np.arange(n), np.array([0, n // 4, n // 2])
    scores = np.array([[rotate(q, cos[m], sin[m]) @ rotate(k, cos[m + dlt], sin[m + dlt]) for dlt in offsets]
                       for m in starts])
    return ModelPositions(mid, "rotary", scheme.rows, inv_freq=inv_freq, d=len(q), tokens=(enc.tokens[i],
                          enc.tokens[j]), offsets=offsets, starts=starts, scores=scores, notes=tuple(enc.notes))


@dataclass(frozen=True)
class SentenceTrace:
    """Input vectors of the typed sentence (T tokens, d dims, float32).

    token: (T, d) word/token embedding; position: (T, d) position vector at 0..T-1; total: (T, d) their sum.
    BERT also adds a segment (token-type 0) vector and applies LayerNorm before layer 0 (see `note`).
    """

    tokens: tuple[str, ...]
    notes: tuple[str, ...]
    token: np.ndarray
    position: np.ndarray
    total: np.ndarray
    max_positions: int
    note: str = ""

    @property
    def norms(self) -> np.ndarray:
        """(T, 3) Euclidean norms of token, position and sum vectors."""
        return np.stack([np.linalg.norm(a, axis=1) for a in (self.token, self.position, self.total)], axis=1)

    @property
    def mean_norms(self) -> tuple[float, float]:
        """(mean ‖token vector‖, mean ‖position vector‖) over the sentence's tokens."""
        norms = self.norms
        return (float(norms[:, 0].mean()), float(norms[:, 1].mean())) if len(norms) else (0.0, 0.0)


def sentence_vectors(loaded: Loaded, text: str) -> SentenceTrace:
    """The token and position vectors the model adds for `text` (its record's embed and pos_embed)."""
    table = _table(loaded)
    max_pos = int(table.weight.shape[0]) - table.offset
    adapter = _positions(loaded)
    enc = adapter.encode(text, max_tokens=max_pos)
    d = int(table.weight.shape[1])
    if not enc.ids:
        empty = np.zeros((0, d), dtype=np.float32)
        return SentenceTrace((), enc.notes, empty, empty, empty, max_pos)
    rec = adapter.run(enc, names=("embed", "pos_embed"))
    tok, pos = rec["embed"].astype(np.float32), rec["pos_embed"].astype(np.float32)
    note = adapter.input_note()
    return SentenceTrace(enc.tokens, enc.notes, tok, pos, tok + pos, max_pos, note[:1].upper() + note[1:])


# ------------------------------------------------------------------------------------- permutation test
@dataclass(frozen=True)
class PermutationTrace:
    """Self-attention on a sentence and on its shuffle, with and without position vectors.

    perm: (T,) the shuffled sequence holds token perm[j] at place j (special tokens stay in place);
    diff_nopos / diff_pos: (T,) per original token, max_j |y(x)_t - unshuffle(y(shuffle(x)))_t| without / with
    position vectors; diff_causal: (T,) the same without positions but with the causal mask (decoders), else None.
    layer: what was run.
    """

    tokens: tuple[str, ...]
    shuffled: tuple[str, ...]
    perm: np.ndarray
    diff_nopos: np.ndarray
    diff_pos: np.ndarray
    diff_causal: np.ndarray | None
    layer: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def max_nopos(self) -> float:
        return float(self.diff_nopos.max()) if self.diff_nopos.size else 0.0

    @property
    def max_pos(self) -> float:
        return float(self.diff_pos.max()) if self.diff_pos.size else 0.0


def shuffle_order(special: tuple[bool, ...], seed: int) -> np.ndarray:
    """A permutation of 0..T-1 that moves only non-special tokens and is not the identity when possible."""
    T = len(special)
    perm = np.arange(T)
    movable = np.array([t for t in range(T) if not special[t]], dtype=int)
    if len(movable) < 2:
        return perm
    rng = np.random.default_rng(seed)
    for _ in range(20):
        shuffled = rng.permutation(movable)
        if not np.array_equal(shuffled, movable):
            break
    else:
        shuffled = np.roll(movable, 1)
    perm[movable] = shuffled
    return perm


def permutation_experiment(loaded: Loaded, text: str, seed: int = 0) -> PermutationTrace:
    """Shuffle the tokens; run layer-0 self-attention with/without positions; compare after un-shuffling."""
    from explorer.adapters.text import Encoded

    table = _table(loaded)
    adapter = _positions(loaded)
    enc = adapter.encode(text, max_tokens=int(table.weight.shape[0]) - table.offset)
    special = enc.special or tuple(False for _ in enc.ids)
    perm = shuffle_order(special, seed)
    empty = np.zeros(0)
    if len(enc.ids) < 2:
        layer = adapter.first_attention(enc, True, False)[1] if enc.ids else ""
        return PermutationTrace(enc.tokens, enc.tokens, perm, empty, empty, None, layer,
                                (*enc.notes, "Type at least two tokens to shuffle."))
    notes = list(enc.notes)
    if np.array_equal(perm, np.arange(len(perm))):
        notes.append("There are fewer than two words to shuffle (special tokens stay in place).")
    shuffled = Encoded(tuple(enc.ids[i] for i in perm), tuple(enc.tokens[i] for i in perm), (), False, 0,
                       tuple(special[i] for i in perm))
    inv = np.argsort(perm)

    def diff(with_pos: bool, causal: bool) -> tuple[np.ndarray, str]:
        y, what = adapter.first_attention(enc, with_pos, causal)
        y_shuf, _ = adapter.first_attention(shuffled, with_pos, causal)
        return np.abs(y - y_shuf[inv]).max(axis=-1), what

    (d_nopos, layer), (d_pos, _) = diff(False, False), diff(True, False)
    d_causal = diff(False, True)[0] if adapter.causal else None
    return PermutationTrace(enc.tokens, shuffled.tokens, perm, d_nopos, d_pos, d_causal, layer, tuple(notes))
