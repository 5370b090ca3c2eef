"""Server capacity without browsers: N simulated sessions speak Streamlit's websocket protocol (testkit/st_protocol.py).

Shared by tests/test_serve.py, tests/test_scale_out.py and bench/bench_serve.py. The sessions are spread evenly
over three views (self-attention on MiniLM, the recurrent cell on the built-in LSTM LM, decoding on the built-in
GPT). Each opens its view (the first run), then every `think` seconds (uniform in the range) types a new sentence
(a rerun with the new widget state, or a fragment rerun where the input lives in a fragment) and waits for the
script to finish. Every sentence is `TEMPLATE` with a noun triple no other sentence of the run uses, so the run's
output can be checked: the session's own sentence must be drawn (chart axes, prompt) and no other session's.

Measured per rerun: seconds from the request to `script_finished` as the client sees it (queueing included).
Per run: errors, cross-talk, the server's peak RSS and CPU use, and the load generator's own CPU.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from testkit.load_scenario import NOUNS, RssSampler, cpu_seconds, machine, tree_rss_bytes
from testkit.st_protocol import Run, Session, query

VIEWS = {  # url path -> query parameters of the opened view
    "self-attention": {"model": "pretrained:minilm"},
    "lstm-gates": {"model": "builtin:lstm-lm"},
    "decoding-strategies": {"model": "builtin:tiny-gpt"},
}
# the real packaged model, SmolLM2-135M-Instruct, in the views a class reads it with (their defaults for it)
REAL_VIEWS = {
    "logit-lens": {"model": "pretrained:smollm2"},
    "self-attention": {"model": "pretrained:smollm2"},
    "decoding-strategies": {"model": "pretrained:smollm2"},
}
TEMPLATE = "the {} near the {} likes the old {}"  # 9 words: 11 tokens with MiniLM's [CLS]/[SEP], 10 with <bos>
_TRIPLES = list(itertools.permutations(NOUNS, 3))
random.Random(0).shuffle(_TRIPLES)
# the template as drawn anywhere: chart axes ("3 · near"), JSON ("\u00b7"), HTML (tags between), prompts
_SEP = r"(?:[^a-z]|u00b7)+"
_FOUND = re.compile(rf"\bthe{_SEP}([a-z]+){_SEP}near{_SEP}the{_SEP}([a-z]+){_SEP}"
                    rf"likes{_SEP}the{_SEP}old{_SEP}([a-z]+)\b")


def sentence(k: int) -> str:
    """The k-th sentence of a run (distinct for k < 6,840)."""
    return TEMPLATE.format(*_TRIPLES[k % len(_TRIPLES)])


def sentences_drawn(run: Run) -> set[str]:
    """Every sentence of the template that the run drew."""
    return {TEMPLATE.format(*m) for text in run.strings for m in _FOUND.findall(text.lower())}


@dataclass
class Rerun:
    session: int
    view: str
    seconds: float
    at: float  # seconds since the start of the measured window


@dataclass
class ServeResult:
    """Figures of one run: rerun seconds, errors ("session i: …"), cross-talk, server memory and CPU."""

    sessions: int
    think: tuple[float, float]
    duration: float
    reruns: list[Rerun]
    opens: list[float]  # seconds of each session's first run
    errors: list[str]
    cross_talk: list[str]
    peak_rss_bytes: int
    rss_end_bytes: int
    server_cpu_seconds: float  # over the measured window, all server processes
    generator_cpu_seconds: float
    wall_seconds: float
    machine: str
    replicas: int = 1
    upstreams: dict[str, int] = field(default_factory=dict)  # upstream address -> sessions (behind a proxy)
    views: dict[str, dict[str, str]] = field(default_factory=lambda: dict(VIEWS))  # the views the sessions opened

    def seconds(self, view: str | None = None) -> np.ndarray:
        return np.array([r.seconds for r in self.reruns if view in (None, r.view)], dtype=np.float64)

    def stats(self, view: str | None = None) -> dict:
        xs = self.seconds(view)
        if not xs.size:
            return {"reruns": 0, "p50_s": float("nan"), "p95_s": float("nan"), "max_s": float("nan")}
        return {"reruns": int(xs.size), "p50_s": float(np.percentile(xs, 50)),
                "p95_s": float(np.percentile(xs, 95)), "max_s": float(xs.max())}

    @property
    def server_cpu_percent(self) -> float:
        return 100.0 * self.server_cpu_seconds / self.wall_seconds if self.wall_seconds else 0.0

    def row(self) -> str:
        """A row of docs/serving.md's table: sessions | reruns | p50 | p95 | max | per view p95 | errors | cross-talk |
        RSS | CPU."""
        s = self.stats()
        per_view = " / ".join(f"{self.stats(v)['p95_s']:.2f}" for v in self.views)
        return (f"| {self.sessions} | {s['reruns']} | {s['p50_s']:.2f} s | {s['p95_s']:.2f} s | {s['max_s']:.2f} s | "
                f"{per_view} s | {len(self.errors)} | {len(self.cross_talk)} | {self.peak_rss_bytes / 2**20:,.0f} MiB "
                f"| {self.server_cpu_percent:.0f} % |")

    def to_json(self) -> dict:
        d = asdict(self)
        d["summary"] = {"all": self.stats(), **{v: self.stats(v) for v in self.views},
                        "server_cpu_percent": self.server_cpu_percent}
        return d


async def _user(i: int, base: str, view: str, start_at: float, end_at: float, think: tuple[float, float],
                counter: itertools.count, out: ServeResult, t0: list[float], keep: list[Session] | None) -> None:
    rng = random.Random(i)
    own = sentence(next(counter))
    s = Session(base, view, query(**out.views[view], text=own))
    try:
        await s.connect()
        if s.upstream:
            out.upstreams[s.upstream] = out.upstreams.get(s.upstream, 0) + 1
        run = await s.rerun()
        out.opens.append(run.seconds)
        _check(i, view, run, own, out)
        await asyncio.sleep(max(0.0, start_at - time.monotonic()) + rng.uniform(*think))
        while time.monotonic() < end_at:
            own = sentence(next(counter))
            run = await s.set_text("text", own)
            out.reruns.append(Rerun(i, view, run.seconds, time.monotonic() - t0[0]))
            _check(i, view, run, own, out)
            await asyncio.sleep(rng.uniform(*think))
    except Exception as exc:  # a session that fails is counted, the others go on
        out.errors.append(f"session {i} ({view}): {type(exc).__name__}: {exc}"[:300])
    finally:
        if keep is not None:
            keep.append(s)
            s.last_sentence = own  # type: ignore[attr-defined]
        else:
            await s.close()


def _check(i: int, view: str, run: Run, own: str, out: ServeResult) -> None:
    if run.status != "ok":
        out.errors.append(f"session {i} ({view}): {run.status}")
    drawn = sentences_drawn(run)
    if own not in drawn:
        said = " | ".join(t[:120] for t in run.strings if not t.startswith(("{", "[")))[:600]
        out.errors.append(f"session {i} ({view}): its sentence {own!r} was not drawn; the page drew: {said}")
    for other in drawn - {own}:
        out.cross_talk.append(f"session {i} ({view}) drew {other!r}")


async def simulate(base: str, n: int, duration: float, think: tuple[float, float] = (2.0, 4.0),
                   server_pids: tuple[int, ...] = (), keep: list[Session] | None = None,
                   views_opened: dict[str, dict[str, str]] | None = None) -> ServeResult:
    """Run n sessions against `base` for `duration` seconds after all have opened their view (spread evenly over
    `views_opened`, default VIEWS: url path -> query parameters).

    keep: if given, sessions are left connected and appended to it (to test reconnection)."""
    chosen = dict(VIEWS if views_opened is None else views_opened)
    views = list(chosen)
    out = ServeResult(n, think, duration, [], [], [], [], 0, 0, 0.0, 0.0, 0.0, machine(), views=chosen)
    counter = itertools.count()
    samplers = [RssSampler(pid) for pid in server_pids]
    for sampler in samplers:
        sampler.__enter__()
    try:
        opened_by = time.monotonic() + 10 + 0.3 * n  # first runs of all sessions, queued on the server
        t0 = [opened_by]
        end_at = opened_by + duration
        tasks = [_user(i, base, views[i % len(views)], opened_by, end_at, think, counter, out, t0, keep)
                 for i in range(n)]
        cpu0 = sum(cpu_seconds(p) for p in server_pids)
        gen0 = time.process_time()
        wall0 = time.monotonic()
        await asyncio.gather(*tasks)
        out.wall_seconds = time.monotonic() - wall0
        out.server_cpu_seconds = sum(cpu_seconds(p) for p in server_pids) - cpu0
        out.generator_cpu_seconds = time.process_time() - gen0
    finally:
        for sampler in samplers:
            sampler.__exit__(None, None, None)
    out.peak_rss_bytes = sum(s.peak for s in samplers)
    out.rss_end_bytes = sum(tree_rss_bytes(p) for p in server_pids)
    return out


def write_json(results: list[ServeResult], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.to_json() for r in results], indent=1))
    return path


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
