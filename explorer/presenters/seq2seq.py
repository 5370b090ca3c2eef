"""Seq2seq alignment's presenter: an AlignmentTrace (weights: L, H, T, S; step_logprobs, out_tokens: T; topk: T, K)
and the view's settings -> the alignment heatmap (T output tokens × S source tokens; a second model's beside it), or
without attention each output token's reliance on the one context vector; the output and its log-probability; below,
one decoding step's arithmetic, accuracy against source length (LengthCurves) or the beam-search tree."""
from __future__ import annotations

from collections.abc import Sequence

from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.seq2seq import AlignmentTrace, LengthCurve
from explorer.text.escape import latex_text, md
from explorer.viz import seq2seq as viz
from explorer.viz.decoding_strategies import beam_tree
from explorer.viz.theme import Theme
from explorer.viz.tokens import strongest, vector_summary

DECODING = {"greedy": "greedy decoding", "beam": "beam search"}
PANELS = {"step": "Step by step", "length": "Accuracy against source length", "beam": "Beam search tree"}
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


def layer_label(i: int) -> str:
    return f"layer {i}"


def head_label(h: str) -> str:
    return "mean over heads" if h == "mean" else f"head {h}"


def panels(trace: AlignmentTrace) -> tuple[list[str], str]:
    """The panels offered under the heatmap (the beam tree only for a beam search) and the one the view opens on."""
    offered = ["step", "length"] + (["beam"] if trace.mode == "beam" and trace.beam else [])
    return offered, "beam" if "beam" in offered else "step"


def messages(trace: AlignmentTrace, p: Presentation | None = None) -> Presentation:
    """What the probe said about the input (notes) and about the decoding (warnings)."""
    p = Presentation() if p is None else p
    p.say("note", *trace.notes)
    p.say("warning", *trace.warnings)
    return p


def output(trace: AlignmentTrace, p: Presentation | None = None) -> Presentation:
    """The output as text, with how it was decoded, its length and its log-probability."""
    p = Presentation() if p is None else p
    mode = {"greedy": "greedy decoding", "beam": f"beam search (beam size {trace.beam_size})",
            "forced": "your target, teacher-forced"}[trace.mode]
    p.say("line", f"Output ({mode}): {trace.output_text or '∅ (only the end token)'}")
    p.say("caption", f"{len(trace.src_tokens)} source tokens → {len(trace.out_ids)} output steps · sum log p = "
                     f"{trace.step_logprobs.sum():.4f}"
          + (f" · teacher-forced loss (mean cross-entropy) = {trace.loss:.5f}" if trace.mode == "forced" else ""))
    return p


def alignment(trace: AlignmentTrace, layer: int, head: str, step: int | None, theme: Theme, key: str = "a",
              p: Presentation | None = None) -> Presentation:
    """The heatmap of a trace (the first model's: "alignment", a second's: "alignment_b"; row `step` outlined), or,
    without attention, the reliance on the single context vector ("reliance", "reliance_b")."""
    p = Presentation() if p is None else p
    suffix = "" if key == "a" else f"_{key}"
    if trace.weights is None:
        p.say("line", viz.NO_ATTENTION)
        if trace.no_source_logprobs is not None:
            p.figure(f"reliance{suffix}", viz.reliance_figure(trace.out_tokens, trace.step_logprobs,
                                                               trace.no_source_logprobs, theme),
                     Origin("model", "the model's own log-probabilities, and a second run with c and s₀ set to 0."),
                     "seq2seq-no-attention")
            p.say("caption", "How much each output token depends on c: its log-probability with c, and with c and s₀ "
                             "set to 0.")
        return p
    matrix = trace.matrix(layer, head)
    assert matrix is not None  # the trace has weights
    p.figure(f"alignment{suffix}", viz.alignment_heatmap(matrix, trace.out_tokens, trace.src_tokens,
                                                         viz.alignment_title(trace.model_id, trace.kind, layer, head),
                                                         theme, highlight=step),
             Origin("model", f"{md(trace.model_id)}'s own attention weights while it produced this output."),
             f"seq2seq-alignment-{key}")
    return p


