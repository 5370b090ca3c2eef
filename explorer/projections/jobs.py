"""Projections fitted in the background, shared by every browser session of a server process.

    jobs = FitJobs(max_items=8)
    proj = jobs.ready(key)                      # the stored fit, or None
    job = jobs.start(key, build, label)         # starts (or joins) the one fit for `key`: build(progress) -> Projection
    job.fraction, job.message, job.status       # "running" | "done" | "failed" (job.error: a message for the user)

One fit per key per process: a second request for a key that is being fitted joins that job. Finished fits are
kept in a LoadOnceLRU (at most max_items, least recently used evicted); failed jobs are kept (at most
MAX_FAILED) so every session sees the message until someone asks again (`retry`). At most MAX_RUNNING fits
compute at once (2 cores are shared); the others wait for a slot, saying so.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable

from explorer.runtime.lru import LoadOnceLRU
from explorer.projections.reduce import Progress, Projection, ProjectionError

MAX_RUNNING = 2
MAX_FAILED = 16
_SLOTS = threading.BoundedSemaphore(MAX_RUNNING)
_ALL: set[FitJob] = set()  # unfinished jobs of every registry (tests and benches wait for them)
_ALL_LOCK = threading.Lock()


@dataclass(eq=False)
class FitJob:
    """One background fit. fraction in [0, 1]; message: the fit's last progress line."""

    key: Hashable
    label: str
    status: str = "running"  # running | done | failed
    fraction: float = 0.0
    message: str = "waiting for a free slot (another projection is being fitted)"
    error: str = ""
    started: float = field(default_factory=time.time)
    finished: float = 0.0
    _thread: threading.Thread | None = field(default=None, repr=False)

    def progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = min(1.0, max(0.0, float(fraction))), message

    @property
    def elapsed(self) -> float:
        return (self.finished or time.time()) - self.started

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the fit ends (tests, benches); True when it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.status != "running"


class FitJobs:
    """Process-wide registry: finished fits in an LRU, running and failed jobs by key."""

    def __init__(self, max_items: int) -> None:
        self.store: LoadOnceLRU[Projection] = LoadOnceLRU(max_items)
        self._jobs: dict[Hashable, FitJob] = {}
        self._lock = threading.Lock()

    def ready(self, key: Hashable) -> Projection | None:
        return self.store.peek(key)

    def job(self, key: Hashable) -> FitJob | None:
        """The running or failed job of `key`, if any."""
        with self._lock:
            return self._jobs.get(key)

    def start(self, key: Hashable, build: Callable[[Progress], Projection], label: str) -> FitJob:
        """The job fitting `key`: an existing running or failed one, else a new one started in a daemon thread."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None:
                return job
            job = FitJob(key, label)
            if self.store.peek(key) is not None:  # finished between the caller's check and now
                job.status, job.fraction, job.message = "done", 1.0, "done"
                return job
            self._jobs[key] = job
            job._thread = threading.Thread(target=self._run, args=(job, build), name=f"fit-{label}"[:60], daemon=True)
        with _ALL_LOCK:
            _ALL.add(job)
        job._thread.start()
        return job

    def _run(self, job: FitJob, build: Callable[[Progress], Projection]) -> None:
        try:
            with _SLOTS:
                job.progress(0.0, "starting")
                self.store.get(job.key, lambda: build(job.progress))
            job.status = "done"
            with self._lock:
                self._jobs.pop(job.key, None)
        except Exception as exc:  # shown to every session asking for this key, until `retry`
            job.error = str(exc) if isinstance(exc, ProjectionError) else f"{type(exc).__name__}: {exc}"
            job.status = "failed"
            with self._lock:
                failed = [k for k, j in self._jobs.items() if j.status == "failed" and k != job.key]
                for k in failed[: max(0, len(failed) - MAX_FAILED + 1)]:
                    del self._jobs[k]
        finally:
            job.finished = time.time()
            with _ALL_LOCK:
                _ALL.discard(job)

    def retry(self, key: Hashable) -> None:
        """Forget a failed job, so that the next request fits again."""
        with self._lock:
            if key in self._jobs and self._jobs[key].status == "failed":
                del self._jobs[key]


def wait_all(timeout: float = 600.0) -> bool:
    """Wait for every unfinished fit of the process (tests, benches); True when none is left."""
    deadline = time.time() + timeout
    while True:
        with _ALL_LOCK:
            pending = list(_ALL)
        if not pending:
            return True
        for job in pending:
            if not job.wait(max(0.0, deadline - time.time())):
                return False


__all__ = ["FitJob", "FitJobs", "MAX_RUNNING", "wait_all"]
