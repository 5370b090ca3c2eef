"""Word embeddings: PCA, t-SNE and UMAP of a whole vocabulary, neighbours, analogies, two-axis views and
contextual embeddings layer by layer."""
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.data.examples import NATURAL
from explorer.presenters import word_embeddings as P
from explorer.probes import contextual_embeddings as CE
from explorer.probes import word_embeddings as PW
from explorer.projections import reduce as PR
from explorer.text.escape import md_message
from explorer.ui.cache import get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls, follow_default
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_sentence, page_header, sentence_input, top_row
from explorer.ui.word_embeddings import fit_status, model_table, pick_vectors, projection

FILE_WORDS = NATURAL["words"]  # an uploaded file's words are unknown until it is read: natural English
HIGHLIGHT = "Words to highlight"
HIGHLIGHT_HELP = "Drawn on the projection; also the sentence of the contextual view below."
WIDE: dict[str, Place] = {name: {"wide": True} for name in ("neighbours", "neighbours_b", "neighbours_compared",
                                                            "analogies")}
c = Controls("word-embeddings")


def projection_part(columns: list[DeltaGenerator], vectors: DeltaGenerator, v: P.Vectors,
                    found: list[PW.Located]) -> P.Fitted:
    """The method's controls, and the projection of the table's first entries with the typed words on it."""
    c_method, c_dims, _, c_params = columns
    with c_method:
        method: str = c.selectbox("method", format_func=PR.METHODS.get, label_visibility="collapsed")
    with c_dims:
        dims: int = c.selectbox("dims", format_func=lambda d: f"{d}-D", label_visibility="collapsed")
    with vectors:
        n = int(c.number("n", hi=len(v.table), default=min(len(v.table), c.params["n"].default), step=500,
                         label=v.table.first(), help=f"Up to the full table ({len(v.table):,}). "
                         f"Order: {v.table.order_note}."))
        whole = c.toggle("whole") if v.table.subword else False
    params: dict[str, float | str] = {}
    if method != "pca":
        with c_params, st.popover(f"{PR.METHODS[method]} parameters", icon=":material/settings:", width="stretch"):
            if method == "umap":
                params["n_neighbors"] = c.number("nb", slider=True)
                params["min_dist"] = c.number("md", slider=True)
            else:
                params["perplexity"] = c.number("perp", slider=True)
            params["metric"] = c.radio("metric")
    fit = P.fitted(v.table, n, whole)
    reason = P.cannot_project(v.table, fit, method, dims)
    proj = job = None
    failed = ""
    if not reason:
        try:  # a fit that is neither stored nor shipped runs in the background: PCA (and its progress) meanwhile
            trained = trained_model(v.loaded) if v.loaded is not None else None  # a snapshot: the trained axes
            reference = model_table(trained, v.source) if trained is not None else None
            proj, job = projection(v.table, fit.rows, method, dims, PR.params_for(method, params), reference)
        except PR.ProjectionError as exc:
            failed = str(exc)
    draw(P.projection_warnings(method, dims, n, reason, failed))
    if job is not None:
        fit_status(job)
    draw(P.projection(v, proj, job is not None, method, dims, fit, found, theme()), {"projection": {"fold": True}})
    if (shown := proj) is not None:
        st.download_button("Download the coordinates (CSV)", lambda: P.coords_csv(v.table, shown, fit, found),
                           file_name=f"embeddings-{shown.method}-{dims}d.csv", mime="text/csv", key="csv")
    return fit


def neighbours_section(v: P.Vectors, found: list[PW.Located]) -> None:
    """A word's nearest neighbours by cosine (and a second model's, ?compare=), with the first one's arithmetic."""
    n1, n2, n3 = st.columns([2, 1, 1.4], vertical_alignment="bottom")
    with n1:
        nn_word = c.text_input("nn", P.first_word(v.table, found), max_chars=200, strip=True)
    with n2:
        k = c.number("k", slider=True)
    other_id = other = table_b = None
    if v.loaded is not None:
        with n3:
            other_id = compare_picker(c.view.needs, v.loaded.id, label_visibility="collapsed")
    other_error = ""
    if other_id is not None and nn_word and (other := get_model(other_id)) is not None:
        try:
            table_b = model_table(other, P.source_in(PW.table_sources(other), v.source))
        except PW.EmbeddingError as exc:
            other_error = str(exc)
    head, sides, tail = P.neighbours(v, nn_word, k, str(other_id), table_b, other, other_error)
    draw(head, WIDE)
    for column, side in zip(st.columns(2) if sides else (), sides or ()):
        with column:
            draw(side, WIDE)
    draw(tail, WIDE)


