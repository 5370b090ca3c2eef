"""Arrays out of a figure's JSON (a Plotly figure's `to_json()`, or the spec an AppTest chart element carries).

Plotly and Streamlit write a numpy array into the JSON either as a plain list or as Plotly's typed-array encoding
{"dtype": "f4", "bdata": base64 of the array's bytes[, "shape": "rows, cols"]}; `plotly_array` reads both.
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np


def plotly_array(value: Any, dtype: Any = None) -> np.ndarray:
    """The array `value` holds: a typed array decoded (reshaped when it has a shape), else the list read by
    np.asarray with `dtype` (None: numpy's own choice)."""
    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            arr = arr.reshape([int(n) for n in str(shape).split(",")])
        return arr
    return np.asarray(value, dtype=dtype)
