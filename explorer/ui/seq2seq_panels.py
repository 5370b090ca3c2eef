"""The seq2seq view's charts and panels, called by its page: a trace's alignment heatmap (or, without attention,
its reliance on the one context vector), one decoding step's arithmetic, accuracy against source length and the
beam search tree."""
from __future__ import annotations

import streamlit as st

from explorer.loading.catalogue import builtin_metas
from explorer.loading.loaders import LoadedModel
from explorer.probes.seq2seq import AlignmentTrace, Seq2SeqError, builtin_length_curves, length_accuracy
from explorer.text.escape import latex_text, md, md_message
from explorer.ui import settings
from explorer.ui.cache import get_model, probe
from explorer.ui.charts import Origin, badge, caption, show
from explorer.ui.state import Controls
from explorer.viz import seq2seq as viz
from explorer.viz.decoding_strategies import beam_tree
from explorer.viz.tokens import strongest, vector_summary

COMPARED_FOLD = 370  # projector pixels of a chart under a line of text (a model's output, "No attention")
NOTICE = [
    "Adjective–noun inversion: in “the red car” → “la voiture rouge”, the row of “voiture” looks at “car” "
    "and the row of “rouge” looks back at “red”: the alignment is not the diagonal.",
    "“the european economic area” → “la zone économique européenne”: the adjectives come out in mirror order.",
    "The no-attention model has no heatmap: one context vector carries the whole sentence, and long sentences "
    "suffer (see the length curve).",
    "Bahdanau scores with the previous decoder state s_{t-1}; Luong with the current one s_t.",
    "Dates: each output digit attends to the source characters of the day, month or year it copies.",
    "Force a wrong translation: the loss rises and the alignment of the wrong words becomes diffuse.",
]


def show_alignment(tr, key: str, layer: int, head: str, step: int | None, title_prefix: str = "",
                   fold: bool | int = True, share: float = 1.0) -> None:
    """The heatmap of a trace (the first model's: key "alignment"), or (no attention) the reliance on the single
    context vector; `share`: the fraction of the view's width it is drawn in."""
    theme = settings.theme()
    if tr.weights is None:
        head, rest = viz.NO_ATTENTION.split(": ", 1)
        st.markdown(f"**{head}**: {rest}")
        if tr.no_source_logprobs is not None:
            show(viz.reliance_figure(tr.out_tokens, tr.step_logprobs, tr.no_source_logprobs, theme),
                 Origin("model", "the model's own log-probabilities, and a second run with c and s₀ set to 0."),
                 key=f"reliance_{key}", filename="seq2seq-no-attention", fold=COMPARED_FOLD, share=share)
            caption("How much each output token depends on c: its log-probability with c, and with c and s₀ set "
                       "to 0.")
        return
    show(viz.alignment_heatmap(tr.matrix(layer, head), tr.out_tokens, tr.src_tokens,
                               viz.alignment_title(tr.model_id, tr.kind, layer, head, title_prefix), theme,
                               highlight=step),
         Origin("model", f"{md(tr.model_id)}'s own attention weights while it produced this output."),
         key="alignment" if key == "a" else f"alignment_{key}", filename=f"seq2seq-alignment-{key}", fold=fold,
         share=share)


