"""Widget values from the websocket, checked like URL values before a script reads them.

A browser sends each widget's value in the field of its kind (a number box a double or an int, a text box a string,
a slider an array of doubles, …), but anything can write to the websocket: Streamlit takes the field it is given,
and a text box that receives a number, or a number box NaN, raises in that session's script on every rerun until the
page is reloaded. `install()` puts a check in front of Streamlit's own reading of a rerun's widget states (once per
process): a value whose field is not the one the widget registered, a non-finite number, or JSON that does not parse
is dropped, so the widget keeps the value it had (its default in a new session), and `show_rejected()` says which
control ignored what, once, at the top of the page.
"""
from __future__ import annotations

import json
import math
import threading
import streamlit as st
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from streamlit.runtime.state.session_state import SessionState

from explorer.text.escape import md

KEY = "_explorer_rejected_widgets"
_KINDS = {"double_value": "a number", "int_value": "a whole number", "string_value": "text", "bool_value": "on/off",
          "double_array_value": "numbers", "int_array_value": "choices", "string_array_value": "choices",
          "json_value": "JSON", "trigger_value": "a press", "string_trigger_value": "text",
          "json_trigger_value": "JSON", "bytes_value": "bytes", "arrow_value": "a table",
          "file_uploader_state_value": "files"}
_LOCK = threading.Lock()


_NUMBERS = ("double_value", "int_value")


def as_expected(state: WidgetState, expected: str | None) -> WidgetState:
    """`state` with a number sent in the other number field moved to the `expected` one where nothing is lost (a
    whole number for a number box, a whole double for a whole-number box: a browser that kept a control's earlier
    kind sends either); else `state` itself."""
    got = state.WhichOneof("value")
    if got == expected or got not in _NUMBERS or expected not in _NUMBERS:
        return state
    value = getattr(state, got)
    if got == "double_value" and not (math.isfinite(value) and value == int(value) and abs(value) < 2 ** 53):
        return state
    moved = WidgetState(id=state.id)
    setattr(moved, expected, float(value) if expected == "double_value" else int(value))
    return moved


def problem(state: WidgetState, expected: str | None) -> str:
    """Why one WidgetState proto cannot be read by a widget registered for the field `expected` ("" if it can)."""
    got = state.WhichOneof("value")
    if got is None:  # no value: the widget's own (a file uploader with no files; Streamlit reads it as unset)
        return ""
    if expected and got != expected:
        return f"expects {_KINDS.get(expected, expected)}, got {_KINDS.get(got, got)}"
    if got == "double_value" and not math.isfinite(state.double_value):
        return f"got {state.double_value}, not a finite number"
    if got == "double_array_value" and not all(math.isfinite(v) for v in state.double_array_value.data):
        return "got a number that is not finite"
    if got in ("json_value", "json_trigger_value"):
        try:
            json.loads(getattr(state, got))
        except ValueError:
            return "got JSON that does not parse"
    return ""


def _key(widget_id: str) -> str:
    """The user key of a widget id ("$$ID-<hash>-<key>"), else the id."""
    key = widget_id.rsplit("-", 1)[-1] if widget_id.startswith("$$ID") else widget_id
    return key if key and key != "None" else widget_id


def install() -> None:
    """Check every rerun's widget states in this process (idempotent)."""
    with _LOCK:
        if getattr(SessionState.set_widgets_from_proto, "_explorer_guard", False):
            return
        original = SessionState.set_widgets_from_proto

        def set_widgets_from_proto(self: SessionState, widget_states: WidgetStates) -> None:
            known = self._new_widget_state.widget_metadata
            kept, rejected = [], []
            changed = False
            for state in widget_states.widgets:
                meta = known.get(state.id)
                expected = meta.value_type if meta is not None else None
                moved = as_expected(state, expected)
                changed |= moved is not state
                why = problem(moved, expected)
                if why:
                    rejected.append(f"“{_key(state.id)}” {why}")
                else:
                    kept.append(moved)
            if rejected or changed:
                del widget_states.widgets[:]
                widget_states.widgets.extend(kept)
            if rejected:
                self._new_session_state[KEY] = rejected
            original(self, widget_states)

        set_widgets_from_proto._explorer_guard = True  # type: ignore[attr-defined]
        SessionState.set_widgets_from_proto = set_widgets_from_proto  # type: ignore[method-assign]


def show_rejected() -> None:
    """Say, once, which controls ignored a value sent to them (and why)."""
    rejected = st.session_state.pop(KEY, None)
    if rejected:
        st.warning("Ignored a value sent for " + "; ".join(md(r) for r in rejected[:5])
                   + ": each control kept the value it had.", icon=":material/block:")
