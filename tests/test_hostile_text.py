"""Hostile text on every page that reads a sentence (AppTest): through ?text= and through the text box.

No exception; no st.error; where the text cannot be used (or only in part) an info/warning says why; where it
can, the page still draws its charts; and text typed by a user never reaches the browser as HTML.
"""
from __future__ import annotations

import html
from dataclasses import asdict
from pathlib import Path

import pytest

from conftest import assert_no_exception, run_page, view_source
from explorer.text.escape import md
from explorer.views import BY_PATH, VIEWS
from testkit.view_cases import CASES
from hostile import HOSTILE_TEXTS, HTML_CASES, UNUSABLE, bytelevel_gpt2, raw_html_in

# Every page whose script has the main sentence input (widget key "text", ?text=).
TEXT_PAGES = [v.script for v in VIEWS if any(f"{w}(" in view_source(v.script)
                                             for w in ("sentence_input", "model_sentence", "model_and_sentence"))]

# page script -> what it says about hostile text (testkit/view_cases.py: Hostile)
SETUP: dict[str, dict] = {BY_PATH[path].script: asdict(case.hostile) for path, case in CASES.items() if case.hostile}
WIDGET_CASES = ["control-only", "combining-only", "script"]


def expected_message(page: str, case: str) -> str | None:
    """What the page must say about this text (None: the text is usable as it is)."""
    cfg = SETUP[page]
    if case in UNUSABLE:
        return cfg["empty"] if case == "empty" else cfg["unreadable"] or cfg["empty"]
    if case == "combining-only":
        return cfg["marks"]
    if case == "3000-words":
        return cfg["long"]
    if case in ("emoji", "cjk"):
        return cfg["unknown"]
    return None if cfg["subword"] else cfg["unknown"]  # rtl, html, control-mixed: unknown to word-level models


def _elements(block):
    for child in getattr(block, "children", {}).values():
        yield child
        yield from _elements(child)


def _notes(at) -> str:
    return " | ".join(str(e.value) for e in [*at.info, *at.warning]).replace("\\", "")


def assert_no_user_html(at) -> None:
    """No raw <script>/<img> in anything the browser renders as HTML (st.html, markdown with unsafe_allow_html)."""
    for el in [*_elements(at.main), *_elements(at.sidebar)]:
        if el.type == "html":
            assert not raw_html_in(el.proto.body), el.proto.body[:300]
        elif getattr(el, "allow_html", False):
            assert not raw_html_in(el.value), el.value[:300]


def check_page(at, page: str, case: str) -> None:
    assert_no_exception(at)
    assert not at.error, [e.value for e in at.error]
    message = expected_message(page, case)
    if message:
        assert message in _notes(at), f"{page} / {case}: expected {message!r} in {_notes(at)!r}"
    if case not in UNUSABLE and case != "combining-only":
        assert at.get("plotly_chart"), f"{page} / {case}: no chart for usable text"
    assert_no_user_html(at)


def test_every_text_page_is_set_up() -> None:
    assert set(TEXT_PAGES) == set(SETUP), "a page reads the sentence input: add it to SETUP"


@pytest.mark.parametrize("case", list(HOSTILE_TEXTS))
@pytest.mark.parametrize("page", TEXT_PAGES)
def test_hostile_text_in_the_url(page: str, case: str) -> None:
    at = run_page(page, {**SETUP[page]["params"], "text": HOSTILE_TEXTS[case]})
    check_page(at, page, case)
    if page == "app_pages/word_embeddings.py" and case in HTML_CASES:  # shown literally, as text
        first = HOSTILE_TEXTS[case].split()[0]
        assert f"'{md(first)}'" in " ".join(w.value for w in at.warning)  # escaped: the browser shows it as typed


@pytest.mark.parametrize("case", WIDGET_CASES)
@pytest.mark.parametrize("page", TEXT_PAGES)
def test_hostile_text_typed_in_the_box(page: str, case: str) -> None:
    at = run_page(page, {**SETUP[page]["params"], "text": "the dog"})
    assert_no_exception(at)
    at.text_input(key="text").set_value(HOSTILE_TEXTS[case]).run()
    check_page(at, page, case)
    assert at.query_params.get("text") in (HOSTILE_TEXTS[case], [HOSTILE_TEXTS[case]])  # written back to the URL


@pytest.fixture(scope="module")
def bytelevel_model(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bytemodels")
    bytelevel_gpt2(root / "bytes-gpt2")
    return root


@pytest.mark.parametrize("case", HTML_CASES)
def test_typed_html_reaches_the_page_escaped(bytelevel_model: Path, monkeypatch, case: str) -> None:
    """A byte-level tokenizer keeps the typed text exactly: the generated tokens shown with st.html (the output
    columns) are escaped, never markup; Markdown elements carry no user HTML."""
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(bytelevel_model))
    text = HOSTILE_TEXTS[case]
    at = run_page("app_pages/decoding_strategies.py", {"model": "local:bytes-gpt2", "text": text, "max_new": "5"})
    assert_no_exception(at)
    assert not at.error, [e.value for e in at.error]
    bodies = [h.proto.body for h in at.get("html") if not h.proto.body.lstrip().startswith("<style>")]
    assert bodies and all(text not in body for body in bodies) and text != html.escape(text)
    assert_no_user_html(at)
