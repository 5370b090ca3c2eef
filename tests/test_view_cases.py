"""testkit/view_cases.py holds one entry per view, and each entry fits its view."""
from __future__ import annotations

from conftest import view_source
from explorer.views import BY_PATH, VIEWS
from testkit.view_cases import CASES

READS_TEXT = ("sentence_input(", "model_sentence(", "model_and_sentence(")


def test_every_view_has_its_cases_and_only_views_do() -> None:
    assert set(CASES) == {v.url_path for v in VIEWS}
    assert len(CASES) == len(VIEWS)


def test_each_entry_fits_its_view() -> None:
    for path, case in CASES.items():
        view = BY_PATH[path]
        reads_text = any(w in view_source(view.script) for w in READS_TEXT)
        assert (case.hostile is not None) == reads_text, path  # a page with a sentence box has hostile-text cases
        assert (case.word_level is not None) == bool(view.sentences and "text" in view.params), path
        assert bool(case.panels) == bool(view.main), path  # a view with a main chart shows it under a badge
        for state in [*case.panels, *([case.hostile.params] if case.hostile else []),
                      *([case.word_level[1]] if case.word_level else [])]:
            assert set(state) <= {*view.params, "text"}, (path, state)  # only the view's own URL parameters
        if case.word_level and case.word_level[0]:
            assert case.word_level[0].startswith("builtin:"), path  # word-level: a built-in vocabulary
