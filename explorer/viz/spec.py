"""A Plotly figure as the JSON st.plotly_chart sends, made without deep copies and serialised once.

`figure_spec(fig)` is what `fig.to_dict()` returns (numeric arrays as base64 typed arrays) without copying the
arrays; `serialize(spec)` turns each trace and the layout into JSON once (orjson, with Plotly's escapes), in a form
`plotly.io.to_json` embeds unchanged. explorer.ui.charts.show keeps the result with the figure. The tests check
both against Plotly's own functions, byte for byte.
"""
from __future__ import annotations

import base64

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.basevalidators import is_homogeneous_array
from _plotly_utils.utils import plotlyjsShortTypes, to_typed_array_spec

import orjson


class Serialized(dict):
    """A figure serialised beforehand, as st.plotly_chart consumes it.

    As a dict it holds what Streamlit reads besides the JSON: an empty trace list (plotly.io.to_json strips trace
    uids from it) and the layout's width and height. `plotly.io.to_json` asks it for `to_plotly_json()` and gets
    the JSON of each trace and of the layout as orjson Fragments, which orjson copies into the output unchanged.
    """

    def __init__(self, parts: dict[str, object]) -> None:
        layout = parts.get("_size", {})
        super().__init__(data=[], layout=layout)
        self.parts = parts

    def to_plotly_json(self) -> dict:
        return {k: v for k, v in self.parts.items() if k != "_size"}

    def with_overlay(self, overlay: "Serialized") -> "Serialized":
        """The traces of `overlay` drawn after (on top of) this figure's."""
        mine, theirs = self.parts["data"], overlay.parts["data"]
        assert isinstance(mine, list) and isinstance(theirs, list)  # serialize's lists of traces
        return Serialized({**self.parts, "data": mine + theirs})


def _escape(text: str) -> str:
    """Plotly's escaping of its JSON output (plotly.io._json._safe with the orjson swaps); idempotent."""
    for unsafe, safe in _SWAPS:
        if unsafe in text:
            text = text.replace(unsafe, safe)
    return text


_SWAPS = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _fragment(value: object) -> orjson.Fragment:
    """`value` as JSON that orjson embeds verbatim (Plotly's own conversion when orjson alone cannot), with
    Plotly's HTML-safe escapes (<, >, / as \\u003c …) already made: Plotly escapes the whole output again,
    which changes nothing then and costs only a scan (base64 arrays are full of '/')."""
    try:
        text = orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:
        text = pio.json.to_json_plotly(value, engine="orjson")
    return orjson.Fragment(_escape(text).encode())


def serialize(spec: dict) -> dict | Serialized:
    """`spec` (from figure_spec) with each trace and the layout serialised once; `spec` itself when Plotly would
    not use orjson (the JSON engine is configurable) or orjson lacks Fragment."""
    if orjson is None or not hasattr(orjson, "Fragment") or pio.json.config.default_engine not in ("auto", "orjson"):
        return spec
    parts: dict[str, object] = {}
    for key, value in spec.items():
        if key == "data":  # without uids, as plotly.io.to_json sends traces
            parts[key] = [_fragment({k: v for k, v in t.items() if k != "uid"}) for t in value]
        else:
            parts[key] = _fragment(value)
    layout = spec.get("layout") or {}
    parts["_size"] = {k: layout[k] for k in ("width", "height") if k in layout}
    return Serialized(parts)


def _copy(value: object) -> object:
    """Copy dicts and lists (which _encode_arrays rewrites in place), not the arrays and strings they hold."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value] if value and isinstance(value[0], (dict, list)) else list(value)
    return value


_SKIPPED_KEYS = frozenset(("geojson", "layer", "layers", "range"))  # _plotly_utils.utils.is_skipped_key
_SCALARS = (str, int, float, bool, type(None))


def _typed_array(v: np.ndarray) -> dict[str, str] | np.ndarray:
    """_plotly_utils.utils.to_typed_array_spec of a numeric numpy array (the same result), without the generic
    conversion step it starts with (narwhals, pandas), which costs more than the encoding."""
    if v.size == 0:
        return to_typed_array_spec(v)
    if v.dtype == np.int64 or v.dtype == np.uint64:  # downcast as Plotly does (plotly.js has no 64-bit ints)
        lo, hi = v.min(), v.max()
        for small in ((np.int8, np.int16, np.int32) if v.dtype == np.int64 else (np.uint8, np.uint16, np.uint32)):
            info = np.iinfo(small)
            if info.min <= lo and hi <= info.max:
                v = v.astype(small)
                break
        else:
            return to_typed_array_spec(v)
    short = plotlyjsShortTypes.get(str(v.dtype))
    if short is None:
        return to_typed_array_spec(v)
    spec = {"dtype": short, "bdata": base64.b64encode(np.ascontiguousarray(v).data).decode("ascii")}
    if v.ndim > 1:
        spec["shape"] = str(v.shape)[1:-1]
    return spec


def _encode_arrays(value: dict[str, object] | list[object] | tuple[object, ...]) -> None:
    """In place, what Plotly's convert_to_base64 does to Figure.to_dict() (arrays held by a dict key, except the
    skipped keys, become base64 typed arrays; lists are searched for dicts), without a Python call for every
    number and string of every list. Then arrays of text become lists, as Plotly's JSON encoder makes them
    (orjson takes numeric arrays only)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list, tuple)):
                if key not in _SKIPPED_KEYS:
                    _encode_arrays(item)
            elif isinstance(item, _SCALARS) or key in _SKIPPED_KEYS:
                continue
            elif type(item) is np.ndarray and item.dtype.kind in "iuf":
                item = value[key] = _typed_array(item)
            elif is_homogeneous_array(item):
                item = value[key] = to_typed_array_spec(item)
            if isinstance(item, np.ndarray) and item.dtype.kind in "UO":
                value[key] = item.tolist()
    else:
        for i, item in enumerate(value):
            if isinstance(item, (dict, list, tuple)):
                _encode_arrays(item)
            elif isinstance(item, np.ndarray) and item.dtype.kind in "UO" and isinstance(value, list):
                value[i] = item.tolist()


def figure_spec(fig: go.Figure) -> dict:
    """What `fig.to_dict()` returns (data, layout, numeric arrays as base64 typed arrays), without deep copies.
    The figure is left unchanged."""
    if fig._frame_objs:
        return fig.to_dict()
    # The template holds plain JSON values only: it is shared, neither copied nor walked by _encode_arrays
    # (put back afterwards at its own place in the key order).
    layout = {k: None if k == "template" else _copy(v) for k, v in fig._layout.items()}
    spec: dict[str, object] = {"data": [_copy(trace) for trace in fig._data], "layout": layout}
    _encode_arrays(spec)
    if "template" in layout:
        layout["template"] = fig._layout["template"]
    return spec
