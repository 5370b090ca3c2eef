"""explorer.runtime.heap: the import-time heap is frozen out of the garbage collector, and a model evicted from the
cache is still freed when it was frozen with it. Run in fresh interpreters: freezing is process-wide."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from testkit.browser import ROOT


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={"EXPLORER_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_frozen_cycles_survive_a_plain_collection_and_go_with_heaps_collection():
    out = _run("""
        import gc, weakref
        from explorer.runtime import heap

        class Node:
            pass

        a, b = Node(), Node()
        a.other, b.other = b, a  # a reference cycle: only the cycle collector frees it
        ref = weakref.ref(a)
        frozen = heap.freeze()
        del a, b
        gc.collect()
        kept = ref() is not None
        heap.collect()
        print(frozen > 1000, kept, ref() is None, gc.get_freeze_count() > 1000)
    """)
    assert out == "True True True True"


def test_preload_and_transformers_leave_their_heap_frozen():
    out = _run("""
        import gc
        import explorer.runtime.preload
        after_preload = gc.get_freeze_count()
        import explorer.runtime.hf_runtime
        print(after_preload, gc.get_freeze_count(), len(gc.get_objects()))
    """)
    preload, both, unfrozen = map(int, out.split())
    assert preload > 100_000 and both > preload + 50_000  # torch/Streamlit/plotly/pandas, then transformers
    assert unfrozen < 0.05 * both  # what a full collection still walks


def test_a_frozen_model_is_freed_when_the_cache_evicts_it():
    out = _run("""
        import weakref
        from explorer.runtime import heap
        from explorer.loading.model_cache import ModelCache

        cache = ModelCache(max_models=1)
        first = weakref.ref(cache.get("builtin:gru-lm").model)
        heap.freeze()  # as when transformers is first imported while a built-in model is loaded
        cache.get("builtin:rnn-lm")  # evicts the GRU
        print(first() is None, [m.id for m in cache.loaded()])
    """)
    assert out == "True ['builtin:rnn-lm']"


def test_a_model_loaded_after_the_last_freeze_is_freed_without_thawing_the_heap():
    out = _run("""
        import gc, weakref
        from explorer.runtime import heap
        from explorer.loading.model_cache import ModelCache

        heap.freeze()
        cache = ModelCache(max_models=1)
        first = weakref.ref(cache.get("builtin:gru-lm").model)
        thawed = []
        unfreeze = gc.unfreeze
        gc.unfreeze = lambda: (thawed.append(1), unfreeze())[1]
        cache.get("builtin:rnn-lm")  # evicts the GRU: loaded after the freeze, so a plain collection frees it
        print(first() is None, len(thawed), [m.id for m in cache.loaded()])
    """)
    assert out == "True 0 ['builtin:rnn-lm']"
