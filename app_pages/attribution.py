"""Token attribution: gradient × input and integrated gradients from each output token onto the input tokens."""
import streamlit as st

from explorer.probes.attribution import AttributionError, attribution
from explorer.ui import settings
from explorer.ui.cache import probe
from explorer.ui.charts import Origin, show
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import attribution as V

c = Controls("token-attribution")
page_header("Token attribution", "Which input tokens drive each output token: gradient × input, and integrated "
            "gradients (Sundararajan et al. 2017) from the zero embedding, with their completeness error.")
_, loaded, text = model_and_sentence(
    c, label=lambda m: "Source sentence" if m.adapter.is_encoder_decoder else "Sentence")
target = c.text_input("target") if loaded.adapter.is_encoder_decoder else ""
c_out, c_method, c_steps = st.columns([2.2, 1.6, 1], vertical_alignment="bottom")  # c_out: once the run is known
with c_method:
    method = c.selectbox("method", label_visibility="collapsed")
with c_steps, st.popover("Steps", icon=":material/tune:", width="stretch"):
    steps = c.number("steps", disabled=method != "integrated gradients")
try:
    trace = probe(attribution, loaded, text, target, steps)
except AttributionError as exc:
    st.info(str(exc))
    st.stop()
for note in trace.notes:
    st.info(note)
theme = settings.theme()
M = len(trace.outputs)
with c_out:
    out = c.selectbox("out", list(range(M)), default=M - 1, label_visibility="collapsed",
                      format_func=lambda i: f"onto output {i}: {trace.outputs[i]}"
                      + (" (the model's prediction)" if trace.predicted and i == M - 1 else ""))
values = trace.integrated if method == "integrated gradients" else trace.gradient_x_input
origin = Origin("model", f"gradients of {loaded.id}'s own logits through its own layers (autograd); integrated "
                         f"gradients: {trace.steps} steps from {trace.baseline}, completeness error at most "
                         f"{trace.max_completeness:.2g} (Σ attributions vs logit − baseline logit).")
show(V.attribution_heatmap(values, trace.inputs, trace.outputs, method, theme, out), origin, key="attr_heatmap",
     filename="attribution", fold=True)
st.markdown(f"**{method} onto “{trace.outputs[out]}”** (red raises its logit, blue lowers it):")
st.html(V.attribution_html(trace.inputs, values[out], trace.reach[out]))
st.caption(f"Logit of “{trace.outputs[out]}”: {trace.logit[out]:.4f}; at the zero embedding: "
           f"{trace.baseline_logit[out]:.4f}; the integrated gradients sum to "
           f"{float(trace.integrated[out].sum()):.4f} (completeness error {trace.completeness[out]:.2g}, "
           f"{trace.steps} steps).")
what_to_notice([
    "In an agreement sentence, compare what the verb's logit draws from the subject noun and from the nearer "
    "attractor noun: attribution says what raises this logit, not which word decides the verb's number.",
    "Gradient × input is one backward pass; integrated gradients average the gradient along the straight path from "
    "the zero embedding, so the attributions add up to the change in the logit (the completeness error shows how "
    "closely with this many steps).",
    "An encoder-decoder's output token draws on the source and on the outputs before it (second part of the row).",
])
