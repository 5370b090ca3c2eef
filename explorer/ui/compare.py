"""Two models side by side in a view: `?compare=<model id>` names the second one (another model, or another step of
the same model's training: `builtin:lstm-lm@640`). The view reads the same sentence with both, draws both charts on a
shared scale with each model's id in its title, and their difference where the shapes match."""
from __future__ import annotations

from typing import Iterable

import streamlit as st

from explorer.loading.catalogue import ModelId, series_steps, vocabulary_key
from explorer.text.escape import md, md_message
from explorer.files.safe_load import ModelLoadError
from explorer.ui import state
from explorer.ui.cache import session_catalogue
from explorer.ui.widgets import refused

KEY = "compare"
NONE = "none"


OTHER_TOKENS = " · other tokens"  # a label's end: B − A cannot be drawn (the pages say why once picked)


def options(needs: Iterable[str] | None, model_id: str, same_tokens: bool = False) -> dict[str, str]:
    """id -> label of what `model_id` can be compared with: the other steps of its training (when it has snapshots),
    then the other models of known families that may have the capabilities the view `needs`. same_tokens: the view
    subtracts the two models' numbers position by position, so a model known (catalogue.vocabulary_key) to cut
    sentences into other tokens than `model_id` says so in its label, before it is picked: it is drawn beside, with
    no B − A."""
    out: dict[str, str] = {NONE: "Compare with…"}  # nothing compared; short enough for a projector's font
    steps = series_steps(model_id)
    if steps:
        base = ModelId.parse(model_id).base
        for step in steps[:-1]:
            out[f"{base}@{step}"] = f"step {step:,} of this model"
        out[base] = f"step {steps[-1]:,} of this model (trained)"
    own = vocabulary_key(model_id) if same_tokens else None
    for entry in session_catalogue():
        if needs is None or (entry.family and entry.may_have(needs)):
            other = vocabulary_key(entry.id) if own is not None else None
            out.setdefault(entry.id, entry.label + (OTHER_TOKENS if other is not None and other != own else ""))
    out.pop(model_id, None)
    return out


def compare_picker(needs: Iterable[str] | None, model_id: str, same_tokens: bool = False, **kwargs: object
                   ) -> str | None:
    """The "Compare with" selectbox (?compare=): the id of the second model, or None. An id in the URL that is not
    offered (e.g. hf:<repo>) is offered too, so that links work; a malformed one is ignored with a message.
    same_tokens: the view draws B − A position by position (`options`)."""
    labels = options(needs, model_id, same_tokens)
    raw = state.url_value(KEY)
    if raw and raw == model_id:  # the view's own model: nothing to compare (B − A would be 0 by construction)
        st.info(f"Ignoring ?{KEY}=: {md(raw)} is the model shown; compare it with another model or another step of "
                "its training.")
        state.drop_url_value(KEY)
    elif raw and raw not in labels and raw != NONE and \
            (why := refused(raw, needs, session_catalogue(), "Nothing is compared.")):
        st.warning(f"Ignoring ?{KEY}=: {why}")  # decided from the catalogue: nothing was loaded to find it out
        state.drop_url_value(KEY)
    elif raw and raw not in labels and raw != NONE:
        try:
            ModelId.parse(raw)
            labels[raw] = raw
        except ModelLoadError as exc:
            st.warning(f"Ignoring ?{KEY}=: {md_message(exc)}")
    if st.session_state.get(KEY) not in labels:
        st.session_state.pop(KEY, None)
    chosen = state.choice(st.selectbox, "Compare with", list(labels), KEY, NONE, format_func=labels.get, **kwargs)
    return None if chosen == NONE else chosen
