"""Positional encodings: sinusoidal (Vaswani et al. 2017), learned tables, rotary (Su et al. 2021).

Pure functions (no streamlit, no plotly). Control-only functions take plain numbers and return float64 numpy
arrays; model functions take a `registry.LoadedModel` and read the model's own weights and modules.

Conventions (the same as `explorer.models.tiny_gpt.sinusoidal_positions`): dimension pair i uses the angular
frequency omega_i = base^(-2i/d); PE[p, 2i] = sin(p * omega_i), PE[p, 2i+1] = cos(p * omega_i).
RoPE rotates the pair (x[2i], x[2i+1]) by the angle m * omega_i at position m (interleaved pairs, as in the
RoFormer paper).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from explorer.adapters.base import Unsupported
from explorer.probes.self_attention import rotate
from explorer.projections.reduce import pca

# Bounds for the controls (clear messages for anything outside them).
D_MIN, D_MAX = 2, 1024
P_MIN, P_MAX = 1, 2048
BASE_MIN, BASE_MAX = 2.0, 1e7


def _check(n_pos: int, d_model: int, base: float) -> None:
    if not (D_MIN <= d_model <= D_MAX and d_model % 2 == 0):
        raise ValueError(f"d_model must be even and in [{D_MIN}, {D_MAX}], got {d_model}")
    if not P_MIN <= n_pos <= P_MAX:
        raise ValueError(f"the number of positions must be in [{P_MIN}, {P_MAX}], got {n_pos}")
    if not BASE_MIN <= base <= BASE_MAX:
        raise ValueError(f"the base must be in [{BASE_MIN:g}, {BASE_MAX:g}], got {base}")


# ------------------------------------------------------------------------------------------ sinusoidal
def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """(d/2,) angular frequency of each pair: omega_i = base^(-2i/d)."""
    two_i = np.arange(0, d_model, 2, dtype=np.float64)
    return np.power(float(base), -two_i / d_model)


@dataclass(frozen=True)
class SinusoidalTrace:
    """The sinusoidal table and its per-pair frequencies (float64).

    pe: (n_pos, d_model)  PE[p, 2i] = sin(p * omega_i), PE[p, 2i+1] = cos(p * omega_i)
    omega: (d_model/2,)   angular frequency of pair i
    wavelength: (d_model/2,)  2*pi / omega_i, in positions
    """

    n_pos: int
    d_model: int
    base: float
    pe: np.ndarray
    omega: np.ndarray
    wavelength: np.ndarray

    @property
    def norm(self) -> float:
        """√(d/2): the length of every PE(p)."""
        return float(np.sqrt(self.d_model / 2))

    @property
    def norm_range(self) -> tuple[float, float]:
        """(smallest, largest) ‖PE(p)‖ over the positions (each pair contributes sin² + cos² = 1: √(d/2))."""
        norms = np.linalg.norm(self.pe, axis=1)
        return float(norms.min()), float(norms.max())


def sinusoidal(n_pos: int, d_model: int, base: float = 10000.0) -> SinusoidalTrace:
    """The Vaswani et al. (2017) table for positions 0..n_pos-1 (validated sizes)."""
    _check(n_pos, d_model, base)
    omega = frequencies(d_model, base)
    angle = np.arange(n_pos, dtype=np.float64)[:, None] * omega[None, :]  # (P, d/2)
    pe = np.empty((n_pos, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return SinusoidalTrace(n_pos, d_model, float(base), pe, omega, 2 * np.pi / omega)


@dataclass(frozen=True)
class FormulaValues:
    """The numbers of the formula at (pos, pair i): angle = pos / base^(2i/d), PE(pos,2i)=sin, PE(pos,2i+1)=cos."""

    pos: int
    i: int
    denominator: float  # base^(2i/d)
    angle: float
    sin: float
    cos: float
    wavelength: float


def formula_values(trace: SinusoidalTrace, pos: int, i: int) -> FormulaValues:
    denom = trace.base ** (2 * i / trace.d_model)
    angle = pos / denom
    return FormulaValues(pos, i, denom, angle, float(trace.pe[pos, 2 * i]), float(trace.pe[pos, 2 * i + 1]),
                         float(trace.wavelength[i]))


def similarity(vectors: np.ndarray, kind: str = "dot") -> np.ndarray:
    """(P, P) similarity between the rows of `vectors` (P, d): "dot" products or "cosine"."""
    v = np.asarray(vectors, dtype=np.float64)
    if kind == "cosine":
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        v = v / np.where(norms > 0, norms, 1.0)
    elif kind != "dot":
        raise ValueError(f"kind must be 'dot' or 'cosine', got {kind!r}")
    return v @ v.T


def sinusoidal_similarity(n_pos: int, d_model: int, base: float, kind: str = "dot") -> np.ndarray:
    """(n_pos, n_pos) dot products or cosines between the sinusoidal position vectors."""
    return similarity(sinusoidal(n_pos, d_model, base).pe, kind)


def rotation_matrix(d_model: int, base: float, k: int) -> np.ndarray:
    """(d, d) block-diagonal R_k with PE(p + k) = R_k PE(p) for every p.

    For the pair (s, c) = (sin p*w, cos p*w): sin((p+k)w) = s cos kw + c sin kw, cos((p+k)w) = -s sin kw + c cos kw,
    so each 2x2 block is [[cos kw, sin kw], [-sin kw, cos kw]].
    """
    omega = frequencies(d_model, base)
    R = np.zeros((d_model, d_model), dtype=np.float64)
    c, s = np.cos(k * omega), np.sin(k * omega)
    idx = np.arange(0, d_model, 2)
    R[idx, idx], R[idx, idx + 1] = c, s
    R[idx + 1, idx], R[idx + 1, idx + 1] = -s, c
    return R


@dataclass(frozen=True)
class RotationTrace:
    """The relative-position property for offset k.

    R: (d, d) the block-diagonal rotation; angles: (d/2,) k * omega_i (radians);
    errors: (n_pos - k,) max_j |PE(p+k) - R_k PE(p)|_j for p = 0..n_pos-k-1; max_error: their max (0 if none),
    reached at p = worst.
    """

    k: int
    R: np.ndarray
    angles: np.ndarray
    errors: np.ndarray
    max_error: float
    omega: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def worst(self) -> int:
        return int(np.argmax(self.errors)) if self.errors.size else 0

    def block(self, i: int) -> "RotationBlock":
        """The 2x2 block of pair i: angle k·ω_i and its cosine and sine."""
        a = float(self.angles[i])
        return RotationBlock(float(self.omega[i]), a, float(np.cos(a)), float(np.sin(a)))


@dataclass(frozen=True)
class RotationBlock:
    omega: float
    angle: float
    cos: float
    sin: float


def rotation_check(n_pos: int, d_model: int, base: float, k: int) -> RotationTrace:
    tr = sinusoidal(n_pos, d_model, base)
    R = rotation_matrix(d_model, base, k)
    if 0 <= k < n_pos:
        err = np.abs(tr.pe[k:] - tr.pe[: n_pos - k] @ R.T).max(axis=1)
    else:
        err = np.zeros(0)
    return RotationTrace(k, R, k * tr.omega, err, float(err.max()) if err.size else 0.0, tr.omega)


# ------------------------------------------------------------------------------------------------ RoPE
def rope_rotate(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Rotate x (T, d) at `positions` (T,): pair (x[2i], x[2i+1]) turns by positions * omega_i."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    theta = np.asarray(positions, dtype=np.float64)[:, None] * frequencies(d, base)[None, :]  # (T, d/2)
    c, s = np.cos(theta), np.sin(theta)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


@dataclass(frozen=True)
class RopeTrace:
    """Rotary embeddings for one query/key pair.

    q, k: (d,) the vectors before rotation; pos: the selected position m;
    q_rot: (d,) q rotated at m; angles: (d/2,) m * omega_i (radians);
    offsets: (n_off,) 0..n_off-1; starts: (S,) absolute positions m of the query;
    scores: (S, n_off) (R_m q) . (R_{m+offset} k): rows coincide because only the offset matters;
    norms: (2,) |q|, |q_rot| (equal: rotations preserve length).
    """

    d_model: int
    base: float
    pos: int
    q: np.ndarray
    k: np.ndarray
    q_rot: np.ndarray
    angles: np.ndarray
    offsets: np.ndarray
    starts: np.ndarray
    scores: np.ndarray
    norms: np.ndarray

    @property
    def spread(self) -> float:
        """max |score(m, offset) - score(0, offset)| over the query positions m: 0 up to rounding."""
        return float(np.abs(self.scores - self.scores[0]).max())


def rope(d_model: int, n_pos: int, base: float, pos: int, vectors: str = "ones", seed: int = 0) -> RopeTrace:
    """q.k after rotation as a function of the offset, for several query positions.

    vectors: "ones" (q = k = all ones: the long-term decay of Su et al.) or "random" (seeded Gaussian, |.| = 1).
    """
    _check(n_pos, d_model, base)
    if vectors == "random":
        rng = np.random.default_rng(seed)
        q, k = rng.standard_normal(d_model), rng.standard_normal(d_model)
        q, k = q / np.linalg.norm(q), k / np.linalg.norm(k)
    else:
        q = k = np.ones(d_model, dtype=np.float64)
    pos = int(min(max(pos, 0), n_pos - 1))
    q_rot = rope_rotate(q[None, :], np.array([pos]), base)[0]
    offsets = np.arange(n_pos)
    starts = np.unique(np.array([0, n_pos // 4, n_pos // 2, pos]))
    scores = np.empty((len(starts), len(offsets)))
    for r, m in enumerate(starts):
        qm = rope_rotate(q[None, :], np.array([m]), base)[0]
        kn = rope_rotate(np.repeat(k[None, :], len(offsets), 0), m + offsets, base)
        scores[r] = kn @ qm
    angles = pos * frequencies(d_model, base)
    return RopeTrace(d_model, float(base), pos, q, k, q_rot, angles, offsets, starts, scores,
                     np.array([np.linalg.norm(q), np.linalg.norm(q_rot)]))


# ---------------------------------------------------------------------------------------------- models
def _table(loaded: Any) -> Any:
    if getattr(loaded, "model", None) is None:
        raise Unsupported(f"{getattr(loaded, 'id', 'This model')} is a bare state dict: load it as a model to see its "
                          "positions.")
    return loaded.adapter.position_table()


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


def learned_positions(loaded: Any) -> LearnedTrace:
    table = _table(loaded)
    with torch.inference_mode():
        w = table.weight.detach().float().cpu().numpy()
    return LearnedTrace(str(loaded.id), table.source, table.kind, w, table.offset)


@dataclass(frozen=True)
class LearnedAnalysis:
    """Similarities and PCA of a (P, d) position table: dot, cosine (P, P); coords (P, 3); explained (3,)."""

    dot: np.ndarray
    cosine: np.ndarray
    coords: np.ndarray
    explained: np.ndarray


def analyse_table(weight: np.ndarray) -> LearnedAnalysis:
    coords, explained = pca(weight, min(3, *weight.shape))
    return LearnedAnalysis(similarity(weight, "dot"), similarity(weight, "cosine"), coords, np.asarray(explained))


def learned_analysis(loaded: Any) -> LearnedAnalysis:
    """Similarities and PCA of the model's own position table."""
    return analyse_table(learned_positions(loaded).weight)


