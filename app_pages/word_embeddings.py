"""Word embeddings: PCA, t-SNE and UMAP of a whole vocabulary, neighbours, analogies, two-axis views and
contextual embeddings layer by layer."""
from typing import Any

import streamlit as st

from explorer.projections import reduce as PR
from explorer.loading.catalogue import builtin_names
from explorer.data.examples import ANALOGY, COLOURS, NATURAL
from explorer.files.vector_text import EmbeddingFileError
from explorer.probes import contextual_embeddings as CE
from explorer.probes import word_embeddings as P
from explorer.text.escape import md, md_message, plotly_text
from explorer.ui import settings
from explorer.ui.cache import get_model, probe_raising
from explorer.ui.compare import compare_picker
from explorer.ui import charts
from explorer.ui.charts import Origin, caption, show
from explorer.ui.word_embeddings import file_table, fit_status, follow_default, model_table, projection
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import (model_picker, model_sentence, page_header, sentence_input, top_row,
                                what_to_notice)
from explorer.viz import word_embeddings as V

FILE_WORDS = NATURAL["words"]  # an uploaded file's words are unknown until it is read: natural English
TSNE_SLOW = 10_000

c = Controls("word-embeddings")
page_header("Word embeddings",
            "A whole vocabulary projected with PCA, t-SNE or UMAP; nearest neighbours, analogies and two-axis views "
            "by cosine similarity; and how a sentence's token vectors move through the layers of a model.")


def _locate_all(words: tuple[str, ...]) -> list[P.Located] | None:
    """The table rows of `words` read as the model reads them (a caption says which entries), or None after a
    warning naming those the table lacks."""
    locs = [P.locate(table, w, loaded) for w in words]
    lost = [loc for loc in locs if not loc.found]
    if lost:
        st.warning(md_message(P.not_found_message(lost, table)))
        return None
    if table.scheme != "plain" or any(loc.how != "exact" for loc in locs):  # a word vocabulary's exact match: no news
        caption(md_message(" · ".join(P.read_as(loc, table) for loc in locs) + "."))
    return locs


def _compared_neighbours(other, word: str, ranked: P.Ranked, k: int) -> tuple[P.Ranked, Any] | None:
    """The second model's (?compare=) own neighbours of `word`, and its cosines of the first model's neighbours;
    None after a message when it has no such table or word."""
    sources_b = P.table_sources(other)
    try:
        table_b = model_table(other, source if source in sources_b else next(iter(sources_b)))
    except P.EmbeddingError as exc:
        st.warning(f"{md(other.id)} cannot be compared here: {md_message(exc)}")
        return None
    loc_b = P.locate(table_b, word, other)
    if loc_b.row is None:
        st.warning(md_message(P.not_found_message([loc_b], table_b)))
        return None
    return P.neighbours(table_b, loc_b.row, k), P.cosines_of(table_b, loc_b.row, ranked.words)


# ------------------------------------------------------------------------------------------- table
theme = settings.theme()
HIGHLIGHT = "Words to highlight"
HIGHLIGHT_HELP = "Drawn on the projection; also the sentence of the contextual view below."
col_model, col_text = top_row()
# the projection's method and dimensions, and (under Vectors) where the table comes from and how much of it
c_method, c_dims, c_vectors, c_params = st.columns([1.2, 0.8, 1, 1.2], vertical_alignment="bottom")
vectors = c_vectors.popover("Vectors", icon=":material/tune:", width="stretch")
with vectors:
    origin = c.radio("src", format_func=lambda s: {"model": "a model's input embeddings",
                                                   "file": "an uploaded text file"}[s])
loaded = None
table = None
source = "input"
if origin == "model":
    default_model = c.params["model"].default if "word2vec" in builtin_names() else "pretrained:minilm"
    with col_model:
        model_id = model_picker(c.view.families, default=default_model)
        loaded = get_model(model_id)
    if loaded is None:
        st.stop()
    sources = P.table_sources(loaded)
    source = next(iter(sources))
    if len(sources) > 1:
        with vectors:
            source = c.radio("table", list(sources), format_func=lambda k: md(sources[k]))  # radio options: Markdown
    try:
        table = model_table(loaded, source)
    except P.EmbeddingError as exc:
        st.error(md_message(exc))
        st.stop()
