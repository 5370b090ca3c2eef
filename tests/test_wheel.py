"""`pip install .` brings the app: the wheel built from this checkout, installed in a fresh virtual environment, starts
with `python -m explorer` from another folder, reads its files from the install (not the checkout) and serves a view in
chromium. The wheel holds the product alone: not the test harness (testkit/), which the product never imports.

The fresh environment takes its dependencies from the interpreter running the suite (no network): the site folders on
its sys.path, whatever they are (a virtual environment's, the system's, a conda-like prefix's, the user's). Not
`venv --system-site-packages`, which sees the base interpreter's packages: inside a virtual environment those are
not the ones the user installed."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
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
    shipped = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("explorer/probes/") for n in shipped)
    assert [n for n in shipped if n.startswith("testkit/")] == []  # the product stands without its test harness
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    _see_the_running_packages(python)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True,
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


def site_folders() -> list[str]:
    """The running interpreter's site folders, in its order: each entry of sys.path named site-packages or
    dist-packages (a virtual environment's, the system's, a conda-like prefix's, the user's)."""
    return [p for p in dict.fromkeys(sys.path)
            if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]


def _see_the_running_packages(python: Path) -> None:
    """Make the environment of `python` import the running interpreter's packages after its own: a .pth file in its
    site-packages that adds each of our site folders with site.addsitedir (so their own .pth files, editable installs
    among them, are read too)."""
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    lines = [f"import site; site.addsitedir({folder!r})" for folder in site_folders()]
    (Path(purelib) / "zz_running_interpreter.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_fresh_environment_sees_the_running_packages_after_its_own(tmp_path: Path) -> None:
    """The wheel test's environment imports the files this interpreter imports (streamlit, torch), and reads its own
    site-packages first (so the installed wheel, not the checkout, is the explorer it runs)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    _see_the_running_packages(python)
    code = ("import json, sys, sysconfig, streamlit, torch; "
            "print(json.dumps([streamlit.__file__, torch.__file__, sysconfig.get_paths()['purelib'], sys.path]))")
    streamlit_file, torch_file, own, path = json.loads(subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path, timeout=120).stdout)
    import streamlit
    import torch

    assert (streamlit_file, torch_file) == (streamlit.__file__, torch.__file__)
    assert own.startswith(str(venv)) and all(path.index(own) < path.index(f) for f in site_folders()), path
