"""Probe a running Explorer container from the host, as a browser would (used by deploy/image/build-and-run.sh).

Waits for /_stcore/health, then opens each view over the websocket with the project's own client
(testkit/st_protocol.py) and waits for its first run to finish. Prints one JSON object:

    {"health_ok": true, "health_seconds": 7.9, "cold_start_seconds": 11.2,
     "views": [{"page": "lstm-gates", "query": "model=builtin:lstm-lm", "status": "ok", "seconds": 3.2,
                "elements": 41, "charts": 3}, ...]}

`--started` is the wall-clock time (epoch seconds) the container was started: health_seconds and
cold_start_seconds (container start -> the first view's run finished, i.e. its first chart is on screen) count
from it.

    python deploy/image/probe.py --base http://127.0.0.1:8501 --started "$(date +%s.%N)" \
        --view "lstm-gates?model=builtin:lstm-lm" --view "logit-lens?model=pretrained:smollm2"
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: testkit

from testkit.st_protocol import Session  # noqa: E402


class ChartCountingSession(Session):
    """A Session that also counts the Plotly charts a run draws (the "first chart" of the cold start)."""

    charts: int = 0

    def _read_element(self, el, fragment_id, strings):  # type: ignore[no-untyped-def]
        if el.WhichOneof("type") == "plotly_chart":
            self.charts += 1
        return super()._read_element(el, fragment_id, strings)


def wait_healthy(base: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


async def open_view(base: str, view: str, timeout: float) -> dict:
    page, _, query = view.partition("?")
    out: dict = {"page": page, "query": query}
    try:
        async with ChartCountingSession(base, page, query) as s:
            run = await s.rerun(timeout=timeout)
        out.update(status=run.status, seconds=round(run.seconds, 2), elements=run.elements, charts=s.charts)
    except Exception as exc:  # a refused websocket or a run that never finished: reported, not raised
        out.update(status=f"error: {type(exc).__name__}: {exc}"[:300], seconds=None, elements=0, charts=0)
    out["finished_at"] = time.time()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="http://host:port of the running app")
    ap.add_argument("--started", type=float, required=True, help="epoch seconds the container was started")
    ap.add_argument("--view", action="append", required=True, help="url path and query, e.g. lstm-gates?model=…")
    ap.add_argument("--health-timeout", type=float, default=180)
    ap.add_argument("--run-timeout", type=float, default=300)
    args = ap.parse_args()

    report: dict = {"health_ok": wait_healthy(args.base, args.health_timeout)}
    report["health_seconds"] = round(time.time() - args.started, 2) if report["health_ok"] else None
    views = []
    if report["health_ok"]:
        for view in args.view:  # one after the other: the first is the cold start
            views.append(asyncio.run(open_view(args.base, view, args.run_timeout)))
    first = views[0] if views else None
    report["cold_start_seconds"] = (round(first["finished_at"] - args.started, 2)
                                    if first and first["status"] == "ok" and first["charts"] else None)
    for v in views:
        v.pop("finished_at")
    report["views"] = views
    print(json.dumps(report))
    return 0 if report["health_ok"] and views and all(v["status"] == "ok" and v["charts"] for v in views) else 1


if __name__ == "__main__":
    raise SystemExit(main())
