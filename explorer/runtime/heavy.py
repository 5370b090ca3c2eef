"""Heavy computations take turns, so that the class's light reruns keep a core.

A heavy computation (a view declared `heavy`, on a model above explorer.runtime.device.LARGE_MODEL parameters:
decoding, token attribution, interventions on SmolLM2) holds a core for seconds. At most `slots` of them run at once
on a server (EXPLORER_HEAVY_SLOTS, default: the CPU count less one, at least 1), at most one per session, in the
order they were asked for; the others wait, told where they are in the queue. A waiting request whose session moves
on (a newer sentence: Streamlit stops the script at its next message) leaves the queue.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from itertools import count
from typing import Callable, Iterator


def heavy_slots() -> int:
    """How many heavy computations run at once (EXPLORER_HEAVY_SLOTS, default CPU count − 1, at least 1)."""
    try:
        return max(1, int(os.environ.get("EXPLORER_HEAVY_SLOTS", "") or max(1, (os.cpu_count() or 2) - 1)))
    except ValueError:
        return max(1, (os.cpu_count() or 2) - 1)


class HeavyQueue:
    """Turns for heavy computations: `slots` at once, one per session, first come first served."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, str]] = []  # (ticket, session), in arrival order
        self._running: dict[int, str] = {}
        self._tickets = count()

    def _ahead(self, ticket: int, session: str) -> int | None:
        """0 when `ticket` may start now, else how many runs are ahead of it (running or waiting before it)."""
        busy = set(self._running.values())
        before = [t for t, s in self._waiting if t < ticket]
        if session not in busy and len(self._running) < self.slots and \
                not [t for t, s in self._waiting if t < ticket and s not in busy]:
            return 0
        return len(self._running) + len(before)

    @contextmanager
    def turn(self, session: str, waiting: Callable[[int], None] = lambda ahead: None,
             poll_s: float = 0.25) -> Iterator[None]:
        """Hold a turn while the block runs. Until it starts, waiting(ahead) is called every poll_s with the number
        of runs ahead (an exception it raises, e.g. the script stopped, leaves the queue)."""
        with self._cond:
            ticket = next(self._tickets)
            self._waiting.append((ticket, session))
        try:
            while True:
                with self._cond:
                    ahead = self._ahead(ticket, session)
                    if ahead == 0:
                        self._waiting.remove((ticket, session))
                        self._running[ticket] = session
                        break
                waiting(int(ahead or 0))
                with self._cond:
                    self._cond.wait(poll_s)
        except BaseException:
            with self._cond:
                if (ticket, session) in self._waiting:
                    self._waiting.remove((ticket, session))
                self._cond.notify_all()
            raise
        try:
            yield
        finally:
            with self._cond:
                self._running.pop(ticket, None)
                self._cond.notify_all()

    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)
