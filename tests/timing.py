"""Time limits that hold on a busy machine (CI next to other jobs, the suite beside a benchmark).

A limit is stated for this project's idle 2-core machine and scaled by how much slower a fixed unit of work runs
right now, timed just before and just after the code under test: on a machine 3× slower or 3× more loaded, a 1 s
limit allows 3 s, while a quadratic regression (minutes) still fails."""
from __future__ import annotations

import hashlib
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

IDLE_UNIT_S = 0.026  # unit() on the project's machine (2 cores, Python 3.11, one core free): median of 5 runs


def _work() -> int:
    """CPU-bound and single-threaded like the code under test: Python bytecode and a C hash."""
    digest = hashlib.sha256()
    block = b"unit of work" * 5000
    for _ in range(300):
        digest.update(block)
    return sum(i * i for i in range(400_000)) + digest.digest()[0]


def unit(runs: int = 3) -> float:
    """Seconds for one unit of work now (the median of `runs`)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        _work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def slowdown() -> float:
    """How many times slower than the idle reference this machine runs now (at least 1)."""
    return max(1.0, unit() / IDLE_UNIT_S)


def scaled(seconds: float) -> float:
    """A timeout or limit of `seconds` on the idle machine, for this machine now."""
    return seconds * slowdown()


@dataclass
class Timed:
    elapsed: float = 0.0
    limit: float = 0.0


@contextmanager
def within(seconds: float, what: str = "") -> Iterator[Timed]:
    """Assert that the block runs within `seconds` on the idle machine, scaled by the slowdown measured before and
    after it (the larger)."""
    before = slowdown()
    timed = Timed()
    start = time.perf_counter()
    yield timed
    timed.elapsed = time.perf_counter() - start
    factor = max(before, slowdown())
    timed.limit = seconds * factor
    assert timed.elapsed < timed.limit, (f"{what or 'the block'} took {timed.elapsed:.2f} s: over {seconds} s on an "
                                         f"idle machine × {factor:.1f} (this machine's slowdown now)")
