"""What the probes keep for a loaded model besides its weights, in one store shared by every session.

Entries are named by the model's adapter (or one of its capability objects: the owner), a name ("prompt states",
"mean embedding", "examples", "memo:attribution" …) and a key. Each entry is counted in bytes when it is stored
(explorer.runtime.result_cache.nbytes, deep: the arrays and tensors it holds, in any object but a torch module)
against one budget for the process, EXPLORER_MODEL_STATE_MB (default 256 MB); past it the least recently used
entries go first. When an owner is garbage-collected (its model left the model cache), its entries go with it.

    kept(owner, name, key, build, most=None) -> the entry, built once (concurrent askers wait for the one build)
    peek(owner, name, key)        -> the entry or None, never builds
    forget(owner, name=None)      -> drop an owner's entries (all of them, or one name's)
    count(owner, name)            -> how many entries of that name it has
"""
from __future__ import annotations

import itertools
import os
import threading
import weakref
from typing import Callable, Hashable, TypeVar, cast

from explorer.runtime.lru import LoadOnceLRU
from explorer.runtime.result_cache import nbytes

V = TypeVar("V")
DEFAULT_MB = 256.0
MAX_ENTRIES = 200_000  # a count bound besides the bytes: each entry costs a key and its bookkeeping


def budget_bytes() -> int:
    """EXPLORER_MODEL_STATE_MB in bytes (a value that is not a positive number reads as the default)."""
    try:
        mb = float(os.environ.get("EXPLORER_MODEL_STATE_MB", DEFAULT_MB))
    except ValueError:
        mb = DEFAULT_MB
    return int((mb if mb > 0 else DEFAULT_MB) * 2**20)


_STORE: LoadOnceLRU[object] = LoadOnceLRU(MAX_ENTRIES, budget_bytes(), lambda v: nbytes(v, deep=True))
_OWNERS: dict[int, int] = {}  # id(owner) -> its token while it lives (weakref.finalize removes it)
_COUNTER = itertools.count(1)
_LOCK = threading.Lock()


def _token(owner: object) -> int:
    """A number for `owner` that no other object gets, even after `owner` is gone (ids are reused, tokens not)."""
    with _LOCK:
        token = _OWNERS.get(id(owner))
        if token is None:
            token = _OWNERS[id(owner)] = next(_COUNTER)
            weakref.finalize(owner, _gone, id(owner), token)
        return token


def _gone(owner_id: int, token: int) -> None:
    with _LOCK:
        if _OWNERS.get(owner_id) == token:
            del _OWNERS[owner_id]
    _STORE.drop(lambda k: isinstance(k, tuple) and k[0] == token)


def kept(owner: object, name: str, key: Hashable, build: Callable[[], V], most: int | None = None) -> V:
    """The entry `name`/`key` of `owner`, built by `build()` on first use; with `most`, `owner` keeps at most that many
    entries of this name (its least recently used others are dropped)."""
    token = _token(owner)
    built = False

    def build_once() -> V:
        nonlocal built
        built = True
        return build()

    value = cast(V, _STORE.get((token, name, key), build_once))
    if most is not None and built:  # only a new entry can put the owner over `most`: a hit costs no scan
        mine = [k for k in _STORE.keys() if isinstance(k, tuple) and k[0] == token and k[1] == name]
        old = set(mine[:max(0, len(mine) - most)])  # keys() lists the most recently used last
        if old:
            _STORE.drop(lambda k: k in old)
    return value


def peek(owner: object, name: str, key: Hashable) -> object | None:
    return _STORE.peek((_token(owner), name, key))


def forget(owner: object, name: str | None = None) -> int:
    """Drop `owner`'s entries (only those named `name` when given); returns how many."""
    token = _token(owner)
    return _STORE.drop(lambda k: isinstance(k, tuple) and k[0] == token and (name is None or k[1] == name))


def count(owner: object, name: str) -> int:
    """How many entries named `name` `owner` has."""
    token = _token(owner)
    return sum(1 for k in _STORE.keys() if isinstance(k, tuple) and k[0] == token and k[1] == name)


def held_bytes() -> int:
    """Bytes of all entries, as counted when they were stored."""
    return _STORE.stored_bytes()
