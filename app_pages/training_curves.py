"""Watch it learn: held-out measures of every snapshot of a model's training, and a click opens a view at that step."""
import streamlit as st

from explorer.loading.catalogue import series_steps
from explorer.presenters import training_curves as P
from explorer.text.escape import md, md_message
from explorer.training import curves as TC
from explorer.ui.cache import get_model, session_catalogue
from explorer.ui.present import draw, notice, theme
from explorer.ui.state import Controls
from explorer.ui.training_steps import open_view
from explorer.ui.widgets import model_picker, page_header

c = Controls("training-curves")
page_header("Watch it learn",
            "What a model learned, when: held-out measures of each snapshot of its training. Click a point to open "
            "the view that shows it, at that step.")
with_series = [e.id for e in session_catalogue() if series_steps(e.id)]
model_id = model_picker(c.view.needs, default=c.params["model"].default, training_steps=False,
                        extra=with_series)  # a classifier or tagger trained with snapshots too
if not series_steps(model_id):
    st.info(md_message(P.not_trained(model_id, with_series)))
    st.stop()
curves = TC.measured(model_id)
if curves is None:  # the first time in this process: the recorded losses at once, the measured curves when ready
    slot = st.empty()
    with slot.container():
        draw(P.recorded(TC.recorded(model_id), model_id, theme()), {"curves_so_far_0": {"fold": True}})
    with st.spinner(f"Measuring each snapshot of {md(model_id)} on held-out data (once per server)…"):
        curves = TC.series_curves(model_id)
    slot.empty()
draw(P.present(curves, model_id, theme()), {"curves": {"fold": True, "select": True}})
score: str = c.radio("score") if curves.heads else c.params["score"].default
draw(P.heads(curves, score, theme()), {"heads": {"select": True}})

for key in ("curves", "heads") if curves.heads else ("curves",):  # a click on a point opens the view at its step
    custom = P.clicked(st.session_state.get(key))
    if custom is None:
        continue
    if key == "curves":
        page, params = TC.view_at(curves, str(custom[1]), int(custom[0]))
    else:
        loaded = get_model(model_id)
        vocab = loaded.vocabs.get("vocab") if loaded is not None else None
        page, params = TC.view_at(curves, score, int(custom[0]), int(custom[1]), int(custom[2]), vocab)
    open_view(page, params)

with st.expander("Every snapshot's numbers"):
    draw(P.snapshots(curves), {"snapshots": {"wide": True}})
notice(P.notices(curves))
