"""tests/timing.py: a limit for the idle machine, scaled by the slowdown measured now."""
from __future__ import annotations

import time

import pytest

import timing


def test_a_limit_grows_with_the_measured_slowdown_and_never_shrinks(monkeypatch) -> None:
    monkeypatch.setattr(timing, "unit", lambda runs=3: 3 * timing.IDLE_UNIT_S)  # a machine 3× slower now
    assert timing.scaled(2.0) == pytest.approx(6.0)
    with timing.within(0.05, "a sleep") as t:
        time.sleep(0.1)  # over 0.05 s, under 0.05 × 3
    assert t.limit == pytest.approx(0.15) and t.elapsed >= 0.1
    monkeypatch.setattr(timing, "unit", lambda runs=3: timing.IDLE_UNIT_S / 4)  # a faster machine: the limit stays
    assert timing.scaled(2.0) == 2.0
    with pytest.raises(AssertionError, match="took 0.1"):
        with timing.within(0.05, "a sleep"):
            time.sleep(0.1)


def test_the_unit_of_work_is_measured() -> None:
    u = timing.unit()
    assert 0.001 < u < 5 and timing.slowdown() >= 1.0
