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
"""
from __future__ import annotations

import gc
import threading

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
