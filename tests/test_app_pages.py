"""AppTest: app.py and every registered page run without an exception element, with and without URL state."""
from __future__ import annotations

import io

import pytest
import torch

from conftest import assert_no_exception, run_page
from explorer.text.escape import md_unescape
from explorer.views import BY_PATH, VIEWS
from testkit.view_cases import CASES

PAGES = [v.script for v in VIEWS]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_with_defaults(page: str) -> None:
    at = run_page(page)
    assert_no_exception(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_with_model_and_text_params(page: str) -> None:
    at = run_page(page, {"model": "pretrained:minilm", "text": "The animal didn't cross the street 🐕\x07"})
    assert_no_exception(at)


def test_home_lists_views_device_and_offline_models() -> None:
    at = run_page("app_pages/overview.py")
    text = " ".join(m.value for m in at.markdown)
    assert "cpu" in text
    for view in VIEWS[1:]:
        assert view.summary in text
    ids = list(at.dataframe[0].value["id"])
    assert "pretrained:minilm" in ids


def test_models_page_loads_minilm_from_url_and_reports_6x12() -> None:
    at = run_page("app_pages/catalogue.py", {"model": "pretrained:minilm"})
    assert_no_exception(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers × heads"] == "6 × 12"
    assert metrics["Device · dtype"] == "cpu · float32"
    assert metrics["Parameters"] == "22,713,216"
    table = at.dataframe[-1].value
    assert "pretrained:minilm" in list(table["id"])


def test_models_page_bad_model_id_in_url_is_a_message(tmp_path) -> None:
    at = run_page("app_pages/catalogue.py", {"model": "local:../../etc"})
    assert_no_exception(at)
    assert any("not a valid" in w.value for w in at.warning)


def test_models_page_unknown_hf_model_is_a_message(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_ALLOW_HUB", "0")
    at = run_page("app_pages/catalogue.py", {"model": "hf:nobody/nothing-here"})
    assert_no_exception(at)
    assert any("nobody/nothing-here" in md_unescape(e.value) and "EXPLORER_MODEL_PATH" in md_unescape(e.value)
               for e in at.error)


def test_models_page_refuses_hostile_pt_upload(tmp_path) -> None:
    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "marker"), "w"))

    buf = io.BytesIO()
    torch.save({"w": torch.zeros(1), "x": Payload()}, buf)
    at = run_page("app_pages/catalogue.py")
    at.file_uploader(key="upload_files").upload("evil.pt", buf.getvalue(), "application/octet-stream").run()
    buttons = [b for b in at.button if b.label == "Add to the catalogue"]
    assert buttons, "the add button appears once files are chosen"
    buttons[0].click().run()
    assert_no_exception(at)
    assert any("refused" in e.value for e in at.error)
    assert not (tmp_path / "marker").exists()


def test_reruns_without_a_new_sentence_do_not_rerun_the_model() -> None:
    """Live typing reruns the page often (each pause, Enter, a click away from the box):
    every rerun whose inputs did not change must be served from the cache, with no model run."""
    from explorer.ui import cache

    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "text": "the keys to the cabinet are here ."})
    assert_no_exception(at)
    before = len(cache.COMPUTE_LOG)
    for _ in range(3):
        at.run()
    assert len(cache.COMPUTE_LOG) == before  # no probe ran again
    at.text_input(key="text").set_value("the key to the cabinets is here .").run()
    assert len(cache.COMPUTE_LOG) > before  # a new sentence does run the model
    after = len(cache.COMPUTE_LOG)
    at.text_input(key="text").set_value("the keys to the cabinet are here .").run()
    assert len(cache.COMPUTE_LOG) == after  # going back to an earlier sentence is cached too


# (page, URL params): every view in each of its panels and modes (testkit/view_cases.py)
BADGED = [(BY_PATH[path].script, params) for path, case in CASES.items() for params in case.panels]
BADGE_KINDS = (":blue-badge[Model]", ":green-badge[Recomputed]", ":orange-badge[Illustration]",
               ":violet-badge[Uploaded vectors]")


def _flat(node):
    for child in getattr(node, "children", {}).values():
        if getattr(child, "children", None):
            yield from _flat(child)
        else:
            yield child


@pytest.mark.parametrize("page,params", BADGED,
                         ids=[f"{p.split('/')[1][:-3]}-{'-'.join(q.values())}" for p, q in BADGED])
def test_every_chart_and_table_says_what_its_numbers_are(page: str, params: dict) -> None:
    """Each chart, data frame and Markdown table of a view sits right under a badge (Model / Recomputed /
    Illustration / Uploaded vectors) whose sentence is not empty."""
    at = run_page(page, params)
    assert_no_exception(at)
    elements = list(_flat(at.main))
    shown = 0
    for i, el in enumerate(elements):
        value = str(getattr(el, "value", "")) if el.type in ("markdown", "caption") else ""
        if el.type in ("plotly_chart", "dataframe") or "|---" in value:
            before = elements[i - 1] if i else None
            label = str(getattr(before, "value", "")) if before is not None and before.type == "caption" else ""
            assert label.startswith(BADGE_KINDS), (page, params, el.type, label[:80])
            assert len(label.split("] ", 1)[1]) > 10
            shown += 1
    assert shown, "no chart or table on this page state"
