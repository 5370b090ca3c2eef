"""One user-facing error base: every error whose message a page shows is an explorer.runtime.errors.ViewError, and
explorer.ui.cache.probe shows one that a probe raises once, escaped, as its class's alert, and stops the page."""
from __future__ import annotations

import ast
import importlib
import re

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT, assert_no_exception, run_page
from explorer.runtime.errors import ViewError
from explorer.text.escape import md_message, md_unescape

# Every error class a page shows: (module, class, the other base callers catch it by, how a page shows it).
SHOWN = [
    ("explorer.adapters.base", "Unsupported", ValueError, "info"),
    ("explorer.adapters.recurrent", "RecurrentInferenceError", ValueError, "info"),
    ("explorer.adapters.generation", "DecodingError", ValueError, "error"),
    ("explorer.files.safe_load", "ModelLoadError", Exception, "error"),
    ("explorer.files.safe_load", "UnsafeFileError", Exception, "error"),
    ("explorer.files.safe_load", "CorruptFileError", Exception, "error"),
    ("explorer.files.vector_text", "EmbeddingError", ValueError, "error"),
    ("explorer.files.vector_text", "EmbeddingFileError", ValueError, "error"),
    ("explorer.loading.loaders", "OutOfMemoryLoadError", Exception, "error"),
    ("explorer.loading.uploads", "UploadBudgetError", Exception, "error"),
    ("explorer.data.tokenizer_safety", "TokenizerError", ValueError, "error"),
    ("explorer.data.user_text", "CorpusError", ValueError, "warning"),
    ("explorer.projections.reduce", "ProjectionError", ValueError, "warning"),
    ("explorer.probes.logit_lens", "LensError", ValueError, "info"),
    ("explorer.probes.token_attribution", "AttributionError", ValueError, "info"),
    ("explorer.probes.gradients_through_time", "GradientError", ValueError, "info"),
    ("explorer.probes.lstm_gates", "RNNGatesError", ValueError, "error"),
    ("explorer.probes.contextual_embeddings", "ContextError", ValueError, None),  # the page says it (st.info)
    ("explorer.lessons", "LessonError", ValueError, "warning"),
    ("explorer.ui.upload_store", "UploadRefused", Exception, "error"),
]
# Exceptions defined in explorer that no page shows as they are.
NOT_SHOWN = {
    "explorer.files.state_dicts.NoWeightsError": "safe_load raises CorruptFileError naming the file instead",
    "explorer.lessons.NotInstalled": "kept in the lesson, which is listed as unavailable with its install command",
    "explorer.training.clock.TrainingCancelled": "control flow: the run the user cancelled ends",
    # shown by explorer/ui/training.py's own except block; explorer/training/ was out of this change's reach
    "explorer.training.budget.TrainBudgetError": "explorer/ui/training.py: except (ValueError, TrainingBusyError)",
    "explorer.training.jobs.TrainingBusyError": "explorer/ui/training.py: except (ValueError, TrainingBusyError)",
}


def _class(module: str, name: str) -> type:
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module, name, base, alert", SHOWN, ids=[n for _, n, _, _ in SHOWN])
def test_every_error_a_page_shows_is_a_view_error(module: str, name: str, base: type, alert: str | None) -> None:
    cls = _class(module, name)
    assert issubclass(cls, ViewError) and issubclass(cls, base)
    if alert is not None:
        assert cls.alert == alert
    if base is Exception:  # not a ValueError: an `except ValueError` elsewhere does not swallow it
        assert not issubclass(cls, ValueError)


