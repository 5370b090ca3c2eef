"""Per-position results of a left-to-right model, kept under the token prefix they read.

A causal decoder's or a one-way recurrent LM's output at position p reads only the tokens 0 … p. So a result for
position p (a row of integrated gradients, the Jacobian of one recurrent step, a column of the logit lens) depends
only on that prefix and on the probe's settings, and stays valid when the user types on at the end of the sentence.
The probes store such results here and recompute only the positions whose prefix changed: typing the next word of a
20-token sentence costs one row, not twenty.

The memo lives on the model's adapter (`prefix_memo(adapter, "attribution")`), so it goes when the model is
evicted, and is shared by every session using that model. Keys hold the prefix's token ids themselves (no hash
that could collide); each memo keeps its `max_items` most recently used results.
"""
from __future__ import annotations

from typing import Generic, Hashable, TypeVar

from explorer.runtime.lru import LoadOnceLRU

MAX_ITEMS = 4096
V = TypeVar("V")


class PrefixMemo(Generic[V]):
    """The project's thread-safe LRU (explorer.runtime.lru) as a lookup/store map key -> result; `hits` / `misses` count
    lookups (the tests read them)."""

    def __init__(self, max_items: int = MAX_ITEMS) -> None:
        self._store: LoadOnceLRU[V] = LoadOnceLRU(max_items)
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> V | None:
        value = self._store.peek(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: Hashable, value: V) -> None:
        self._store.get(key, lambda: value)

    def __len__(self) -> int:
        return len(self._store.values())


def prefix_memo(adapter: object, probe: str) -> PrefixMemo[V]:
    """The memo of `probe` ("attribution", "gradients", "lens:<k>") on this model's adapter, made on first use. One
    probe keeps one kind of result: the caller names it (`memo: PrefixMemo[np.ndarray] = prefix_memo(...)`)."""
    memos: dict[str, PrefixMemo[V]] = adapter.__dict__.setdefault("_prefix_memos", {})
    if probe not in memos:
        memos.setdefault(probe, PrefixMemo())
    return memos[probe]
