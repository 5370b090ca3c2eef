"""When each phase of a training run must end: the time limit (max_seconds), stop requests and cancellation.

max_seconds bounds the whole run, every phase included: corpus generation, encoding, each batch, each held-out
evaluation batch. Training stops at TRAIN_SHARE of it so the held-out evaluation has the rest. A stop request ends
training cleanly (the model so far is evaluated and returned); `cancel()` (the session that asked has gone) ends
every phase within a batch and raises TrainingCancelled.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

TRAIN_SHARE = 0.85  # of max_seconds for data and training; the held-out evaluation may use the rest

T = TypeVar("T")


class TrainingCancelled(RuntimeError):
    """The run ended before it trained anything: cancelled, or its time limit ran out while preparing the data."""


class Clock:
    """When each phase of a run must end. `over()`: cancelled, or max_seconds used (evaluations stop, keeping what
    they computed); `train_over()`: that, a stop request, or TRAIN_SHARE of max_seconds used (the training loop
    stops); `check(doing)`: raise TrainingCancelled when over() (phases before training)."""

    def __init__(self, max_seconds: float | None, should_stop: Callable[[], bool] | None,
                 cancel: Callable[[], bool] | None) -> None:
        self.t0, self.max_seconds = time.perf_counter(), max_seconds
        self.should_stop, self.cancel = should_stop, cancel

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def cancelled(self) -> bool:
        return self.cancel is not None and bool(self.cancel())

    def over(self) -> bool:
        return self.cancelled() or (self.max_seconds is not None and self.elapsed() > self.max_seconds)

    def train_over(self) -> bool:
        return (self.over() or (self.should_stop is not None and bool(self.should_stop()))
                or (self.max_seconds is not None and self.elapsed() > TRAIN_SHARE * self.max_seconds))

    def check(self, doing: str) -> None:
        if self.cancelled():
            raise TrainingCancelled(f"Training was cancelled while {doing}.")
        if self.over():
            raise TrainingCancelled(f"The time limit ({self.max_seconds:g} s) ran out while {doing}, before any "
                                    "training: ask for more time or less data.")

    def each(self, items: Iterable[T], doing: str, every: int = 2000) -> Iterator[T]:
        """`items`, checking the clock every `every` items (long loops before training)."""
        for i, item in enumerate(items):
            if i % every == 0:
                self.check(doing)
            yield item


NO_CLOCK = Clock(None, None, None)  # a run without limits (a task built outside train_model)
