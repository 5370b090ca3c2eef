"""Word embeddings' presenter: an EmbeddingTable (vectors: V entries × D dimensions, a model's or an uploaded file's)
and its Projection (coords: N fitted rows × 2 or 3) -> the projection with the typed words over it, a word's nearest
neighbours (and a second model's), analogies, two axes given by word pairs, a sentence's hidden states layer by layer
(ContextTrace: states × tokens × width, projected) and the same word in two sentences; and what to notice on this
table."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from explorer.data.examples import ANALOGY, COLOURS
from explorer.files.vector_text import EmbeddingFileError
from explorer.loading.loaders import LoadedModel
from explorer.presenters.presentation import Origin, Presentation
from explorer.probes import contextual_embeddings as CE
from explorer.probes import word_embeddings as PW
from explorer.projections import reduce as PR
from explorer.text.escape import md, plotly_text
from explorer.viz import word_embeddings as V
from explorer.viz.theme import Theme

TSNE_SLOW = 10_000
SECTIONS = {"neighbours": "Nearest neighbours", "analogies": "Analogies: a − b + c",
            "axes": "Two axes given by word pairs", "contextual": "Contextual embeddings, layer by layer"}
SOURCES = {"model": "a model's input embeddings", "file": "an uploaded text file"}
UPLOAD = "Upload a file to project it. Uploaded files stay in this browser session: links cannot reopen them."
NO_CONTEXT = ("An uploaded file holds one vector per word: there is no context. Pick a model to see contextual "
              "embeddings.")

Runs = tuple[CE.ContextTrace, CE.ContextTrace]  # the two sentences of "the same word in two sentences"


@dataclass
class Vectors:
    """The table the view projects: a model's embedding table `source` (`loaded`, `model_id`) or an uploaded
    file's (loaded None); `origin`: what its numbers are, for the badges."""
    table: PW.EmbeddingTable
    loaded: LoadedModel | None
    source: str
    model_id: str
    origin: Origin


@dataclass
class Fitted:
    """The entries the projection fits: table rows (n,), and how the charts name them."""
    rows: np.ndarray
    shown: str


def model_vectors(table: PW.EmbeddingTable, loaded: LoadedModel, source: str, model_id: str) -> Vectors:
    return Vectors(table, loaded, source, model_id,
                   Origin("model", f"{md(table.source)}: the model's own embedding table."))


def file_vectors(table: PW.EmbeddingTable) -> Vectors:
    return Vectors(table, None, "input", "", Origin("file", f"{md(table.source)}: the vectors of the uploaded file."))


def file_error(name: str, exc: EmbeddingFileError) -> str:
    """Why an uploaded file cannot be read (the line, when one is at fault)."""
    return f"{name} cannot be read. Line {exc.line}: {exc.reason}" if exc.line else f"{name}: {exc.reason}"


def fitted(table: PW.EmbeddingTable, n: int, whole: bool) -> Fitted:
    rows = PW.background_rows(table, int(n), whole)
    return Fitted(rows, table.first(len(rows), whole))


def _columns(rows: Sequence[dict]) -> dict[str, list[object]]:
    """Rows (column -> value each) as columns (column -> values), every column of any row, in order."""
    keys = dict.fromkeys(k for row in rows for k in row)
    return {k: [row.get(k) for row in rows] for k in keys}


def words(v: Vectors, text: str) -> tuple[list[PW.Located], Presentation]:
    """The typed words the table holds, and what the view says about them (warnings name the others)."""
    p = Presentation()
    p.say("note", *v.table.notes)
    found, notes = PW.highlighted(v.table, text, v.loaded)
    if not PW.typed_words(text):
        p.say("note", "Type some words to highlight them in the projection.")
    p.say("warning", *notes)  # the words not in the table, the words past the limit
    return found, p


