"""Token attribution: gradient × input, integrated gradients and LRP from each output token onto the input tokens,
and why this output rather than another (a foil)."""
import streamlit as st

from explorer.presenters import token_attribution as P
from explorer.probes.token_attribution import (AttributionError, AttributionTrace, attribution, default_method,
                                               default_outputs)
from explorer.ui.cache import get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.training_steps import trained_model
from explorer.ui.widgets import model_and_sentence, page_header

c = Controls("token-attribution")
PLACES: dict[str, Place] = {"attribution": {"key": "attr_heatmap", "fold": True}, "attribution_b": {
    "key": "attr_heatmap_b"}, "attribution_diff": {"key": "attr_heatmap_diff"}}  # the charts' keys as they were
page_header("Token attribution", "Which input tokens drive each output token: gradient × input, integrated "
            "gradients (Sundararajan et al. 2017) from a baseline with their completeness error, and LRP (AttnLRP, "
            "Achtibat et al. 2024) with its conservation; and why this token rather than another.")
_, loaded, text = model_and_sentence(
    c, label=lambda m: "Source sentence" if m.adapter.is_encoder_decoder else "Sentence")
target = c.text_input("target") if loaded.adapter.is_encoder_decoder else ""
c_out, c_method, c_cmp, c_steps = st.columns([2.0, 1.9, 1.65, 1.45], vertical_alignment="bottom")  # "Options" whole
with c_cmp:
    other_id = compare_picker(c.view.needs, loaded.id, same_tokens=True, label_visibility="collapsed")
with c_method:
    method: str = c.selectbox("method", default=default_method(loaded), label_visibility="collapsed")
with c_steps, st.popover("Options", icon=":material/tune:", width="stretch"):
    foil = c.text_input("foil", placeholder="a word, or “second”")
    of: str = c.radio("of")
    steps = c.number("steps", disabled=method != "integrated gradients")
    outputs = "all" if loaded.adapter.is_encoder_decoder else c.radio(
        "outputs", default=default_outputs(loaded), format_func=P.OUTPUTS.get)
drawn = [0]


def so_far(partial: AttributionTrace) -> None:
    """The attributions known so far, in place of the chart: gradient × input after one backward pass, then
    integrated gradients after each round of the integration, with the completeness error of what is shown."""
    drawn[0] += 1
    draw(P.so_far(partial, method, of, theme(), loaded.family),
         {"so_far": {"key": f"attr_so_far_{drawn[0]}", "fold": True}})


trace = probe(attribution, loaded, text, target, steps, outputs, of=of, foil=foil, method=method,
              partial=so_far, heavy=True, progress=True)  # an AttributionError: shown, page stops
M = len(trace.outputs)
with c_out:
    out = c.token("out", trace.outputs, M - 1, label_visibility="collapsed",  # follows the sentence
                  format_func=lambda i: P.output_label(trace, i))
reference = None
if (trained := trained_model(loaded)) is not None:  # a snapshot: coloured on the trained model's scale
    try:
        reference = probe(attribution, trained, text, target, steps, outputs, of=of, foil=foil,
                          method=method, heavy=True, raising=True)
    except AttributionError:
        reference = None
other, failed = None, ""
if other_id is not None and (loaded_b := get_model(other_id)) is not None:
    try:
        other = probe(attribution, loaded_b, text, target, steps, outputs, of=of, foil=foil, method=method,
                      heavy=True, raising=True)
    except AttributionError as exc:
        failed = str(exc)
draw(P.present(trace, method, out, outputs, theme(), reference, trained.id if trained is not None else "", other,
               other_id or "", failed, loaded.family), PLACES)
notice(P.notices(trace, outputs, loaded.adapter.is_encoder_decoder))
