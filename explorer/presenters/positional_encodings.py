"""Positional encodings' presenter: the sinusoidal table (SinusoidalTrace.pe: n positions × d dimensions), relative
positions as rotations (RotationTrace.R: d × d), the rotary formula (RopeTrace.scores: query positions × offsets), a
model's own positions (LearnedTrace.weight: positions × width; ModelPositions: rotary θ, ALiBi or relative bias, heads ×
offsets) and a sentence's vectors (SentenceTrace: tokens × width) with its words shuffled (PermutationTrace). Formulas
on chosen numbers are badged as illustrations; the model panels read the loaded model."""
from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec

import numpy as np
import plotly.graph_objects as go

from explorer.presenters.presentation import Origin, Presentation
from explorer.probes import position_formulas as PF
from explorer.probes import positional_encodings as PE
from explorer.runtime.errors import severity
from explorer.text.escape import md, md_code, plotly_text
from explorer.viz import positional_encodings as V
from explorer.viz.theme import Theme

PANELS = {
    "sinusoidal": "Sinusoidal",
    "similarity": "Relative positions",
    "rope": "Rotary (RoPE)",
    "learned": "The model's positions",
    "sentence": "Sentence & shuffle",
}
SCHEMES = {"learned": "a learned position table added to the input", "sinusoidal": "a fixed sinusoidal table added "
           "to the input", "rotary": "rotary embeddings (RoPE) inside attention", "alibi": "ALiBi, a linear bias per "
           "head on the scores", "relative": "a learned relative position bias on the scores", "none": "nothing "
           "this view can read"}
QK = {"ones": "q = k = (1, …, 1)", "random": "random q and k"}
PRESETS = {  # the table's presets: d_model, n_pos, base, pos, dim, k
    "Vaswani et al. base model: d_model 512, 100 positions, base 10000": (512, 100, 10000.0, 20, 8, 5),
    "Small table to read cell by cell: d_model 16, 50 positions": (16, 50, 10000.0, 10, 2, 3),
    "Small base n = 100: short wavelengths, faster repetition": (64, 200, 100.0, 30, 4, 5),
    "Long context: d_model 128, 2048 positions": (128, 2048, 10000.0, 1000, 10, 50),
    "MiniLM's size: d_model 384, 512 positions": (384, 512, 10000.0, 100, 16, 8),
}

_A = ParamSpec("_A")
Build = Callable[..., go.Figure]  # how a presenter builds its large figures: `build(fn, *args)` is fn(*args); the
# page passes explorer.ui.cache.figure_of, which builds each figure once for every session

def built(fn: Callable[_A, go.Figure], /, *args: _A.args, **kwargs: _A.kwargs) -> go.Figure:
    """fn(*args, **kwargs): a figure built anew (the notebook's `Build`)."""
    return fn(*args, **kwargs)


