"""Background fits (explorer/projections/jobs.py) and numba's disk cache (explorer/runtime/numba_cache.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np

from conftest import ROOT
from explorer.runtime import numba_cache
from explorer.projections.reduce import Projection, ProjectionError
from explorer.projections.jobs import FitJobs, wait_all


def _proj(n: int = 3) -> Projection:
    return Projection("umap", 2, {}, np.zeros((n, 2), dtype=np.float32))


def test_one_fit_per_key_however_many_sessions_ask() -> None:
    jobs, calls, gate = FitJobs(4), [], threading.Event()

    def build(progress):
        calls.append(1)
        progress(0.5, "half way")
        gate.wait(10)
        return _proj()

    started = [jobs.start("k", build, "UMAP") for _ in range(5)]
    assert all(j is started[0] for j in started) and jobs.ready("k") is None
    deadline = time.time() + 10
    while started[0].message != "half way" and time.time() < deadline:
        time.sleep(0.01)
    assert started[0].fraction == 0.5 and started[0].status == "running"
    gate.set()
    assert started[0].wait(10) and started[0].status == "done"
    assert calls == [1] and jobs.ready("k") is not None and jobs.job("k") is None
    assert jobs.start("k", build, "UMAP").status == "done" and calls == [1]  # stored: not fitted again


def test_a_failure_is_kept_until_retried() -> None:
    jobs, attempts = FitJobs(4), []

    def build(progress):
        attempts.append(1)
        if len(attempts) == 1:
            raise ProjectionError("UMAP needs at least 4 points.")
        return _proj()

    job = jobs.start("k", build, "UMAP")
    assert job.wait(10) and job.status == "failed" and job.error == "UMAP needs at least 4 points."
    assert jobs.start("k", build, "UMAP") is job and len(attempts) == 1  # every session sees the same failure
    jobs.retry("k")
    again = jobs.start("k", build, "UMAP")
    assert again is not job and again.wait(10) and again.status == "done" and len(attempts) == 2


def test_finished_fits_are_bounded() -> None:
    jobs = FitJobs(2)
    for key in "abc":
        jobs.start(key, lambda progress: _proj(), key).wait(10)
    assert wait_all(10)
    assert jobs.ready("a") is None and jobs.ready("b") is not None and jobs.ready("c") is not None


def test_numba_cache_dir_follows_xdg_and_keeps_a_users_value(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert numba_cache.cache_dir() == tmp_path / "neural-nlp-explorer" / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/somewhere/the/user/chose")
    assert numba_cache.configure() == "/somewhere/the/user/chose"
    assert os.environ["NUMBA_CACHE_DIR"] == "/somewhere/the/user/chose"


def test_importing_the_projections_sets_numbas_cache_before_numba_loads(tmp_path) -> None:
    """In a fresh process, importing explorer.projections.reduce (the one module that imports umap) sets NUMBA_CACHE_DIR
    before numba is imported (by umap, later), and numba uses it; a value the user set is kept."""
    code = ("import sys, explorer.projections.reduce; assert 'numba' not in sys.modules; "
            "import numba.core.config as c; print(c.CACHE_DIR)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         check=False, env={**env, "XDG_CACHE_HOME": str(tmp_path)})
    assert out.stdout.strip() == str(tmp_path / "neural-nlp-explorer" / "numba"), out.stderr[-2000:]
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         check=False, env={**env, "NUMBA_CACHE_DIR": str(tmp_path / "mine")})
    assert out.stdout.strip() == str(tmp_path / "mine"), out.stderr[-2000:]
