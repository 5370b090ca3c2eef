"""The word-embeddings view's parts, each drawn by one function the page calls in order: where the vectors come
from (`pick_vectors`), the words to highlight (`highlighted`), the projection (`projection_section`), the four
sections under it (`neighbours_section`, `analogies_section`, `axes_section`, `contextual_section`) and what to
notice on this table (`notices`). Widgets keep the keys and order the page had."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st
from numpy.typing import NDArray
from streamlit.delta_generator import DeltaGenerator

from explorer.adapters.protocols import Loaded
from explorer.data.examples import ANALOGY, COLOURS, NATURAL
from explorer.files.vector_text import EmbeddingFileError
from explorer.loading.catalogue import builtin_names
from explorer.loading.loaders import LoadedModel
from explorer.probes import contextual_embeddings as CE
from explorer.probes import word_embeddings as P
from explorer.projections import reduce as PR
from explorer.projections.jobs import FitJob
from explorer.text.escape import md, md_message, plotly_text
from explorer.ui import charts
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import Origin, caption, show
from explorer.ui.compare import compare_picker
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_picker, model_sentence, sentence_input
from explorer.ui.state import follow_default
from explorer.ui.word_embeddings import file_table, fit_status, model_table, projection
from explorer.viz import word_embeddings as V
from explorer.viz.theme import Theme

FILE_WORDS = NATURAL["words"]  # an uploaded file's words are unknown until it is read: natural English
TSNE_SLOW = 10_000
HIGHLIGHT = "Words to highlight"
HIGHLIGHT_HELP = "Drawn on the projection; also the sentence of the contextual view below."
SECTIONS = {"neighbours": "Nearest neighbours", "analogies": "Analogies: a − b + c",
            "axes": "Two axes given by word pairs", "contextual": "Contextual embeddings, layer by layer"}


@dataclass
class Vectors:
    """The table the view projects: a model's embedding table `source` (`loaded`, `model_id`) or an uploaded
    file's (loaded None); `origin`: what its numbers are, for the badges."""
    table: P.EmbeddingTable
    loaded: LoadedModel | None
    source: str
    model_id: str
    origin: Origin


@dataclass
class Fitted:
    """The entries the projection fits: table rows (n,), and how the charts name them."""
    rows: np.ndarray
    shown: str


def pick_vectors(c: Controls, vectors: DeltaGenerator, col_model: DeltaGenerator) -> Vectors:
    """The vectors' origin (under the Vectors popover), then the model and its table or the uploaded file; stops
    the page with a message when there is none."""
    with vectors:
        origin: str = c.radio("src", format_func=lambda s: {"model": "a model's input embeddings",
                                                       "file": "an uploaded text file"}[s])
    if origin == "model":
        default_model = c.params["model"].default if "word2vec" in builtin_names() else "pretrained:minilm"
        with col_model:
            model_id = model_picker(c.view.needs, default=default_model)
            loaded = get_model(model_id)
        if loaded is None:
            st.stop()
        sources = P.table_sources(loaded)
        source = next(iter(sources))
        if len(sources) > 1:
            with vectors:
                source = c.radio("table", list(sources), format_func=lambda k: md(sources[k]))  # radio: Markdown
        try:
            table = model_table(loaded, source)
        except P.EmbeddingError as exc:
            st.error(md_message(exc))
            st.stop()
        return Vectors(table, loaded, source, model_id,
                       Origin("model", f"{md(table.source)}: the model's own embedding table."))
    with col_model:
        upload = st.file_uploader("Embedding file (text)", type=["txt", "vec", "csv", "tsv"], key="emb_file",
                                  help="One `word v1 v2 … vD` per line (GloVe / word2vec text format; an optional "
                                       "first line `N D`).")
    if upload is None:
        st.info("Upload a file to project it. Uploaded files stay in this browser session: links cannot reopen them.")
        st.stop()
    try:
        table = file_table(upload.name, upload.getvalue())
    except EmbeddingFileError as exc:
        where = f"Line {exc.line}" if exc.line else "The file"
        st.error(md_message(f"{upload.name} cannot be read. {where}: {exc.reason}" if exc.line else
                            f"{upload.name}: {exc.reason}"))
        st.stop()
    return Vectors(table, None, "input", "", Origin("file", f"{md(table.source)}: the vectors of the uploaded file."))


