"""Probe results kept by their bytes: for the whole process, for each session, and for at most an hour.

One result is built once per key and shared, read-only, by every session that asks for it (the same sentence typed
by a class is computed once). Each entry remembers the sessions that used it ("owners"):

- all entries together stay within `max_bytes` (least recently used dropped first);
- the entries one session uses stay within `session_bytes`: past it, that session gives up its oldest entries (an
  entry no session holds any more is dropped), so one student's long sentences cannot push out the class's results;
- a result larger than `session_bytes` is returned but not kept;
- `end_session(sid)` (the session's tab closed) gives up all its entries;
- an entry older than `ttl_s` is built again;
- a kept result's numpy arrays are made read-only (`read_only`): it is shared.

Sizes come from `nbytes`: the arrays and tensors a result holds, and a small charge per Python object.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

import numpy as np

V = TypeVar("V")
OBJECT_BYTES = 64  # charged for each Python object besides its arrays
MAX_OBJECTS = 200_000  # nbytes stops looking past this many objects (and charges what it has seen)


def _walk(value: object, visit: Callable[[object], None], deep: bool = False) -> None:
    """Call visit(obj) on `value` and what it holds (containers, dataclasses; with `deep`, any object's attributes
    too, torch modules and classes excepted), each object once, MAX_OBJECTS at most."""
    import torch

    seen: set[int] = set()
    stack: list[object] = [value]
    while stack and len(seen) < MAX_OBJECTS:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        visit(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            stack.extend(getattr(obj, f.name, None) for f in dataclasses.fields(obj))
        elif deep and hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.nn.Module, torch.Tensor)) \
                and type(obj).__module__ != "builtins":
            stack.extend(vars(obj).values())


def read_only(value: object) -> None:
    """Make the numpy arrays `value` holds read-only: a shared result that a page wrote into would change what
    every other session sees (writing raises "assignment destination is read-only" instead)."""
    def visit(obj: object) -> None:
        if isinstance(obj, np.ndarray):
            obj.flags.writeable = False

    _walk(value, visit)


def nbytes(value: object, deep: bool = False) -> int:
    """Bytes `value` holds: numpy arrays and torch tensors by their buffers (a buffer shared by several views counted
    once), bytes and str by their length, containers and dataclasses through their items, OBJECT_BYTES for each
    object. Other objects (a model or tokenizer a result refers to, shared, not the result's own) are not walked,
    unless `deep` (a generation state's cache object: its attributes), torch modules always excepted.
    Iterative; stops after MAX_OBJECTS objects."""
    import torch

    buffers: set[tuple[str, int]] = set()
    total = 0

    def visit(obj: object) -> None:
        nonlocal total
        total += OBJECT_BYTES
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if ("np", id(base)) not in buffers:
                buffers.add(("np", id(base)))
                total += base.nbytes
        elif isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if ("torch", storage.data_ptr()) not in buffers:
                buffers.add(("torch", storage.data_ptr()))
                total += storage.nbytes()
        elif isinstance(obj, (bytes, bytearray, str)):
            total += len(obj)

    _walk(value, visit, deep)
    return total


@dataclasses.dataclass
class _Entry(Generic[V]):
    value: V
    size: int
    born: float
    owners: "OrderedDict[str, None]"  # sessions holding it


class ResultCache(Generic[V]):
    """Results by key, bounded in bytes per process and per session and in age (see the module's docstring)."""

    def __init__(self, max_bytes: int, session_bytes: int, ttl_s: float = 3600.0,
                 size: Callable[[V], int] = nbytes, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes, self.session_bytes, self.ttl_s = max_bytes, session_bytes, ttl_s
        self._size, self._clock = size, clock
        self._items: "OrderedDict[Hashable, _Entry[V]]" = OrderedDict()
        self._sessions: dict[str, "OrderedDict[Hashable, None]"] = {}  # session -> its keys, oldest use first
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self.builds = 0

    def get(self, key: Hashable, session: str, build: Callable[[], V]) -> V:
        """The result for `key` (built by `build()` once while other keys proceed), now held by `session` too."""
        hit = self._hit(key, session)
        if hit is not None:
            return hit[0]
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            hit = self._hit(key, session)
            if hit is not None:
                return hit[0]
            try:
                value = build()
            except BaseException:  # a cancelled run: nothing kept, the next ask builds again
                with self._lock:
                    self._key_locks.pop(key, None)
                raise
            size = self._size(value)
            with self._lock:
                self.builds += 1
                self._key_locks.pop(key, None)
                if size <= self.session_bytes and size <= self.max_bytes:
                    read_only(value)
                    self._items[key] = _Entry(value, size, self._clock(), OrderedDict())
                    self._own_locked(key, session)
                    self._evict_locked(key, session)
        return value

    def _hit(self, key: Hashable, session: str) -> tuple[V] | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            if self._clock() - entry.born > self.ttl_s:
                self._remove_locked(key)
                return None
            self._items.move_to_end(key)
            self._own_locked(key, session)
            self._evict_locked(key, session)
            return (entry.value,)

    def _own_locked(self, key: Hashable, session: str) -> None:
        self._items[key].owners[session] = None
        keys = self._sessions.setdefault(session, OrderedDict())
        keys[key] = None
        keys.move_to_end(key)

    def _remove_locked(self, key: Hashable) -> None:
        entry = self._items.pop(key)
        for owner in entry.owners:
            self._sessions.get(owner, {}).pop(key, None)  # type: ignore[call-overload]

    def _disown_locked(self, key: Hashable, session: str) -> None:
        self._sessions.get(session, OrderedDict()).pop(key, None)
        entry = self._items.get(key)
        if entry is not None:
            entry.owners.pop(session, None)
            if not entry.owners:
                self._remove_locked(key)

    def _evict_locked(self, keep: Hashable, session: str) -> None:
        mine = self._sessions.get(session, OrderedDict())
        while self._held_locked(session) > self.session_bytes:
            oldest = next((k for k in mine if k != keep), None)
            if oldest is None:
                break
            self._disown_locked(oldest, session)
        while sum(e.size for e in self._items.values()) > self.max_bytes:
            oldest = next((k for k in self._items if k != keep), None)
            if oldest is None:
                break
            self._remove_locked(oldest)

    def _held_locked(self, session: str) -> int:
        return sum(self._items[k].size for k in self._sessions.get(session, ()) if k in self._items)

    def end_session(self, session: str) -> int:
        """`session` gives up every entry it held (entries no other session holds are dropped); returns how many
        entries were dropped."""
        with self._lock:
            before = len(self._items)
            for key in list(self._sessions.get(session, ())):
                self._disown_locked(key, session)
            self._sessions.pop(session, None)
            return before - len(self._items)

    def held(self, session: str) -> int:
        """Bytes of the entries `session` holds."""
        with self._lock:
            return self._held_locked(session)

    def total(self) -> int:
        """Bytes of all entries."""
        with self._lock:
            return sum(e.size for e in self._items.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sessions.clear()