def step_panel(trace: AlignmentTrace, step: int, layer: int, head: str) -> None:
    """Step t of the decoding: the weights over the source, the score's arithmetic and the next-token candidates."""
    theme = settings.theme()
    st.subheader(f"Step t = {step}: producing “{md(viz.labels([trace.out_tokens[step]])[0])}”")
    if trace.form is not None:
        formula, where = viz.equation(trace.form)
        st.latex(formula)
        caption(md_message(where))
    row = trace.matrix(layer, head)
    left, right = st.columns([3, 2])
    with left:
        if row is not None:
            scores = trace.scores[step] if trace.scores is not None else None
            show(viz.step_weights(row[step], trace.src_tokens, trace.out_tokens[step], step, theme, scores),
                 Origin("model", "the model's own weights (and scores) at this step."), key="step_weights",
                 filename=f"seq2seq-step-{step}", share=0.6)
        elif trace.no_source_logprobs is not None:
            lp, lp0 = trace.step_logprobs[step], trace.no_source_logprobs[step]
            st.latex(rf"\log p(\text{{“{latex_text(viz.labels([trace.out_tokens[step]])[0])}”}})={lp:.4f}\ "
                     rf"\text{{with }}c,\qquad{lp0:.4f}\ \text{{with }}c=s_0=0")
    with right:
        badge(Origin("model", "the model's own next-token distribution at this step, T = 1."))
        st.markdown("**Top next-token candidates**\n\n" + viz.topk_table(trace, step))

    m = trace.math[step] if step < len(trace.math) else None
    if m is not None:
        src_j = latex_text(viz.labels([trace.src_tokens[m.j]])[0])
        sym = viz.SCORE_FORMULAS[trace.attention]
        st.latex(rf"j^*=\text{{“{src_j}”}}\ (j={m.j}):\quad e_{{{step},{m.j}}}={sym}={m.score_recomputed:.5f},\quad "
                 rf"a_{{{step},{m.j}}}=\frac{{e^{{{m.score_model:.4f}-{m.max_score:.4f}}}}}{{{m.denominator:.4f}}}"
                 rf"={m.weight:.5f}")
        caption(f"The score was recomputed in float64 from the two sides of the score the model computed: "
                   f"{m.score_recomputed:.6f}; the model returned {m.score_model:.6f} (difference "
                   f"{abs(m.score_recomputed - m.score_model):.1e}). Vectors have {m.dim} dimensions; the first "
                   f"{len(m.parts[0][1])} are shown.")
        badge(Origin("recomputed", f"the score from the record's two sides in float64, equal to the model's to "
                                   f"{abs(m.score_recomputed - m.score_model):.1e}."))
        st.markdown(viz.math_table(m))
    if trace.contexts is not None:
        caption(f"Context vector c_{step}: {vector_summary(trace.contexts[step])}")
    if trace.kind == "hf" and row is not None:
        weight, key, total = strongest(row[step], trace.src_tokens)
        caption(f"Layer {layer}, {'mean over heads' if head == 'mean' else 'head ' + head}: output position {step} "
                   f"gives its largest weight {weight:.5f} to “{md(key)}”; the row sums to {total:.6f}. The weights "
                   f"are the model's own (eager attention).")


def length_panel(c: Controls, loaded: LoadedModel, model2_id: str) -> None:
    """Exact match against source length on held-out pairs: the loaded built-ins' curves (and every built-in's)."""
    theme = settings.theme()
    st.subheader("Accuracy against source length")
    curves = []
    gen = str(((loaded.meta or {}).get("corpus") or {}).get("generator", "translation"))
    for lm in [loaded] + ([get_model(model2_id)] if model2_id != "none" else []):
        if lm is not None and lm.caps.alignment is not None:  # a Hugging Face one has no curve: the probe says so
            try:
                curves.append(probe(length_accuracy, lm, raising=True))
            except Seq2SeqError:  # no curve for this model: the caption below says which have one
                pass
    if c.toggle("allcurves"):
        seen = {curve.model_id for curve in curves}
        curves += [curve for curve in builtin_length_curves(builtin_metas(), gen) if curve.model_id not in seen]
    if curves:
        show(viz.length_accuracy_figure([(cv.label, cv.buckets, cv.accuracy, cv.n) for cv in curves], theme),
             Origin("model", "exact match of the models' own greedy outputs on held-out pairs."), key="length_curve",
             filename="seq2seq-length")
        caption("Source: " + "; ".join(f"{md(cv.model_id)}: {md_message(cv.source)}" for cv in curves)
                   + ". Without attention the whole source must fit in one vector, so accuracy falls as sentences get "
                   "longer (the bottleneck).")
    else:
        caption("The accuracy-by-length curve is available for the built-in seq2seq models.")


def tree_panel(trace: AlignmentTrace) -> None:
    """The beam search tree of this output."""
    theme = settings.theme()
    beam = trace.beam
    assert beam is not None
    st.subheader("Beam search tree")
    show(beam_tree(beam, theme), Origin("model", "the model's own log-probabilities, ranked by beam search."),
         key="beam_tree", filename="seq2seq-beam")
    caption(f"Each step keeps the 2·K best continuations of the K = {trace.beam_size} running beams by total "
               "log-probability: the K best not ending continue (coloured), those ending with the end token or at "
               "the length limit join the finished list (diamonds), the rest are pruned (grey). Finished hypotheses "
               f"are ranked by sum log p / generated_length^{beam.length_penalty:g} (Hugging Face's definition, "
               f"the same beam search as the decoding view); the returned one scored {beam.final_score:.4f}.")
