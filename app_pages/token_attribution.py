"""Token attribution: gradient × input and integrated gradients from each output token onto the input tokens."""
import streamlit as st

from explorer.probes.token_attribution import AttributionError, AttributionTrace, attribution, default_outputs
from explorer.text.escape import md, md_message
from explorer.ui import settings
from explorer.ui.cache import get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.charts import Origin, caption, show
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import token_attribution as V

c = Controls("token-attribution")
page_header("Token attribution", "Which input tokens drive each output token: gradient × input, and integrated "
            "gradients (Sundararajan et al. 2017) from a baseline, with their completeness error.")
_, loaded, text = model_and_sentence(
    c, label=lambda m: "Source sentence" if m.adapter.is_encoder_decoder else "Sentence")
target = c.text_input("target") if loaded.adapter.is_encoder_decoder else ""
c_out, c_method, c_cmp, c_steps = st.columns([2.0, 1.8, 1.6, 1], vertical_alignment="bottom")  # c_out: after the run
with c_cmp:
    other_id = compare_picker(c.view.needs, loaded.id, same_tokens=True, label_visibility="collapsed")
with c_method:
    method: str = c.selectbox("method", label_visibility="collapsed")
with c_steps, st.popover("Steps", icon=":material/tune:", width="stretch"):
    of: str = c.radio("of")
    steps = c.number("steps", disabled=method != "integrated gradients")
    outputs = "all" if loaded.adapter.is_encoder_decoder else c.radio(
        "outputs", default=default_outputs(loaded), format_func={
            "all": "every next token and the prediction", "prediction": "the model's prediction only"}.get)
drawn = [0]


def so_far(partial: AttributionTrace) -> None:
    """The attributions known so far, in place of the chart: gradient × input after one backward pass, then
    integrated gradients after each round of the integration, with the completeness error of what is shown."""
    drawn[0] += 1
    shown, label, values = V.so_far(partial, method)
    last = len(partial.outputs) - 1
    show(V.attribution_heatmap(values, partial.inputs, partial.outputs, label, settings.theme(), last),
         Origin("model", f"gradients of {md(loaded.id)}'s own {of} (autograd), as far as the bar above says"),
         key=f"attr_so_far_{drawn[0]}", fold=True)
    st.html(V.attribution_html(partial.inputs, values[last], partial.reach[last], settings.theme(),
                               V.kept_inputs(partial, shown)))


trace = probe(attribution, loaded, text, target, steps, outputs, of=of, partial=so_far, heavy=True,
              progress=True)  # an AttributionError: shown, page stops
for note in trace.notes:
    st.info(md_message(note))
theme = settings.theme()
M = len(trace.outputs)
with c_out:
    out = c.token("out", trace.outputs, M - 1, label_visibility="collapsed",  # follows the sentence
                  format_func=lambda i: f"onto output {i}: {trace.outputs[i]}"
                  + (" (the model's prediction)" if trace.predicted and i == M - 1 else ""))
values = trace.integrated if method == "integrated gradients" else trace.gradient_x_input
origin = Origin("model", f"gradients of {md(loaded.id)}'s own {of} (autograd); integrated gradients "
                         f"from {md_message(trace.baseline)}: {md(V.worst_output(trace))}.")
trained, peak = trained_model(loaded), None
if trained is not None:  # a snapshot: coloured on the trained model's scale, so that what changes is the model
    try:
        reference = probe(attribution, trained, text, target, steps, outputs, of=of, heavy=True, raising=True)
        peak = V.peak(reference.integrated if method == "integrated gradients" else reference.gradient_x_input)
    except AttributionError:
        peak = None
trace_b, values_b = None, None
if other_id is not None and (other := get_model(other_id)) is not None:
    try:
        trace_b = probe(attribution, other, text, target, steps, outputs, of=of, heavy=True, raising=True)
    except AttributionError as exc:
        st.warning(f"{md(other_id)} cannot be compared here: {md_message(exc)}")
    else:
        values_b = trace_b.integrated if method == "integrated gradients" else trace_b.gradient_x_input
        if trace_b.inputs != trace.inputs or trace_b.outputs != trace.outputs:
            st.info(f"No difference is drawn: {md(other_id)} reads this sentence as other tokens than "
                    f"{md(loaded.id)}.")
        else:
            peak = V.shared_peak(values, values_b, peak)
