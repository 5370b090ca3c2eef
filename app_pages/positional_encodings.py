"""Positional encodings: sinusoidal, learned and rotary positions, and why attention needs them."""
from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.adapters.base import Unsupported
from explorer.loading.loaders import LoadedModel
from explorer.presenters import positional_encodings as P
from explorer.probes import position_formulas as PF
from explorer.probes import positional_encodings as PE
from explorer.text.escape import md_message
from explorer.ui import settings
from explorer.ui.cache import compute, figure_of, get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_picker, model_sentence, page_header

c = Controls("positional-encodings")  # the view's declared widgets (configuration only: shared safely)


def _fold() -> int:
    """The first chart of a panel with no model or sentence row (one row of controls above it): a taller fold."""
    return settings.fold_height(True) + 70


def apply_preset() -> None:
    choice = st.session_state.get("_pe_preset")
    if choice in P.PRESETS:
        for key, value in zip(("d_model", "n_pos", "base", "pos", "dim", "k"), P.PRESETS[choice]):
            st.session_state[key] = value


def table_controls(label: str = "Table") -> tuple[DeltaGenerator, int, int, float]:
    """The table's size, base and presets in a popover of the control row: (the popover, for more options; d, n, b)."""
    pop = st.popover(label, icon=":material/tune:", width="stretch")
    with pop:
        st.selectbox("Preset", ["— choose a preset —", *P.PRESETS], key="_pe_preset", on_change=apply_preset,
                     label_visibility="collapsed")
        d, n, b = c.number("d_model"), c.number("n_pos"), c.number("base")
    return pop, d, n, b


def control_row(row: DeltaGenerator, widths: list[float]) -> list[DeltaGenerator]:
    """The panel's controls in the row beside the panel menu (above the panel's first chart)."""
    with row:
        return st.columns(widths, vertical_alignment="bottom")


def model_in_row(row: DeltaGenerator) -> tuple[LoadedModel | None, DeltaGenerator]:
    """The model picker at the start of the panel's control row: (the model picked, or None; the rest of the row)."""
    c_model, c_more = control_row(row, [1.3, 1.7])
    with c_model:
        model_id = model_picker(c.view.needs, default=c.params["model"].default, label_visibility="collapsed")
        loaded = get_model(model_id) if model_id else None
    return loaded, c_more


def _pair(d: int) -> int:
    """The sinusoidal panel's pair i (dimensions 2i, 2i+1), for the panels without its slider."""
    return P.pair(d, int(st.session_state.get("dim", c.params["dim"].default)))


