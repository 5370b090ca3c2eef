"""Positional encodings: sinusoidal (Vaswani et al. 2017), learned tables, rotary (Su et al. 2021).

Pure functions (no streamlit, no plotly). Control-only functions take plain numbers and return float64 numpy
arrays; model functions take a `registry.LoadedModel` and read the model's own weights and modules.

Conventions (the same as `explorer.models.tiny_gpt.sinusoidal_positions`): dimension pair i uses the angular
frequency omega_i = base^(-2i/d); PE[p, 2i] = sin(p * omega_i), PE[p, 2i+1] = cos(p * omega_i).
RoPE rotates the pair (x[2i], x[2i+1]) by the angle m * omega_i at position m (interleaved pairs, as in the
RoFormer paper).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# Bounds for the controls (clear messages for anything outside them).
D_MIN, D_MAX = 2, 1024
P_MIN, P_MAX = 1, 2048
BASE_MIN, BASE_MAX = 2.0, 1e7


# ------------------------------------------------------------------------------------------ validation
def validate_int(raw: Any, lo: int, hi: int, default: int, name: str, even: bool = False) -> tuple[int, str | None]:
    """Parse `raw` into an int in [lo, hi] (even if asked). Returns (value to use, message or None)."""
    try:
        value = float(str(raw).strip())
        if not math.isfinite(value) or value != int(value):
            raise ValueError
        value = int(value)
    except (ValueError, TypeError, OverflowError):
        return default, f"{name} must be a whole number; got '{str(raw)[:40]}', using {default}."
    if value < lo:
        return lo, f"{name} must be at least {lo:,}; got {value:,}, using {lo:,}."
    if value > hi:
        return hi, f"{name} is limited to {hi:,} here; got {value:,}, using {hi:,}."
    if even and value % 2:
        fixed = value + 1 if value + 1 <= hi else value - 1
        return fixed, f"{name} must be even (dimensions come in sin/cos pairs); got {value:,}, using {fixed:,}."
    return value, None


def validate_float(raw: Any, lo: float, hi: float, default: float, name: str) -> tuple[float, str | None]:
    """Parse `raw` into a finite float in [lo, hi]. Returns (value to use, message or None)."""
    try:
        value = float(str(raw).strip())
        if not math.isfinite(value):
            raise ValueError
    except (ValueError, TypeError):
        return default, f"{name} must be a number; got '{str(raw)[:40]}', using {default:g}."
    if value < lo:
        return lo, f"{name} must be at least {lo:g}; got {value:g}, using {lo:g}."
    if value > hi:
        return hi, f"{name} is limited to {hi:g} here; got {value:g}, using {hi:g}."
    return value, None


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
    errors: (n_pos - k,) max_j |PE(p+k) - R_k PE(p)|_j for p = 0..n_pos-k-1; max_error: their max (0 if none).
    """

    k: int
    R: np.ndarray
    angles: np.ndarray
    errors: np.ndarray
    max_error: float


def rotation_check(n_pos: int, d_model: int, base: float, k: int) -> RotationTrace:
    tr = sinusoidal(n_pos, d_model, base)
    R = rotation_matrix(d_model, base, k)
    if 0 <= k < n_pos:
        err = np.abs(tr.pe[k:] - tr.pe[: n_pos - k] @ R.T).max(axis=1)
    else:
        err = np.zeros(0)
    return RotationTrace(k, R, k * tr.omega, err, float(err.max()) if err.size else 0.0)


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