show(V.attribution_heatmap(values, trace.inputs, trace.outputs, method, theme, out, peak,
                           model=loaded.id if trace_b is not None else ""), origin,
     key="attr_heatmap", filename="attribution", fold=True)
if peak is not None and trace_b is None and trained is not None:  # a peak of the trained model's
    caption(f"Colours from −{peak:.3f} to {peak:.3f}: the largest |{method}| of the trained model "
               f"({md(trained.id)}) on this sentence, at every training step.")
if trace_b is not None and values_b is not None:
    same = trace_b.inputs == trace.inputs and trace_b.outputs == trace.outputs
    show(V.attribution_heatmap(values_b, trace_b.inputs, trace_b.outputs, method, theme, None,
                               peak if same else None, model=trace_b.model_id),
         Origin("model", f"gradients of {md(other_id)}'s own {of} (autograd)."), key="attr_heatmap_b",
         filename="attribution-compare")
    if same:
        show(V.difference_heatmap(values, values_b, trace.inputs, trace.outputs, method, loaded.id, trace_b.model_id,
                                  theme),
             Origin("model", "the difference of the two models' own attributions on this sentence."),
             key="attr_heatmap_diff", filename="attribution-difference")
        caption(f"Both on one colour scale (±{peak or 0:.3f}); largest |B − A|: "
                   f"{V.largest_difference(values, values_b):.3f}.")
if outputs == "prediction" and len(trace.inputs) > 1:
    caption("Only the model's own prediction after the last token is attributed: for a row per next token of "
               "the sentence choose “every next token” under Steps (each row costs tens of forward and backward "
               "passes of the model).")
warning = V.completeness_warning(trace, c.view.params["steps"].hi)
if warning and method == "integrated gradients":
    st.warning(md_message(warning), icon=":material/warning:")
st.markdown(f"**{method} onto “{md(trace.outputs[out])}”** ({V.colour_key(theme, trace.of)}):")
st.html(V.attribution_html(trace.inputs, values[out], trace.reach[out], theme, V.kept_inputs(trace, method)))
caption(f"{trace.of.capitalize()} of “{md(trace.outputs[out])}”: {trace.value[out]:.4f}; at the baseline "
           f"({md_message(trace.baseline)}): "
           f"{trace.baseline_value[out]:.4f}; the integrated gradients sum to {float(trace.integrated[out].sum()):.4f} "
           f"(completeness error {trace.completeness[out]:.2g}, {trace.relative[out]:.2%} of the change; "
           f"{len(trace.edges[out]) - 1} intervals, {trace.points[out]} points, {trace.evaluations[out]} gradient "
           f"evaluations besides gradient × input's). The rule: "
           f"{md_message(trace.rule)}, up to {trace.points.max()} points per output ({trace.evaluations.sum()} "
           f"gradient evaluations in all, at most {trace.steps} per output).")
what_to_notice([
    f"In an agreement sentence, compare what the verb's {trace.of} draws from the subject noun and from the nearer "
    f"attractor noun: attribution says what raises this {trace.of}, not which word decides the verb's number.",
    "Gradient × input is one backward pass; integrated gradients integrate the gradient along the straight path from "
    f"the baseline, so the attributions add up to the change in the {trace.of} between the baseline and the sentence "
    "(the completeness error, computed for every output, shows how closely). It checks the sum only: errors of "
    "single tokens can cancel in it.",
    *([f"Outputs can need different numbers of gradient evaluations (here {trace.evaluations.min()} to "
       f"{trace.evaluations.max()}; the caption gives each one's count): the integration halves the intervals where "
       f"its sum disagrees with the {trace.of} at their ends, which is where it bends sharply along the path."]
      if M > 1 else []),
    *([f"This model adds no position vectors to its token embeddings (rotary, ALiBi or relative positions), so the "
       f"baseline keeps {', '.join(f'“{md(trace.inputs[i])}”' for i in trace.kept)} as it is: it gets no share (its "
       "integrated gradient is 0)" + (", and the first output, which reads only that token, has nothing to split."
                                      if outputs == "all" and not loaded.adapter.is_encoder_decoder else ".")]
      if trace.kept else []),
    *(["An encoder-decoder's output token draws on the source and on the outputs before it (second part of the row)."]
      if loaded.adapter.is_encoder_decoder else []),
])
