"""Per-position results of a left-to-right model, kept under the token prefix they read.

A causal decoder's or a one-way recurrent LM's output at position p reads only the tokens 0 … p. So a result for
position p (a row of integrated gradients, the Jacobian of one recurrent step) depends only on that prefix and on
the probe's settings, and stays valid when the user types on at the end of the sentence. The probes store such
results here and recompute only the positions whose prefix changed: typing the next word of a 20-token sentence
costs one row, not twenty.

The memo lives on the model's adapter (`prefix_memo(adapter, "attribution")`), so it goes when the model is
evicted, and is shared by every session using that model. Keys hold the prefix's token ids themselves (no hash
that could collide); each memo keeps its `max_items` most recently used results.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

MAX_ITEMS = 4096


class PrefixMemo:
    """A thread-safe bounded LRU map key -> result; `hits` / `misses` count lookups (the tests read them)."""

    def __init__(self, max_items: int = MAX_ITEMS) -> None:
        self.max_items = max_items
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
            return None

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


def prefix_memo(adapter: Any, probe: str) -> PrefixMemo:
    """The memo of `probe` ("attribution", "gradients") on this model's adapter, made on first use."""
    memos = adapter.__dict__.setdefault("_prefix_memos", {})
    return memos.setdefault(probe, PrefixMemo())