@dataclass(frozen=True)
class ModelPositions:
    """How a loaded model knows word order, with its own numbers (the adapter's PositionScheme).

    kind: "learned" | "sinusoidal" | "rotary" | "alibi" | "relative" | "none"; rows: (what, value) read from it.
    rotary: inv_freq (r/2,) its θ_i (the angle its own cos/sin table turns by at position 1); d, the head size; tokens (2,) the query and key words of the demonstration;
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


def model_positions(loaded: Any, text: str, n: int = 48) -> ModelPositions:
    """The model's own position scheme and numbers (see ModelPositions). Raises Unsupported for a bare state dict."""
    if getattr(loaded, "model", None) is None:
        raise Unsupported(f"{getattr(loaded, 'id', 'This model')} is a bare state dict: load it as a model to see its "
                          "positions.")
    adapter, mid = loaded.adapter, str(loaded.id)
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
    enc = adapter.encode(text)
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


def sentence_vectors(loaded: Any, text: str) -> SentenceTrace:
    """The token and position vectors the model adds for `text` (its record's embed and pos_embed)."""
    table = _table(loaded)
    max_pos = int(table.weight.shape[0]) - table.offset
    adapter = loaded.adapter
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


def permutation_experiment(loaded: Any, text: str, seed: int = 0) -> PermutationTrace:
    """Shuffle the tokens; run layer-0 self-attention with/without positions; compare after un-shuffling."""
    from explorer.adapters.text import Encoded

    table = _table(loaded)
    adapter = loaded.adapter
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