def _locate(p: Presentation, v: Vectors, typed: tuple[str, ...]) -> list[PW.Located] | None:
    """The table rows of `typed` read as the model reads them (a caption says which entries), or None after a
    warning naming those the table lacks."""
    locs = [PW.locate(v.table, w, v.loaded) for w in typed]
    lost = [loc for loc in locs if not loc.found]
    if lost:
        p.say("warning", PW.not_found_message(lost, v.table))
        return None
    if v.table.scheme != "plain" or any(loc.how != "exact" for loc in locs):  # a word vocabulary's exact match
        p.say("caption", " · ".join(PW.read_as(loc, v.table) for loc in locs) + ".")
    return locs


def _row(loc: PW.Located) -> int:
    """The table row of a located word (found: it has one)."""
    assert loc.row is not None
    return loc.row


# ---------------------------------------------------------------------------------------------- projection
def cannot_project(table: PW.EmbeddingTable, fit: Fitted, method: str, dims: int) -> str | None:
    """Why the fitted rows cannot be projected so, or None."""
    return PR.check(table.vectors[fit.rows], method, dims)


def projection_warnings(method: str, dims: int, n: int, reason: str | None, failed: str = "") -> Presentation:
    """A slow t-SNE, a table that cannot be projected (reason), a fit that failed."""
    p = Presentation()
    if method == "tsne" and n > TSNE_SLOW:
        p.say("warning", f"t-SNE of {int(n):,} points takes minutes on a CPU; PCA is instant and UMAP faster.")
    if reason:
        p.say("warning", f"No {dims}-D {PR.METHODS[method]} of this table: {reason}")
    p.say("warning", failed)
    return p


def projection(v: Vectors, proj: PR.Projection | None, computing: bool, method: str, dims: int, fit: Fitted,
               found: list[PW.Located], theme: Theme) -> Presentation:
    """The fitted rows' projection (kept with the fit, per theme) with the typed words over it, and its captions.
    proj: the requested projection, or the PCA while it is `computing` (None: none could be fitted)."""
    table, rows, shown = v.table, fit.rows, fit.shown
    p = Presentation()
    table_line = f"{table.source}: {len(table):,} entries × {table.dim} dimensions; order: {table.order_note}."
    if proj is None:
        p.say("caption", table_line)
        return p
    drawn = proj.method  # the requested method, or PCA while it is computed
    in_bg, labels, classes, has_classes = PW.fitted_rows(table, proj, rows)
    placed = PW.place(table, proj, rows, found)
    if placed.unplaced:
        p.say("note", f"t-SNE cannot place new points: {', '.join(placed.unplaced)} "
                      f"{'is' if len(placed.unplaced) == 1 else 'are'} in the table but not among the {len(rows):,} "
                      "fitted entries. Raise N to include them, or use PCA or UMAP, which place new points with "
                      "transform.")
    if placed.transformed:
        placement = proj.placement or f"the fitted {PR.METHODS[drawn]}'s transform"
        p.say("caption", f"{', '.join(w for w, _ in placed.transformed)}: outside the {len(rows):,} fitted entries, "
                         f"placed with {placement} (diamonds).")
    axis = [f"PC {i + 1} ({e:.1%} of variance)" for i, e in enumerate(proj.explained)] if drawn == "pca" else \
        [f"{PR.METHODS[drawn]} {i + 1}" for i in range(dims)]
    if proj.placement.startswith("the PCA axes of"):  # a snapshot on the trained model's axes
        axis = [f"PC {i + 1} of the trained model" for i in range(dims)]
    if theme.name not in proj.memo:  # the 30k-point background depends only on the fit: kept with it
        proj.memo[theme.name] = V.projection_background(
            labels, classes, proj.coords, theme, title=f"{PR.METHODS[drawn]} of the {shown}", axis_names=axis,
            colour_by_class=has_classes, ranks=PW.ranks(table, rows), rank_label=table.rank_label)
    if proj.shipped:  # the table is named in the caption under the chart (a badge of one or two lines)
        detail = f"{proj.shipped}."
    elif computing:
        detail = f"{md(table.source)}, projected with PCA while the requested {PR.METHODS[method]} is computed."
    elif proj.frame is not None:
        detail = (f"{md(table.source)}: {md(proj.placement)} (distances within the map unchanged), so that every "
                  "training step is seen in the trained model's frame.")
    elif proj.placement.startswith("the PCA axes of"):
        detail = (f"{md(table.source)}, placed on {md(proj.placement)} (the same axes at every training step; "
                  "their share of this table's variance differs).")
    else:
        detail = f"{md(table.source)}, projected with {PR.METHODS[drawn]}."
    p.figure("projection", proj.memo[theme.name], Origin(v.origin.kind, detail), f"embeddings-{drawn}",
             overlay=V.typed_overlay(V.points(placed), dims, theme))
    what = {"pca": "PCA (an exact linear map: the axes are the directions of largest variance)",
            "tsne": f"t-SNE (perplexity {proj.params.get('perplexity', 30):g}): it fits the positions of these points "
                    "only, so new points cannot be placed",
            "umap": f"UMAP (n_neighbors {proj.params.get('n_neighbors')}, min_dist {proj.params.get('min_dist')}, "
                    f"{proj.params.get('metric')}): new points are placed "
                    + ("from their nearest fitted entries" if proj.placement and proj.frame is None
                       else "by transform")}[drawn]
    how = ("Precomputed and shipped with the app (python -m explorer.startup.precompute_projections regenerates them) "
           "for " if proj.shipped else "Fitted once on ")
    p.say("caption", f"{table_line} {how}the {shown} with {what}: a map of the vectors, not the vectors themselves; "
                     "typing only places the typed words. "
                     + (f"Colours: the built-in corpus's word classes (grey: no class; at most {V.MAX_LEGEND} legend "
                        "entries, so beyond them the smaller classes share one light grey entry, and a point's hover "
                        "names its class)." if has_classes else ""))
    read = [loc for loc in found if table.scheme != "plain" or loc.how != "exact"]
    if read:  # which entry each typed word is (subword vocabularies: the word as read inside a sentence)
        p.say("caption", "The typed words are read as the model reads them: " + " · ".join(
            PW.read_as(loc, table) for loc in read[:12]) + (f" · and {len(read) - 12} more" if len(read) > 12 else "")
            + ".")
    return p


