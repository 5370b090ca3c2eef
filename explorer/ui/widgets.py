"""Shared widgets: the sentence input (key `text`), the model picker (key `model`), page furniture."""
from __future__ import annotations

import re

from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TypedDict, Unpack

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.adapters.protocols import Loaded
from explorer.adapters.capabilities import WHAT, families_with
from explorer.loading.catalogue import FAMILIES, CatalogueEntry, ModelId, series_steps
from explorer.ui.training_steps import step_control
from explorer.files.safe_load import ModelLoadError
from explorer.runtime.device import is_large
from explorer.text.escape import md, md_message
from explorer.ui import settings, state
from explorer.ui.cache import get_model, session_catalogue
from explorer.ui.charts import record
from explorer.ui.sentence_box import forget, forget_sentence_input, sentence_box

if TYPE_CHECKING:
    from explorer.loading.loaders import LoadedModel
    from explorer.views import View

MAX_CHARS = state.MAX_CHARS
MULTILINE_HELP = "Enter starts a new line; Ctrl+Enter (or clicking away) updates the view."
ON_ENTER_HELP = ("This view computes for seconds on a model of this size, so it reads the sentence when you press "
                 "Enter (or click away), not at each pause in your typing.")


class BoxOptions(TypedDict, total=False):
    """What a page may say of its sentence box (sentence_input's keyword arguments) besides its label."""

    help: str | None
    on_enter: bool


class SentenceOptions(BoxOptions, total=False):
    label: str


def reads_on_enter(view: View, loaded: Loaded) -> bool:
    """Whether `view` reads its sentence on Enter for `loaded`: a heavy view (explorer.views.View.heavy: decoding,
    attribution, interventions) on a model above explorer.runtime.device.LARGE_MODEL parameters, where one run takes
    seconds; every other view updates while typing (350 ms debounce)."""
    return bool(getattr(view, "heavy", False)) and is_large(getattr(loaded, "model", None))


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
            st.session_state["text"], st.session_state["_text_default"] = raw, None  # url_value: within MAX_CHARS
        elif "_text" in st.session_state:
            st.session_state["text"] = st.session_state["_text"]
        else:
            st.session_state["text"], st.session_state["_text_default"] = default, default
    auto = st.session_state.get("_text_default")
    if auto is not None and auto != default and st.session_state["text"] == auto:
        _set_text(default)
        st.session_state["_text_default"] = default


def _examples_menu(presets: Sequence[str]) -> None:
    """The sentence box's "Examples" popover: a choice replaces the sentence and reruns the whole app (also from
    inside an st.fragment)."""
    with st.popover("Examples", icon=":material/format_list_bulleted:", width="stretch",
                    help="The loaded model's example sentences"):
        choice = st.radio("Example sentences", list(presets), index=None, format_func=md,  # options are Markdown
                          key=f"_preset_{st.session_state.get('_text_rev', 0)}")
    if choice is not None and choice in presets and choice != st.session_state.get("text"):
        _set_text(choice)
        st.session_state["_text_default"] = None  # chosen: it stays when the model changes
        st.rerun()