else:
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

V_rows = len(table)
SOURCE = Origin("model", f"{md(table.source)}: the model's own embedding table.") if origin == "model" else \
    Origin("file", f"{md(table.source)}: the vectors of the uploaded file.")
for note in table.notes:
    st.info(md_message(note))

with col_text:
    text = model_sentence(loaded, c.view.sentences, label=HIGHLIGHT, help=HIGHLIGHT_HELP) if loaded is not None \
        else sentence_input(FILE_WORDS[0], FILE_WORDS, label=HIGHLIGHT, help=HIGHLIGHT_HELP)
typed = P.typed_words(text, P.MAX_TYPED_WORDS + 1)
located = [P.locate(table, w, loaded) for w in typed[:P.MAX_TYPED_WORDS]]
found = [loc for loc in located if loc.found]
missing = [loc for loc in located if not loc.found]
if not typed:
    st.info("Type some words to highlight them in the projection.")
elif missing:
    st.warning(md_message(P.not_found_message(missing, table)))
if len(typed) > P.MAX_TYPED_WORDS:
    st.info(f"Only the first {P.MAX_TYPED_WORDS} distinct words are highlighted.")

# -------------------------------------------------------------------------------------- projection
with c_method:
    method = c.selectbox("method", format_func=PR.METHODS.get, label_visibility="collapsed")
with c_dims:
    dims = c.selectbox("dims", format_func=lambda d: f"{d}-D", label_visibility="collapsed")
with vectors:
    n = int(c.number("n", hi=V_rows, default=min(V_rows, c.params["n"].default), step=500,
                     label=table.first(), help=f"Up to the full table ({V_rows:,}). "
                     f"Order: {table.order_note}."))
    whole = c.toggle("whole") if table.subword else False
params: dict = {}
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

rows = P.background_rows(table, int(n), whole)
shown = table.first(len(rows), whole)
reason = PR.check(table.vectors[rows], method, dims)
proj = job = None
if reason:
    st.warning(f"No {dims}-D {PR.METHODS[method]} of this table: {md_message(reason)}")
else:
    try:  # a fit that is neither stored nor shipped runs in the background: PCA (and its progress) meanwhile
        trained = trained_model(loaded) if loaded is not None else None  # a snapshot: the trained model's axes
        reference = model_table(trained, source) if trained is not None else None
        proj, job = projection(table, rows, method, dims, PR.params_for(method, params), reference)
    except PR.ProjectionError as exc:
        st.warning(md_message(exc))
if job is not None:
    fit_status(job)
TABLE_LINE = f"**{md(table.source)}**: {V_rows:,} entries × {table.dim} dimensions; order: {table.order_note}."
if proj is None:
    caption(TABLE_LINE)

