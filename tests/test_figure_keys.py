"""explorer.runtime.keys.fingerprint and explorer.ui.cache.figure_of: a figure is kept under its function and every
argument, read from their contents, so that no control, model or theme can be left out of its key."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.runtime.keys import fingerprint
from explorer.viz.theme import NORMAL, PROJECTOR


@dataclass
class _Trace:
    name: str
    values: np.ndarray


def test_equal_contents_give_equal_keys_and_any_change_a_new_one() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert fingerprint((a, "x", 3)) == fingerprint((a.copy(), "x", 3))
    b = a.copy()
    b[2, 3] += 1e-6
    assert fingerprint(a) != fingerprint(b)  # one element
    assert fingerprint(a) != fingerprint(a.reshape(4, 3))  # the shape
    assert fingerprint(a) != fingerprint(a.astype(np.float64))  # the dtype
    assert fingerprint(a[:, ::2]) == fingerprint(np.ascontiguousarray(a[:, ::2]))  # a view reads as its values
    assert len({fingerprint(v) for v in (1, 1.0, True, "1", b"1", None)}) == 6  # types are part of the key
    assert fingerprint(_Trace("t", a)) != fingerprint(_Trace("t", b))  # a trace by its fields
    assert fingerprint(NORMAL) != fingerprint(PROJECTOR)  # the theme
    assert fingerprint({"b": 1, "a": 2}) == fingerprint({"a": 2, "b": 1})
    assert fingerprint(np.array(["a", None], dtype=object)) != fingerprint(np.array(["a", "b"], dtype=object))


def test_a_value_it_cannot_read_is_refused() -> None:
    with pytest.raises(TypeError, match="no cache key"):
        fingerprint(object())


def test_figure_of_builds_once_per_function_and_arguments_and_refuses_closures(monkeypatch) -> None:
    from explorer.runtime.lru import LoadOnceLRU
    from explorer.ui import cache

    store: LoadOnceLRU[go.Figure] = LoadOnceLRU(16)
    monkeypatch.setattr(cache, "_figure_store", lambda: store)
    built: list[tuple] = []

    def count(*args):
        built.append(args)

    monkeypatch.setattr(go, "Figure", _counting(go.Figure, count))
    z = np.eye(3)
    first = cache.figure_of(_heatmap, z, "a")
    assert cache.figure_of(_heatmap, z.copy(), "a") is first  # the same contents: the same figure
    assert cache.figure_of(_heatmap, z, "b") is not first  # another title: another figure
    assert cache.figure_of(_heatmap, z * 2, "a") is not first  # other numbers: another figure
    assert len(built) == 3
    with pytest.raises(TypeError, match="module-level function"):
        cache.figure_of(lambda: go.Figure())
    title = "closure"

    def closed() -> go.Figure:
        return _heatmap(z, title)
    with pytest.raises(TypeError, match="module-level function"):
        cache.figure_of(closed)


def _heatmap(z: np.ndarray, title: str) -> go.Figure:
    return go.Figure(go.Heatmap(z=z), layout={"title": title})


def _counting(cls, count):
    class Counting(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            count(args)
            super().__init__(*args, **kwargs)
    return Counting
