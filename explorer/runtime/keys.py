"""Cache keys read from the values themselves: `fingerprint(value)` is a hashable stand-in for everything a value
holds, so that a cache keyed by a function and the fingerprints of its arguments cannot leave one of them out.

  None, bool, int, float, str, bytes   themselves, tagged with their type (1, 1.0 and True differ)
  tuple, list / dict                   their items' fingerprints, in order / by sorted key
  numpy array                          dtype, shape and a BLAKE2b digest of its bytes (≈1 ms per MB)
  dataclass instance                   its class and its fields' fingerprints (a trace, a theme)
  a loaded model                       ("model", id, device, dtype): what the model caches key it by
Anything else raises TypeError naming its type: a key must never silently ignore part of a value.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Hashable

import numpy as np

ATOMS = (type(None), bool, int, float, str, bytes)


def fingerprint(value: object) -> Hashable:
    """A hashable value equal for equal contents (module docstring). Raises TypeError for a value it cannot read."""
    if isinstance(value, ATOMS):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(fingerprint(v) for v in value))
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k), fingerprint(v)) for k, v in value.items())))
    if isinstance(value, np.generic):
        return fingerprint(value.item())
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return ("objects", value.shape, fingerprint(value.ravel().tolist()))
        data = np.ascontiguousarray(value)
        raw = data.data.cast("B") if data.dtype.kind in "biufc" and data.size else data.tobytes()
        return ("array", data.dtype.str, data.shape, hashlib.blake2b(raw, digest_size=16).hexdigest())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__,
                tuple((f.name, fingerprint(getattr(value, f.name))) for f in dataclasses.fields(value)))
    if hasattr(value, "id") and hasattr(value, "device") and hasattr(value, "dtype") \
            and hasattr(value, "adapter"):  # a LoadedModel
        return ("model", str(value.id), str(value.device), str(value.dtype))
    raise TypeError(f"no cache key for a {type(value).__module__}.{type(value).__qualname__}")
