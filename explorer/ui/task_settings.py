"""The Models page asks what an uploaded classifier's or tagger's weights cannot tell: its task, how it pools a
sentence, its label names (explorer.adapters.task_head), showing what was assumed; applying them adds the upload
again with those settings (explorer.loading.uploads.with_task_settings)."""
from __future__ import annotations

import streamlit as st

from explorer.adapters.task_head import MAX_LABEL_CHARS, POOLING_WHAT
from explorer.files.safe_load import ModelLoadError
from explorer.loading.loaders import LoadedModel
from explorer.loading.uploads import with_task_settings
from explorer.models.rnn_classifier import POOLINGS
from explorer.text.escape import md, md_message
from explorer.ui import state
from explorer.ui.cache import upload_owner


def ask_task_settings(loaded: LoadedModel) -> None:
    """For an uploaded state dict read as a task model: a form for its task, pooling and label names."""
    decision = loaded.caps.decision
    if decision is None or not loaded.id.startswith("upload:") or loaded.meta.get("source") != "state-dict":
        return
    head = decision.head
    with st.expander("Task, pooling and label names: what the weights cannot tell", expanded=bool(head.assumed)):
        if head.assumed:
            st.caption("Assumed: " + " ".join(md(a) for a in head.assumed))
        st.caption("A JSON file beside the weights can say the same: "
                   "`{\"task\": \"classify\", \"pooling\": \"mean\", \"labels\": [\"negative\", \"positive\"]}`.")
        c1, c2 = st.columns(2)
        tag = c1.radio("Task", ["classify", "tag"], index=int(head.per_token), horizontal=True, key="ask_task",
                       format_func={"classify": "a label per sentence", "tag": "a label per word"}.get) == "tag"
        pooling = c2.selectbox("The sentence is read from", POOLINGS, disabled=tag, key="ask_pooling",
                               index=POOLINGS.index(head.pooling) if head.pooling in POOLINGS else 0,
                               format_func=lambda p: POOLING_WHAT.get(p, p))
        typed = st.text_input(f"The {len(head.labels)} label names, in the order of the head's rows, comma-separated",
                              ", ".join(head.labels), key="ask_labels",
                              max_chars=len(head.labels) * (MAX_LABEL_CHARS + 2))
        labels = [name.strip() for name in typed.split(",")]
        if len(labels) != len(head.labels) or not all(labels):
            st.warning(f"Give {len(head.labels)} non-empty names (the head has {len(head.labels)} rows); "
                       f"{len(labels)} were given.")
            return
        if st.button("Apply to this upload", key="ask_apply"):
            try:
                uid = with_task_settings(loaded.id, {"task": "tag" if tag else "classify", "pooling": pooling,
                                                     "labels": labels}, owner=upload_owner())
            except ModelLoadError as exc:
                st.error(md_message(exc))
                return
            st.session_state["_added_upload"] = uid  # the picker exists already: set it on the rerun
            state.write("model", uid)
            st.rerun()
