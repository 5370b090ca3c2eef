"""A thread-safe least-recently-used store whose values are built once per key, even under concurrent requests.

Shared by the model cache (loaded models) and the projection store (fitted PCA/t-SNE/UMAP): both are expensive
to build, shared by every browser session of the server, and bounded.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class LoadOnceLRU(Generic[V]):
    """At most `max_items` values (and, with `size`, at most `max_bytes` in total); least recently used evicted.

    `get(key, build)` returns the stored value or runs `build()` once for that key while other keys proceed.
    `on_evict(values)` runs after values were dropped, with a list of them that it may clear (to free them).
    `pinned(key)`: values never evicted (they count against the limits; `drop` still removes them).
    A value's size is taken once, when it is stored (a stored value does not grow).
    """

    def __init__(self, max_items: int, max_bytes: int | None = None, size: Callable[[V], int] | None = None,
                 on_evict: Callable[[list[V]], None] | None = None,
                 pinned: Callable[[Hashable], bool] | None = None) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._size = size
        self._on_evict = on_evict
        self._pinned = pinned or (lambda key: False)
        self._items: "OrderedDict[Hashable, V]" = OrderedDict()
        self._sizes: dict[Hashable, int] = {}  # key -> its value's size when stored (with `size`)
        self._bytes = 0  # their sum
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self.builds = 0  # how many times `build` actually ran

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._items:
                    return self._items[key]
            value = build()
            size = self._size(value) if self._size is not None else 0
            with self._lock:
                self.builds += 1
                self._items[key] = value
                self._bytes += size - self._sizes.get(key, 0)
                self._sizes[key] = size
                evicted = self._evict_locked(keep=key)
                self._key_locks.pop(key, None)
        if evicted and self._on_evict is not None:
            self._on_evict(evicted)
        return value

    def _over_locked(self) -> bool:
        if len(self._items) > self.max_items:
            return True
        return self.max_bytes is not None and self._bytes > self.max_bytes

    def _pop_locked(self, key: Hashable) -> V:
        self._bytes -= self._sizes.pop(key, 0)
        return self._items.pop(key)

    def _evict_locked(self, keep: Hashable) -> list[V]:
        evicted = []
        while self._over_locked():
            oldest = next((k for k in self._items if k != keep and not self._pinned(k)), None)
            if oldest is None:  # what is left is pinned or just built
                break
            evicted.append(self._pop_locked(oldest))
        return evicted

    def peek(self, key: Hashable) -> V | None:
        """The stored value (marked as recently used), or None; never builds."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def stored_bytes(self) -> int:
        """The sizes of the stored values, summed (0 without `size`)."""
        with self._lock:
            return self._bytes

    def keys(self) -> list[Hashable]:
        """Stored keys, most recently used last."""
        with self._lock:
            return list(self._items)

    def values(self) -> list[V]:
        """Stored values, most recently used last."""
        with self._lock:
            return list(self._items.values())

    def drop(self, match: Callable[[Hashable], bool]) -> int:
        """Remove the entries whose key matches; returns how many."""
        with self._lock:
            dropped = [self._pop_locked(k) for k in [k for k in self._items if match(k)]]
        count = len(dropped)
        if dropped and self._on_evict is not None:
            self._on_evict(dropped)
        return count
