"""Every string an AppTest run puts on the screen: text elements, widget labels, options and values, help texts,
table cells, and the text inside Plotly figures (titles, tick labels, hover templates, annotations, trace text)."""
from __future__ import annotations

import json
from typing import Any, Iterator

from google.protobuf.json_format import MessageToDict

_SKIP_KEYS = {"bdata", "dtype", "shape", "data", "id", "formId", "theme", "spec", "arrowData", "styler"}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, v in value.items():
            if key not in _SKIP_KEYS:
                yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def screen_strings(at: Any) -> list[str]:
    """The strings of every element of `at`'s page (see the module docstring)."""
    out: list[str] = []
    for node in at:
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        kind = getattr(node, "type", "")
        if kind == "plotly_chart":
            out += list(_strings(json.loads(proto.spec)))
            continue
        if kind in ("arrow_data_frame", "dataframe", "table"):
            frame = node.value
            out += [str(c) for c in frame.columns] + [str(v) for row in frame.astype(str).values for v in row]
            continue
        try:
            out += list(_strings(MessageToDict(proto)))
        except Exception:  # an element type with binary fields only
            continue
    return out
