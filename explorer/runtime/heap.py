"""Short full garbage collections on a shared server: the heap that imports leave is frozen out of the collector.

torch, transformers, Streamlit, plotly and pandas leave ~450,000 objects that live as long as the process. Python's
cycle collector walks every one of them at each full (generation-2) collection: 90-250 ms holding the interpreter
lock, during which no session's script runs. While one browser typed on the seq2seq and decoding views, 4 such
pauses (up to 253 ms) landed in 2.5 minutes, in the slow tail of typing → chart. gc.freeze() moves the objects
alive at that moment to a permanent generation that collections skip: a full collection then takes ~3 ms.

Frozen objects are never collected. The freezes happen once, when the libraries are first imported
(explorer.runtime.preload, explorer.runtime.hf_runtime); a model loaded by then is frozen with them. A model sits in
reference cycles (its adapter and the loaded record refer to each other), so evicting one needs a collection:
`collect()` with `thaw=True` when the model may be frozen (loaded before the last freeze: compare `epoch()` then and
now), which thaws everything, collects and freezes what is left (0.3-0.6 s holding the interpreter lock with a few
models loaded: every other session waits), else a plain full collection of what is not frozen (milliseconds).

Freed memory is not always returned to the operating system: glibc's malloc keeps the free pages of its heaps
(tensors under its dynamic mmap threshold, up to 32 MB, live there) for later allocations, so a replica's resident
memory only grows. `trim()` (malloc_trim(0)) hands every free page back; it is called after a model is evicted, an
upload is dropped and a closed tab's files leave the upload store.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
from typing import Callable

_lock = threading.Lock()
_epoch = [0]  # how many freezes so far


def epoch() -> int:
    """How many times `freeze` ran: an object created at epoch e was frozen iff a freeze ran after, epoch() > e."""
    return _epoch[0]


def freeze() -> int:
    """Collect, then freeze every object alive now; returns how many objects are frozen."""
    with _lock:
        gc.collect()
        gc.freeze()
        _epoch[0] += 1
        return gc.get_freeze_count()


def collect(thaw: bool = True) -> int:
    """A full collection; with `thaw`, one that reaches frozen objects too (thaw, collect, freeze the survivors).
    Returns how many unreachable objects it found."""
    with _lock:
        if not thaw:
            return gc.collect()
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        found = gc.collect()
        if frozen:
            gc.freeze()
        return found


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS, Windows)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def trim() -> bool:
    """Return the free pages of malloc's heaps to the operating system (glibc's malloc_trim(0), a few ms); False
    where the C library cannot (nothing done)."""
    if _TRIM is None:
        return False
    with _lock:
        _TRIM(0)
    return True
