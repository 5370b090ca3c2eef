"""What the probes keep per model lives in one store counted in bytes (explorer.runtime.model_state; issue 58 item
4): no adapter keeps a cache of its own, entries past the budget go least recently used first, and a model's
entries go with the model."""
from __future__ import annotations

import ast
import gc
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.runtime import model_state as MS
from explorer.runtime.lru import LoadOnceLRU
from explorer.runtime.result_cache import nbytes

ROOT = Path(__file__).resolve().parents[1]


class Owner:
    pass


@pytest.fixture
def small_store(monkeypatch):
    store: LoadOnceLRU[object] = LoadOnceLRU(1000, 3 * 8000 + 1000, lambda v: nbytes(v, deep=True))
    monkeypatch.setattr(MS, "_STORE", store)
    return store


def test_entries_are_counted_in_bytes_and_the_least_recently_used_go_first(small_store) -> None:
    owner = Owner()
    for k in range(3):
        MS.kept(owner, "rows", k, lambda k=k: np.full(1000, k, dtype=np.float64))  # 8,000 bytes each
    assert 3 * 8000 <= MS.held_bytes() <= 3 * 8000 + 3 * 200
    assert MS.peek(owner, "rows", 0) is not None  # 0 is now the most recently used
    MS.kept(owner, "rows", 3, lambda: np.zeros(1000))
    assert MS.peek(owner, "rows", 1) is None and MS.peek(owner, "rows", 0) is not None
    assert MS.count(owner, "rows") == 3


def test_a_generation_states_tensors_are_counted_inside_any_object(small_store) -> None:
    class Cache:  # like transformers' DynamicCache: tensors in lists in attributes of plain objects
        def __init__(self) -> None:
            self.layers = [{"keys": torch.zeros(100, 10), "values": torch.zeros(100, 10)} for _ in range(2)]

    owner = Owner()
    MS.kept(owner, "prompt states", (1, 2), lambda: (torch.zeros(1, 50), Cache()))
    assert MS.held_bytes() >= 4 * 100 * 10 * 4 + 50 * 4


def test_most_keeps_only_the_last_entries_of_a_name(small_store) -> None:
    owner, other = Owner(), Owner()
    MS.kept(other, "prompt states", 0, lambda: 0)
    for k in range(4):
        MS.kept(owner, "prompt states", k, lambda k=k: k, most=2)
    assert [MS.peek(owner, "prompt states", k) for k in range(4)] == [None, None, 2, 3]
    assert MS.peek(other, "prompt states", 0) == 0  # another owner's entries are its own
    assert MS.forget(owner) == 2 and MS.count(owner, "prompt states") == 0


def test_a_models_entries_go_with_the_model() -> None:
    from explorer.loading.model_cache import ModelCache

    cache = ModelCache(max_models=1)
    first = cache.get("builtin:tiny-gpt", "cpu", "float32", None)
    first.adapter.examples("attention")
    MS.kept(first.adapter, "test rows", 0, lambda: np.zeros(100_000))  # 800 kB
    held = MS.held_bytes()
    assert MS.count(first.adapter, "test rows") == 1
    del first
    cache.get("builtin:lstm-lm", "cpu", "float32", None)  # evicts tiny-gpt: its adapter is collected
    gc.collect()
    assert MS.held_bytes() <= held - 800_000


def test_no_module_stashes_a_cache_in_an_objects_dict() -> None:
    """`obj.__dict__.setdefault(...)` / `obj.__dict__[...] = ...` held the probes' per-model caches, uncounted."""
    offenders = []
    for path in (ROOT / "explorer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault":
                target = node.func.value
            elif isinstance(node, ast.Assign):
                target = next((t.value for t in node.targets if isinstance(t, ast.Subscript)), None)
            if isinstance(target, ast.Attribute) and target.attr == "__dict__":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
