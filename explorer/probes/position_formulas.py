"""Position formulas, as illustrations computed from the papers' equations (no model): the sinusoidal table
(Vaswani et al. 2017) with its relative-position rotation, and rotary embeddings (RoPE, Su et al. 2021).

Control-only functions: they take plain numbers (validated against the bounds below) and return float64 numpy
arrays. The loaded model's own positions are read by explorer.probes.positional_encodings.

Conventions (the same as `explorer.models.tiny_gpt.sinusoidal_positions`): dimension pair i uses the angular
frequency omega_i = base^(-2i/d); PE[p, 2i] = sin(p * omega_i), PE[p, 2i+1] = cos(p * omega_i).
RoPE rotates the pair (x[2i], x[2i+1]) by the angle m * omega_i at position m (interleaved pairs, as in the
RoFormer paper).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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
    """The formula's numbers at position `pos` and pair i, read from `trace.pe` (n_pos, d_model)."""
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
    """PE(p + k) against R_k PE(p) over the table's positions (see RotationTrace: errors (n_pos - k,))."""
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
    return RopeTrace(d_model=d_model, base=float(base), pos=pos, q=q, k=k, q_rot=q_rot, angles=angles,
                     offsets=offsets, starts=starts, scores=scores,
                     norms=np.array([np.linalg.norm(q), np.linalg.norm(q_rot)]))