def highlighted(c: Controls, col_text: DeltaGenerator, v: Vectors) -> tuple[str, list[P.Located]]:
    """The typed words to highlight, and those the table holds (warnings name the others)."""
    for note in v.table.notes:
        st.info(md_message(note))
    with col_text:
        text = model_sentence(v.loaded, c.view.sentences, label=HIGHLIGHT, help=HIGHLIGHT_HELP) \
            if v.loaded is not None else sentence_input(FILE_WORDS[0], FILE_WORDS, label=HIGHLIGHT,
                                                        help=HIGHLIGHT_HELP)
    found, notes = P.highlighted(v.table, text, v.loaded)
    if not P.typed_words(text):
        st.info("Type some words to highlight them in the projection.")
    for note in notes:  # the words not in the table, the words past the limit
        st.warning(md_message(note))
    return text, found


def _locate_all(v: Vectors, words: tuple[str, ...]) -> list[P.Located] | None:
    """The table rows of `words` read as the model reads them (a caption says which entries), or None after a
    warning naming those the table lacks."""
    locs = [P.locate(v.table, w, v.loaded) for w in words]
    lost = [loc for loc in locs if not loc.found]
    if lost:
        st.warning(md_message(P.not_found_message(lost, v.table)))
        return None
    if v.table.scheme != "plain" or any(loc.how != "exact" for loc in locs):  # a word vocabulary's exact match
        caption(md_message(" · ".join(P.read_as(loc, v.table) for loc in locs) + "."))
    return locs


def _row(loc: P.Located) -> int:
    """The table row of a located word (found: it has one)."""
    assert loc.row is not None
    return loc.row


