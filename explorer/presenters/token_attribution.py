"""Token attribution's presenter: an AttributionTrace (gradient_x_input, integrated: M outputs × N inputs; value,
baseline_value, completeness, relative: (M,)) and the view's settings -> the outputs × inputs heatmap (with a second
model's and B − A beside it), the chosen output's inputs as coloured text, the integration's numbers and its
completeness warning (explorer.viz.token_attribution.completeness_warning: the page and the notebook say it in the
same words); what is drawn while the integration runs; and what to notice."""
from __future__ import annotations

import numpy as np

from explorer.metrics.faithfulness import first_answer, ranking
from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.token_attribution import AttributionTrace
from explorer.text.escape import md, md_message
from explorer.views import BY_PATH
from explorer.viz import token_attribution as viz
from explorer.viz.theme import Theme

OUTPUTS = {"all": "every next token and the prediction", "prediction": "the model's prediction only"}
MOST = int(BY_PATH["token-attribution"].params["steps"].hi or 0)  # the largest budget the view allows


METHODS = tuple(str(m) for m in BY_PATH["token-attribution"].params["method"].choices)


def values_of(trace: AttributionTrace, method: str) -> np.ndarray:
    """The (M, N) attributions `method` draws: integrated gradients, gradient × input or LRP's relevance."""
    if method == "LRP" and trace.lrp is not None:
        return np.asarray(trace.lrp.relevance)
    return trace.integrated if method == "integrated gradients" else trace.gradient_x_input


def origin(trace: AttributionTrace, method: str, model_id: str) -> str:
    """The badge's text for `method`'s chart of model `model_id` (escaped here: the badge is Markdown)."""
    if method == "LRP":
        return (f"relevance of {md(model_id)}'s own logit by the LRP rules (one forward and one backward pass): "
                f"{md(viz.worst_conservation(trace))}.")
    return (f"gradients of {md(model_id)}'s own {trace.of} (autograd); integrated gradients from "
            f"{md_message(trace.baseline)}: {md(viz.worst_output(trace))}.")


def output_label(trace: AttributionTrace, i: int) -> str:
    """The output menu's label of output i."""
    return f"onto output {i}: {trace.outputs[i]}" + (" (the model's prediction)" if trace.predicted and
                                                      i == len(trace.outputs) - 1 else "")


def so_far(partial: AttributionTrace, method: str, of: str, theme: Theme, family: str = "") -> Presentation:
    """What is drawn in place of the chart while the attribution is computed (`partial`: the trace so far):
    the fast method measured more faithful for the model's `family` (LRP or gradient × input: one pass), then
    integrated gradients after each round of the integration, and the last output's inputs coloured ("so_far",
    "so_far_tokens")."""
    p = Presentation()
    shown, label, values = viz.so_far(partial, method, first_answer(family))
    last = len(partial.outputs) - 1
    p.figure("so_far", viz.attribution_heatmap(values, partial.inputs, partial.outputs, label, theme, last),
             Origin("model", origin(partial, "LRP", partial.model_id) if shown == "LRP" else
                    f"gradients of {md(partial.model_id)}'s own {of} (autograd), as far as the bar above says"),
             "explorer")
    p.html("so_far_tokens", viz.attribution_html(partial.inputs, values[last], partial.reach[last], theme,
                                                 viz.kept_inputs(partial, shown)))
    return p


