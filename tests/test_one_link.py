"""Issue 57: one link changes one student's page, never the class's app. A view decides from the catalogue whether a
model can serve it before loading it; a load with another head is remembered apart; only the views' default models
are pinned; a URL number that is not finite is a message; the view's own model as `compare=` is said, not drawn."""
from __future__ import annotations

import pytest

from conftest import assert_no_exception, needs_smollm2, run_page
from explorer.loading import catalogue
from explorer.ui.cache import model_cache


def _texts(at) -> str:
    return "\n".join(str(e.value) for kind in (at.warning, at.info, at.error) for e in kind).replace("\\", "")


@needs_smollm2
@pytest.mark.parametrize("param", ["compare", "model"])
def test_a_model_that_cannot_serve_the_view_is_refused_without_loading_it(param: str) -> None:
    before = model_cache().loads
    at = run_page("app_pages/masked_words.py", {param: "pretrained:smollm2"})
    assert_no_exception(at)
    said = _texts(at)
    assert ("SmolLM2-135M-Instruct (packaged) cannot open in this view: it needs a model that reads a sentence both "
            "ways (an encoder), and this one is of the family “Transformer decoder (causal LM)”. Families that can: "
            "Transformer encoder; Masked language model (bidirectional encoder that fills in [MASK]).") in said
    assert said.count("cannot open in this view") == 1  # said once, not again by the URL's own check
    assert not model_cache().has("pretrained:smollm2", "cpu", "float32", "masked-lm")
    loaded = [m.id for m in model_cache().loaded()]
    assert "pretrained:smollm2" not in loaded or model_cache().loads - before <= 1  # at most the view's own model
    assert at.selectbox(key="model").value == "pretrained:minilm-mlm"  # the view opens on its default


def test_a_load_with_another_head_changes_nothing_another_session_is_offered(monkeypatch: pytest.MonkeyPatch
                                                                             ) -> None:
    """What a model was found to have is remembered per (id, head): SmolLM2 (or any model) loaded as a masked LM
    leaves the pickers offering it by its own head's capabilities."""
    from explorer.runtime.lru import LoadOnceLRU

    monkeypatch.setattr(catalogue, "_FOUND", LoadOnceLRU(catalogue.FOUND_KEPT))  # this process's record left alone
    own = frozenset({"attention", "stepper", "lens"})
    catalogue.found("builtin:tiny-gpt", own)
    catalogue.found("builtin:tiny-gpt", frozenset({"attention"}), task="masked-lm")
    entry = next(e for e in catalogue.catalogue() if e.id == "builtin:tiny-gpt")
    assert entry.caps == own


def test_the_views_own_model_as_compare_is_said_not_drawn() -> None:
    at = run_page("app_pages/masked_words.py", {"compare": "pretrained:minilm-mlm"})
    assert_no_exception(at)
    assert "pretrained:minilm-mlm is the model shown" in _texts(at).replace("\\", "")


@pytest.mark.parametrize("raw", ["inf", "-inf", "1e400", "nan"])
def test_a_training_step_that_is_not_a_finite_number_is_a_message(raw: str) -> None:
    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "train_step": raw})
    assert_no_exception(at)
    assert f"Ignoring ?train_step={raw}: not a value this control takes" in _texts(at).replace("\\", "")


LESSON = """title: "Caption test \u202eexe.live"
steps:
  - title: "Step \u202egnp.exe"
    page: lstm-gates
    caption: "See [this](javascript:alert(9)), [that](JaVaScRiPt&#58;alert(1)), <vbscript:msgbox(1)>,
      [the docs](https://example.org/a_(b)) and [step 2](/lstm-gates?model=builtin:lstm-lm)."
    question: "[q](data:text/html;base64,PHNjcmlwdD4=) or ![i](javascript:alert(2))"
"""


def test_lesson_text_is_inert_in_the_panel_and_the_export() -> None:
    """Issue 57, item 6: links in a lesson's captions keep http(s) and in-app targets only; a right-to-left override
    is shown as a visible mark, in the lesson panel and in the HTML export."""
    from explorer.lessons import parse_lesson
    from explorer.text.escape import inert_markdown

    lesson = parse_lesson(LESSON, "hostile")
    step = lesson.steps[0]
    assert "\u202e" not in lesson.title + step.title + step.caption
    assert lesson.title == "Caption test ⟨U+202E⟩exe.live" and step.title == "Step ⟨U+202E⟩gnp.exe"
    assert "javascript" not in step.caption.lower().replace("\\", "") + step.question.lower()
    assert "data:" not in step.question and "[the docs](https://example.org/a_(b))" in step.caption
    assert "[step 2](/lstm-gates?model=builtin:lstm-lm)" in step.caption
    assert "\\<vbscript\\:msgbox(1)\\>" in step.caption
    assert inert_markdown("👩\u200d💻 [a](mailto:x@y.z)") == "👩\u200d💻 a"  # the emoji joiner stays
    from explorer.ui.export import lesson_html

    page = lesson_html(lesson, {})  # the export: the same parsed text, escaped for HTML
    assert "\u202e" not in page and "exe.live" in page and "⟨U+202E⟩" in page
    import re

    text = re.sub(r"(?s)<script.*?</script>", "", page)  # plotly.js names javascript: in its own sanitiser
    assert "javascript" not in text.lower() and "alert(" not in text and "https://example.org/a_(b)" in text


def test_an_unexpected_error_reaches_the_page_without_its_traceback() -> None:
    """Issue 57, item 4: the app's own config (read by `streamlit run` and by the wheel's launcher) shows an error's
    type and a short message, never a traceback or a server path; Streamlit logs the whole traceback on the server."""
    import tomllib

    from conftest import ROOT
    from explorer.startup.launch import config_options

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "type"
    assert "--client.showErrorDetails=type" in config_options(ROOT / ".streamlit" / "config.toml")
