"""Shared widgets: the sentence input (key `text`), the model picker (key `model`), page furniture."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import streamlit as st

from explorer.catalogue import ModelId, catalogue
from explorer.safe_load import ModelLoadError
from explorer.ui import settings, state

MAX_CHARS = state.MAX_CHARS


def forget_sentence_input() -> None:
    """Drop the sentence input's memory (the live input's last text, the preset choice, the text carried between
    views), so that the next view seeds it from `text` in the session or the URL."""
    for key in ("_text", "_st_keyup_text"):
        st.session_state.pop(key, None)
    st.session_state["_text_rev"] = st.session_state.get("_text_rev", 0) + 1


def _set_text(value: str) -> None:
    st.session_state["text"] = value
    forget_sentence_input()  # the live input adopts the new value


def _seed_text(default: str) -> None:
    """Seed the sentence from the URL, the text carried from the last view, or `default`. A sentence that is still
    a default the app put there (`_text_default`; never a typed, chosen or linked one) follows the model and the
    view: when their default changes, the sentence becomes the new default."""
    if "text" not in st.session_state:
        raw = state.url_value("text")
        if raw is not None:
            st.session_state["text"], st.session_state["_text_default"] = raw[:MAX_CHARS], None
        elif "_text" in st.session_state:
            st.session_state["text"] = st.session_state["_text"]
        else:
            st.session_state["text"], st.session_state["_text_default"] = default, default
    auto = st.session_state.get("_text_default")
    if auto is not None and auto != default and st.session_state["text"] == auto:
        _set_text(default)
        st.session_state["_text_default"] = default


def sentence_presets(default: str, presets: Sequence[str]) -> None:
    """The teaching-sentence menu of the sentence input: a choice replaces the sentence and reruns the app.
    sentence_input draws it; a page that keeps the sentence in an st.fragment draws it just above the fragment
    (it reruns the whole app anyway), and the fragment calls sentence_input without presets."""
    _seed_text(default)
    choice = st.selectbox(
        "Presets", ["— choose a teaching sentence —", *presets], key=f"_preset_{st.session_state.get('_text_rev', 0)}",
        label_visibility="collapsed",
    )
    if choice in presets and choice != st.session_state.get("text"):
        _set_text(choice)
        st.session_state["_text_default"] = None  # chosen: it stays when the model changes
        st.rerun()


def sentence_input(default: str, presets: Sequence[str] = (), label: str = "Sentence",
                   help: str | None = None) -> str:
    """The main sentence input: widget key `text`, seeded from ?text=, written back to the URL.

    Live (debounced) updates with streamlit-keyup when "Update while typing" is on, else st.text_input.
    Presets are one click each. Returns the current text (may be empty: the view must say what to do).
    """
    _seed_text(default)
    if presets:
        sentence_presets(default, presets)
    value = None
    if settings.live_default() and st.session_state.get("live", True):
        try:
            from st_keyup import st_keyup

            value = st_keyup(label, value=st.session_state["text"], key="text", debounce=350,
                             max_chars=MAX_CHARS, placeholder="Type a sentence…")
        except Exception:  # component unavailable: fall back to the plain input
            value = None
    if value is None:
        value = st.text_input(label, key="text", max_chars=MAX_CHARS, help=help)
    value = str(value or "")
    st.session_state["_text"] = value
    state.write("text", value)
    return value


def model_sentence(loaded: Any, purpose: str, fragment: bool = False, **kwargs: Any) -> str:
    """The sentence input with the loaded model's own example sentences for `purpose` (its view's
    `View.sentences`): the default and the preset menu come from `loaded.adapter.examples(purpose)`, with its note
    when the model reads none of them in full. fragment=True: only the box (the page drew the presets with
    model_presets above its st.fragment)."""
    ex = loaded.adapter.examples(purpose)
    if fragment:
        return sentence_input(ex.default, (), **kwargs)
    text = sentence_input(ex.default, ex.sentences, **kwargs)
    if ex.note:
        st.caption(ex.note)
    return text


def model_presets(loaded: Any, purpose: str) -> str:
    """The loaded model's preset menu alone (a page whose sentence box is inside an st.fragment); returns the
    default sentence for the fragment's box."""
    ex = loaded.adapter.examples(purpose)
    sentence_presets(ex.default, ex.sentences)
    if ex.note:
        st.caption(ex.note)
    return ex.default


def model_picker(families: Iterable[str] | None, default: str, label: str = "Model", key: str = "model",
                 extra: Sequence[str] = (), none_label: str | None = None) -> str:
    """Choose a catalogue id (kept in ?model=). `families`: keys of explorer.catalogue.FAMILIES this view can read.

    An id from the URL that is not in the offline catalogue (e.g. hf:<repo>) is offered too, so links work.
    With `none_label`, the first option is "none" (shown as none_label): an optional second model.
    """
    allowed = set(families) if families is not None else None
    entries = [e for e in catalogue() if allowed is None or e.family in allowed or e.family == ""]
    labels = {e.id: e.label for e in entries}
    options = [e.id for e in entries] + [x for x in extra if x not in labels]
    if none_label is not None:
        options.insert(0, "none")
        labels["none"] = none_label
    raw = state.url_value(key)
    if raw and raw not in options:
        try:
            ModelId.parse(raw)
            options.append(raw)
        except ModelLoadError as exc:
            st.warning(f"Ignoring ?{key}=: {exc}")
    if not options:
        options = [default]
    if default not in options:
        default = options[0]
    return state.choice(st.selectbox, label, options, key, default, format_func=lambda i: labels.get(i, i))


def page_header(title: str, summary: str) -> None:
    st.title(title)
    st.caption(summary)


def what_to_notice(points: Sequence[str]) -> None:
    with st.expander("What to notice", expanded=settings.projector()):
        for p in points:
            st.markdown(f"- {p}")