def coords_csv(table: PW.EmbeddingTable, proj: PR.Projection, fit: Fitted, found: list[PW.Located]) -> str:
    """The projection's coordinates and the typed words' as CSV (built when it is downloaded)."""
    _, labels, classes, _ = PW.fitted_rows(table, proj, fit.rows)
    placed = PW.place(table, proj, fit.rows, found)
    return V.coords_csv(labels, classes, proj.coords, V.points(placed), PW.ranks(table, fit.rows), table.rank_label)


# ------------------------------------------------------------------------------------------------ sections
def first_word(table: PW.EmbeddingTable, found: list[PW.Located]) -> str:
    """The word whose neighbours the section opens on: the first typed word the table holds, else its first entry."""
    return found[0].word if found else (table.words[int(table.order[0])] if len(table) else "")


def source_in(sources: dict[str, str], source: str) -> str:
    """A second model's table to compare: the same source when it has one, else its first."""
    return source if source in sources else next(iter(sources))


Sides = tuple[Presentation, Presentation]


def neighbours(v: Vectors, word: str, k: int, other_id: str = "", table_b: PW.EmbeddingTable | None = None,
               other: LoadedModel | None = None,
               other_error: str = "") -> tuple[Presentation, Sides | None, Presentation]:
    """`word`'s k nearest neighbours by cosine, with the first one's arithmetic; beside them a second model's
    (`other`, its table `table_b`, or why it has none: other_error), and each model's cosines of the first's. Returns
    what comes before the two tables drawn side by side, those two (None: one table), and what follows."""
    table = v.table
    p, tail = Presentation(), Presentation()
    if not word:
        p.say("note", "Type a word to see its nearest neighbours.")
        return p, None, tail
    found = _locate(p, v, (word,))
    if not found:
        return p, None, tail
    loc = found[0]
    ranked = PW.neighbours(table, _row(loc), k)
    compared = None
    if other_error:
        p.say("warning", f"{other.id if other is not None else other_id} cannot be compared here: {other_error}")
    elif other is not None and table_b is not None:
        loc_b = PW.locate(table_b, word, other)
        if loc_b.row is None:
            p.say("warning", PW.not_found_message([loc_b], table_b))
        else:
            compared = PW.neighbours(table_b, loc_b.row, k), PW.cosines_of(table_b, loc_b.row, ranked.words)
    sides = None
    if compared is None:
        p.table("neighbours", _columns(V.ranked_rows(ranked.words, ranked.cos)), v.origin)
    else:
        ranked_b, cos_b = compared
        a, b = Presentation(), Presentation()
        a.say("caption", v.model_id)
        a.table("neighbours", _columns(V.ranked_rows(ranked.words, ranked.cos)), v.origin)
        b.say("caption", other_id)
        b.table("neighbours_b", _columns(V.ranked_rows(ranked_b.words, ranked_b.cos)),
                Origin("model", f"{md(other_id)}'s own embedding table."))
        sides = (a, b)
        tail.table("neighbours_compared", _columns(V.compared_rows(ranked.words, ranked.cos, list(cos_b),
                                                                   (v.model_id, other_id))),
                   Origin("model", "each model's own cosines of the same entries."))
        shared = len(set(ranked.words) & set(ranked_b.words))
        tail.say("caption", f"{shared} of {v.model_id}'s {len(ranked.words)} nearest neighbours of “{word}” are among "
                            f"{other_id}'s {len(ranked_b.words)}. The last table reads {v.model_id}'s neighbours in "
                            f"{other_id}: the cosine of each in both, and B − A (blank: an entry the second model's "
                            "table lacks).")
    if ranked.rows:
        ct = PW.cosine_terms(table, _row(loc), ranked.rows[0])
        tail.say("latex", r"\cos(u, v) = \frac{u \cdot v}{\lVert u \rVert\, \lVert v \rVert} = "
                          rf"\frac{{{ct.dot:.4f}}}{{{ct.norm_u:.4f} \times {ct.norm_v:.4f}}}"
                          rf" = {ranked.cos[0]:.4f}\quad(u = \text{{{V.tex(loc.entry)}}},\ "
                          rf"v = \text{{{V.tex(ranked.words[0])}}})")
    return p, sides, tail


