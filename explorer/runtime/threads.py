"""How the sessions' script threads share the Python interpreter.

Every session's script runs on its own thread, and only one thread runs Python at a time. A thread that lets go of
the interpreter (each torch operation does) waits, to get it back, until a busy thread hands it over: at most
`sys.getswitchinterval()` later, 5 ms by default. A rerun of the recurrent-cell view makes a few hundred torch calls,
so while another session's script ran pure Python (a 2 MB text read into a training corpus, 1.8 s) the rerun took
1.2–1.3 s instead of 0.09 s (tests/test_hostile_student.py). At SWITCH_S a waiting thread gets the interpreter
back five times sooner; a busy thread loses little (a hand-over costs microseconds).
"""
from __future__ import annotations

import sys

SWITCH_S = 0.001


def share_interpreter() -> None:
    """Set the interpreter's switch interval to SWITCH_S (process-wide; idempotent)."""
    sys.setswitchinterval(SWITCH_S)