# ------------------------------------------------------------------------------------------------- PCA
def pca(x: np.ndarray, n: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Centre the rows of x (P, d) and project on the top-n principal axes: (coords (P, n), explained ratio (n,))."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean(axis=0, keepdims=True)
    n = max(1, min(n, *xc.shape))
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    total = float((s**2).sum()) or 1.0
    return xc @ vt[:n].T, (s[:n] ** 2) / total


# ---------------------------------------------------------------------------------------------- models
class UnsupportedModel(ValueError):
    """The model has no part this view can read (message for the user)."""


def _parts(loaded: Any) -> dict[str, Any]:
    """Find the embedding tables and the first attention layer of a BERT-family, GPT-2-family or tiny-gpt model."""
    model = getattr(loaded, "model", None)
    if model is None:
        raise UnsupportedModel(f"{getattr(loaded, 'id', 'This model')} is a bare state dict: load it as a model to see its positions.")
    base = getattr(model, "base_model", model)
    emb = getattr(base, "embeddings", None)
    if emb is not None and hasattr(emb, "position_embeddings") and hasattr(emb, "word_embeddings"):
        layer = None
        enc = getattr(base, "encoder", None)
        if enc is not None and hasattr(enc, "layer") and hasattr(enc.layer[0], "attention"):
            layer = enc.layer[0].attention
        cfg = getattr(model, "config", None)
        offset = 0
        if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            offset = int(getattr(cfg, "pad_token_id", 1) or 1) + 1  # RoBERTa numbers positions from padding_idx + 1
        return {
            "kind": "bert", "wte": emb.word_embeddings.weight, "wpe": emb.position_embeddings.weight,
            "wpe_name": "embeddings.position_embeddings", "tte": getattr(emb, "token_type_embeddings", None),
            "ln": getattr(emb, "LayerNorm", None), "attention": layer, "offset": offset, "positions": "learned",
        }
    if hasattr(base, "wte") and hasattr(base, "wpe") and hasattr(base, "h"):
        cfg = getattr(model, "config", None)
        positions = getattr(cfg, "positions", "learned")
        wpe = base.wpe.weight if isinstance(base.wpe, torch.nn.Module) else base.wpe
        block = base.h[0]
        n_head = getattr(cfg, "n_head", None) or getattr(cfg, "num_attention_heads", None)
        return {
            "kind": "gpt", "wte": base.wte.weight, "wpe": wpe, "wpe_name": "wpe", "tte": None, "ln": None,
            "ln_1": block.ln_1 if getattr(block, "norm", "pre") == "pre" else None,
            "c_attn": block.attn.c_attn, "c_proj": block.attn.c_proj, "n_head": int(n_head), "offset": 0,
            "positions": positions,
        }
    cfg = getattr(model, "config", None)
    if getattr(cfg, "rope_theta", None) is not None or getattr(cfg, "rope_parameters", None) is not None:
        raise UnsupportedModel(
            f"{loaded.id} has no position table: it uses rotary embeddings (RoPE) inside attention. "
            "See the Rotary panel for how they work."
        )
    raise UnsupportedModel(
        f"{getattr(loaded, 'id', 'This model')} has no learned position table this view can read "
        "(BERT-family embeddings.position_embeddings, GPT-2-family wpe or builtin:tiny-gpt). "
        "Recurrent models know order from the recurrence, not from position vectors."
    )


def _np(t: Any) -> np.ndarray:
    return t.detach().float().cpu().numpy()


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
    parts = _parts(loaded)
    with torch.inference_mode():
        w = _np(parts["wpe"])
    return LearnedTrace(str(loaded.id), parts["wpe_name"], str(parts["positions"]), w, parts["offset"])


@dataclass(frozen=True)
class LearnedAnalysis:
    """Similarities and PCA of a (P, d) position table: dot, cosine (P, P); coords (P, 3); explained (3,)."""

    dot: np.ndarray
    cosine: np.ndarray
    coords: np.ndarray
    explained: np.ndarray


def analyse_table(weight: np.ndarray) -> LearnedAnalysis:
    coords, explained = pca(weight, 3)
    return LearnedAnalysis(similarity(weight, "dot"), similarity(weight, "cosine"), coords, explained)


def learned_analysis(loaded: Any) -> LearnedAnalysis:
    """Similarities and PCA of the model's own position table."""
    return analyse_table(learned_positions(loaded).weight)


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
    from explorer.adapters.text import encode

    parts = _parts(loaded)
    max_pos = int(parts["wpe"].shape[0]) - parts["offset"]
    enc = encode(loaded, text, max_tokens=max_pos)
    d = int(parts["wte"].shape[1])
    if not enc.ids:
        empty = np.zeros((0, d), dtype=np.float32)
        return SentenceTrace((), enc.notes, empty, empty, empty, max_pos)
    with torch.inference_mode():
        ids = torch.tensor(enc.ids, device=parts["wte"].device)
        tok = parts["wte"][ids].float()
        pos = parts["wpe"][parts["offset"]: parts["offset"] + len(enc.ids)].float()
        total = tok + pos
    note = ("BERT also adds the segment (token type 0) vector and applies LayerNorm to the sum before layer 0."
            if parts["kind"] == "bert" else "")
    return SentenceTrace(enc.tokens, enc.notes, _np(tok), _np(pos), _np(total), max_pos, note)


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


def gpt_attention(parts: dict[str, Any], x: Any, causal: bool) -> Any:
    """Layer-0 attention of a GPT-2-family / tiny-gpt model on x (B, T, C) with its own c_attn/c_proj weights.

    causal=True reproduces the model's attention exactly; causal=False is the same layer with the mask removed.
    """
    h = parts["ln_1"](x) if parts.get("ln_1") is not None else x
    B, T, C = h.shape
    nh = parts["n_head"]
    q, k, v = parts["c_attn"](h).split(C, dim=2)
    q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)
    if causal:
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
    y = torch.softmax(att, dim=-1) @ v
    return parts["c_proj"](y.transpose(1, 2).reshape(B, T, C))


