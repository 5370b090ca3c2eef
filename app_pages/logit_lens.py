"""The logit lens: every layer's hidden state read through the model's own final norm and output layer."""
import streamlit as st

from explorer.presenters import logit_lens as P
from explorer.probes.logit_lens import LensError, logit_lens, probability_of
from explorer.text.escape import md_message
from explorer.ui.cache import get_model, probe
from explorer.ui.compare import compare_picker
from explorer.ui.present import Place, draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header

c = Controls("logit-lens")
PLACES: dict[str, Place] = {"lens_grid": {"fold": True}}
page_header("Logit lens", "What each layer would predict if the model stopped there: its hidden state read through "
            "the model's own final norm and output layer (nostalgebraist 2020).")
_, loaded, text = model_and_sentence(c)
trace = probe(logit_lens, loaded, text)  # a LensError is shown (st.info) and stops the page
draw(P.head(trace))
L, T = trace.top_probs.shape
c1, c2, c3 = st.columns([1, 1, 1])
with c3:
    other_id = compare_picker(c.view.needs, loaded.id, same_tokens=True, label_visibility="collapsed")
with c1:
    pos = c.token("pos", trace.tokens, T - 1, label_visibility="collapsed",  # follows the sentence
                  format_func=lambda t: P.position_label(trace, t))
with c2:
    layer = c.selectbox("layer", list(range(L)), default=L - 1, label_visibility="collapsed",
                        format_func=lambda i: P.layer_label(trace, i))
other, tracked, failed = None, None, ""
if other_id is not None and (loaded_b := get_model(other_id)) is not None:
    try:
        other = probe(logit_lens, loaded_b, text, raising=True)
    except LensError as exc:
        failed = str(exc)
    else:
        try:
            tracked = probe(probability_of, loaded_b, text, trace.final_ids, raising=True) \
                if P.comparable(trace, other) else None
        except LensError:
            tracked = None
draw(P.present(trace, layer, pos, theme(), other, other_id or "", tracked, failed), PLACES)
title, every = P.all_layers(trace, layer, pos, theme())
if every.blocks:
    with st.expander(md_message(title)):
        draw(every)
notice(P.notices(trace, pos))
