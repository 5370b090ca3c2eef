"""The type of a value read from JSON or written to it (a checkpoint's meta, a lesson, a bench row): `JSON`, and
`JSONDict` for an object. Read one with isinstance checks (or explorer.runtime.json_value.get), never by assuming."""
from __future__ import annotations

from typing import Union

JSON = Union[dict[str, "JSON"], list["JSON"], str, int, float, bool, None]
JSONDict = dict[str, JSON]


def get(obj: JSON, *path: str | int) -> JSON:
    """obj[path[0]][path[1]]... or None where a step is missing or of the wrong kind (a dict key, a list index)."""
    for step in path:
        if isinstance(obj, dict) and isinstance(step, str):
            obj = obj.get(step)
        elif isinstance(obj, list) and isinstance(step, int) and -len(obj) <= step < len(obj):
            obj = obj[step]
        else:
            return None
    return obj