def beside(trace: AlignmentTrace, layer: int, head: str, step: int, theme: Theme, key: str = "a",
           p: Presentation | None = None) -> Presentation:
    """One of two models side by side: its output and its heatmap; the second model's ("b") with its own warnings,
    at the layer and head nearest the first's, its row `step` outlined where it has one."""
    p = Presentation() if p is None else p
    if key != "a":
        p.say("warning", *trace.warnings)
    p.say("line", f"{trace.model_id}: {trace.output_text}")
    if key != "a":
        if not trace.out_ids:
            return p
        layer = min(layer, max(trace.n_layers - 1, 0))
        head = head if head == "mean" or int(head) < trace.n_heads else "mean"
    return alignment(trace, layer, head, step if step < len(trace.out_ids) else None, theme, key, p)


def step_head(trace: AlignmentTrace, step: int, p: Presentation | None = None) -> Presentation:
    """Step t's title, the formula the checkpoint's attention computes and where it was read."""
    p = Presentation() if p is None else p
    p.heading(f"Step t = {step}: producing “{viz.labels([trace.out_tokens[step]])[0]}”")
    if trace.form is not None:
        formula, where = viz.equation(trace.form)
        p.say("latex", formula)
        p.say("caption", where)
    return p


def step_weights(trace: AlignmentTrace, step: int, layer: int, head: str, theme: Theme,
                 p: Presentation | None = None) -> Presentation:
    """Step t's weights over the source (and scores), or without attention its log-probability with and without c."""
    p = Presentation() if p is None else p
    row = trace.matrix(layer, head)
    if row is not None:
        scores = trace.scores[step] if trace.scores is not None else None
        p.figure("step_weights", viz.step_weights(row[step], trace.src_tokens, trace.out_tokens[step], step, theme,
                                                  scores),
                 Origin("model", "the model's own weights (and scores) at this step."), f"seq2seq-step-{step}")
    elif trace.no_source_logprobs is not None:
        lp, lp0 = trace.step_logprobs[step], trace.no_source_logprobs[step]
        p.say("latex", rf"\log p(\text{{“{latex_text(viz.labels([trace.out_tokens[step]])[0])}”}})={lp:.4f}\ "
                       rf"\text{{with }}c,\qquad{lp0:.4f}\ \text{{with }}c=s_0=0")
    return p


def candidates(trace: AlignmentTrace, step: int, p: Presentation | None = None) -> Presentation:
    """The top next-token candidates at step t."""
    p = Presentation() if p is None else p
    p.say("line", "Top next-token candidates")
    p.table("candidates", viz.topk_columns(trace, step),
            Origin("model", "the model's own next-token distribution at this step, T = 1."))
    return p


def step_math(trace: AlignmentTrace, step: int, layer: int, head: str, p: Presentation | None = None
              ) -> Presentation:
    """Step t's score of its most attended source token, recomputed; its context vector; a Hugging Face model's
    strongest weight."""
    p = Presentation() if p is None else p
    m = trace.math[step] if step < len(trace.math) else None
    if m is not None:
        src_j = latex_text(viz.labels([trace.src_tokens[m.j]])[0])
        sym = viz.SCORE_FORMULAS[trace.attention]
        gap = abs(m.score_recomputed - m.score_model)
        p.say("latex", rf"j^*=\text{{“{src_j}”}}\ (j={m.j}):\quad e_{{{step},{m.j}}}={sym}={m.score_recomputed:.5f},"
                       rf"\quad a_{{{step},{m.j}}}=\frac{{e^{{{m.score_model:.4f}-{m.max_score:.4f}}}}}"
                       rf"{{{m.denominator:.4f}}}={m.weight:.5f}")
        p.say("caption", f"The score was recomputed in float64 from the two sides of the score the model computed: "
                         f"{m.score_recomputed:.6f}; the model returned {m.score_model:.6f} (difference {gap:.1e}). "
                         f"Vectors have {m.dim} dimensions; the first {len(m.parts[0][1])} are shown.")
        p.table("score_parts", viz.math_columns(m),
                Origin("recomputed", f"the score from the record's two sides in float64, equal to the model's to "
                                     f"{gap:.1e}."))
    if trace.contexts is not None:
        p.say("caption", f"Context vector c_{step}: {vector_summary(trace.contexts[step])}")
    row = trace.matrix(layer, head)
    if trace.kind == "hf" and row is not None:
        weight, key, total = strongest(row[step], trace.src_tokens)
        p.say("caption", f"Layer {layer}, {head_label(head)}: output position {step} gives its largest weight "
                         f"{weight:.5f} to “{key}”; the row sums to {total:.6f}. The weights are the model's own "
                         "(eager attention).")
    return p