# ---------------------------------------------------------------------------------------------- projection
def _method_controls(c: Controls, columns: list[DeltaGenerator], vectors: DeltaGenerator,
                     v: Vectors) -> tuple[str, int, int, bool, dict[str, float | str]]:
    """(method, dims, n, whole words only, the method's parameters) from the row of controls and the popovers."""
    c_method, c_dims, _, c_params = columns
    V_rows = len(v.table)
    with c_method:
        method: str = c.selectbox("method", format_func=PR.METHODS.get, label_visibility="collapsed")
    with c_dims:
        dims: int = c.selectbox("dims", format_func=lambda d: f"{d}-D", label_visibility="collapsed")
    with vectors:
        n = int(c.number("n", hi=V_rows, default=min(V_rows, c.params["n"].default), step=500,
                         label=v.table.first(), help=f"Up to the full table ({V_rows:,}). "
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
        if method == "tsne" and n > TSNE_SLOW:
            st.warning(f"t-SNE of {int(n):,} points takes minutes on a CPU; PCA is instant and UMAP faster.")
    return method, dims, n, whole, params


def projection_section(c: Controls, columns: list[DeltaGenerator], vectors: DeltaGenerator, v: Vectors,
                       found: list[P.Located], theme: Theme) -> Fitted:
    """The projection of the table's first entries with the typed words on it, its captions and the CSV."""
    method, dims, n, whole, params = _method_controls(c, columns, vectors, v)
    table = v.table
    rows = P.background_rows(table, int(n), whole)
    shown = table.first(len(rows), whole)
    reason = PR.check(table.vectors[rows], method, dims)
    proj = job = None
    if reason:
        st.warning(f"No {dims}-D {PR.METHODS[method]} of this table: {md_message(reason)}")
    else:
        try:  # a fit that is neither stored nor shipped runs in the background: PCA (and its progress) meanwhile
            trained = trained_model(v.loaded) if v.loaded is not None else None  # a snapshot: the trained axes
            reference = model_table(trained, v.source) if trained is not None else None
            proj, job = projection(table, rows, method, dims, PR.params_for(method, params), reference)
        except PR.ProjectionError as exc:
            st.warning(md_message(exc))
    if job is not None:
        fit_status(job)
    table_line = (f"**{md(table.source)}**: {len(table):,} entries × {table.dim} dimensions; "
                  f"order: {table.order_note}.")
    if proj is None:
        caption(table_line)
    else:
        _draw_projection(v, proj, job, method, dims, rows, shown, found, theme, table_line)
    return Fitted(rows, shown)


def _draw_projection(v: Vectors, proj: PR.Projection, job: FitJob | None, method: str, dims: int, rows: np.ndarray,
                     shown: str, found: list[P.Located], theme: Theme, table_line: str) -> None:
    table = v.table
    drawn = proj.method  # the requested method, or PCA while it is computed
    in_bg, words, classes, has_classes = P.fitted_rows(table, proj, rows)
    placed = P.place(table, proj, rows, found)
    if placed.unplaced:
        st.info(f"t-SNE cannot place new points: {md(', '.join(placed.unplaced))} "
                f"{'is' if len(placed.unplaced) == 1 else 'are'} in the table but not among the {len(rows):,} fitted "
                "entries. Raise N to include them, or use PCA or UMAP, which place new points with transform.")
    if placed.transformed:
        placement = proj.placement or f"the fitted {PR.METHODS[drawn]}'s transform"
        caption(f"{md(', '.join(w for w, _ in placed.transformed))}: outside the {len(rows):,} fitted entries, "
                f"placed with {placement} (diamonds).")
    axis = [f"PC {i + 1} ({e:.1%} of variance)" for i, e in enumerate(proj.explained)] if drawn == "pca" else \
        [f"{PR.METHODS[drawn]} {i + 1}" for i in range(dims)]
    if proj.placement.startswith("the PCA axes of"):  # a snapshot on the trained model's axes
        axis = [f"PC {i + 1} of the trained model" for i in range(dims)]
    if theme.name not in proj.memo:  # the 30k-point background depends only on the fit: kept with it
        proj.memo[theme.name] = V.projection_background(
            words, classes, proj.coords, theme, title=f"{PR.METHODS[drawn]} of the {shown}", axis_names=axis,
            colour_by_class=has_classes, ranks=P.ranks(table, rows), rank_label=table.rank_label)
    if proj.shipped:  # the table is named in the caption under the chart (a badge of one or two lines)
        detail = f"{proj.shipped}."
    elif job is not None:
        detail = f"{md(table.source)}, projected with PCA while the requested {PR.METHODS[method]} is computed."
    elif proj.frame is not None:
        detail = (f"{md(table.source)}: {md(proj.placement)} (distances within the map unchanged), so that every "
                  "training step is seen in the trained model's frame.")
    elif proj.placement.startswith("the PCA axes of"):
        detail = (f"{md(table.source)}, placed on {md(proj.placement)} (the same axes at every training step; "
                  "their share of this table's variance differs).")
    else:
        detail = f"{md(table.source)}, projected with {PR.METHODS[drawn]}."
    show(proj.memo[theme.name], Origin(v.origin.kind, detail), key="projection", filename=f"embeddings-{drawn}",
         overlay=V.typed_overlay(V.points(placed), dims, theme), fold=True)
    what = {"pca": "PCA (an exact linear map: the axes are the directions of largest variance)",
            "tsne": f"t-SNE (perplexity {proj.params.get('perplexity', 30):g}): it fits the positions of these points "
                    "only, so new points cannot be placed",
            "umap": f"UMAP (n_neighbors {proj.params.get('n_neighbors')}, min_dist {proj.params.get('min_dist')}, "
                    f"{proj.params.get('metric')}): new points are placed "
                    + ("from their nearest fitted entries" if proj.placement and proj.frame is None
                       else "by transform")}[drawn]
    how = ("Precomputed and shipped with the app (python -m explorer.startup.precompute_projections regenerates them) "
           "for " if proj.shipped else "Fitted once on ")
    caption(f"{table_line} {how}the {shown} with {what}: a map of the vectors, not the vectors themselves; "
            "typing only places the typed words. "
            + (f"Colours: the built-in corpus's word classes (grey: no class; at most {V.MAX_LEGEND} legend "
               "entries, so beyond them the smaller classes share one light grey entry, and a point's hover names "
               "its class)." if has_classes else ""))
    read = [loc for loc in found if table.scheme != "plain" or loc.how != "exact"]
    if read:  # which entry each typed word is (subword vocabularies: the word as read inside a sentence)
        caption("The typed words are read as the model reads them: " + " · ".join(
            md_message(P.read_as(loc, table)) for loc in read[:12])
            + (f" · and {len(read) - 12} more" if len(read) > 12 else "")
            + ".")
    st.download_button("Download the coordinates (CSV)",
                       lambda: V.coords_csv(words, classes, proj.coords, V.points(placed), P.ranks(table, rows),
                                            table.rank_label),
                       file_name=f"embeddings-{drawn}-{dims}d.csv", mime="text/csv", key="csv")


# ------------------------------------------------------------------------------------------------ sections
def _compared_neighbours(v: Vectors, other: Loaded, word: str, ranked: P.Ranked,
                         k: int) -> tuple[P.Ranked, NDArray[np.float64]] | None:
    """The second model's (?compare=) own neighbours of `word`, and its cosines of the first model's neighbours;
    None after a message when it has no such table or word."""
    sources_b = P.table_sources(other)
    try:
        table_b = model_table(other, v.source if v.source in sources_b else next(iter(sources_b)))
    except P.EmbeddingError as exc:
        st.warning(f"{md(other.id)} cannot be compared here: {md_message(exc)}")
        return None
    loc_b = P.locate(table_b, word, other)
    if loc_b.row is None:
        st.warning(md_message(P.not_found_message([loc_b], table_b)))
        return None
    return P.neighbours(table_b, loc_b.row, k), P.cosines_of(table_b, loc_b.row, ranked.words)


def neighbours_section(c: Controls, v: Vectors, found: list[P.Located]) -> None:
    """A word's nearest neighbours by cosine (and a second model's, ?compare=), with the first one's arithmetic."""
    table = v.table
    first = found[0].word if found else (table.words[int(table.order[0])] if len(table) else "")
    n1, n2, n3 = st.columns([2, 1, 1.4], vertical_alignment="bottom")
    with n1:
        nn_word = c.text_input("nn", first, max_chars=200, strip=True)
    with n2:
        k = c.number("k", slider=True)
    other_id = None
    if v.loaded is not None:
        with n3:
            other_id = compare_picker(c.view.needs, v.loaded.id, label_visibility="collapsed")
    if not nn_word:
        st.info("Type a word to see its nearest neighbours.")
        return
    found_nn = _locate_all(v, (nn_word,))
    if not found_nn:
        return
    loc = found_nn[0]
    ranked = P.neighbours(table, _row(loc), k)
    other = get_model(other_id) if other_id is not None else None
    compared = _compared_neighbours(v, other, nn_word, ranked, k) if other is not None else None
    if compared is None:
        charts.table(V.ranked_rows(ranked.words, ranked.cos), v.origin)
    else:
        _compared_tables(v, str(other_id), nn_word, ranked, *compared)
    if ranked.rows:
        ct = P.cosine_terms(table, _row(loc), ranked.rows[0])
        st.latex(r"\cos(u, v) = \frac{u \cdot v}{\lVert u \rVert\, \lVert v \rVert} = "
                 rf"\frac{{{ct.dot:.4f}}}{{{ct.norm_u:.4f} \times {ct.norm_v:.4f}}}"
                 rf" = {ranked.cos[0]:.4f}\quad(u = \text{{{V.tex(loc.entry)}}},\ "
                 rf"v = \text{{{V.tex(ranked.words[0])}}})")


def _compared_tables(v: Vectors, other_id: str, word: str, ranked: P.Ranked, ranked_b: P.Ranked,
                     cos_b: Any) -> None:  # (len(ranked.words),) float64 array; viz.compared_rows says Sequence[float]
    t_a, t_b = st.columns(2)
    with t_a:
        caption(f"**{md(v.model_id)}**")
        charts.table(V.ranked_rows(ranked.words, ranked.cos), v.origin)
    with t_b:
        caption(f"**{md(other_id)}**")
        charts.table(V.ranked_rows(ranked_b.words, ranked_b.cos),
                     Origin("model", f"{md(other_id)}'s own embedding table."))
    charts.table(V.compared_rows(ranked.words, ranked.cos, cos_b, (v.model_id, other_id)),
                 Origin("model", "each model's own cosines of the same entries."))
    shared = len(set(ranked.words) & set(ranked_b.words))
    caption(f"{shared} of {md(v.model_id)}'s {len(ranked.words)} nearest neighbours of "
            f"“{md(word)}” are among {md(other_id)}'s {len(ranked_b.words)}. The last table reads "
            f"{md(v.model_id)}'s neighbours in {md(other_id)}: the cosine of each in both, and B − A "
            "(blank: an entry the second model's table lacks).")


def analogies_section(c: Controls, v: Vectors) -> None:
    """a − b + c by 3CosAdd, with the cosines of the first answer."""
    a1, a2, a3, a4 = st.columns(4)
    with a1:
        wa = c.text_input("a", max_chars=200, strip=True)
    with a2:
        wb = c.text_input("b", max_chars=200, strip=True)
    with a3:
        wc = c.text_input("c", max_chars=200, strip=True)
    with a4:
        ka = c.number("ka", slider=True)
    if not (wa and wb and wc):
        st.info("Fill in a, b and c.")
        return
    locs = _locate_all(v, (wa, wb, wc))
    if locs is None:
        return
    if len(v.table) < 4:
        st.warning("The table is too small for an analogy (it needs a fourth entry to answer with).")
        return
    ranked = P.analogy(v.table, _row(locs[0]), _row(locs[1]), _row(locs[2]), ka)
    charts.table(V.ranked_rows(ranked.words, ranked.cos), v.origin)
    if ranked.rows:
        x = ranked.rows[0]
        ca, cb, cc = (P.cosine(v.table, x, _row(loc)) for loc in locs)
        st.latex(r"x^\ast = \arg\max_{x \notin \{a, b, c\}} \cos(x,\ \hat a - \hat b + \hat c)"
                 rf"\qquad \cos(x^\ast, a) - \cos(x^\ast, b) + \cos(x^\ast, c) = {ca:.3f} - {cb:.3f} + {cc:.3f}"
                 rf"\quad(x^\ast = \text{{{V.tex(ranked.words[0])}}})")
        caption("3CosAdd (Mikolov et al. 2013; Levy & Goldberg 2014) on unit-length vectors; the query "
                "words are excluded from the answers. The table shows cos(x, â − b̂ + ĉ).")


def axes_section(c: Controls, v: Vectors, fitted: Fitted, found: list[P.Located], theme: Theme) -> None:
    """The fitted entries on two axes, each from one word to another, with the typed words on top."""
    x1c, x2c, y1c, y2c = st.columns(4)  # each key written out: tests read a view's URL keys from its source
    with x1c:
        x1 = c.text_input("x1", max_chars=200, strip=True)
    with x2c:
        x2 = c.text_input("x2", max_chars=200, strip=True)
    with y1c:
        y1 = c.text_input("y1", max_chars=200, strip=True)
    with y2c:
        y2 = c.text_input("y2", max_chars=200, strip=True)
    if not (x1 and x2 and y1 and y2):
        st.info("Fill in both word pairs.")
        return
    pair_locs = _locate_all(v, (x1, x2, y1, y2))
    if pair_locs is None:
        return
    table, rows = v.table, [int(r) for r in fitted.rows]
    try:
        xp, yp = (_row(pair_locs[0]), _row(pair_locs[1])), (_row(pair_locs[2]), _row(pair_locs[3]))
        axes_key = ("axes", len(rows), xp, yp, theme.name, x1, x2, y1, y2)
        if axes_key not in table.cache:  # kept with the table: the typed words are drawn on top of it
            for old in [k for k in table.cache if isinstance(k, tuple) and k[0] == "axes"][:-3]:
                table.cache.pop(old, None)
            table.cache[axes_key] = V.axes_background(
                [table.words[r] for r in rows], P.axis_coords(table, rows, xp, yp),
                plotly_text(f"{x1} → {x2}"), plotly_text(f"{y1} → {y2}"), theme)
        typed_xy = P.axis_coords(table, [_row(loc) for loc in found], xp, yp)
        show(table.cache[axes_key], v.origin, key="axes", filename="two-axes", overlay=V.axes_overlay(
            V.axis_points([loc.word for loc in found], typed_xy), theme))
        st.latex(r"\text{position of } w \text{ on the axis } a \to b = "
                 r"\frac{(w - a)\cdot(b - a)}{\lVert b - a \rVert^2}\qquad(a \mapsto 0,\ b \mapsto 1)")
    except P.EmbeddingError as exc:
        st.warning(md_message(exc))


def contextual_section(c: Controls, v: Vectors, text: str, theme: Theme) -> str:
    """The sentence's hidden states layer by layer, and the same word in two sentences. Returns the sentence quoted
    in what to notice (the two cosines), or ""."""
    if v.loaded is None:
        st.info("An uploaded file holds one vector per word: there is no context. Pick a model to see contextual "
                "embeddings.")
        return ""
    shown_notes: set[str] = set()  # a model without layers says so once, not once per section
    try:
        trace: CE.ContextTrace | None = probe(CE.contextual, v.loaded, text, raising=True)  # said once, page goes on
    except CE.ContextError as exc:
        trace = None
        shown_notes.add(str(exc))
        st.info(md_message(exc))
    if trace is not None:
        _layers(c, v, trace, theme)
    return _drift(c, v, v.loaded, shown_notes, theme)


def _layers(c: Controls, v: Vectors, trace: CE.ContextTrace, theme: Theme) -> None:
    for note in trace.notes:
        st.warning(md_message(note))
    l1, l2 = st.columns([2, 2])
    with l1:
        layer = c.selectbox("layer", list(range(len(trace.layer_names))), default=len(trace.layer_names) - 1,
                            format_func=lambda i: trace.layer_names[i])
    with l2:
        fit_on: str = c.radio("cfit", format_func=lambda f: {"all": "all layers", "layer": "the selected state"}[f])
    try:
        cproj = CE.context_projection(trace, None if fit_on == "all" else layer)
        show(V.context_figure(trace.tokens, trace.layer_names, cproj.coords, layer, [
            s and any(not x for x in trace.special) for s in trace.special], theme),
            Origin("model", f"the hidden states of {md(v.model_id)}'s own run on this sentence, projected with PCA."),
            key="context", filename="contextual")
        caption(f"{cproj.fitted}. States: {trace.what}. Grey lines follow each token through the layers. "
                "The sentence: the words to highlight, at the top of the page.")
    except CE.ContextError as exc:
        st.info(md_message(exc))


def _drift(c: Controls, v: Vectors, loaded: LoadedModel, shown_notes: set[str], theme: Theme) -> str:
    st.markdown("**The same word in two sentences**")
    pair = CE.drift_pair(loaded)  # the defaults follow the model: a causal model reads only the words before
    for key, value in zip(("s1", "s2", "dw"), pair):
        follow_default(key, value)
    d1, d2, d3 = st.columns([3, 3, 1])
    with d1:
        sa = c.text_input("s1", pair[0], max_chars=200, strip=True)
    with d2:
        sb = c.text_input("s2", pair[1], max_chars=200, strip=True)
    with d3:
        dw = c.text_input("dw", pair[2], max_chars=200, strip=True)
    if not (sa and sb and dw):
        st.info("Type two sentences and a word they share.")
        return ""
    try:
        ta, tb = probe(CE.contextual, loaded, sa, raising=True), probe(CE.contextual, loaded, sb, raising=True)
        dr = CE.drift(ta, tb, dw)
        show(V.drift_figure(dr.layer_names, dr.cos, dw, theme),
             Origin("model", f"cosines of {md(v.model_id)}'s own hidden states in the two runs."), key="drift",
             filename="same-word-two-sentences")
        st.latex(rf"\cos\big(h_A, h_B\big):\quad \text{{embeddings}}:\ {dr.cos[0]:.3f}\qquad "
                 rf"\text{{{V.tex(dr.layer_names[-1])}}}:\ {dr.cos[-1]:.3f}")
        caption(md_message(" ".join(CE.drift_story(ta, tb, dr))))
        return f" Here, for '{dw}': cos {dr.cos[0]:.3f} at the embeddings, {dr.cos[-1]:.3f} {dr.layer_names[-1]}."
    except CE.ContextError as exc:
        if str(exc) not in shown_notes:
            st.info(md_message(exc))
        return ""


# ---------------------------------------------------------------------------------------- what to notice
def notices(v: Vectors, fitted: Fitted, here: str) -> list[str]:
    """What to notice, computed on this table: the chart's word classes where it has them (built-in
    vocabularies), else the colours as the model reads them; the default analogy's answer; the same word in two
    sentences (`here`: the cosines the contextual section computed, or "")."""
    table, loaded, rows, shown = v.table, v.loaded, fitted.rows, fitted.shown
    if loaded is None or not CE.has_context(loaded):  # one vector per word: no context
        same_word = ("A word vector has no context: 'bank' has one vector whether it is by a river or holds an "
                     "account. Pick a language model or a transformer to see contextual embeddings.")
    else:
        A, B, W = CE.drift_pair(loaded)  # words this model reads (a built-in's own language)
        if CE.reads_left_to_right(loaded.adapter):
            same_word = (f"This model reads left to right: a token's vector depends only on the tokens before it. "
                         f"So '{W}' in “{A}” and in “{B}” can drift apart through the layers, while '{W}' followed "
                         "by different words keeps the same vector (the section Contextual embeddings prints the "
                         "cosines)." + md(here))
        else:
            same_word = (f"This model reads the whole sentence both ways: the same word's vector can change with "
                         f"its sentence, '{W}' in “{A}” and in “{B}” can drift apart through the layers (the section "
                         "Contextual embeddings prints the cosines)." + md(here))
    cohesion = P.class_cohesion(table, rows)
    if cohesion is not None:
        closer = "closer together" if cohesion.within > cohesion.between else "no closer together"
        cluster = (f"Words of one class (the chart's colours) sit {closer} than words of different "
                   f"classes: mean cosine {cohesion.within:.2f} within a class, {cohesion.between:.2f} between "
                   f"classes; {cohesion.classes} classes among the {shown}. The vectors were trained on the words "
                   "around them, and words of a class share their contexts.")
    else:
        colours = P.word_cohesion(table, COLOURS.split(), rows, loaded)
        cluster = "The chart has one colour: this vocabulary has no word classes here." + (
            "" if colours is None else
            f" Type words of one kind to see where they fall: the colours {md(' '.join(colours.words))} have mean "
            f"cosine {colours.within:.2f} with one another, against {colours.between:.2f} for random pairs of the "
            f"{shown}" + (": they sit together." if colours.within > colours.between else "."))
    check = P.analogy_check(table, ANALOGY, loaded)
    analogies = ("Analogies (3CosAdd) leave a, b and c out of the answers by convention"
                 + ("." if check is None else
                    f"; here {' − '.join(ANALOGY[:2])} + {ANALOGY[2]} gives “{md(check.first)}” first"
                    + (f", the expected “{ANALOGY[3]}”." if check.rank == 1 else
                       f", and “{ANALOGY[3]}” ranks {check.rank}: analogies work only roughly." if check.rank else
                       f", and “{ANALOGY[3]}” is not among the first {check.k}: analogies work only roughly.")))
    return [cluster,
            "PCA keeps global distances (a linear map); t-SNE and UMAP keep neighbourhoods and can tear apart or "
            "squeeze distances between clusters: do not read cluster sizes or gaps too literally.",
            analogies,
            same_word]