def present(trace: AttributionTrace, method: str, out: int, outputs: str, theme: Theme,
            reference: AttributionTrace | None = None, trained_id: str = "", other: AttributionTrace | None = None,
            other_id: str = "", failed: str = "", family: str = "") -> Presentation:
    """The view for output `out` (a row of the heatmap) and `method` ("integrated gradients", "gradient × input" or
    "LRP"); family: the model's (the measured faithfulness of the methods for it is named).
    outputs: "all" or "prediction" (what the probe attributed); reference: the trained model's trace when `trace` is
    a snapshot of it (`trained_id`), whose peak colours the heatmap; other: a second model's trace of the same
    sentence (`other_id`; failed: why it could not be attributed)."""
    p = Presentation()
    p.say("note", *trace.notes)
    values = values_of(trace, method)
    peak = None if reference is None else viz.peak(values_of(reference, method))
    values_b, same = None, False
    if failed:
        p.say("warning", f"{other_id} cannot be compared here: {failed}")
    elif other is not None:
        values_b = values_of(other, method)
        same = other.inputs == trace.inputs and other.outputs == trace.outputs
        if same:
            peak = viz.shared_peak(values, values_b, peak)
        else:
            p.say("note", f"No difference is drawn: {other_id} reads this sentence as other tokens than "
                          f"{trace.model_id}.")
    p.figure("attribution", viz.attribution_heatmap(values, trace.inputs, trace.outputs, method, theme, out, peak,
                                                    model=trace.model_id if other is not None else ""),
             Origin("model", origin(trace, method, trace.model_id)), "attribution")
    if peak is not None and other is None and reference is not None:  # a peak of the trained model's
        p.say("caption", f"Colours from −{peak:.3f} to {peak:.3f}: the largest |{method}| of the trained model "
                         f"({trained_id}) on this sentence, at every training step.")
    if other is not None and values_b is not None:
        p.figure("attribution_b", viz.attribution_heatmap(values_b, other.inputs, other.outputs, method, theme, None,
                                                          peak if same else None, model=other.model_id),
                 Origin("model", origin(other, method, other_id)), "attribution-compare")
        if same:
            p.figure("attribution_diff", viz.difference_heatmap(values, values_b, trace.inputs, trace.outputs, method,
                                                                trace.model_id, other.model_id, theme),
                     Origin("model", "the difference of the two models' own attributions on this sentence."),
                     "attribution-difference")
            p.say("caption", f"Both on one colour scale (±{peak or 0:.3f}); largest |B − A|: "
                             f"{viz.largest_difference(values, values_b):.3f}.")
    if (measured := ranking(family)) is not None:
        p.say("caption", measured.sentence(trace.model_id))
    if outputs == "prediction" and len(trace.inputs) > 1:
        p.say("caption", "Only the model's own prediction after the last token is attributed: for a row per next "
                         "token of the sentence choose “every next token” under Options (each row costs tens of "
                         "forward and backward passes of the model).")
    if method == "integrated gradients":  # the warning of the page and the notebook, in the same words
        p.say("warning", viz.completeness_warning(trace, MOST) or "")
    of = "logit" if method == "LRP" else trace.of
    p.say("line", f"{method} onto “{trace.outputs[out]}”" + (f" rather than “{trace.foils[out]}”" if trace.foil else "")
          + f" ({viz.colour_key(theme, of + (' difference' if trace.foil else ''))}):")
    p.html("tokens", viz.attribution_html(trace.inputs, values[out], trace.reach[out], theme,
                                          viz.kept_inputs(trace, method)))
    if method == "LRP":
        if trace.of != "logit" and not trace.foil:
            p.say("caption", f"LRP explains the logit, where its relevance starts: a {trace.of} is not a sum its "
                             "rules can pass on. With a foil (Options → “Rather than”) the logit difference it "
                             "explains is the log-probability difference itself.")
        p.say("caption", viz.conservation(trace, out))
        return p
    if method == "gradient × input":
        p.say("caption", f"Gradient × input of f = {viz.explained(trace, method, out)}: f = {trace.value[out]:.4f}; "
                         f"the attributions add up to {float(trace.gradient_x_input[out].sum()):.4f} (gradient × "
                         "input has no completeness: nothing makes them add up to f).")
        return p
    p.say("caption", f"f = {viz.explained(trace, method, out)}: {trace.value[out]:.4f}; at the baseline "
                     f"({trace.baseline}): {trace.baseline_value[out]:.4f}; the integrated gradients sum to "
                     f"{float(trace.integrated[out].sum()):.4f} (completeness error {trace.completeness[out]:.2g}, "
                     f"{trace.relative[out]:.2%} of the change; {len(trace.edges[out]) - 1} intervals, "
                     f"{trace.points[out]} points, {trace.evaluations[out]} gradient evaluations besides gradient × "
                     f"input's). The rule: {trace.rule}, up to {trace.points.max()} points per output "
                     f"({trace.evaluations.sum()} gradient evaluations in all, at most {trace.steps} per output).")
    return p


def notices(trace: AttributionTrace, outputs: str, encoder_decoder: bool) -> list[str]:
    """What to notice, with this trace's numbers (outputs: "all" or "prediction"; encoder_decoder: the model reads a
    source and writes outputs)."""
    of = trace.of
    return [
        f"In an agreement sentence, compare what the verb's {of} draws from the subject noun and from the nearer "
        f"attractor noun: attribution says what raises this {of}, not which word decides the verb's number.",
        "LRP passes the output's relevance back layer by layer in one forward and one backward pass; it is "
        "conserved except for what biases, position vectors and the softmax absorb, and the caption under the chart "
        "prints each of those for the chosen output.",
        "Ask a contrastive question under Options → “Rather than”: “second” attributes the output's log-probability "
        "minus its runner-up's, so only what tells the two apart is coloured; a word you type is contrasted at every "
        "output.",
        "Gradient × input is one backward pass; integrated gradients integrate the gradient along the straight path "
        f"from the baseline, so the attributions add up to the change in the {of} between the baseline and the "
        "sentence (the completeness error, computed for every output, shows how closely). It checks the sum only: "
        "errors of single tokens can cancel in it.",
        *([f"Outputs can need different numbers of gradient evaluations (here {trace.evaluations.min()} to "
           f"{trace.evaluations.max()}; the caption gives each one's count): the integration halves the intervals "
           f"where its sum disagrees with the {of} at their ends, which is where it bends sharply along the path."]
          if len(trace.outputs) > 1 else []),
        *([f"This model adds no position vectors to its token embeddings (rotary, ALiBi or relative positions), so "
           f"the baseline keeps {', '.join(f'“{trace.inputs[i]}”' for i in trace.kept)} as it is: it gets no share "
           "(its integrated gradient is 0)" + (", and the first output, which reads only that token, has nothing to "
                                               "split." if outputs == "all" and not encoder_decoder else ".")]
          if trace.kept else []),
        *(["An encoder-decoder's output token draws on the source and on the outputs before it (second part of the "
           "row)."] if encoder_decoder else []),
    ]
