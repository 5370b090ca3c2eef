"""explorer.ui.widget_guard: which widget states from the websocket a widget can read (the replay against a running
server, every widget of three views: tests/test_hostile_student.py)."""
from __future__ import annotations

from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime.state.session_state import SessionState

from explorer.ui import widget_guard as G


def test_a_value_of_another_kind_a_number_not_finite_and_json_that_does_not_parse_are_refused() -> None:
    assert G.problem(WidgetState(double_value=2.5), "double_value") == ""
    assert G.problem(WidgetState(string_value="x"), "double_value") == "expects a number, got text"
    assert G.problem(WidgetState(double_value=float("nan")), "double_value") == "got nan, not a finite number"
    assert G.problem(WidgetState(double_value=float("inf")), None) == "got inf, not a finite number"
    assert G.problem(WidgetState(int_value=3), "string_value") == "expects text, got a whole number"
    doubles = WidgetState()
    doubles.double_array_value.data.extend([1.0, float("nan")])
    assert G.problem(doubles, "double_array_value") == "got a number that is not finite"
    assert G.problem(WidgetState(json_value='{"value": "the dog"}'), "json_value") == ""
    assert G.problem(WidgetState(json_value="{not json"), "json_value") == "got JSON that does not parse"
    assert G.problem(WidgetState(), "file_uploader_state_value") == ""  # no value: an upload box with no files


def test_the_guard_drops_refused_states_before_streamlit_reads_them_and_keeps_the_rest() -> None:
    from streamlit.proto.WidgetStates_pb2 import WidgetStates
    from streamlit.runtime.state.common import WidgetMetadata

    G.install()
    G.install()  # once per process, however often the app script runs
    state = SessionState()
    for wid, kind in (("$$ID-1-steps", "double_value"), ("$$ID-2-text", "string_value")):
        state._new_widget_state.set_widget_metadata(WidgetMetadata(wid, lambda v: v, lambda v: v, kind))
    sent = WidgetStates()
    sent.widgets.extend([WidgetState(id="$$ID-1-steps", double_value=float("nan")),
                         WidgetState(id="$$ID-2-text", string_value="the dog runs")])
    state.set_widgets_from_proto(sent)
    assert [w.id for w in sent.widgets] == ["$$ID-2-text"]
    assert state["$$ID-2-text"] == "the dog runs"
    assert state[G.KEY] == ["“steps” got nan, not a finite number"]
    assert getattr(SessionState.set_widgets_from_proto, "_explorer_guard", False)


def test_a_whole_number_for_a_number_box_is_read_as_that_number_not_refused() -> None:
    """Lesson 3's RoPE step warned "seed expects a number, got a whole number": a browser that kept a control's
    earlier kind sends the other number field. Where nothing is lost the value is moved to the field the widget
    registered; a fraction for a whole-number box is still refused."""
    from streamlit.proto.WidgetStates_pb2 import WidgetStates
    from streamlit.runtime.state.common import WidgetMetadata

    moved = G.as_expected(WidgetState(id="s", int_value=7), "double_value")
    assert moved.WhichOneof("value") == "double_value" and moved.double_value == 7.0 and moved.id == "s"
    assert G.as_expected(WidgetState(double_value=3.0), "int_value").int_value == 3
    fraction = WidgetState(double_value=2.5)
    assert G.as_expected(fraction, "int_value") is fraction
    assert G.problem(fraction, "int_value") == "expects a whole number, got a number"
    G.install()
    state = SessionState()
    state._new_widget_state.set_widget_metadata(WidgetMetadata("$$ID-1-seed", lambda v: v, lambda v: v,
                                                               "double_value"))
    sent = WidgetStates()
    sent.widgets.extend([WidgetState(id="$$ID-1-seed", int_value=4)])
    state.set_widgets_from_proto(sent)
    assert state["$$ID-1-seed"] == 4.0 and G.KEY not in state