def _layer_inputs(parts: dict[str, Any], ids: Any, with_pos: bool) -> Any:
    x = parts["wte"][ids]
    if parts["kind"] == "bert":
        if parts["tte"] is not None:
            x = x + parts["tte"].weight[0]
    if with_pos:
        T = ids.shape[-1]
        x = x + parts["wpe"][parts["offset"]: parts["offset"] + T]
    if parts["kind"] == "bert" and parts["ln"] is not None:
        x = parts["ln"](x)
    return x.unsqueeze(0)


def run_layer(parts: dict[str, Any], ids: Any, with_pos: bool, causal: bool = False) -> Any:
    """(T, C) output of the first attention layer on the ids' embeddings (with or without position vectors)."""
    x = _layer_inputs(parts, ids, with_pos)
    if parts["kind"] == "bert":
        if parts["attention"] is None:
            raise UnsupportedModel("This encoder has no BERT-style encoder.layer[0].attention to run.")
        out = parts["attention"](x)
        out = out[0] if isinstance(out, tuple) else out
    else:
        out = gpt_attention(parts, x, causal)
    return out[0]


def permutation_experiment(loaded: Any, text: str, seed: int = 0) -> PermutationTrace:
    """Shuffle the tokens; run layer-0 self-attention with/without positions; compare after un-shuffling."""
    from explorer.adapters.text import encode

    parts = _parts(loaded)
    max_pos = int(parts["wpe"].shape[0]) - parts["offset"]
    enc = encode(loaded, text, max_tokens=max_pos)
    if parts["kind"] == "bert":
        layer = "layer 0 self-attention (BertAttention: attention, output projection, residual, LayerNorm)"
    else:
        layer = "layer 0 self-attention with the model's own weights (ln_1, c_attn, c_proj), causal mask removed"
    empty = np.zeros(0)
    special = enc.special or tuple(False for _ in enc.ids)
    perm = shuffle_order(special, seed)
    if len(enc.ids) < 2:
        return PermutationTrace(enc.tokens, enc.tokens, perm, empty, empty, None, layer,
                                (*enc.notes, "Type at least two tokens to shuffle."))
    notes = list(enc.notes)
    if np.array_equal(perm, np.arange(len(perm))):
        notes.append("There are fewer than two words to shuffle (special tokens stay in place).")
    with torch.inference_mode():
        dev = parts["wte"].device
        ids = torch.tensor(enc.ids, device=dev)
        p = torch.tensor(perm, device=dev)
        inv = torch.argsort(p)

        def diff(with_pos: bool, causal: bool) -> np.ndarray:
            y = run_layer(parts, ids, with_pos, causal)
            y_shuf = run_layer(parts, ids[p], with_pos, causal)
            return _np((y - y_shuf[inv]).abs().amax(dim=-1))

        d_nopos, d_pos = diff(False, False), diff(True, False)
        d_causal = diff(False, True) if parts["kind"] == "gpt" else None
    shuffled = tuple(enc.tokens[i] for i in perm)
    return PermutationTrace(enc.tokens, shuffled, perm, d_nopos, d_pos, d_causal, layer, tuple(notes))
