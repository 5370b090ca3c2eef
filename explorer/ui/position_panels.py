"""The panels of the positional-encodings view, one function each (PANEL_FUNCTIONS: the panel menu's key -> the
function drawing it into the control row it is given): the sinusoidal table, relative positions as rotations, the
rotary formula, the loaded model's own positions and a sentence with its words shuffled. Formulas on chosen numbers
are badged as illustrations; the model panels read the loaded model."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.adapters.base import Unsupported
from explorer.probes import position_formulas as PF
from explorer.probes import positional_encodings as P
from explorer.runtime.errors import severity
from explorer.text.escape import md, md_code, md_message, plotly_text
from explorer.ui import settings
from explorer.ui.cache import compute, figure_of, get_model, probe
from explorer.ui.charts import Origin, caption, show, table
from explorer.ui.compare import compare_picker
from explorer.loading.loaders import LoadedModel
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_picker, model_sentence, what_to_notice
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
PRESETS = {
    "Vaswani et al. base model: d_model 512, 100 positions, base 10000": (512, 100, 10000.0, 20, 8, 5),
    "Small table to read cell by cell: d_model 16, 50 positions": (16, 50, 10000.0, 10, 2, 3),
    "Small base n = 100: short wavelengths, faster repetition": (64, 200, 100.0, 30, 4, 5),
    "Long context: d_model 128, 2048 positions": (128, 2048, 10000.0, 1000, 10, 50),
    "MiniLM's size: d_model 384, 512 positions": (384, 512, 10000.0, 100, 16, 8),
}
c = Controls("positional-encodings")  # the view's declared widgets (configuration only: shared safely)


def _fold() -> int:
    """The first chart of the panels with no model or sentence row: one row of controls above it, so it may be
    taller than the fold of a view with a model and sentence row (projector pixels, show's fold)."""
    return settings.fold_height(True) + 70


def apply_preset() -> None:
    choice = st.session_state.get("_pe_preset")
    if choice in PRESETS:
        for key, value in zip(("d_model", "n_pos", "base", "pos", "dim", "k"), PRESETS[choice]):
            st.session_state[key] = value


def table_controls(label: str = "Table") -> tuple[DeltaGenerator, int, int, float]:
    """The table's size and base (and a preset) in a popover of the panel's control row. Returns the popover (a
    panel adds its own options to it) and d, n, b."""
    pop = st.popover(label, icon=":material/tune:", width="stretch")
    with pop:
        st.selectbox("Preset", ["— choose a preset —", *PRESETS], key="_pe_preset", on_change=apply_preset,
                     label_visibility="collapsed")
        d = c.number("d_model")
        n = c.number("n_pos")
        b = c.number("base")
    return pop, d, n, b


def control_row(row: DeltaGenerator, widths: Sequence[float]) -> list[DeltaGenerator]:
    """The panel's controls in the row beside the panel menu (above the panel's first chart)."""
    with row:
        return st.columns(widths, vertical_alignment="bottom")


def show_notes(notes: tuple[str, ...]) -> None:
    for note in notes:  # a Caution (a cut text, unknown words) as a warning, the others as information
        (st.warning if severity(note) == "warning" else st.info)(md_message(note))


def model_in_row(row: DeltaGenerator) -> tuple[LoadedModel | None, DeltaGenerator]:
    """The model picker at the start of the panel's control row: (the model picked, or None; the rest of the row)."""
    c_model, c_more = control_row(row, [1.3, 1.7])
    with c_model:
        model_id = model_picker(c.view.needs, default=c.params["model"].default, label_visibility="collapsed")
        loaded = get_model(model_id) if model_id else None
    return loaded, c_more


# ---------------------------------------------------------------------------------------- panels
def sinusoidal_panel(row: DeltaGenerator) -> None:
    theme = settings.theme()
    c_pos, c_dim, c_table = control_row(row, [1.2, 1.2, 0.8])
    with c_table:
        _, d, n, b = table_controls()
    with c_pos:
        pos = c.number("pos", hi=n - 1, slider=True)
    with c_dim:
        i = c.number("dim", hi=d // 2 - 1, slider=True)
    tr = compute(PF.sinusoidal, n, d, b)
    formula = Origin("illustration", f"the sinusoidal formula of Vaswani et al. for d = {d}, n = {b:g}, {n} positions; "
                                     "no model is read.")
    show(figure_of(V.pe_heatmap, tr.pe, theme, f"Sinusoidal PE: {n} positions × {d} dimensions, base {b:g}"),
         formula, key="pe_heatmap", filename="sinusoidal_pe", overlay=V.cell_mark((pos, 2 * i), theme), fold=_fold())
    f = PF.formula_values(tr, pos, i)
    caption(f"The square marks position {pos}, dimension {2 * i} (pair {i}): PE = {f.sin:.4f}, and "
               f"{f.cos:.4f} in dimension {2 * i + 1}. Table: {n} positions × {d} dimensions, base n = {b:g} "
               "(change it, or pick a preset, under Table).")
    st.latex(
        rf"PE_{{(pos,2i)}} = \sin\!\left(\frac{{pos}}{{n^{{2i/d}}}}\right) = "
        rf"\sin\!\left(\frac{{{pos}}}{{{b:g}^{{{2 * i}/{d}}}}}\right) = "
        rf"\sin\!\left(\frac{{{pos}}}{{{f.denominator:.6g}}}\right)"
        rf" = \sin({f.angle:.6g}) = {f.sin:.6f}"
    )
    st.latex(rf"PE_{{(pos,2i+1)}} = \cos\!\left(\frac{{pos}}{{n^{{2i/d}}}}\right) = \cos({f.angle:.6g}) = {f.cos:.6f}")
    st.latex(rf"\lambda_i = 2\pi\, n^{{2i/d}} = 2\pi \cdot {f.denominator:.6g} = "
             rf"{f.wavelength:.6g}\ \text{{positions}}")
    show(V.wavelengths(tr.wavelength, theme, n, i), formula, key="pe_wavelengths", filename="sinusoidal_wavelengths")
    lo, hi = tr.norm_range
    what_to_notice([
        "Each column pair (2i, 2i+1) is one sine and one cosine of the same frequency: left columns change every "
        "position, right columns barely move across the whole table.",
        f"The wavelengths grow geometrically, from 2π = {tr.wavelength[0]:.4g} positions (pair 0) to "
        f"2π·n^((d−2)/d) = {tr.wavelength[-1]:,.6g} positions (pair {d // 2 - 1}, for d = {d}, n = {b:g}): like "
        "the hands of a clock, fast pairs tell nearby positions apart and slow pairs tell far ones apart.",
        f"Every vector has the same length √(d/2) = {tr.norm:.6g} (computed here: {lo:.6g} to {hi:.6g}): "
        "positions differ by direction, not size.",
        "Lower the base n and the slow pairs speed up: positions start to repeat within the table.",
    ])


def similarity_panel(row: DeltaGenerator) -> None:
    theme = settings.theme()
    c_pos, c_k, c_table = control_row(row, [1.2, 1.2, 0.8])
    with c_table:
        pop, d, n, b = table_controls("Options")
        with pop:
            kind: str = c.radio("sim")
    with c_pos:
        pos = c.number("pos", hi=n - 1, slider=True)
    with c_k:
        k = c.number("k", hi=max(n - 1, 0), slider=True)
    sim = compute(PF.sinusoidal_similarity, n, d, b, kind)
    formula = Origin("illustration", f"the sinusoidal table for d = {d}, n = {b:g}, {n} positions; no model is read.")
    show(figure_of(V.matrix_heatmap, sim, theme, f"{kind} between positions", "position", "position", kind,
                   max_cells=V.SIMILARITY_CELLS),
         formula, key="pe_similarity", filename="sinusoidal_similarity", fold=_fold())
    show(V.similarity_line(sim, pos, theme, kind), formula, key="pe_similarity_line",
         filename="sinusoidal_similarity_line")
    st.subheader("Relative positions are rotations")
    rot = compute(PF.rotation_check, n, d, b, k)
    i = min(int(st.session_state.get("dim", c.params["dim"].default)), d // 2 - 1)
    blk = rot.block(i)
    st.latex(
        rf"PE(p+k) = R_k\,PE(p),\quad R_k = \mathrm{{diag}}\!\left(\begin{{bmatrix}}\cos k\omega_i & \sin k\omega_i\\ "
        rf"-\sin k\omega_i & \cos k\omega_i\end{{bmatrix}}\right)_i,\quad"
        rf"\text{{pair }} {i}:\ k\omega_{{{i}}} = {k}\cdot{blk.omega:.6g} = {blk.angle:.6g}"
        rf"\Rightarrow \begin{{bmatrix}}{blk.cos:.4f} & {blk.sin:.4f}\\ {-blk.sin:.4f} & {blk.cos:.4f}"
        rf"\end{{bmatrix}}"
    )
    if rot.errors.size:
        st.metric(f"max over p of |PE(p+{k}) − R_{k} PE(p)| (float64, {rot.errors.size} positions)",
                  f"{rot.max_error:.2e}")
    else:
        st.info(f"The offset k = {k} leaves no pair (p, p+k) inside {n} positions: lower k or show more positions.")
    show(V.rotation_block(rot.R, theme), formula, key="pe_rotation", filename="sinusoidal_rotation")
    show(V.rotation_errors(rot.errors, rot.angles, k, theme), formula, key="pe_rotation_errors",
         filename="rotation_errors")
    what_to_notice([
        "The dot product of two positions depends only on their distance: every diagonal of the heatmap is constant, "
        "and it is largest at distance 0 and falls off (with ripples) as positions move apart.",
        "R_k does not depend on p: one fixed matrix moves every position k steps forward, so a linear layer can "
        "learn to attend 'k tokens back' anywhere in the sentence.",
        f"The error is float64 rounding: at most {rot.max_error:.1e} here (at p = {rot.worst}); it grows with the "
        "angles p·ω_i, whose sines and cosines lose digits as they get large." if rot.errors.size else
        f"No position p has a p + {k} inside the table: lower k to see the error.",
    ])


def rope_panel(row: DeltaGenerator) -> None:
    theme = settings.theme()
    c_pos, c_qk, c_table = control_row(row, [1.2, 1.2, 0.8])
    with c_qk:
        vectors: str = c.selectbox("rope_qk", format_func=QK.get, label_visibility="collapsed")
    with c_table:
        pop, d, n, b = table_controls("Options")
        with pop:
            seed = c.number("seed") if vectors == "random" else 0
    with c_pos:
        pos = c.number("pos", hi=n - 1, slider=True, label="position m")
    rt = compute(PF.rope, d, n, b, pos, vectors, seed)
    caption("This illustration pairs dimensions (2i, 2i+1), as Su et al. write RoPE; Llama-style models pair i "
               "with i + d/2 (rotate_half). “The model's positions” shows a loaded model's own pairing, θ and "
               "rotation.")
    i = min(int(st.session_state.get("dim", c.params["dim"].default)), d // 2 - 1)
    a = float(rt.angles[i])
    st.latex(
        rf"\begin{{bmatrix}}q'_{{{2 * i}}}\\ q'_{{{2 * i + 1}}}\end{{bmatrix}} = "
        rf"\begin{{bmatrix}}\cos m\omega_i & -\sin m\omega_i\\ \sin m\omega_i & \cos m\omega_i\end{{bmatrix}}"
        rf"\begin{{bmatrix}}q_{{{2 * i}}}\\ q_{{{2 * i + 1}}}\end{{bmatrix}},\quad m\omega_{{{i}}} = {pos}\cdot"
        rf"{b:g}^{{-{2 * i}/{d}}} = {a:.6g}\Rightarrow "
        rf"\begin{{bmatrix}}{rt.q_rot[2 * i]:.4f}\\ {rt.q_rot[2 * i + 1]:.4f}"
        rf"\end{{bmatrix}}"
    )
    st.latex(r"(R_m q)\cdot(R_n k) = q^\top R_m^\top R_n k = q^\top R_{n-m}\, k")
    toy = Origin("illustration", f"{'q = k = (1, …, 1)' if vectors == 'ones' else f'a random q and k (seed {seed})'}"
                                 f", d = {d}, rotated by the RoPE formula (Su et al.); no model is read.")
    # the scores first: the point of RoPE (only the offset matters) in the first screen, under two formulas
    show(V.rope_scores(rt.offsets, rt.starts, rt.scores, theme), toy, key="rope_scores", filename="rope_scores",
         fold=330)
    show(V.rope_pairs(rt.q, rt.q_rot, rt.angles, pos, theme), toy, key="rope_pairs", filename="rope_pairs")
    c1, c2 = st.columns(2)
    c1.metric("|q| before → after rotation", f"{rt.norms[0]:.6f} → {rt.norms[1]:.6f}")
    c2.metric("max difference between the lines (query positions " + ", ".join(map(str, rt.starts)) + ")",
              f"{rt.spread:.2e}")
    what_to_notice([
        "RoPE adds nothing to the vectors: it turns each pair of q and k by an angle proportional to the position, "
        "so lengths never change.",
        "After rotation, q·k depends only on how far apart the two tokens are: the lines for different query "
        "positions lie on top of each other.",
        "With q = k the score is Σ 2cos(offset·ω_i): it decays (with ripples) as the offset grows, so far-apart "
        "tokens interact less by default.",
    ])


def learned_panel(row: DeltaGenerator) -> None:
    theme = settings.theme()
    loaded, c_more = model_in_row(row)
    if loaded is None:
        return
    try:
        kind = probe(P.model_positions, loaded, "", raising=True).kind
        text = model_sentence(loaded, c.view.sentences) if kind == "rotary" else ""
        mp = probe(P.model_positions, loaded, text, raising=True)
    except Unsupported as exc:  # this panel ends; the others are still shown
        st.info(md_message(exc))
        return
    st.markdown(f"**{md(loaded.id)}** knows positions by: **{md(SCHEMES.get(mp.kind, mp.kind))}**")
    if mp.rows:
        table({"read from the model": [r[0] for r in mp.rows], "value": [r[1] for r in mp.rows]},
              Origin("model", "read from the loaded model's modules and config."), width="content")
    show_notes(mp.notes)
    if mp.kind in ("learned", "sinusoidal"):
        table_panel(loaded, c_more)
    elif mp.kind == "rotary" and mp.wavelength is not None:
        show(V.wavelengths(mp.wavelength, theme, None, half=True),
             Origin("model", "θ_i read from the model's own cos/sin table (the angle at position 1): wavelength "
                             "2π/θ_i."), key="model_wavelengths", filename="model_rope_wavelengths")
    if mp.kind == "rotary" and mp.scores is not None and mp.offsets is not None and mp.starts is not None:
        show(V.rope_scores(mp.offsets, mp.starts, mp.scores, theme),
             Origin("model", f"layer 0, head 0: the model's own q of “{md(mp.tokens[0])}” and k of "
                             f"“{md(mp.tokens[1])}” before the rotation, turned with its own cos/sin to positions m "
                             f"and m + offset; the lines differ by at most {mp.spread:.1e}."), key="model_rope_scores",
             filename="model_rope_scores")
    elif mp.kind == "alibi" and mp.key_positions is not None and mp.bias is not None:
        show(V.head_bias_lines(mp.key_positions, mp.bias, theme, "ALiBi: m_h × key position",
                               "key position j"), Origin("model", "the slopes of the model's own ALiBi tensor."),
             key="alibi", filename="alibi")
    elif mp.kind == "relative" and mp.offsets is not None and mp.bias is not None:
        show(V.head_bias_lines(mp.offsets, mp.bias, theme, "Relative position bias b_h(j − i)", "offset j − i"),
             Origin("model", "the model's own relative_attention_bias, through its bucketing (compute_bias)."),
             key="relative_bias", filename="relative_bias")
    elif mp.kind == "none":
        st.info(f"{md(loaded.id)} adds no position information this view can read (no position table, rotary module, "
                "ALiBi or relative bias): recurrent models know order from the recurrence.")
    points = []  # about the way this model knows positions, with its own numbers
    if mp.kind in ("learned", "sinusoidal"):
        try:
            near, far = probe(P.learned_analysis, loaded, raising=True).neighbours
            points.append(("A learned table: nobody told the model positions are ordered, yet neighbouring positions "
                           if mp.kind == "learned" else "A fixed sinusoidal table: neighbouring positions ")
                          + ("have similar vectors" if near > far else "are no more alike than far ones")
                          + f": cosine {near:.2f} between positions p and p + 1 on average, {far:.2f} between "
                          "positions more than a quarter of the table apart (the PCA shows the curve they trace).")
        except Unsupported:  # said above, by the table's panel
            pass
    elif mp.kind == "rotary":
        points.append("Rotary models add nothing to the input: q and k are turned by position × θ_i inside every "
                      "attention, so q·k depends only on the offset"
                      + (f" (the lines above coincide to {mp.spread:.1e})." if mp.scores is not None else "."))
    elif mp.kind == "alibi":
        points.append("ALiBi adds a number per head and distance straight to the scores: far tokens get a penalty, a "
                      "straight line per head.")
    elif mp.kind == "relative":
        points.append("T5's relative bias adds a learned number per head and distance bucket straight to the scores.")
    if points:
        what_to_notice(points)


def table_panel(loaded: LoadedModel, controls: DeltaGenerator) -> None:
    """The model's own position table: heatmap, similarity, PCA, one position against all."""
    theme = settings.theme()
    try:
        lt = probe(P.learned_positions, loaded, raising=True)
        la = probe(P.learned_analysis, loaded, raising=True)
    except Unsupported as exc:  # this panel ends; the others are still shown
        st.info(md_message(exc))
        return
    n_rows, width = lt.weight.shape
    note = "a fixed sinusoidal table (this checkpoint was trained with sinusoidal positions)" \
        if lt.kind == "sinusoidal" else "learned during training"
    st.markdown(f"{md_code(lt.source)} of **{md(lt.model_id)}**: {n_rows} positions × {width} dimensions, {note}.")
    if lt.offset:
        caption(f"Rows 0..{lt.offset - 1} are not used for tokens: position 0 is row {lt.offset}.")
    with controls:
        c1, c2, c3 = st.columns(3)
    with c1:
        kind: str = c.radio("sim")
    with c2:
        dims: int = c.radio("pca", format_func=lambda x: f"{x}-D")
    with c3:
        other_id = compare_picker(c.view.needs, loaded.id, label_visibility="collapsed")
    stored = Origin("model", f"{md_code(lt.source)} of {md(lt.model_id)}, as stored in the checkpoint.")
    trained = trained_model(loaded)  # a snapshot: coloured on the trained model's table's scale
    try:
        reference = None if trained is None else probe(P.learned_positions, trained, raising=True).weight
    except Unsupported:
        reference = None
    if reference is not None and reference.shape != lt.weight.shape:
        reference = None
    other = None
    if other_id is not None and (other_model := get_model(other_id)) is not None:
        try:
            other = probe(P.learned_positions, other_model, raising=True)
        except Unsupported as exc:
            st.info(f"{md(other_id)} is not compared: {md_message(exc)}")
        if other is not None and other.weight.shape != lt.weight.shape:
            st.info(f"{md(other_id)}'s table is {other.weight.shape[0]} × {other.weight.shape[1]}, not "
                    f"{n_rows} × {width}: it is not compared.")
            other = None
    scale = (() if reference is None else (reference,)) + (() if other is None else (lt.weight, other.weight))
    named = f"{plotly_text(lt.model_id)} · " if other is not None else ""
    show(figure_of(V.pe_heatmap, lt.weight, theme, f"{named}{plotly_text(lt.source)}: position × dimension",
                   scale_from=scale),
         stored, key="learned_heatmap", filename="learned_positions")
    if reference is not None and trained is not None:  # a reference is the trained model's
        caption(f"Coloured on the scale of the trained model's table ({md(trained.id)}), at every training step.")
    if other is not None:
        show(V.pe_heatmap(other.weight, theme, f"{plotly_text(other.model_id)} · {plotly_text(other.source)}: "
                                               "position × dimension", scale_from=scale),
             Origin("model", f"{md_code(other.source)} of {md(other.model_id)}, as stored in the checkpoint."),
             key="learned_heatmap_b", filename="learned_positions_compare")
        show(V.table_difference(lt.weight, other.weight, theme, f"{plotly_text(other.model_id)} − "
                                                               f"{plotly_text(lt.model_id)}: position × dimension"),
             Origin("model", "the difference of the two models' own position tables."), key="learned_heatmap_diff",
             filename="learned_positions_difference")
    sim = la.cosine if kind == "cosine" else la.dot
    ref_la = probe(P.learned_analysis, trained, raising=True) if reference is not None and trained is not None \
        else None  # a training step
    ref_sim = () if ref_la is None else ((ref_la.cosine if kind == "cosine" else ref_la.dot),)
    show(figure_of(V.matrix_heatmap, sim, theme, f"{kind} between learned positions", "position", "position", kind,
                   max_cells=V.SIMILARITY_CELLS, scale_from=ref_sim), stored,
         key="learned_similarity", filename="learned_similarity")
    learned_line(sim, kind)
    show(figure_of(_pca_figure, la.coords, la.explained, lt.weight, reference,
                   None if ref_la is None else ref_la.coords, theme, dims),
         Origin("model", f"{md_code(lt.source)} of {md(lt.model_id)}, projected with PCA"
                + (f" on the principal axes of the trained model's table ({md(trained.id)}): the same frame at every "
                   "training step; each axis's share is of this table's variance."
                   if ref_la is not None and trained is not None else ".")),
         key="learned_pca", filename="learned_pca")



def _pca_figure(coords: np.ndarray, explained: np.ndarray, weight: np.ndarray, reference: np.ndarray | None,
                ref_coords: np.ndarray | None, theme: Theme, dims: int) -> go.Figure:
    """The PCA of a position table (coords, explained); at a training step (reference: the trained table, whose
    PCA is ref_coords) on the trained table's axes, in its extent (positions_pca, computed here: only when the
    figure is built)."""
    if reference is not None:
        coords, explained = P.positions_pca(weight, reference)
    return V.pca_positions(coords, explained, theme, dims, ref_coords, "" if reference is None else "the trained table")


@st.fragment
def learned_line(sim, kind: str) -> None:
    """One position against all others. A fragment: moving the slider redraws this line only, not the two
    512-row heatmaps above (1.4 MB of chart data for MiniLM)."""
    theme = settings.theme()
    pos = c.number("pos", hi=sim.shape[0] - 1, slider=True)
    show(V.similarity_line(sim, pos, theme, kind), Origin("model", "rows of the model's own position table."),
         key="learned_similarity_line", filename="learned_line")


def sentence_panel(row: DeltaGenerator) -> None:
    theme = settings.theme()
    loaded, _ = model_in_row(row)
    if loaded is None:
        return
    text = model_sentence(loaded, c.view.sentences)
    try:
        sv = probe(P.sentence_vectors, loaded, text, raising=True)
    except Unsupported as exc:  # this panel ends; the others are still shown
        st.info(md_message(exc))
        return
    show_notes(sv.notes)
    if not sv.tokens:
        return
    vectors = Origin("model", "the model's own token embeddings and position vectors for this sentence.")
    show(V.sentence_vectors(sv.tokens, sv.token, sv.position, sv.total, theme), vectors, key="sentence_vectors",
         filename="sentence_vectors", fold=True)
    if sv.note:
        caption(md_message(sv.note))
    t = c.token("tok", sv.tokens, c.params["tok"].default, slider=True)  # follows the sentence
    norms = sv.norms[t]
    st.latex(rf"x_{{{t}}} = E[\mathrm{{token}}_{{{t}}}] + P_{{{t}}},\quad \lVert E\rVert = {norms[0]:.4f},\ "
             rf"\lVert P_{{{t}}}\rVert = {norms[1]:.4f},\ \lVert x_{{{t}}}\rVert = {norms[2]:.4f}")
    show(V.vector_lines(sv.token[t], sv.position[t], sv.total[t], f"token {t}: {plotly_text(sv.tokens[t])}", theme),
         vectors, key="sentence_lines", filename="sentence_token_vectors")
    permutation_section(loaded, text, sv.notes, sv.mean_norms)


def permutation_section(loaded: LoadedModel, text: str, shown_notes: tuple[str, ...],
                        norms: tuple[float, float]) -> None:
    theme = settings.theme()
    st.subheader("Shuffle the words")
    seed = c.number("seed", label="shuffle seed")
    pt = probe(P.permutation_experiment, loaded, text, seed)
    show_notes(tuple(x for x in pt.notes if x not in shown_notes))
    st.markdown("**Original:** " + md(" ".join(pt.tokens)) + "  \n**Shuffled:** " + md(" ".join(pt.shuffled)))
    caption(f"Run: {md(pt.layer)}, on {loaded.device} in {loaded.dtype}.")
    st.latex(r"\mathrm{Attn}(\Pi X) = \Pi\,\mathrm{Attn}(X)\quad\text{(no positions)},\qquad "
             r"\mathrm{Attn}(\Pi X + P) \ne \Pi\,\mathrm{Attn}(X + P)")
    c1, c2, c3 = st.columns(3)
    c1.metric("max |difference| without positions", f"{pt.max_nopos:.2e}")
    c2.metric("max |difference| with positions", f"{pt.max_pos:.3g}")
    if pt.diff_causal is not None and pt.diff_causal.size:
        c3.metric("without positions, causal mask on", f"{float(pt.diff_causal.max()):.3g}")
    if pt.diff_nopos.size:
        show(V.permutation_bars(pt.tokens, pt.diff_nopos, pt.diff_pos, pt.diff_causal, theme),
             Origin("model", f"{pt.layer}, run on the sentence and on its shuffle (an experiment with the model's "
                             "own weights)."), key="permutation", filename="permutation")
    word, position = norms  # this sentence's own vectors: how long each kind is here
    what_to_notice([
        "Without position vectors, shuffling the words only shuffles the outputs: after putting them back "
        f"in order the difference is at rounding level (here {pt.max_nopos:.1e}). Self-attention is "
        "permutation-equivariant: 'the dog bit the man' and 'the man bit the dog' look the same to it.",
        f"Add the position vectors and the outputs change (here by up to {pt.max_pos:.3g}): now order matters.",
        f"On this sentence the word vectors are {word:.2f} long on average and the position vectors {position:.2f} "
        "(see the norms above): the sum carries both.",
        *([f"A decoder's causal mask is itself a source of order: even without positions a masked layer is not "
           f"permutation-equivariant (third bar: up to {float(pt.diff_causal.max()):.3g})."]
          if pt.diff_causal is not None and pt.diff_causal.size else []),
    ])


PANEL_FUNCTIONS = {"sinusoidal": sinusoidal_panel, "similarity": similarity_panel, "rope": rope_panel,
                   "learned": learned_panel, "sentence": sentence_panel}