if proj is not None:
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
    axis = [f"PC {i + 1} ({v:.1%} of variance)" for i, v in enumerate(proj.explained)] if drawn == "pca" else \
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
    show(proj.memo[theme.name], Origin(SOURCE.kind, detail), key="projection", filename=f"embeddings-{drawn}",
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
    caption(f"{TABLE_LINE} {how}the {shown} with {what}: a map of the vectors, not the vectors themselves; "
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

HERE = ""  # the computed cosines of the same-word comparison, when this run drew it (quoted in what to notice)
SECTIONS = {"neighbours": "Nearest neighbours", "analogies": "Analogies: a − b + c",
            "axes": "Two axes given by word pairs", "contextual": "Contextual embeddings, layer by layer"}
section = c.radio("section", format_func=SECTIONS.get, label_visibility="collapsed")
if section == "neighbours":
    first = found[0].word if found else (table.words[int(table.order[0])] if V_rows else "")
    n1, n2, n3 = st.columns([2, 1, 1.4], vertical_alignment="bottom")
    with n1:
        nn_word = c.text_input("nn", first, max_chars=200, strip=True)
    with n2:
        k = c.number("k", slider=True)
    other_id = None
    if loaded is not None:
        with n3:
            other_id = compare_picker(c.view.families, loaded.id, label_visibility="collapsed")
    if nn_word:
        found_nn = _locate_all((nn_word,))
        if found_nn:
            loc = found_nn[0]
            ranked = P.neighbours(table, loc.row, k)
            other = get_model(other_id) if other_id is not None else None
            compared = _compared_neighbours(other, nn_word, ranked, k) if other is not None else None
            if compared is None:
                charts.table(V.ranked_rows(ranked.words, ranked.cos), SOURCE)
            else:
                ranked_b, cos_b = compared
                t_a, t_b = st.columns(2)
                with t_a:
                    caption(f"**{md(model_id)}**")
                    charts.table(V.ranked_rows(ranked.words, ranked.cos), SOURCE)
                with t_b:
                    caption(f"**{md(other_id)}**")
                    charts.table(V.ranked_rows(ranked_b.words, ranked_b.cos),
                                 Origin("model", f"{md(other_id)}'s own embedding table."))
                charts.table(V.compared_rows(ranked.words, ranked.cos, cos_b, (model_id, str(other_id))),
                             Origin("model", "each model's own cosines of the same entries."))
                shared = len(set(ranked.words) & set(ranked_b.words))
                caption(f"{shared} of {md(model_id)}'s {len(ranked.words)} nearest neighbours of "
                           f"“{md(nn_word)}” are among {md(other_id)}'s {len(ranked_b.words)}. The last table reads "
                           f"{md(model_id)}'s neighbours in {md(other_id)}: the cosine of each in both, and B − A "
                           "(blank: an entry the second model's table lacks).")
            if ranked.rows:
                ct = P.cosine_terms(table, loc.row, ranked.rows[0])
                st.latex(r"\cos(u, v) = \frac{u \cdot v}{\lVert u \rVert\, \lVert v \rVert} = "
                         rf"\frac{{{ct.dot:.4f}}}{{{ct.norm_u:.4f} \times {ct.norm_v:.4f}}}"
                         rf" = {ranked.cos[0]:.4f}\quad(u = \text{{{V.tex(loc.entry)}}},\ "
                         rf"v = \text{{{V.tex(ranked.words[0])}}})")
    else:
        st.info("Type a word to see its nearest neighbours.")

elif section == "analogies":
    a1, a2, a3, a4 = st.columns(4)
    with a1:
        wa = c.text_input("a", max_chars=200, strip=True)
    with a2:
        wb = c.text_input("b", max_chars=200, strip=True)
    with a3:
        wc = c.text_input("c", max_chars=200, strip=True)
    with a4:
        ka = c.number("ka", slider=True)
    if wa and wb and wc:
        locs = _locate_all((wa, wb, wc))
        if locs is not None and len(table) < 4:
            st.warning("The table is too small for an analogy (it needs a fourth entry to answer with).")
        elif locs is not None:
            ranked = P.analogy(table, locs[0].row, locs[1].row, locs[2].row, ka)
            charts.table(V.ranked_rows(ranked.words, ranked.cos), SOURCE)
            if ranked.rows:
                x = ranked.rows[0]
                ca, cb, cc = (P.cosine(table, x, loc.row) for loc in locs)
                st.latex(r"x^\ast = \arg\max_{x \notin \{a, b, c\}} \cos(x,\ \hat a - \hat b + \hat c)"
                         rf"\qquad \cos(x^\ast, a) - \cos(x^\ast, b) + \cos(x^\ast, c) = {ca:.3f} - {cb:.3f} + {cc:.3f}"
                         rf"\quad(x^\ast = \text{{{V.tex(ranked.words[0])}}})")
                caption("3CosAdd (Mikolov et al. 2013; Levy & Goldberg 2014) on unit-length vectors; the query "
                           "words are excluded from the answers. The table shows cos(x, â − b̂ + ĉ).")
    else:
        st.info("Fill in a, b and c.")

elif section == "axes":
    x1c, x2c, y1c, y2c = st.columns(4)
    with x1c:
        x1 = c.text_input("x1", max_chars=200, strip=True)
    with x2c:
        x2 = c.text_input("x2", max_chars=200, strip=True)
    with y1c:
        y1 = c.text_input("y1", max_chars=200, strip=True)
    with y2c:
        y2 = c.text_input("y2", max_chars=200, strip=True)
    if x1 and x2 and y1 and y2:
        pair_locs = _locate_all((x1, x2, y1, y2))
        if pair_locs is not None:
            try:
                xp, yp = (pair_locs[0].row, pair_locs[1].row), (pair_locs[2].row, pair_locs[3].row)
                axes_key = ("axes", len(rows), xp, yp, theme.name, x1, x2, y1, y2)
                if axes_key not in table.cache:  # kept with the table: the typed words are drawn on top of it
                    for old in [k for k in table.cache if isinstance(k, tuple) and k[0] == "axes"][:-3]:
                        table.cache.pop(old, None)
                    table.cache[axes_key] = V.axes_background(
                        [table.words[r] for r in rows], P.axis_coords(table, rows, xp, yp),
                        plotly_text(f"{x1} → {x2}"), plotly_text(f"{y1} → {y2}"), theme)
                typed_xy = P.axis_coords(table, [loc.row for loc in found], xp, yp)
                show(table.cache[axes_key], SOURCE, key="axes", filename="two-axes", overlay=V.axes_overlay(
                    V.axis_points([loc.word for loc in found], typed_xy), theme))
                st.latex(r"\text{position of } w \text{ on the axis } a \to b = "
                         r"\frac{(w - a)\cdot(b - a)}{\lVert b - a \rVert^2}\qquad(a \mapsto 0,\ b \mapsto 1)")
            except P.EmbeddingError as exc:
                st.warning(md_message(exc))
    else:
        st.info("Fill in both word pairs.")

elif section == "contextual":
    if loaded is None:
        st.info("An uploaded file holds one vector per word: there is no context. Pick a model to see contextual "
                "embeddings.")
    else:
        shown_notes: set[str] = set()  # a model without layers says so once, not once per section
        try:
            trace = probe_raising(CE.contextual, loaded, text)  # a ContextError: said once, the page goes on
        except CE.ContextError as exc:
            trace = None
            shown_notes.add(str(exc))
            st.info(md_message(exc))
        if trace is not None:
            for note in trace.notes:
                st.warning(md_message(note))
            l1, l2 = st.columns([2, 2])
            with l1:
                layer = c.selectbox("layer", list(range(len(trace.layer_names))), default=len(trace.layer_names) - 1,
                                    format_func=lambda i: trace.layer_names[i])
            with l2:
                fit_on = c.radio("cfit", format_func=lambda f: {"all": "all layers", "layer": "the selected state"}[f])
            try:
                cproj = CE.context_projection(trace, None if fit_on == "all" else layer)
                show(V.context_figure(trace.tokens, trace.layer_names, cproj.coords, layer, [
                    s and any(not x for x in trace.special) for s in trace.special], theme),
                    Origin("model", f"the hidden states of {md(model_id)}'s own run on this sentence, "
                                    "projected with PCA."),
                    key="context",
                    filename="contextual")
                caption(f"{cproj.fitted}. States: {trace.what}. Grey lines follow each token through the layers. "
                           "The sentence: the words to highlight, at the top of the page.")
            except CE.ContextError as exc:
                st.info(md_message(exc))

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
        if sa and sb and dw:
            try:
                ta, tb = probe_raising(CE.contextual, loaded, sa), probe_raising(CE.contextual, loaded, sb)
                dr = CE.drift(ta, tb, dw)
                show(V.drift_figure(dr.layer_names, dr.cos, dw, theme),
                     Origin("model", f"cosines of {md(model_id)}'s own hidden states in the two runs."), key="drift",
                     filename="same-word-two-sentences")
                st.latex(rf"\cos\big(h_A, h_B\big):\quad \text{{embeddings}}:\ {dr.cos[0]:.3f}\qquad "
                         rf"\text{{{V.tex(dr.layer_names[-1])}}}:\ {dr.cos[-1]:.3f}")
                caption(md_message(" ".join(CE.drift_story(ta, tb, dr))))
                HERE = (f" Here, for '{dw}': cos {dr.cos[0]:.3f} at the embeddings, {dr.cos[-1]:.3f} "
                        f"{dr.layer_names[-1]}.")
            except CE.ContextError as exc:
                if str(exc) not in shown_notes:
                    st.info(md_message(exc))
        else:
            st.info("Type two sentences and a word they share.")

if loaded is None or loaded.family in ("word2vec", "state-dict"):  # one vector per word: no context
    SAME_WORD = ("A word vector has no context: 'bank' has one vector whether it is by a river or holds an account. "
                 "Pick a language model or a transformer to see contextual embeddings.")
elif CE.reads_left_to_right(loaded.adapter):
    A, B, W = CE.drift_pair(loaded)  # words this model reads (a built-in's own language)
    SAME_WORD = (f"This model reads left to right: a token's vector depends only on the tokens before it. So '{W}' "
                 f"in “{A}” and in “{B}” can drift apart through the layers, while '{W}' followed by different words "
                 "keeps the same vector (the section Contextual embeddings prints the cosines)." + md(HERE))
else:
    A, B, W = CE.drift_pair(loaded)
    SAME_WORD = (f"This model reads the whole sentence both ways: the same word's vector can change with its "
                 f"sentence, '{W}' in “{A}” and in “{B}” can drift apart through the layers (the section Contextual "
                 "embeddings prints the cosines)." + md(HERE))
# What to notice, computed on this table: the chart's word classes where it has them (built-in vocabularies), else
# the colours as the model reads them; the default analogy's answer
cohesion = P.class_cohesion(table, rows)
if cohesion is not None:
    closer = "closer together" if cohesion.within > cohesion.between else "no closer together"
    CLUSTER = (f"Words of one class (the chart's colours) sit {closer} than words of different "
               f"classes: mean cosine {cohesion.within:.2f} within a class, {cohesion.between:.2f} between classes; "
               f"{cohesion.classes} classes among the {shown}. The vectors were trained on the words around them, "
               "and words of a class share their contexts.")
else:
    colours = P.word_cohesion(table, COLOURS.split(), rows, loaded)
    CLUSTER = "The chart has one colour: this vocabulary has no word classes here." + (
        "" if colours is None else
        f" Type words of one kind to see where they fall: the colours {md(' '.join(colours.words))} have mean cosine "
        f"{colours.within:.2f} with one another, against {colours.between:.2f} for random pairs of the {shown}"
        + (": they sit together." if colours.within > colours.between else "."))
check = P.analogy_check(table, ANALOGY, loaded)
ANALOGIES = ("Analogies (3CosAdd) leave a, b and c out of the answers by convention"
             + ("." if check is None else
                f"; here {' − '.join(ANALOGY[:2])} + {ANALOGY[2]} gives “{md(check.first)}” first"
                + (f", the expected “{ANALOGY[3]}”." if check.rank == 1 else
                   f", and “{ANALOGY[3]}” ranks {check.rank}: analogies work only roughly." if check.rank else
                   f", and “{ANALOGY[3]}” is not among the first {check.k}: analogies work only roughly.")))
what_to_notice([
    CLUSTER,
    "PCA keeps global distances (a linear map); t-SNE and UMAP keep neighbourhoods and can tear apart or squeeze "
    "distances between clusters: do not read cluster sizes or gaps too literally.",
    ANALOGIES,
    SAME_WORD,
])