def analogies_section(v: P.Vectors) -> None:
    a1, a2, a3, a4 = st.columns(4)
    with a1:
        wa = c.text_input("a", max_chars=200, strip=True)
    with a2:
        wb = c.text_input("b", max_chars=200, strip=True)
    with a3:
        wc = c.text_input("c", max_chars=200, strip=True)
    with a4:
        ka = c.number("ka", slider=True)
    draw(P.analogies(v, wa, wb, wc, ka), WIDE)


def axes_section(v: P.Vectors, fit: P.Fitted, found: list[PW.Located]) -> None:
    x1c, x2c, y1c, y2c = st.columns(4)  # each key written out: tests read a view's URL keys from its source
    with x1c:
        x1 = c.text_input("x1", max_chars=200, strip=True)
    with x2c:
        x2 = c.text_input("x2", max_chars=200, strip=True)
    with y1c:
        y1 = c.text_input("y1", max_chars=200, strip=True)
    with y2c:
        y2 = c.text_input("y2", max_chars=200, strip=True)
    draw(P.axes(v, fit, found, x1, x2, y1, y2, theme()))


def contextual_section(v: P.Vectors, text: str) -> str:
    """The sentence's hidden states layer by layer, and the same word in two sentences. Returns the two cosines
    quoted in what to notice, or ""."""
    if v.loaded is None:
        st.info(md_message(P.NO_CONTEXT))
        return ""
    said = ""  # a model without layers says so once, not once per part
    try:
        trace: CE.ContextTrace | None = probe(CE.contextual, v.loaded, text, raising=True)
    except CE.ContextError as exc:
        trace, said = None, str(exc)
    draw(P.context(trace, said))
    if trace is not None:
        names = trace.layer_names
        l1, l2 = st.columns([2, 2])
        with l1:
            layer = c.selectbox("layer", list(range(len(names))), default=len(names) - 1, format_func=names.__getitem__)
        with l2:
            fit_on: str = c.radio("cfit", format_func=lambda f: {"all": "all layers", "layer": "the selected state"}[f])
        draw(P.layers(v.model_id, trace, layer, fit_on, theme()))
    st.markdown("**The same word in two sentences**")
    pair = CE.drift_pair(v.loaded)  # the defaults follow the model: a causal model reads only the words before
    for key, value in zip(("s1", "s2", "dw"), pair):
        follow_default(key, value)
    d1, d2, d3 = st.columns([3, 3, 1])
    with d1:
        sa = c.text_input("s1", pair[0], max_chars=200, strip=True)
    with d2:
        sb = c.text_input("s2", pair[1], max_chars=200, strip=True)
    with d3:
        dw = c.text_input("dw", pair[2], max_chars=200, strip=True)
    runs: P.Runs | str | None = None
    if sa and sb and dw:
        try:
            runs = probe(CE.contextual, v.loaded, sa, raising=True), probe(CE.contextual, v.loaded, sb, raising=True)
        except CE.ContextError as exc:
            runs = str(exc)
    shown, here = P.drift(v.model_id, dw, runs, said, theme())
    draw(shown)
    return here


page_header("Word embeddings",
            "A whole vocabulary projected with PCA, t-SNE or UMAP; nearest neighbours, analogies and two-axis views "
            "by cosine similarity; and how a sentence's token vectors move through the layers of a model.")
col_model, col_text = top_row()
# the projection's method and dimensions, and (under Vectors) where the table comes from and how much of it
columns = st.columns([1.2, 0.8, 1, 1.2], vertical_alignment="bottom")
vectors = columns[2].popover("Vectors", icon=":material/tune:", width="stretch")
v = pick_vectors(c, vectors, col_model)
with col_text:
    text = model_sentence(v.loaded, c.view.sentences, label=HIGHLIGHT, help=HIGHLIGHT_HELP) \
        if v.loaded is not None else sentence_input(FILE_WORDS[0], FILE_WORDS, label=HIGHLIGHT, help=HIGHLIGHT_HELP)
found, typed = P.words(v, text)
draw(typed)
fit = projection_part(columns, vectors, v, found)

here = ""  # the computed cosines of the same-word comparison, when this run drew it (quoted in what to notice)
section: str = c.radio("section", format_func=P.SECTIONS.get, label_visibility="collapsed")
if section == "neighbours":
    neighbours_section(v, found)
elif section == "analogies":
    analogies_section(v)
elif section == "axes":
    axes_section(v, fit, found)
elif section == "contextual":
    here = contextual_section(v, text)
notice(P.notices(v, fit, here))
