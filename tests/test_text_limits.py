"""Text length is enforced on the server (issue 27): a widget value, a URL value or a text box over its limit gets a
message naming the limit and its setting, and nothing is computed from it; ?strategies= longer than the decoding
view allows keeps its first six."""
from __future__ import annotations

from conftest import assert_no_exception, run_page

from explorer.ui.cache import COMPUTE_LOG
from explorer.ui.state import MAX_CHARS
from explorer.views import KINDS

LSTM = "app_pages/lstm_gates.py"
OVER = f"is {MAX_CHARS + 1:,} characters long, over the limit of {MAX_CHARS:,} characters (set EXPLORER_MAX_CHARS " \
       "to change it)"


def _messages(at) -> list[str]:
    return [e.value for e in (*at.error, *at.warning)]


def test_a_sentence_over_the_limit_from_the_live_input_is_not_read(monkeypatch) -> None:
    """The live sentence box (explorer.ui.sentence_box, the app's default) copies what the client sent into
    st.session_state["text"] in its change callback, without max_chars: a websocket client sent 10 MB that way (the
    plain st.text_input cuts its value at max_chars itself). The test puts the value where that callback does."""
    monkeypatch.setenv("EXPLORER_LIVE_INPUT", "1")
    at = run_page(LSTM, {"model": "builtin:lstm-lm", "text": "the dog runs"})
    assert_no_exception(at)
    computed = len(COMPUTE_LOG)
    at.session_state["text"] = "a" * (MAX_CHARS + 1)
    at.run()
    assert_no_exception(at)
    assert f"Sentence {OVER}: it was not read. Shorten it." in _messages(at)
    assert at.session_state["text"] == "the dog runs"  # the last sentence read stays
    assert at.query_params["text"] == "the dog runs"
    assert len(COMPUTE_LOG) == computed  # nothing computed: the page shows the cached run of the last sentence


def test_a_url_value_over_the_limit_is_ignored_with_a_message() -> None:
    at = run_page(LSTM, {"model": "builtin:lstm-lm", "text": "b" * (MAX_CHARS + 1)})
    assert_no_exception(at)
    assert f"?text= {OVER}: it was ignored." in _messages(at)
    assert at.session_state["text"] != "b" * (MAX_CHARS + 1) and len(at.session_state["text"]) < 200
    at = run_page(LSTM, {"model": "builtin:lstm-lm", "text": "b" * MAX_CHARS})  # at the limit: read
    assert_no_exception(at)
    assert not [m for m in _messages(at) if "over the limit" in m] and at.session_state["text"] == "b" * MAX_CHARS


def _box_script() -> None:
    import streamlit as st

    from explorer.ui.state import checked_text

    title = checked_text(st.session_state.get("title", ""), 200, "The step title", stop=False)
    st.write(f"title of {len(title)} characters")
    word = checked_text(st.session_state.get("word", "king"), 200, "Word")
    st.write(f"computed for {len(word)} characters")


def test_checked_text_refuses_a_text_over_its_limit_before_it_is_used() -> None:
    """The check every text entry point calls (explorer.ui.state.checked_text): a message naming the limit, then
    the page stops, or (stop=False: a box beside the page's work, such as a lesson step's title) reads "" instead."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_box_script, default_timeout=30)
    at.run()
    assert [m.value for m in at.markdown] == ["title of 0 characters", "computed for 4 characters"]
    at.session_state["title"], at.session_state["word"] = "t" * 201, "w" * 201
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "The step title is 201 characters long, over the limit of 200 characters: it was not read. Shorten it.",
        "Word is 201 characters long, over the limit of 200 characters: it was not read. Shorten it."]
    assert [m.value for m in at.markdown] == ["title of 0 characters"]  # the page stopped before the word was used


def test_seven_strategies_in_a_link_keep_the_first_six() -> None:
    at = run_page("app_pages/decoding_strategies.py", {"model": "builtin:tiny-gpt", "text": "the dog", "max_new": "2",
                                                       "n": "1", "strategies": ",".join(KINDS)})
    assert_no_exception(at)
    assert len(KINDS) == 7
    assert "Strategies (2 to 6): at most 6 may be chosen; got 7, using the first 6." in _messages(at)
    assert at.multiselect(key="strategies").value == list(KINDS[:6])
    assert at.query_params["strategies"] == ",".join(KINDS[:6])
    at.multiselect(key="strategies").set_value(list(KINDS)).run()  # seven sent as the widget's value
    assert_no_exception(at)
    assert at.multiselect(key="strategies").value == list(KINDS[:6])
