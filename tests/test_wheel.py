"""`pip install .` brings the app: the wheel built from this checkout, installed in a fresh virtual environment
(its dependencies from this one's, --system-site-packages: no network), starts with `python -m explorer` from
another folder, reads its files from the install (not the checkout) and serves a view in chromium."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_process, wait_for_app

pytestmark = pytest.mark.slow


def test_the_wheel_installs_and_serves_a_view(tmp_path: Path) -> None:
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    elsewhere.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(ROOT)], check=True, cwd=tmp_path, timeout=600)
    wheel = next(dist.glob("neural_nlp_explorer-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   cwd=elsewhere, timeout=600)
    where = subprocess.run([str(python), "-c", "import explorer, explorer.runtime.paths as p; "
                            "print(explorer.__file__); print(p.app_root())"], check=True, cwd=elsewhere,
                           capture_output=True, text=True, timeout=120).stdout.split()
    assert where[0].startswith(str(venv)) and where[1] == str(venv / "share" / "neural-nlp-explorer"), where
    assert (venv / "bin" / "neural-nlp-explorer").is_file()  # the console script
    from playwright.sync_api import sync_playwright

    with streamlit_process(launcher=[str(python), "-m", "explorer"], cwd=elsewhere, timeout=180) as (base, proc), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/lstm-gates?model=builtin:lstm-lm&text=the keys to the cabinet are")
        wait_for_app(page)
        page.locator(".st-key-heatmap .js-plotly-plot").wait_for(timeout=120_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator("h1").first.inner_text().startswith("Inside the recurrent cell")
        browser.close()
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    # the server runs the installed app with the app's own config (read from the install, not the current folder)
    assert str(venv / "share" / "neural-nlp-explorer" / "app.py").encode() in cmdline
    assert b"--runner.postScriptGC=false" in cmdline and b"--server.maxUploadSize=250" in cmdline