def sinusoidal_panel(row: DeltaGenerator) -> None:
    c_pos, c_dim, c_table = control_row(row, [1.2, 1.2, 0.8])
    with c_table:
        _, d, n, b = table_controls()
    with c_pos:
        pos = c.number("pos", hi=n - 1, slider=True)
    with c_dim:
        i = c.number("dim", hi=d // 2 - 1, slider=True)
    tr = compute(PF.sinusoidal, n, d, b)
    draw(P.sinusoidal(tr, pos, i, theme(), figure_of), {"pe_heatmap": {"fold": _fold()}})
    notice(P.sinusoidal_notices(tr))


def similarity_panel(row: DeltaGenerator) -> None:
    c_pos, c_k, c_table = control_row(row, [1.2, 1.2, 0.8])
    with c_table:
        pop, d, n, b = table_controls("Options")
        with pop:
            kind: str = c.radio("sim")
    with c_pos:
        pos = c.number("pos", hi=n - 1, slider=True)
    with c_k:
        k = c.number("k", hi=max(n - 1, 0), slider=True)
    sim, rot = compute(PF.sinusoidal_similarity, n, d, b, kind), compute(PF.rotation_check, n, d, b, k)
    draw(P.similarity(sim, rot, pos, _pair(d), kind, n, d, b, theme(), figure_of), {"pe_similarity": {"fold": _fold()}})
    notice(P.similarity_notices(rot))


def rope_panel(row: DeltaGenerator) -> None:
    c_pos, c_qk, c_table = control_row(row, [1.2, 1.2, 0.8])
    with c_qk:
        vectors: str = c.selectbox("rope_qk", format_func=P.QK.get, label_visibility="collapsed")
    with c_table:
        pop, d, n, b = table_controls("Options")
        with pop:
            seed = c.number("seed") if vectors == "random" else 0
    with c_pos:
        pos = c.number("pos", hi=n - 1, slider=True, label="position m")
    draw(P.rope(compute(PF.rope, d, n, b, pos, vectors, seed), _pair(d), vectors, seed, theme()),
         {"rope_scores": {"fold": 330}})
    notice(P.ROPE_NOTICES)


def learned_panel(row: DeltaGenerator) -> None:
    loaded, c_more = model_in_row(row)
    if loaded is None:
        return
    try:
        kind = probe(PE.model_positions, loaded, "", raising=True).kind
        text = model_sentence(loaded, c.view.sentences) if kind == "rotary" else ""
        mp = probe(PE.model_positions, loaded, text, raising=True)
    except Unsupported as exc:  # this panel ends; the others are still shown
        st.info(md_message(exc))
        return
    draw(P.scheme(mp))
    la = table_panel(loaded, c_more) if mp.kind in ("learned", "sinusoidal") else None
    draw(P.scheme_figures(mp, theme()))
    notice(P.scheme_notices(mp, la))


def table_panel(loaded: LoadedModel, controls: DeltaGenerator) -> PE.LearnedAnalysis | None:
    """The model's own position table: heatmap, similarity, PCA, one position against all; returns its analysis."""
    try:
        lt = probe(PE.learned_positions, loaded, raising=True)
        la = probe(PE.learned_analysis, loaded, raising=True)
    except Unsupported as exc:  # this panel ends; the others are still shown
        st.info(md_message(exc))
        return None
    draw(P.table_heading(lt))
    with controls:
        c1, c2, c3 = st.columns(3)
    with c1:
        kind: str = c.radio("sim")
    with c2:
        dims: int = c.radio("pca", format_func=lambda x: f"{x}-D")
    with c3:
        other_id = compare_picker(c.view.needs, loaded.id, label_visibility="collapsed")
    trained = trained_model(loaded)  # a snapshot: coloured on the trained model's table's scale, on its PCA axes
    try:
        reference = None if trained is None else probe(PE.learned_positions, trained, raising=True)
        ref_la = probe(PE.learned_analysis, trained, raising=True) if trained and P.comparable(lt, reference) else None
    except Unsupported:
        reference = ref_la = None
    other, other_error = None, ""
    if other_id is not None and (other_model := get_model(other_id)) is not None:
        try:
            other = probe(PE.learned_positions, other_model, raising=True)
        except Unsupported as exc:
            other_error = str(exc)
    trained_id = "" if trained is None else trained.id
    draw(P.learned_table(lt, la, kind, theme(), figure_of, reference, ref_la, trained_id, other, other_id or "",
                         other_error))
    learned_line(P.similarity_of(la, kind), kind)
    draw(P.learned_pca(lt, la, dims, theme(), figure_of, reference, ref_la, trained_id))
    return la


@st.fragment
def learned_line(sim, kind: str) -> None:
    """One position against all others. A fragment: moving the slider redraws this line only, not the two
    512-row heatmaps above (1.4 MB of chart data for MiniLM)."""
    draw(P.position_line(sim, c.number("pos", hi=sim.shape[0] - 1, slider=True), kind, theme()))


def sentence_panel(row: DeltaGenerator) -> None:
    loaded, _ = model_in_row(row)
    if loaded is None:
        return
    text = model_sentence(loaded, c.view.sentences)
    try:
        sv = probe(PE.sentence_vectors, loaded, text, raising=True)
    except Unsupported as exc:  # this panel ends; the others are still shown
        st.info(md_message(exc))
        return
    draw(P.sentence(sv, theme()), {"sentence_vectors": {"fold": True}})
    if not sv.tokens:
        return
    t = c.token("tok", sv.tokens, c.params["tok"].default, slider=True)  # follows the sentence
    draw(P.token_vectors(sv, t, theme()))
    st.subheader("Shuffle the words")
    pt = probe(PE.permutation_experiment, loaded, text, c.number("seed", label="shuffle seed"))
    draw(P.shuffle(pt, sv.notes, loaded.device, loaded.dtype, theme()))
    notice(P.shuffle_notices(pt, sv))


PANEL_FUNCTIONS = {"sinusoidal": sinusoidal_panel, "similarity": similarity_panel, "rope": rope_panel,
                   "learned": learned_panel, "sentence": sentence_panel}

page_header("Positional encodings",
            "Attention alone sees a bag of vectors: positions are how a transformer knows word order.")
# The panel menu and the panel's controls share one row, right under the title: the panel's first chart follows.
c_panel, c_row = st.columns([1.2, 3.3], vertical_alignment="bottom")
with c_panel:
    panel: str = c.selectbox("panel", format_func=P.PANELS.get, label_visibility="collapsed")
PANEL_FUNCTIONS[panel](c_row)
