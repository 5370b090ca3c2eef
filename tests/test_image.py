"""The image, built and run on this machine: deploy/image/build-and-run.sh builds a Debian bookworm base with
debootstrap, the app image from the Dockerfile with buildah (BASE=that base), runs it with podman on a network with no
route off the machine, opens two views over the websocket and writes a report; this test asserts on the report.

Slow, so it runs only where asked: EXPLORER_IMAGE_TEST=1, as root, with buildah, podman and debootstrap installed
(`deploy/image/build-and-run.sh --install-tools` installs them on Debian). Measured on 2 cores: about 6 minutes from
nothing (base 1, image 4.5, most of it pip and the warm-up's numba compilation), about 2.5 when only the app's code
changed (the warm-up reruns), about 15 s when nothing changed (every layer cached).

    EXPLORER_IMAGE_TEST=1 pytest -m image tests/test_image.py
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "image" / "build-and-run.sh"

pytestmark = [pytest.mark.slow, pytest.mark.image]


def _why_not() -> str:
    if os.environ.get("EXPLORER_IMAGE_TEST") != "1":
        return "builds the image (minutes): set EXPLORER_IMAGE_TEST=1 to run it"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (debootstrap, rootful podman)"
    missing = [t for t in ("buildah", "podman", "debootstrap", "slirp4netns") if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install buildah podman debootstrap slirp4netns runc)"
    return ""


def test_the_image_builds_runs_offline_as_non_root_and_serves_two_views(tmp_path: Path) -> None:
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    env = dict(os.environ, EXPLORER_IMAGE_WORK=str(tmp_path))
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    report_path = tmp_path / "report.json"
    assert report_path.exists(), f"no report (exit {done.returncode}):\n{done.stderr[-4000:]}"
    report = json.loads(report_path.read_text())
    assert report["health_ok"], report
    assert [v["page"] for v in report["views"]] == ["lstm-gates", "logit-lens"]
    for view in report["views"]:
        assert view["status"] == "ok", view  # the run finished without an exception element
        assert view["charts"] >= 1, view
    assert report["cold_start_seconds"] is not None and report["cold_start_seconds"] > 0
    assert report["image_healthcheck"] == "healthy"
    assert report["uids"] == [10001] and report["non_root"], report["processes"]
    assert report["hf_hub_offline"]
    assert not report["hub_reached"], report["from_container"]
    assert all(v != "reached" for v in report["from_container"].values()), report["from_container"]
    assert report["image_size_bytes"] > 0 and report["build_seconds"] > 0
    assert report["ok"] and done.returncode == 0, done.stderr[-4000:]