def length_head(p: Presentation | None = None) -> Presentation:
    """The length panel's title (its toggle comes under it)."""
    p = Presentation() if p is None else p
    p.heading(PANELS["length"])
    return p


def lengths(curves: Sequence[LengthCurve], builtins: Sequence[LengthCurve], theme: Theme,
            p: Presentation | None = None) -> Presentation:
    """Exact match against source length on held-out pairs, one line per model: the models' own `curves`, then the
    built-in checkpoints' stored ones (`builtins`) of the others."""
    p = Presentation() if p is None else p
    seen = {curve.model_id for curve in curves}
    curves = [*curves, *(cv for cv in builtins if cv.model_id not in seen)]
    if not curves:
        p.say("caption", "The accuracy-by-length curve is available for the built-in seq2seq models.")
        return p
    p.figure("length_curve", viz.length_accuracy_figure([(cv.label, cv.buckets, cv.accuracy, cv.n) for cv in curves],
                                                        theme),
             Origin("model", "exact match of the models' own greedy outputs on held-out pairs."), "seq2seq-length")
    p.say("caption", "Source: " + "; ".join(f"{cv.model_id}: {cv.source}" for cv in curves)
          + ". Without attention the whole source must fit in one vector, so accuracy falls as sentences get longer "
          "(the bottleneck).")
    return p


def tree(trace: AlignmentTrace, theme: Theme, p: Presentation | None = None) -> Presentation:
    """The beam search tree of this output."""
    p = Presentation() if p is None else p
    beam = trace.beam
    assert beam is not None  # offered for a beam search only (panels)
    p.heading(PANELS["beam"])
    p.figure("beam_tree", beam_tree(beam, theme), Origin("model", "the model's own log-probabilities, ranked by beam "
                                                                  "search."), "seq2seq-beam")
    p.say("caption", f"Each step keeps the 2·K best continuations of the K = {trace.beam_size} running beams by total "
                     "log-probability: the K best not ending continue (coloured), those ending with the end token or "
                     "at the length limit join the finished list (diamonds), the rest are pruned (grey). Finished "
                     f"hypotheses are ranked by sum log p / generated_length^{beam.length_penalty:g} (Hugging Face's "
                     f"definition, the same beam search as the decoding view); the returned one scored "
                     f"{beam.final_score:.4f}.")
    return p


def present(trace: AlignmentTrace, layer: int, head: str, step: int, panel: str, theme: Theme,
            second: AlignmentTrace | str | None = None, curves: Sequence[LengthCurve] = (),
            builtins: Sequence[LengthCurve] = ()) -> Presentation:
    """The whole view in the page's order: what the probe said, the heatmap (with `second`, a second model's trace
    beside it, or the message saying why it has none), the output, and the panel "step", "length" (`curves`) or
    "beam" (`curves` and `builtins`: see lengths)."""
    p = messages(trace)
    if not trace.out_ids:
        return p
    if second is None:
        alignment(trace, layer, head, step, theme, "a", p)
    else:
        beside(trace, layer, head, step, theme, "a", p)
        if isinstance(second, str):
            p.say("warning", second)
        else:
            beside(second, layer, head, step, theme, "b", p)
    output(trace, p)
    if panel == "step":
        step_head(trace, step, p)
        step_weights(trace, step, layer, head, theme, p)
        candidates(trace, step, p)
        step_math(trace, step, layer, head, p)
    elif panel == "beam" and trace.beam is not None:
        tree(trace, theme, p)
    elif panel == "length":
        lengths(curves, builtins, theme, length_head(p))
    return p
