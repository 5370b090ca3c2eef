"""Gradients through time: how much of the gradient of a recurrent model's prediction reaches each earlier word."""
import streamlit as st

from explorer.loading import pretrained
from explorer.loading.catalogue import FAMILIES, ModelId, series_steps
from explorer.probes.gradients_through_time import GradientError, gradients_through_time, left_out_notes
from explorer.files.safe_load import ModelLoadError
from explorer.text.escape import md, md_message
from explorer.ui import settings, state
from explorer.ui.cache import get_model, probe, session_catalogue
from explorer.ui.charts import Origin, caption, show
from explorer.ui.state import Controls
from explorer.ui.widgets import model_sentence, page_header, sentence_input, top_row, what_to_notice
from explorer.viz import gradients_through_time as V


def _is_model_id(text: str) -> bool:
    try:
        ModelId.parse(text)
    except ModelLoadError:
        return False
    return True


c = Controls("gradients-through-time")
page_header("Gradients through time", "The gradient of log p(last word) with respect to every earlier input word, "
            "and the norms of the recurrent Jacobians it flows through (Bengio et al. 1994; Hochreiter 1991).")
entries = session_catalogue()
options = [e.id for e in entries if e.family and e.may_have(c.view.needs)]
options += [f"{m}@{step}" for m in list(options) for step in series_steps(m)[:-1]]  # steps of a training series
HELP = "The last word is the one predicted; the gradient of its log-probability flows back to every word before it."
# ?models= ids that this view cannot read: said by name (the multiselect would drop them, or the whole list, silently)
raw = state.url_value("models") if "models" not in st.session_state else None
asked = [m.strip() for m in (raw or "").split(",")[:20] if m.strip()]
left_out = [m for m in asked if m not in options]
if left_out:
    st.session_state["models"] = [m for m in asked if m in options] or list(c.params["models"].default)
    families = {**{p.id: p.family for p in pretrained.PACKAGED.values()}, **{e.id: e.family for e in entries}}
    kinds = {m: FAMILIES[f] for m, f in families.items() if f in FAMILIES}
    named = [m for m in left_out if _is_model_id(m)]  # a URL value is shown only when it is a well-formed model id
    for note in left_out_notes(named, kinds, kept=[m for m in asked if m in options]):
        st.warning(md_message(note))
    if len(named) < len(left_out):
        st.warning(f"{len(left_out) - len(named)} value(s) of ?models= are not model ids: left out.")
col_models, col_text = top_row()
with col_models:
    chosen = c.multiselect("models", options, format_func=lambda i: i.removeprefix("builtin:"))
    models = {model_id: loaded for model_id in chosen if (loaded := get_model(model_id)) is not None}
with col_text:  # the sentences of the first model (the built-in recurrent LMs share one language)
    text = model_sentence(next(iter(models.values())), c.view.sentences, help=HELP) if models else \
        sentence_input("", help=HELP)
traces = []
for model_id, loaded in models.items():
    try:
        traces.append(probe(gradients_through_time, loaded, text, raising=True))
    except GradientError as exc:  # one model left out, the others shown
        st.info(f"{md(model_id)}: {md_message(exc)}")
if not traces:
    st.info("Choose recurrent language models and type a sentence of two words or more.")
    st.stop()
notes: dict[str, list[str]] = {}
for t in traces:
    for note in t.notes:
        notes.setdefault(note, []).append(t.model_id)
for note, ids in notes.items():
    st.info(md_message(note) if len(ids) == len(traces) else f"{md(', '.join(ids))}: {md_message(note)}")
theme = settings.theme()
first = traces[0]
st.markdown(f"Predicting **{md(first.target)}**: " + "; ".join(f"{t.cell} p = {t.prob:.3g}" for t in traces))
own = Origin("model", "autograd through each model's own recurrence and output layer on this sentence.")
show(V.gradient_lines(traces, theme), own, key="gradients", filename="gradients-through-time", fold=True)
caption(f"After “{md(' '.join(first.tokens))}”, as {md(first.model_id)} reads it · "
        + " · ".join(f"{t.cell}: the farthest word gets {t.decay:.3g}× the gradient of the nearest" for t in traces))
show(V.jacobian_lines(traces, theme), Origin("model", "Jacobians of each model's own state update along this "
                                             "sentence (torch.func), largest singular values."),
     key="jacobians", filename="jacobian-norms")
what_to_notice([
    "A Jacobian norm below 1 at every step makes the product shrink geometrically: the vanishing gradient. Above 1 "
    "the bound grows, yet the gradient that actually reaches a word can still be small (it is a product of matrices, "
    "not of their norms).",
    "Compare the three cells on a long agreement sentence: how much of log p(verb) reaches the subject?",
])