def sentence_input(default: str, presets: Sequence[str] = (), label: str = "Sentence",
                   help: str | None = None, on_enter: bool = False) -> str:
    """The main sentence input: widget key `text`, seeded from ?text=, written back to the URL.

    The wrapping sentence box (explorer.ui.sentence_box: the whole sentence in view) read 350 ms after the last key
    while "Update while typing" is on, else on Enter; st.text_input where the live box is off (EXPLORER_LIVE_INPUT=0);
    a text area when the sentence has a line break or "Sentence on several lines" is on (a one-line box drops line
    breaks). The text is returned as typed: the model reads it that way. on_enter: the view computes for seconds on
    this model (`reads_on_enter`), so the box is read when Enter is pressed (or it loses focus), never on a typing
    pause: a half-typed sentence starts no run.
    Presets: the "Examples" popover beside the box. Returns the current text (may be empty: the view must say what to
    do).
    """
    _seed_text(default)
    box = st
    if presets:
        box, menu = st.columns([3.3, 1.4], vertical_alignment="bottom")
        with menu:
            _examples_menu(presets)
    refused = state.text_refusal(str(st.session_state.get("text") or ""), MAX_CHARS, md(label))
    if refused:  # sent over the websocket (a browser keeps to max_chars): not read, not echoed back to the box
        st.error(refused)
        st.session_state["text"] = st.session_state.get("_text", default)  # the last sentence read, or the default
        forget_sentence_input()
    value = None
    multiline = bool(st.session_state.get("multiline")) or "\n" in str(st.session_state.get("text") or "")
    kind = "area" if multiline else "line"
    if st.session_state.get("_text_box", kind) != kind:  # another kind of box: it starts from the sentence read last
        current = st.session_state.get("text")
        st.session_state["text"] = current if current is not None else st.session_state.get("_text", default)
        forget("text")  # the live box shows that sentence, not the one it last sent
    st.session_state["_text_box"] = kind
    if multiline:
        # a one-line box would drop the line breaks: the model reads the text as typed, line breaks included
        value = box.text_area(label, key="text", max_chars=MAX_CHARS, help=help or MULTILINE_HELP)
    elif settings.live_default():
        live = st.session_state.get("live", True) and not on_enter
        with box:
            value = sentence_box(label if live else f"{label} (Enter to run)", st.session_state["text"], "text",
                                 MAX_CHARS, mode="pause" if live else "enter", placeholder="Type a sentence…",
                                 help=help if live else (help + " " if help else "") + ON_ENTER_HELP)
    elif on_enter:
        value = box.text_input(f"{label} (Enter to run)", key="text", max_chars=MAX_CHARS,
                               help=(help + " " if help else "") + ON_ENTER_HELP)
    if value is None:
        value = box.text_input(label, key="text", max_chars=MAX_CHARS, help=help)
    value = state.checked_text(value, MAX_CHARS, md(label))  # over the limit: a message, and the page stops
    st.session_state["_text"] = value
    state.write("text", value)
    return value


def model_sentence(loaded: Loaded, purpose: str, **kwargs: Unpack[SentenceOptions]) -> str:
    """The sentence input with the loaded model's own example sentences for `purpose` (its view's
    `View.sentences`): the default and the "Examples" menu come from `loaded.adapter.examples(purpose)`, with its
    note when the model reads none of them in full."""
    ex = loaded.adapter.examples(purpose)
    text = sentence_input(ex.default, ex.sentences, **kwargs)
    if ex.note:
        st.caption(md_message(ex.note))
    return text


PICKER_CHARS = 18  # what the model box shows whole at a projector's font beside the sentence box


def _short(model_id: str, label: str) -> str:
    """A model's name for projector mode: its label without its origin ("(packaged)"), or its catalogue name
    (minilm-sentiment) when the label is longer than the box shows."""
    name = re.sub(r" \([^()]*\)$", "", label)
    return name if len(name) <= PICKER_CHARS else model_id.split(":", 1)[-1]


def refused(model_id: str, needs: Iterable[str] | None, known: Sequence[CatalogueEntry],
            then: str = "The view opens on its default.") -> str:
    """Why a catalogue model cannot serve a view that `needs` those capabilities, from what the catalogue knows (its
    family's, or what it was found to have with its own head), before anything is loaded; "" when it may, or when
    it is not in the catalogue (an hf: or local: id is known only once loaded). Names what the view needs and the
    kinds of model that have it."""
    base = model_id.partition("@")[0]
    entry = next((e for e in known if e.id == base), None)
    if entry is None or not entry.family or entry.may_have(needs):
        return ""
    lacks = [n for n in (needs or ()) if not entry.may_have((n,))]
    kinds = [FAMILIES[f] for f in families_with(tuple(needs or ())) if f in FAMILIES and f != "state-dict"]
    return (f"{md(entry.label)} cannot open in this view: it needs a model that "
            f"{' and '.join(WHAT[n] for n in lacks)}, and this one is of the family "
            f"“{md(FAMILIES.get(entry.family, entry.family))}”"
            + (f". Families that can: {'; '.join(kinds)}." if kinds else ".") + f" {then}")