def analogies(v: Vectors, wa: str, wb: str, wc: str, ka: int) -> Presentation:
    """a − b + c by 3CosAdd, with the cosines of the first answer."""
    p = Presentation()
    if not (wa and wb and wc):
        p.say("note", "Fill in a, b and c.")
        return p
    locs = _locate(p, v, (wa, wb, wc))
    if locs is None:
        return p
    if len(v.table) < 4:
        p.say("warning", "The table is too small for an analogy (it needs a fourth entry to answer with).")
        return p
    ranked = PW.analogy(v.table, _row(locs[0]), _row(locs[1]), _row(locs[2]), ka)
    p.table("analogies", _columns(V.ranked_rows(ranked.words, ranked.cos)), v.origin)
    if ranked.rows:
        x = ranked.rows[0]
        ca, cb, cc = (PW.cosine(v.table, x, _row(loc)) for loc in locs)
        p.say("latex", r"x^\ast = \arg\max_{x \notin \{a, b, c\}} \cos(x,\ \hat a - \hat b + \hat c)"
                       rf"\qquad \cos(x^\ast, a) - \cos(x^\ast, b) + \cos(x^\ast, c) = {ca:.3f} - {cb:.3f} + {cc:.3f}"
                       rf"\quad(x^\ast = \text{{{V.tex(ranked.words[0])}}})")
        p.say("caption", "3CosAdd (Mikolov et al. 2013; Levy & Goldberg 2014) on unit-length vectors; the query "
                         "words are excluded from the answers. The table shows cos(x, â − b̂ + ĉ).")
    return p


