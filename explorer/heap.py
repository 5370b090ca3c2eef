"""Short full garbage collections on a shared server: the heap that imports leave is frozen out of the collector.

torch, transformers, Streamlit, plotly and pandas leave ~450,000 objects that live as long as the process. Python's
cycle collector walks every one of them at each full (generation-2) collection: 90-250 ms holding the interpreter
lock, during which no session's script runs. While one browser typed on the seq2seq and decoding views, 4 such
pauses (up to 253 ms) landed in 2.5 minutes, in the slow tail of typing → chart. gc.freeze() moves the objects
alive at that moment to a permanent generation that collections skip: a full collection then takes ~3 ms.

Frozen objects are never collected. The freezes happen once, when the libraries are first imported
(explorer.preload, explorer.hf_runtime); a model loaded by then is frozen with them, and a model sits in reference
cycles (its adapter and the loaded record refer to each other), so evicting one needs `collect()`, which thaws
everything, collects and freezes what is left. The model cache calls it after every eviction.
"""
from __future__ import annotations

import gc
import threading

_lock = threading.Lock()


def freeze() -> int:
    """Collect, then freeze every object alive now; returns how many objects are frozen."""
    with _lock:
        gc.collect()
        gc.freeze()
        return gc.get_freeze_count()


def collect() -> int:
    """A full collection that reaches frozen objects too (thaw, collect, freeze the survivors); returns how many
    unreachable objects it found."""
    with _lock:
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        found = gc.collect()
        if frozen:
            gc.freeze()
        return found
