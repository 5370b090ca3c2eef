"""Watch it learn: held-out measures of every snapshot of a model's training, and a click opens a view at that step."""
import streamlit as st

from explorer.loading.catalogue import series_steps
from explorer.text.escape import md
from explorer.training import curves as TC
from explorer.ui import settings
from explorer.ui.cache import get_model, session_catalogue
from explorer.ui.charts import Origin, caption, show, table
from explorer.ui.state import Controls
from explorer.ui.training_steps import open_view
from explorer.ui.widgets import model_picker, page_header, what_to_notice
from explorer.viz import training_curves as V

c = Controls("training-curves")
page_header("Watch it learn",
            "What a model learned, when: held-out measures of each snapshot of its training. Click a point to open "
            "the view that shows it, at that step.")
with_series = [e.id for e in session_catalogue() if series_steps(e.id)]
model_id = model_picker(c.view.needs, default=c.params["model"].default, training_steps=False,
                        extra=with_series)  # a classifier or tagger trained with snapshots too
if not series_steps(model_id):
    st.info(f"{md(model_id)} was not trained with snapshots. The models that were: "
            f"{', '.join(md(m) for m in with_series) or 'none here'} (train one with "
            "`python -m explorer.training.train NAME --snapshots 16`).")
    st.stop()
theme = settings.theme()
curves = TC.measured(model_id)
if curves is None:  # the first time in this process: the recorded losses at once, the measured curves when ready
    first = TC.recorded(model_id)
    slot = st.empty()
    with slot.container():
        show(V.curves_figure(first.steps, first.curves, model_id, theme),
             Origin("model", "the held-out and training losses the training run recorded at each snapshot; the "
                             "held-out measures follow."), key="curves_so_far_0", fold=True)
    with st.spinner(f"Measuring each snapshot of {md(model_id)} on held-out data (once per server)…"):
        curves = TC.series_curves(model_id)
    slot.empty()
for note in curves.notes:
    st.info(md(note))
MEASURED = Origin("model", f"each snapshot's stored weights run on “{md(curves.sentence)}”; the held-out loss and "
                           "accuracy as the training run measured them on its held-out examples.") if curves.sentence \
    else Origin("model", f"each snapshot's stored weights measured on held-out data ({curves.n_items} agreement "
                         f"items, {TC.SENTENCES} sentences, {TC.REPEATS} repeated sequences); the losses as the "
                         "training run recorded them.")
picked = show(V.curves_figure(curves.steps, curves.curves, model_id, theme), MEASURED, key="curves",
              filename="training-curves", fold=True, on_select="rerun", selection_mode="points")
final = {name: float(v[-1]) for name, v in curves.curves.items()}
first_good = {name: next((int(s) for s, x in zip(curves.steps, v) if x >= 0.9), None)
              for name, v in curves.curves.items() if name not in V.LOSSES}
caption(" · ".join(f"{name}: {final[name]:.3f} at the end" + (f", first ≥ 0.9 at step {first_good[name]:,}"
                                                                  if first_good.get(name) is not None else "")
                      for name in curves.curves))
head = None
score: str = c.params["score"].default
if curves.heads:
    score = c.radio("score")
    head = show(V.heads_figure(curves.steps, curves.heads[score], f"Each head's {score} score over training", theme),
                MEASURED, key="heads", filename=f"{score}-scores", on_select="rerun", selection_mode="points")
    best = curves.heads[score][-1]
    layer, h = divmod(int(best.argmax()), best.shape[1])
    caption(f"At the end, the highest {score} score is head L{layer}H{h}'s, {float(best.max()):.3f} "
               f"(at the first snapshot: {float(curves.heads[score][0].max()):.3f}).")

for event, kind in ((picked, "curve"), (head, "head")):
    custom = V.selected(event.selection.points) if event is not None and event.selection else None
    if custom is None:
        continue
    if kind == "curve":
        page, params = TC.view_at(curves, str(custom[1]), int(custom[0]))
    else:
        loaded = get_model(model_id)
        vocab = loaded.vocabs.get("vocab") if loaded is not None else None
        page, params = TC.view_at(curves, score, int(custom[0]), int(custom[1]), int(custom[2]), vocab)
    open_view(page, params)

with st.expander("Every snapshot's numbers"):
    table(V.table_rows(curves.steps, curves.epochs, curves.curves, curves.unit), MEASURED)

what_to_notice([
    "When does held-out accuracy rise, compared with when the loss falls? And the decision on the sentence: is it "
    "settled long before the end, or does it flip late? Click a point to open the Decision view at that step.",
] if curves.sentence else [
    "When does agreement leave chance (0.5), compared with when the loss falls? The caption under the chart gives "
    "the first step at which each share reaches 0.9.",
    "A recurrent model's number unit: is it the same unit from one snapshot to the next once it is accurate (the "
    "table below names it)? Click a point to see that unit at that step.",
    "Neighbour precision: from which step do words of a class get similar embeddings?",
])