def _exception_classes() -> set[str]:
    """Every class defined in explorer/ that derives from an exception (names read from the code, checked by import)."""
    found = set()
    for path in sorted((ROOT / "explorer").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [node.name for node in tree.body if isinstance(node, ast.ClassDef) and node.bases
                 and re.search(r"Error|Exception|Unsupported|Refused", " ".join(map(ast.unparse, node.bases)))]
        if names:
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found |= {f"{module}.{n}" for n in names if issubclass(_class(module, n), BaseException)}
    return found


def test_every_exception_in_the_explorer_is_a_view_error_or_not_shown() -> None:
    """A new error class is a ViewError (its message can reach the page) unless it is named in NOT_SHOWN."""
    found = _exception_classes()
    assert {f"{m}.{n}" for m, n, _, _ in SHOWN} <= found and set(NOT_SHOWN) <= found
    assert sorted(c for c in found if c not in NOT_SHOWN
                  and not issubclass(_class(*c.rsplit(".", 1)), ViewError)) == []
    assert not any(issubclass(_class(*c.rsplit(".", 1)), ViewError) for c in NOT_SHOWN)


def _probe_page(module: str, name: str, raising: bool) -> None:
    """A page whose probe raises `name` with a message quoting Markdown from the URL and the model id."""
    import importlib
    from types import SimpleNamespace

    import streamlit as st

    from explorer.ui.cache import probe

    error = getattr(importlib.import_module(module), name)

    def fails(loaded: object, text: str) -> None:
        raise error(f"{getattr(loaded, 'id')} cannot read '{text}'")

    loaded = SimpleNamespace(id="hf:x/[y](https://example.com)", device="cpu", dtype="float32")
    if raising:
        try:
            probe(fails, loaded, "**bold** <b>", raising=True)
        except error:
            st.markdown("handled by the page")
    else:
        probe(fails, loaded, "**bold** <b>")
    st.markdown("after the probe")


@pytest.mark.parametrize("module, name, alert", [
    ("explorer.probes.logit_lens", "LensError", "info"),
    ("explorer.adapters.generation", "DecodingError", "error"),
    ("explorer.projections.reduce", "ProjectionError", "warning"),
    ("explorer.files.safe_load", "CorruptFileError", "error"),
])
def test_probe_shows_a_view_error_once_escaped_and_stops_the_page(module: str, name: str, alert: str) -> None:
    at = AppTest.from_function(_probe_page, args=(module, name, False), default_timeout=60).run()
    assert_no_exception(at)
    message = "hf:x/[y](https://example.com) cannot read '**bold** <b>'"
    shown = {"info": [e.value for e in at.info], "warning": [e.value for e in at.warning],
             "error": [e.value for e in at.error]}
    assert shown == {**{k: [] for k in shown}, alert: [md_message(message)]}
    assert md_unescape(shown[alert][0]) == message and "](" not in shown[alert][0] and "**" not in shown[alert][0]
    assert [m.value for m in at.markdown] == []  # the page stopped at the probe


def test_probe_raising_true_leaves_the_error_to_the_page() -> None:
    at = AppTest.from_function(_probe_page, args=("explorer.probes.logit_lens", "LensError", True),
                               default_timeout=60).run()
    assert_no_exception(at)
    assert not at.info and not at.warning and not at.error
    assert [m.value for m in at.markdown] == ["handled by the page", "after the probe"]


@pytest.mark.parametrize("page, model, says", [
    ("app_pages/logit_lens.py", "pretrained:minilm",
     "all-MiniLM-L6-v2 (packaged) cannot open in this view: it needs a model that predicts the next token, each layer "
     "readable through its output layer, and this one is of the family “Transformer encoder”. Families that can: RNN "
     "language model; Transformer decoder (causal LM). The view opens on its default."),
    ("app_pages/token_attribution.py", "builtin:word2vec",
     "word2vec (built-in) cannot open in this view: it needs a model that gives its logits as a function of its "
     "input embeddings, and this one is of the family “Word embeddings”."),
    ("app_pages/decoding_strategies.py", "pretrained:minilm",
     "all-MiniLM-L6-v2 (packaged) cannot open in this view: it needs a model that generates token by token"),
])
def test_a_view_its_model_cannot_give_says_why_once(page: str, model: str, says: str) -> None:
    """Issue 57: a model linked to a view it cannot serve is refused from the catalogue's knowledge, before it is
    loaded: said once (a warning naming what the view needs and the families that have it), and the view opens on
    its default model and draws it. (A probe's own error is said once by ui.cache.probe: the tests above.)"""
    at = run_page(page, {"model": model, "text": "the cat sat on the mat"})
    assert_no_exception(at)
    warnings = [md_unescape(e.value) for e in at.warning]
    assert len([w for w in warnings if "cannot open in this view" in w]) == 1, warnings
    assert any(says in w for w in warnings), warnings
    assert not at.error and at.selectbox(key="model").value != model
    assert at.get("plotly_chart")  # the default model's view
