"""A closed tab's session, once shut down, holds nothing (explorer/ui/reconnect.py): checked against the installed
Streamlit's own session state, whose internals the sweeper empties (the server-level replays are in
tests/test_hostile_student.py: an uploaded model's memory comes back after its tab closes)."""
from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

from streamlit.runtime.state.common import WidgetMetadata
from streamlit.runtime.state.session_state import SessionState

from explorer.ui import reconnect


class Model:
    """Stands for a loaded model that a picker's format function closes over."""


def test_emptying_a_session_drops_its_widget_values_and_the_metadata_that_closes_over_models(monkeypatch) -> None:
    state = SessionState()
    model = Model()
    alive = weakref.ref(model)
    fmt = (lambda m: lambda v: f"{v} of {id(m)}")(model)  # noqa: E731 (a picker's format_func)
    meta = WidgetMetadata("$$ID-picker", fmt, fmt, "string_value")
    state._set_widget_metadata(meta)
    state._new_widget_state.set_from_value("$$ID-picker", "upload:1")
    state["files"] = bytearray(10)  # an upload box's copy of its files
    del model, fmt, meta
    assert state._new_widget_state.widget_metadata and "files" in state
    reconnect._empty(SimpleNamespace(_session_state=state))
    gc.collect()
    assert "files" not in state and not state._new_widget_state.widget_metadata
    assert not state._new_widget_state.states
    assert alive() is None  # nothing of the session keeps the model


def test_a_session_is_closed_after_its_reconnect_window_and_the_window_is_a_setting(monkeypatch) -> None:
    closed: list[str] = []
    sessions = {sid: SimpleNamespace(id=sid, _session_state=SessionState()) for sid in ("a", "b", "live")}
    rt = SimpleNamespace(
        _session_mgr=SimpleNamespace(list_sessions=lambda: [SimpleNamespace(session=s) for s in sessions.values()]),
        is_active_session=lambda sid: sid == "live", close_session=closed.append)
    monkeypatch.setattr(reconnect.runtime, "get_instance", lambda: rt)
    first: dict[str, float] = {"a": 100.0}  # "a" has been without a websocket since t = 100
    assert reconnect.close_expired(first, now=120.0, window=30.0) == [] and first == {"a": 100.0, "b": 120.0}
    assert reconnect.close_expired(first, now=131.0, window=30.0) == ["a"] and closed == ["a"]
    assert reconnect.close_expired(first, now=151.0, window=30.0) == ["b"] and "live" not in closed
    monkeypatch.setenv("EXPLORER_RECONNECT_S", "5")
    assert reconnect.reconnect_seconds() == 5.0