def axes(v: Vectors, fit: Fitted, found: list[PW.Located], x1: str, x2: str, y1: str, y2: str,
         theme: Theme) -> Presentation:
    """The fitted entries on two axes, each from one word to another, with the typed words on top."""
    p = Presentation()
    if not (x1 and x2 and y1 and y2):
        p.say("note", "Fill in both word pairs.")
        return p
    pair_locs = _locate(p, v, (x1, x2, y1, y2))
    if pair_locs is None:
        return p
    table, rows = v.table, [int(r) for r in fit.rows]
    try:
        xp, yp = (_row(pair_locs[0]), _row(pair_locs[1])), (_row(pair_locs[2]), _row(pair_locs[3]))
        axes_key = ("axes", len(rows), xp, yp, theme.name, x1, x2, y1, y2)
        if axes_key not in table.cache:  # kept with the table: the typed words are drawn on top of it
            for old in [k for k in table.cache if isinstance(k, tuple) and k[0] == "axes"][:-3]:
                table.cache.pop(old, None)
            table.cache[axes_key] = V.axes_background(
                [table.words[r] for r in rows], PW.axis_coords(table, rows, xp, yp),
                plotly_text(f"{x1} → {x2}"), plotly_text(f"{y1} → {y2}"), theme)
        typed_xy = PW.axis_coords(table, [_row(loc) for loc in found], xp, yp)
        p.figure("axes", table.cache[axes_key], v.origin, "two-axes",
                 overlay=V.axes_overlay(V.axis_points([loc.word for loc in found], typed_xy), theme))
        p.say("latex", r"\text{position of } w \text{ on the axis } a \to b = "
                       r"\frac{(w - a)\cdot(b - a)}{\lVert b - a \rVert^2}\qquad(a \mapsto 0,\ b \mapsto 1)")
    except PW.EmbeddingError as exc:
        p.say("warning", str(exc))
    return p


def context(trace: CE.ContextTrace | None, error: str = "") -> Presentation:
    """Why the sentence has no hidden states to show (error), or what its run says (trace.notes)."""
    p = Presentation()
    p.say("note", error)
    if trace is not None:
        p.say("warning", *trace.notes)
    return p


def layers(model_id: str, trace: CE.ContextTrace, layer: int, fit_on: str, theme: Theme) -> Presentation:
    """Every token's hidden state at every layer, projected with PCA (fitted on all layers or on `layer`)."""
    p = Presentation()
    try:
        cproj = CE.context_projection(trace, None if fit_on == "all" else layer)
        p.figure("context", V.context_figure(trace.tokens, trace.layer_names, cproj.coords, layer, [
            s and any(not x for x in trace.special) for s in trace.special], theme),
            Origin("model", f"the hidden states of {md(model_id)}'s own run on this sentence, projected with PCA."),
            "contextual")
        p.say("caption", f"{cproj.fitted}. States: {trace.what}. Grey lines follow each token through the layers. "
                         "The sentence: the words to highlight, at the top of the page.")
    except CE.ContextError as exc:
        p.say("note", str(exc))
    return p


def drift(model_id: str, word: str, runs: Runs | str | None, said: str, theme: Theme) -> tuple[Presentation, str]:
    """The cosine of `word`'s hidden states in two sentences, layer by layer. runs: the two sentences' runs, or why
    they have none (said: a message the section said already, not repeated), or None when a box is empty. Returns
    the part and the two cosines as quoted in what to notice ("" when none)."""
    p = Presentation()
    if runs is None:
        p.say("note", "Type two sentences and a word they share.")
        return p, ""
    try:
        if isinstance(runs, str):
            raise CE.ContextError(runs)
        ta, tb = runs
        dr = CE.drift(ta, tb, word)
    except CE.ContextError as exc:
        if str(exc) != said:
            p.say("note", str(exc))
        return p, ""
    p.figure("drift", V.drift_figure(dr.layer_names, dr.cos, word, theme),
             Origin("model", f"cosines of {md(model_id)}'s own hidden states in the two runs."),
             "same-word-two-sentences")
    p.say("latex", rf"\cos\big(h_A, h_B\big):\quad \text{{embeddings}}:\ {dr.cos[0]:.3f}\qquad "
                   rf"\text{{{V.tex(dr.layer_names[-1])}}}:\ {dr.cos[-1]:.3f}")
    p.say("caption", " ".join(CE.drift_story(ta, tb, dr)))
    return p, f" Here, for '{word}': cos {dr.cos[0]:.3f} at the embeddings, {dr.cos[-1]:.3f} {dr.layer_names[-1]}."


