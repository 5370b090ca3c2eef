"""AppTest reruns of one st.fragment, as the browser asks for them when a widget inside the fragment changes.

AppTest.run() always reruns the whole script. The browser instead sends the widget states of the whole page with
the fragment's id, and the server reruns only the fragment's function. `run_fragment` does the same through
AppTest's own script runner; afterwards `at` holds the fragment's elements only (what the rerun redrew).
Used by the tests of fragment-scoped views and by bench/.
"""
from __future__ import annotations

from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.testing.v1 import local_script_runner


def fragment_ids(at) -> list[str]:
    """The ids of the fragments the last full run registered, in registration order."""
    storage = at._fragment_storage
    return sorted(storage._fragments, key=lambda fid: storage._registration_sequence_by_id.get(fid, 0))


def page_states(at) -> WidgetStates:
    """The widget states of the whole page, taken after a full run (what the browser keeps sending)."""
    return at._tree.get_widget_states()


def run_fragment(at, fragment_id: str, page: WidgetStates, timeout: float | None = None):
    """Rerun only `fragment_id`. `page` is page_states(at) of the last full run: those widget states are sent,
    updated by the widgets of the current tree (the fragment's, changed with set_value)."""
    states: dict[str, object] = {w.id: w for w in page.widgets}
    states.update({w.id: w for w in at._tree.get_widget_states().widgets})
    sent = WidgetStates()
    sent.widgets.extend(states.values())

    real = local_script_runner.RerunData

    def fragment_rerun(**kwargs):
        return real(**kwargs, fragment_id_queue=[fragment_id])

    local_script_runner.RerunData = fragment_rerun
    try:
        at._run(sent, timeout)
    finally:
        local_script_runner.RerunData = real
    return at
