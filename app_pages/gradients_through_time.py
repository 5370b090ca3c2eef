"""Gradients through time: how much of the gradient of a recurrent model's prediction reaches each earlier word."""
import streamlit as st

from explorer.loading.catalogue import series_steps
from explorer.presenters import gradients_through_time as P
from explorer.probes.gradients_through_time import GradientError, gradients_through_time
from explorer.ui import state
from explorer.ui.cache import get_model, probe, session_catalogue
from explorer.ui.present import draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.widgets import model_sentence, page_header, sentence_input, top_row

c = Controls("gradients-through-time")
page_header("Gradients through time", "The gradient of log p(last word) with respect to every earlier input word, "
            "and the norms of the recurrent Jacobians it flows through (Bengio et al. 1994; Hochreiter 1991).")
entries = session_catalogue()
options = [e.id for e in entries if e.family and e.may_have(c.view.needs)]
options += [f"{m}@{step}" for m in list(options) for step in series_steps(m)[:-1]]  # steps of a training series
# ?models= ids that this view cannot read: said by name (the multiselect would drop them, or the whole list, silently)
raw = state.url_value("models") if "models" not in st.session_state else None
asked = [m.strip() for m in (raw or "").split(",")[:20] if m.strip()]
left_out = [m for m in asked if m not in options]
if left_out:
    st.session_state["models"] = [m for m in asked if m in options] or list(c.params["models"].default)
    draw(P.left_out(left_out, entries, kept=[m for m in asked if m in options]))
col_models, col_text = top_row()
with col_models:
    chosen = c.multiselect("models", options, format_func=P.model_label)
    models = {model_id: loaded for model_id in chosen if (loaded := get_model(model_id)) is not None}
with col_text:  # the sentences of the first model (the built-in recurrent LMs share one language)
    text = model_sentence(next(iter(models.values())), c.view.sentences, help=P.HELP) if models else \
        sentence_input("", help=P.HELP)
traces, failed = [], []
for model_id, loaded in models.items():
    try:
        traces.append(probe(gradients_through_time, loaded, text, raising=True))
    except GradientError as exc:  # one model left out, the others shown
        failed.append((model_id, str(exc)))
draw(P.present(traces, theme(), failed), {"gradients": {"fold": True}})
if not traces:
    st.stop()
notice(P.NOTICES)
