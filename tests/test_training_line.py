"""Issue 57, item 5: training input is bounded and read once; the single training slot is shared fairly (a line,
first come first served, the position shown, a cooldown for a session that just trained while others wait)."""
from __future__ import annotations

import pytest

from conftest import assert_no_exception, run_page
from explorer.data import user_text
from explorer.training.jobs import TrainingLine

TEXT = "The dog runs to the park. The cat sleeps on the warm mat. " * 20


def test_the_line_is_first_come_first_served_and_says_each_place() -> None:
    line = TrainingLine(cooldown=120, ttl=15)
    assert line.refusal("a", now=0) == ""  # nobody waits: a session may take a free slot
    assert line.wait("a", now=0) == 1 and line.wait("b", now=1) == 2 and line.wait("c", now=2) == 3
    assert line.refusal("a", now=3) == ""
    assert line.refusal("c", now=3) == "2 session(s) are ahead of you in line"
    assert line.wait("b", now=4) == 2  # renewing keeps the place
    line.leave("a")
    assert line.refusal("b", now=5) == "" and line.wait("c", now=5) == 2


def test_a_place_not_renewed_is_given_up() -> None:
    line = TrainingLine(cooldown=120, ttl=15)
    line.wait("closed-tab", now=0)
    line.wait("b", now=1)
    assert line.refusal("b", now=10) == "1 session(s) are ahead of you in line"
    assert line.refusal("b", now=16) == ""  # the closed tab's place lapsed after 15 s


def test_a_session_that_just_trained_lets_the_others_go_first() -> None:
    line = TrainingLine(cooldown=120, ttl=15)
    line.ended("a", now=0)
    assert line.refusal("a", now=10) == ""  # nobody else waits: no reason to make it wait
    line.wait("b", now=10)
    why = line.refusal("a", now=20)
    assert "finished training 20 s ago" in why and "1 other session(s)" in why and "100 s more" in why
    assert line.refusal("b", now=20) == ""
    line.wait("b", now=120)  # b still waits (its page renews its place)
    assert line.refusal("a", now=121) == "1 session(s) are ahead of you in line"  # cooldown over: in line, after b


def test_pasted_text_is_bounded_named_on_the_page_and_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from explorer.ui import training

    calls: list[int] = []
    real = user_text.corpus_from_text

    def counted(text: str, **kwargs):
        calls.append(len(text))
        return real(text, **kwargs)

    monkeypatch.setattr(training, "corpus_from_text", counted)
    at = run_page("app_pages/catalogue.py")
    at.radio(key="train_corpus").set_value("My text").run()
    box = at.text_area(key="train_text")
    assert box.max_chars == user_text.MAX_CHARS == 1_000_000 and "at most 1,000,000 characters" in box.label
    box.input(TEXT).run()
    assert_no_exception(at)
    at.number_input(key="train_epochs").set_value(3).run()  # another setting: the text is not read again
    at.run()
    assert calls.count(len(TEXT)) == 1 and len(calls) == len(set(calls))  # each distinct text read once
    assert any("sentences" in c.value and "tokens" in c.value for c in at.caption)
    with pytest.raises(user_text.CorpusError, match="limit is 1,000,000"):
        user_text.corpus_from_text("a " * 500_001)
    with pytest.raises(user_text.CorpusError, match="limit is 4 MB"):
        user_text.read_uploaded_text(b"a" * 4_000_001)