# ---------------------------------------------------------------------------------------- what to notice
def notices(v: Vectors, fit: Fitted, here: str) -> list[str]:
    """What to notice, computed on this table: the chart's word classes where it has them (built-in
    vocabularies), else the colours as the model reads them; the default analogy's answer; the same word in two
    sentences (`here`: the cosines the contextual section computed, or "")."""
    table, loaded, rows, shown = v.table, v.loaded, fit.rows, fit.shown
    if loaded is None or not CE.has_context(loaded):  # one vector per word: no context
        same_word = ("A word vector has no context: 'bank' has one vector whether it is by a river or holds an "
                     "account. Pick a language model or a transformer to see contextual embeddings.")
    else:
        A, B, W = CE.drift_pair(loaded)  # words this model reads (a built-in's own language)
        if CE.reads_left_to_right(loaded.adapter):
            same_word = (f"This model reads left to right: a token's vector depends only on the tokens before it. "
                         f"So '{W}' in “{A}” and in “{B}” can drift apart through the layers, while '{W}' followed "
                         "by different words keeps the same vector (the section Contextual embeddings prints the "
                         "cosines)." + here)
        else:
            same_word = (f"This model reads the whole sentence both ways: the same word's vector can change with "
                         f"its sentence, '{W}' in “{A}” and in “{B}” can drift apart through the layers (the section "
                         "Contextual embeddings prints the cosines)." + here)
    cohesion = PW.class_cohesion(table, rows)
    if cohesion is not None:
        closer = "closer together" if cohesion.within > cohesion.between else "no closer together"
        cluster = (f"Words of one class (the chart's colours) sit {closer} than words of different "
                   f"classes: mean cosine {cohesion.within:.2f} within a class, {cohesion.between:.2f} between "
                   f"classes; {cohesion.classes} classes among the {shown}. The vectors were trained on the words "
                   "around them, and words of a class share their contexts.")
    else:
        colours = PW.word_cohesion(table, COLOURS.split(), rows, loaded)
        cluster = "The chart has one colour: this vocabulary has no word classes here." + (
            "" if colours is None else
            f" Type words of one kind to see where they fall: the colours {' '.join(colours.words)} have mean "
            f"cosine {colours.within:.2f} with one another, against {colours.between:.2f} for random pairs of the "
            f"{shown}" + (": they sit together." if colours.within > colours.between else "."))
    check = PW.analogy_check(table, ANALOGY, loaded)
    analogy = ("Analogies (3CosAdd) leave a, b and c out of the answers by convention"
               + ("." if check is None else
                  f"; here {' − '.join(ANALOGY[:2])} + {ANALOGY[2]} gives “{check.first}” first"
                  + (f", the expected “{ANALOGY[3]}”." if check.rank == 1 else
                     f", and “{ANALOGY[3]}” ranks {check.rank}: analogies work only roughly." if check.rank else
                     f", and “{ANALOGY[3]}” is not among the first {check.k}: analogies work only roughly.")))
    return [cluster,
            "PCA keeps global distances (a linear map); t-SNE and UMAP keep neighbourhoods and can tear apart or "
            "squeeze distances between clusters: do not read cluster sizes or gaps too literally.",
            analogy,
            same_word]