def pair(d: int, dim: int) -> int:
    """The pair i (dimensions 2i, 2i+1) of the similarity and rotary panels: the sinusoidal panel's, within d."""
    return min(dim, d // 2 - 1)


def _notes(p: Presentation, notes: tuple[str, ...]) -> None:
    for note in notes:  # a Caution (a cut text, unknown words) as a warning, the others as information
        p.say("warning" if severity(note) == "warning" else "note", note)


# ---------------------------------------------------------------------------------------------- formulas
def _formula(tr: PF.SinusoidalTrace) -> Origin:
    return Origin("illustration", f"the sinusoidal formula of Vaswani et al. for d = {tr.d_model}, n = {tr.base:g}, "
                                  f"{tr.n_pos} positions; no model is read.")


def sinusoidal(tr: PF.SinusoidalTrace, pos: int, i: int, theme: Theme, build: Build = built) -> Presentation:
    """The table (square on position `pos`, dimension 2i), the formula at that cell and the wavelengths."""
    n, d, b = tr.n_pos, tr.d_model, tr.base
    p = Presentation()
    p.figure("pe_heatmap", build(V.pe_heatmap, tr.pe, theme, f"Sinusoidal PE: {n} positions × {d} dimensions, base "
                                                             f"{b:g}"),
             _formula(tr), "sinusoidal_pe", overlay=V.cell_mark((pos, 2 * i), theme))
    f = PF.formula_values(tr, pos, i)
    p.say("caption", f"The square marks position {pos}, dimension {2 * i} (pair {i}): PE = {f.sin:.4f}, and "
                     f"{f.cos:.4f} in dimension {2 * i + 1}. Table: {n} positions × {d} dimensions, base n = {b:g} "
                     "(change it, or pick a preset, under Table).")
    p.say("latex",
          rf"PE_{{(pos,2i)}} = \sin\!\left(\frac{{pos}}{{n^{{2i/d}}}}\right) = "
          rf"\sin\!\left(\frac{{{pos}}}{{{b:g}^{{{2 * i}/{d}}}}}\right) = "
          rf"\sin\!\left(\frac{{{pos}}}{{{f.denominator:.6g}}}\right)"
          rf" = \sin({f.angle:.6g}) = {f.sin:.6f}",
          rf"PE_{{(pos,2i+1)}} = \cos\!\left(\frac{{pos}}{{n^{{2i/d}}}}\right) = \cos({f.angle:.6g}) = {f.cos:.6f}",
          rf"\lambda_i = 2\pi\, n^{{2i/d}} = 2\pi \cdot {f.denominator:.6g} = {f.wavelength:.6g}\ \text{{positions}}")
    p.figure("pe_wavelengths", V.wavelengths(tr.wavelength, theme, n, i), _formula(tr), "sinusoidal_wavelengths")
    return p


def sinusoidal_notices(tr: PF.SinusoidalTrace) -> list[str]:
    lo, hi = tr.norm_range
    d = tr.d_model
    return [
        "Each column pair (2i, 2i+1) is one sine and one cosine of the same frequency: left columns change every "
        "position, right columns barely move across the whole table.",
        f"The wavelengths grow geometrically, from 2π = {tr.wavelength[0]:.4g} positions (pair 0) to "
        f"2π·n^((d−2)/d) = {tr.wavelength[-1]:,.6g} positions (pair {d // 2 - 1}, for d = {d}, n = {tr.base:g}): like "
        "the hands of a clock, fast pairs tell nearby positions apart and slow pairs tell far ones apart.",
        f"Every vector has the same length √(d/2) = {tr.norm:.6g} (computed here: {lo:.6g} to {hi:.6g}): "
        "positions differ by direction, not size.",
        "Lower the base n and the slow pairs speed up: positions start to repeat within the table.",
    ]


def similarity(sim: np.ndarray, rot: PF.RotationTrace, pos: int, i: int, kind: str, n: int, d: int, b: float,
               theme: Theme, build: Build = built) -> Presentation:
    """`kind` ("dot" or "cosine") between the n positions (sim: n × n) and one position's row; then PE(p + k) =
    R_k PE(p) for pair i, with its float64 error over the table (rot)."""
    k = rot.k
    formula = Origin("illustration", f"the sinusoidal table for d = {d}, n = {b:g}, {n} positions; no model is read.")
    p = Presentation()
    p.figure("pe_similarity", build(V.matrix_heatmap, sim, theme, f"{kind} between positions", "position", "position",
                                    kind, max_cells=V.SIMILARITY_CELLS), formula, "sinusoidal_similarity")
    p.figure("pe_similarity_line", V.similarity_line(sim, pos, theme, kind), formula, "sinusoidal_similarity_line")
    p.heading("Relative positions are rotations")
    blk = rot.block(i)
    p.say("latex",
          rf"PE(p+k) = R_k\,PE(p),\quad R_k = \mathrm{{diag}}\!\left(\begin{{bmatrix}}\cos k\omega_i & "
          rf"\sin k\omega_i\\ -\sin k\omega_i & \cos k\omega_i\end{{bmatrix}}\right)_i,\quad"
          rf"\text{{pair }} {i}:\ k\omega_{{{i}}} = {k}\cdot{blk.omega:.6g} = {blk.angle:.6g}"
          rf"\Rightarrow \begin{{bmatrix}}{blk.cos:.4f} & {blk.sin:.4f}\\ {-blk.sin:.4f} & {blk.cos:.4f}"
          rf"\end{{bmatrix}}")
    if rot.errors.size:
        p.metrics("rotation_error", (f"max over p of |PE(p+{k}) − R_{k} PE(p)| (float64, {rot.errors.size} positions)",
                                     f"{rot.max_error:.2e}"))
    else:
        p.say("note", f"The offset k = {k} leaves no pair (p, p+k) inside {n} positions: lower k or show more "
                      "positions.")
    p.figure("pe_rotation", V.rotation_block(rot.R, theme), formula, "sinusoidal_rotation")
    p.figure("pe_rotation_errors", V.rotation_errors(rot.errors, rot.angles, k, theme), formula, "rotation_errors")
    return p


def similarity_notices(rot: PF.RotationTrace) -> list[str]:
    return [
        "The dot product of two positions depends only on their distance: every diagonal of the heatmap is constant, "
        "and it is largest at distance 0 and falls off (with ripples) as positions move apart.",
        "R_k does not depend on p: one fixed matrix moves every position k steps forward, so a linear layer can "
        "learn to attend 'k tokens back' anywhere in the sentence.",
        f"The error is float64 rounding: at most {rot.max_error:.1e} here (at p = {rot.worst}); it grows with the "
        "angles p·ω_i, whose sines and cosines lose digits as they get large." if rot.errors.size else
        f"No position p has a p + {rot.k} inside the table: lower k to see the error.",
    ]


def rope(rt: PF.RopeTrace, i: int, vectors: str, seed: int, theme: Theme) -> Presentation:
    """The rotary formula for pair i at position m (rt.pos), q·k against the offset for several query positions,
    and q's pairs before and after the rotation."""
    d, b, pos = rt.d_model, rt.base, rt.pos
    p = Presentation()
    p.say("caption", "This illustration pairs dimensions (2i, 2i+1), as Su et al. write RoPE; Llama-style models "
                     "pair i with i + d/2 (rotate_half). “The model's positions” shows a loaded model's own pairing, "
                     "θ and rotation.")
    a = float(rt.angles[i])
    p.say("latex",
          rf"\begin{{bmatrix}}q'_{{{2 * i}}}\\ q'_{{{2 * i + 1}}}\end{{bmatrix}} = "
          rf"\begin{{bmatrix}}\cos m\omega_i & -\sin m\omega_i\\ \sin m\omega_i & \cos m\omega_i\end{{bmatrix}}"
          rf"\begin{{bmatrix}}q_{{{2 * i}}}\\ q_{{{2 * i + 1}}}\end{{bmatrix}},\quad m\omega_{{{i}}} = {pos}\cdot"
          rf"{b:g}^{{-{2 * i}/{d}}} = {a:.6g}\Rightarrow "
          rf"\begin{{bmatrix}}{rt.q_rot[2 * i]:.4f}\\ {rt.q_rot[2 * i + 1]:.4f}"
          rf"\end{{bmatrix}}",
          r"(R_m q)\cdot(R_n k) = q^\top R_m^\top R_n k = q^\top R_{n-m}\, k")
    toy = Origin("illustration", f"{'q = k = (1, …, 1)' if vectors == 'ones' else f'a random q and k (seed {seed})'}"
                                 f", d = {d}, rotated by the RoPE formula (Su et al.); no model is read.")
    # the scores first: the point of RoPE (only the offset matters) in the first screen, under two formulas
    p.figure("rope_scores", V.rope_scores(rt.offsets, rt.starts, rt.scores, theme), toy, "rope_scores")
    p.figure("rope_pairs", V.rope_pairs(rt.q, rt.q_rot, rt.angles, pos, theme), toy, "rope_pairs")
    p.metrics("rope", ("|q| before → after rotation", f"{rt.norms[0]:.6f} → {rt.norms[1]:.6f}"),
              ("max difference between the lines (query positions " + ", ".join(map(str, rt.starts)) + ")",
               f"{rt.spread:.2e}"))
    return p


ROPE_NOTICES = [
    "RoPE adds nothing to the vectors: it turns each pair of q and k by an angle proportional to the position, "
    "so lengths never change.",
    "After rotation, q·k depends only on how far apart the two tokens are: the lines for different query "
    "positions lie on top of each other.",
    "With q = k the score is Σ 2cos(offset·ω_i): it decays (with ripples) as the offset grows, so far-apart "
    "tokens interact less by default.",
]


# ---------------------------------------------------------------------------------------- the model's positions
def scheme(mp: PE.ModelPositions) -> Presentation:
    """How the model knows positions, what was read from it and its notes."""
    p = Presentation()
    p.say("line", f"{mp.model_id} knows positions by: {SCHEMES.get(mp.kind, mp.kind)}")
    if mp.rows:
        p.table("read", {"read from the model": [r[0] for r in mp.rows], "value": [r[1] for r in mp.rows]},
                Origin("model", "read from the loaded model's modules and config."))
    _notes(p, mp.notes)
    return p


def scheme_figures(mp: PE.ModelPositions, theme: Theme) -> Presentation:
    """A model without a position table: its rotary wavelengths and q·k against the offset, its ALiBi slopes or its
    relative bias (a model with a table: nothing, `table_heading` and what follows show it)."""
    p = Presentation()
    if mp.kind == "rotary" and mp.wavelength is not None:
        p.figure("model_wavelengths", V.wavelengths(mp.wavelength, theme, None, half=True),
                 Origin("model", "θ_i read from the model's own cos/sin table (the angle at position 1): wavelength "
                                 "2π/θ_i."), "model_rope_wavelengths")
    if mp.kind == "rotary" and mp.scores is not None and mp.offsets is not None and mp.starts is not None:
        p.figure("model_rope_scores", V.rope_scores(mp.offsets, mp.starts, mp.scores, theme),
                 Origin("model", f"layer 0, head 0: the model's own q of “{md(mp.tokens[0])}” and k of "
                                 f"“{md(mp.tokens[1])}” before the rotation, turned with its own cos/sin to positions "
                                 f"m and m + offset; the lines differ by at most {mp.spread:.1e}."),
                 "model_rope_scores")
    elif mp.kind == "alibi" and mp.key_positions is not None and mp.bias is not None:
        p.figure("alibi", V.head_bias_lines(mp.key_positions, mp.bias, theme, "ALiBi: m_h × key position",
                                            "key position j"),
                 Origin("model", "the slopes of the model's own ALiBi tensor."), "alibi")
    elif mp.kind == "relative" and mp.offsets is not None and mp.bias is not None:
        p.figure("relative_bias", V.head_bias_lines(mp.offsets, mp.bias, theme, "Relative position bias b_h(j − i)",
                                                    "offset j − i"),
                 Origin("model", "the model's own relative_attention_bias, through its bucketing (compute_bias)."),
                 "relative_bias")
    elif mp.kind == "none":
        p.say("note", f"{mp.model_id} adds no position information this view can read (no position table, rotary "
                      "module, ALiBi or relative bias): recurrent models know order from the recurrence.")
    return p


def scheme_notices(mp: PE.ModelPositions, la: PE.LearnedAnalysis | None) -> list[str]:
    """What to notice about the way this model knows positions, with its own numbers (la: its table's analysis,
    None when it has no table this view reads)."""
    if mp.kind in ("learned", "sinusoidal") and la is not None:
        near, far = la.neighbours
        return [("A learned table: nobody told the model positions are ordered, yet neighbouring positions "
                 if mp.kind == "learned" else "A fixed sinusoidal table: neighbouring positions ")
                + ("have similar vectors" if near > far else "are no more alike than far ones")
                + f": cosine {near:.2f} between positions p and p + 1 on average, {far:.2f} between "
                "positions more than a quarter of the table apart (the PCA shows the curve they trace)."]
    if mp.kind == "rotary":
        return ["Rotary models add nothing to the input: q and k are turned by position × θ_i inside every "
                "attention, so q·k depends only on the offset"
                + (f" (the lines above coincide to {mp.spread:.1e})." if mp.scores is not None else ".")]
    if mp.kind == "alibi":
        return ["ALiBi adds a number per head and distance straight to the scores: far tokens get a penalty, a "
                "straight line per head."]
    if mp.kind == "relative":
        return ["T5's relative bias adds a learned number per head and distance bucket straight to the scores."]
    return []


def table_heading(lt: PE.LearnedTrace) -> Presentation:
    """What the model's position table is: its source, size and kind, and the rows not used for tokens."""
    n_rows, width = lt.weight.shape
    note = "a fixed sinusoidal table (this checkpoint was trained with sinusoidal positions)" \
        if lt.kind == "sinusoidal" else "learned during training"
    p = Presentation()
    p.say("line", f"{md_code(lt.source)} of {lt.model_id}: {n_rows} positions × {width} dimensions, {note}.")
    if lt.offset:
        p.say("caption", f"Rows 0..{lt.offset - 1} are not used for tokens: position 0 is row {lt.offset}.")
    return p


def _stored(lt: PE.LearnedTrace) -> Origin:
    return Origin("model", f"{md_code(lt.source)} of {md(lt.model_id)}, as stored in the checkpoint.")


def comparable(lt: PE.LearnedTrace, other: PE.LearnedTrace | None) -> PE.LearnedTrace | None:
    """`other` when its table has the shape of `lt`'s (a training step's trained table, a second model's), else
    None."""
    return other if other is not None and other.weight.shape == lt.weight.shape else None


def similarity_of(la: PE.LearnedAnalysis, kind: str) -> np.ndarray:
    """The table's (positions × positions) cosines or dot products."""
    return la.cosine if kind == "cosine" else la.dot


def learned_table(lt: PE.LearnedTrace, la: PE.LearnedAnalysis, kind: str, theme: Theme, build: Build = built,
                  reference: PE.LearnedTrace | None = None, ref_la: PE.LearnedAnalysis | None = None,
                  trained_id: str = "", other: PE.LearnedTrace | None = None, other_id: str = "",
                  other_error: str = "") -> Presentation:
    """The table as a heatmap (beside a second model's, `other`, with B − A), and the similarity of its positions.
    reference, ref_la: the trained model's table and its analysis (`lt` is a training step's): the colours on its
    scale. other_error: why the second model's table could not be read."""
    n_rows, width = lt.weight.shape
    p = Presentation()
    if other_error:
        p.say("note", f"{other_id} is not compared: {other_error}")
    if other is not None and comparable(lt, other) is None:
        p.say("note", f"{other_id}'s table is {other.weight.shape[0]} × {other.weight.shape[1]}, not "
                      f"{n_rows} × {width}: it is not compared.")
        other = None
    reference = comparable(lt, reference)
    scale = (() if reference is None else (reference.weight,)) + (() if other is None else (lt.weight, other.weight))
    named = f"{plotly_text(lt.model_id)} · " if other is not None else ""
    p.figure("learned_heatmap", build(V.pe_heatmap, lt.weight, theme, f"{named}{plotly_text(lt.source)}: position × "
                                                                      "dimension", scale_from=scale),
             _stored(lt), "learned_positions")
    if reference is not None:  # a reference is the trained model's
        p.say("caption", f"Coloured on the scale of the trained model's table ({trained_id}), at every training step.")
    if other is not None:
        p.figure("learned_heatmap_b", V.pe_heatmap(other.weight, theme, f"{plotly_text(other.model_id)} · "
                                                                        f"{plotly_text(other.source)}: position × "
                                                                        "dimension", scale_from=scale),
                 Origin("model", f"{md_code(other.source)} of {md(other.model_id)}, as stored in the checkpoint."),
                 "learned_positions_compare")
        p.figure("learned_heatmap_diff", V.table_difference(lt.weight, other.weight, theme,
                                                            f"{plotly_text(other.model_id)} − "
                                                            f"{plotly_text(lt.model_id)}: position × dimension"),
                 Origin("model", "the difference of the two models' own position tables."),
                 "learned_positions_difference")
    ref_sim = () if reference is None or ref_la is None else (similarity_of(ref_la, kind),)
    p.figure("learned_similarity", build(V.matrix_heatmap, similarity_of(la, kind), theme,
                                         f"{kind} between learned positions", "position", "position", kind,
                                         max_cells=V.SIMILARITY_CELLS, scale_from=ref_sim),
             _stored(lt), "learned_similarity")
    return p


def position_line(sim: np.ndarray, pos: int, kind: str, theme: Theme) -> Presentation:
    """One position of the model's table against all others."""
    p = Presentation()
    p.figure("learned_similarity_line", V.similarity_line(sim, pos, theme, kind),
             Origin("model", "rows of the model's own position table."), "learned_line")
    return p


def pca_figure(coords: np.ndarray, explained: np.ndarray, weight: np.ndarray, reference: np.ndarray | None,
               ref_coords: np.ndarray | None, theme: Theme, dims: int) -> go.Figure:
    """The PCA of a position table (coords, explained); at a training step (reference: the trained table, whose
    PCA is ref_coords) on the trained table's axes, in its extent (positions_pca, computed here: only when the
    figure is built)."""
    if reference is not None:
        coords, explained = PE.positions_pca(weight, reference)
    return V.pca_positions(coords, explained, theme, dims, ref_coords, "" if reference is None else "the trained table")


def learned_pca(lt: PE.LearnedTrace, la: PE.LearnedAnalysis, dims: int, theme: Theme, build: Build = built,
                reference: PE.LearnedTrace | None = None, ref_la: PE.LearnedAnalysis | None = None,
                trained_id: str = "") -> Presentation:
    """The positions on the table's principal axes (`dims` of them), or on the trained model's at a training step."""
    reference = comparable(lt, reference)
    on_reference = reference is not None and ref_la is not None
    p = Presentation()
    p.figure("learned_pca", build(pca_figure, la.coords, la.explained, lt.weight,
                                  None if reference is None else reference.weight,
                                  None if ref_la is None or reference is None else ref_la.coords, theme, dims),
             Origin("model", f"{md_code(lt.source)} of {md(lt.model_id)}, projected with PCA"
                    + (f" on the principal axes of the trained model's table ({md(trained_id)}): the same frame at "
                       "every training step; each axis's share is of this table's variance." if on_reference
                       else ".")),
             "learned_pca")
    return p


# ---------------------------------------------------------------------------------------------- a sentence
def _vectors() -> Origin:
    return Origin("model", "the model's own token embeddings and position vectors for this sentence.")


def sentence(sv: PE.SentenceTrace, theme: Theme) -> Presentation:
    """The sentence's notes, and each token's embedding, position vector and their sum."""
    p = Presentation()
    _notes(p, sv.notes)
    if sv.tokens:
        p.figure("sentence_vectors", V.sentence_vectors(sv.tokens, sv.token, sv.position, sv.total, theme),
                 _vectors(), "sentence_vectors")
        p.say("caption", sv.note)
    return p


def token_vectors(sv: PE.SentenceTrace, t: int, theme: Theme) -> Presentation:
    """Token t's embedding, position vector and sum, with their norms."""
    norms = sv.norms[t]
    p = Presentation()
    p.say("latex", rf"x_{{{t}}} = E[\mathrm{{token}}_{{{t}}}] + P_{{{t}}},\quad \lVert E\rVert = {norms[0]:.4f},\ "
                   rf"\lVert P_{{{t}}}\rVert = {norms[1]:.4f},\ \lVert x_{{{t}}}\rVert = {norms[2]:.4f}")
    p.figure("sentence_lines", V.vector_lines(sv.token[t], sv.position[t], sv.total[t],
                                              f"token {t}: {plotly_text(sv.tokens[t])}", theme),
             _vectors(), "sentence_token_vectors")
    return p


def shuffle(pt: PE.PermutationTrace, said: tuple[str, ...], device: str, dtype: str, theme: Theme) -> Presentation:
    """The sentence and its shuffle, and how much the first layer's output changes with and without positions
    (said: the notes the sentence's part already said)."""
    p = Presentation()
    _notes(p, tuple(x for x in pt.notes if x not in said))
    p.say("line", "Original: " + " ".join(pt.tokens) + "  \nShuffled: " + " ".join(pt.shuffled))
    p.say("caption", f"Run: {pt.layer}, on {device} in {dtype}.")
    p.say("latex", r"\mathrm{Attn}(\Pi X) = \Pi\,\mathrm{Attn}(X)\quad\text{(no positions)},\qquad "
                   r"\mathrm{Attn}(\Pi X + P) \ne \Pi\,\mathrm{Attn}(X + P)")
    causal = [("without positions, causal mask on", f"{float(pt.diff_causal.max()):.3g}")] \
        if pt.diff_causal is not None and pt.diff_causal.size else []
    p.metrics("shuffle", ("max |difference| without positions", f"{pt.max_nopos:.2e}"),
              ("max |difference| with positions", f"{pt.max_pos:.3g}"), *causal, columns=3)
    if pt.diff_nopos.size:
        p.figure("permutation", V.permutation_bars(pt.tokens, pt.diff_nopos, pt.diff_pos, pt.diff_causal, theme),
                 Origin("model", f"{pt.layer}, run on the sentence and on its shuffle (an experiment with the model's "
                                 "own weights)."), "permutation")
    return p


def shuffle_notices(pt: PE.PermutationTrace, sv: PE.SentenceTrace) -> list[str]:
    word, position = sv.mean_norms  # this sentence's own vectors: how long each kind is here
    return [
        "Without position vectors, shuffling the words only shuffles the outputs: after putting them back "
        f"in order the difference is at rounding level (here {pt.max_nopos:.1e}). Self-attention is "
        "permutation-equivariant: 'the dog bit the man' and 'the man bit the dog' look the same to it.",
        f"Add the position vectors and the outputs change (here by up to {pt.max_pos:.3g}): now order matters.",
        f"On this sentence the word vectors are {word:.2f} long on average and the position vectors {position:.2f} "
        "(see the norms above): the sum carries both.",
        *([f"A decoder's causal mask is itself a source of order: even without positions a masked layer is not "
           f"permutation-equivariant (third bar: up to {float(pt.diff_causal.max()):.3g})."]
          if pt.diff_causal is not None and pt.diff_causal.size else []),
    ]