def model_picker(needs: Iterable[str] | None, default: str, label: str = "Model", key: str = "model",
                 extra: Sequence[str] = (), none_label: str | None = None, training_steps: bool = True,
                 **kwargs: object) -> str:
    """Choose a catalogue id (kept in ?model=) among the models that may have the capabilities the view `needs`
    (explorer.adapters.capabilities; a model whose family is known only once loaded is offered too). The view's
    model (key "model") trained with snapshots gets the training-step control under the picker
    (explorer.ui.training_steps; training_steps=False: not), and the id returned is that of the chosen step's model.

    An id from the URL that is not in the offline catalogue (e.g. hf:<repo>) is offered too, so links work.
    With `none_label`, the first option is "none" (shown as none_label): an optional second model. kwargs go to
    st.selectbox (e.g. label_visibility).
    """
    known = session_catalogue()
    entries = [e for e in known if e.may_have(needs)]
    # projector mode: the name without its origin ("(packaged)", "(built-in)"), so that the large font shows it whole
    labels = {e.id: _short(e.id, e.label) if settings.projector() else e.label for e in entries}
    options = [e.id for e in entries] + [x for x in extra if x not in labels]
    if none_label is not None:
        options.insert(0, "none")
        labels["none"] = none_label
    raw = state.url_value(key)
    if raw and raw not in options and (why := refused(raw, needs, known)):
        st.warning(f"Ignoring ?{key}=: {why}")  # decided from the catalogue: nothing was loaded to find it out
        state.drop_url_value(key)
    elif raw and raw not in options:
        try:
            ModelId.parse(raw)
            options.append(raw)
        except ModelLoadError as exc:
            st.warning(f"Ignoring ?{key}=: {md_message(exc)}")
    if not options:
        options = [default]
    if default not in options:
        default = options[0]
    steps = training_steps and key == "model"
    current = st.session_state.get(key) or state.url_value(key) or default  # what this run will show
    if steps and series_steps(str(current)):  # the training-step button beside the picker, on the same line
        col_pick, col_step = st.columns([1.15, 1], vertical_alignment="bottom")  # "end", "640" whole at 20 px
    else:
        col_pick = col_step = st.container()
        if steps and "help" not in kwargs:  # why there is no training-step control (the tooltip takes no room)
            with_series = [e.id for e in entries if series_steps(e.id)]
            have = " and ".join(md(m) for m in with_series)
            kwargs["help"] = (f"{md(str(current))} was trained without snapshots, so it has no training-step control"
                              + (f"; {have} have one (Watch it learn draws their training)." if have else "."))
    with col_pick:
        chosen = state.choice(st.selectbox, label, options, key, default, format_func=lambda i: labels.get(i, i),
                              **kwargs)
    if not steps:
        return chosen
    with col_step:
        return step_control(chosen)


def follow_preset(values: Sequence[str] | None, keys: Sequence[str]) -> None:
    """Widgets that belong with the sentence (the interventions view's corrupted prompt and continuations): when the
    sentence becomes an example with `values`, the widgets `keys` take them; on a page's first run, a value in the URL
    wins over its example's."""
    sentence = str(st.session_state.get("text") or "").strip()
    last = st.session_state.get("_preset_for")
    if values is None or last == sentence:
        return
    for key, value in zip(keys, values):
        if last is not None or state.url_value(key) is None:
            st.session_state[key] = value
    st.session_state["_preset_for"] = sentence


def top_row() -> list[DeltaGenerator]:
    """The row under the title: the model picker (left) and the sentence box with its examples (right). Pages
    draw into it with `with`; the view's controls and main chart follow, so they fit in the first screen."""
    return st.columns([1, 2.6], vertical_alignment="bottom")


def model_and_sentence(c: state.Controls, default: str | None = None, task: str | None = None,
                       label: str | Callable[[LoadedModel], str] = "Sentence",
                       **kwargs: Unpack[BoxOptions]) -> tuple[str, LoadedModel, str]:
    """top_row() for a view with one model and one sentence (`c`: its explorer.ui.state.Controls): the model
    picker (default: the view's declared model; task: the head to load, see get_model) and, once the model is
    loaded, the sentence box with that model's examples for the view (label: text, or made from the loaded model;
    kwargs go to sentence_input). Stops the page when the model does not load. Returns (model id, model, text)."""
    col_model, col_text = top_row()
    with col_model:
        model_id = model_picker(c.view.needs, default=default or c.params["model"].default)
        loaded = get_model(model_id, task=task)
    if loaded is None:
        st.stop()
    with col_text:
        kwargs.setdefault("on_enter", reads_on_enter(c.view, loaded))
        text = model_sentence(loaded, c.view.sentences, label=label(loaded) if callable(label) else label, **kwargs)
    return model_id, loaded, text


def page_header(title: str, summary: str) -> None:
    """The view's title and one-line summary (in projector mode, the summary is the title's tooltip: the first
    screen is for the chart)."""
    record("title", ("title", title, summary))
    if settings.projector():
        st.title(title, help=summary)
    else:
        st.title(title)
        st.caption(summary)


def what_to_notice(points: Sequence[str]) -> None:
    record("notice", ("notice", list(points)))
    with st.expander("What to notice", expanded=settings.projector()):
        for p in points:
            st.markdown(f"- {p}")
