"""One parser per kind of view parameter (explorer.views.Param.kind), shared by the URL controls
(explorer.ui.state), lessons (explorer.lessons) and the views' declarations (Param.validate).

    parse(kind, value, choices=()) -> the kind's Python value, or ValueError("must be … (got '…')")
    to_url_value(value) -> the text a view writes to its URL (bools 0/1, lists comma-joined)

`value` is a URL string or a value typed in a lesson's YAML (int, float, bool, list). Kinds: "text", "model",
"model or none" (the model's validity is the caller's: the catalogue and the view's needs), "int", "float", "bool",
"ints" (comma-separated integers), "choice" (one of `choices`; `int` among them accepts any whole number) and
"choices" (a comma-separated list of them). Bounds (lo, hi, even) are the declaration's: Param.validate.
"""
from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
MAX_NUMBER_CHARS = 40  # a number written with more characters is refused, not parsed
WHAT = {"text": "text", "model": "a model id", "model or none": "a model id or none", "int": "a whole number",
        "float": "a number", "bool": "true or false", "ints": "a list of whole numbers"}


def to_url_value(value: object) -> str:
    """A parameter value as the views write it to the URL: bools 0/1, lists comma-joined, a whole float without its
    ".0" (1.0 -> "1"), any other float exactly (repr)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(to_url_value(v) for v in value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def near(word: str, options: Iterable[object]) -> str:
    """" (did you mean 'x'?)" for the closest option; difflib's work is bounded (a word is cut to 100 characters, at
    most 200 options are compared)."""
    match = difflib.get_close_matches(word[:100], [str(o)[:100] for o in options][:200], n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def is_int_text(text: str) -> bool:
    return len(text) <= MAX_NUMBER_CHARS and re.fullmatch(r"[+-]?\d+", text.strip()) is not None


def _shown(text: str) -> str:
    return f"'{text[:60]}'"


def _scalar(value: object, what: str) -> str:
    """A scalar as text (a YAML number or bool as its URL text); a list, mapping or nothing is refused."""
    if isinstance(value, (dict, list, tuple, set)) or value is None:
        raise ValueError(f"must be {what}, not {'empty' if value is None else type(value).__name__}")
    return to_url_value(value)


def _number(value: object, kind: str) -> float | int:
    """An "int" or "float" value: finite; a whole number for "int" (3.0 reads as 3); never a bool."""
    text = _scalar(value, WHAT[kind]).strip()
    if not isinstance(value, bool) and len(text) <= MAX_NUMBER_CHARS:
        if kind == "int" and is_int_text(text):
            return int(text)
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and (kind == "float" or number.is_integer()):
            return float(number) if kind == "float" else int(number)
    raise ValueError(f"must be {WHAT[kind]} (got {_shown(text)})")


def _choice(value: object, choices: tuple[object, ...]) -> object:
    names = [str(c) for c in choices if c is not int]
    what = "one of " + ", ".join(names) + (" or a whole number" if int in choices else "")
    text = _scalar(value, what)
    for c in choices:
        if c is not int and str(c) == text:
            return c
    for c in choices:  # case aside (?method=lrp)
        if c is not int and str(c).lower() == text.lower():
            return c
    if int in choices and not isinstance(value, bool) and is_int_text(text):
        return int(text)
    raise ValueError(f"must be {what} (got {_shown(text)}){near(text, names)}")


def parse(kind: str, value: object, choices: tuple[object, ...] = ()) -> object:
    """`value` (URL text, or a lesson's typed value) as a value of `kind`; ValueError says what it must be."""
    if kind == "text":
        if not isinstance(value, str):
            raise ValueError(f"must be text, got {type(value).__name__} {_shown(str(value))}: put it in quotes")
        return value
    if kind in ("model", "model or none"):
        return _scalar(value, WHAT[kind]).strip()
    if kind in ("int", "float"):
        return _number(value, kind)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = _scalar(value, WHAT[kind]).strip().lower()
        if text in TRUE + FALSE:
            return text in TRUE
        raise ValueError(f"must be true or false (got {_shown(text)})")
    if kind == "choice":
        return _choice(value, choices)
    if kind in ("ints", "choices"):
        items = list(value) if isinstance(value, (list, tuple)) else \
            [t for t in _scalar(value, WHAT.get(kind, "a list")).split(",") if t.strip()]
        try:
            return [_number(v, "int") if kind == "ints" else _choice(v.strip() if isinstance(v, str) else v, choices)
                    for v in items]
        except ValueError as exc:
            if kind == "choices":
                raise
            raise ValueError(f"must be {WHAT[kind]} (got {_shown(to_url_value(items))})") from exc
    raise ValueError(f"unknown parameter kind {kind!r}")


def split_kind(kind: object) -> tuple[str, tuple[object, ...]]:
    """(kind name, choices) of a kind as explorer.views.PARAMS gives it: a tuple of choices, a list for several of
    them, else the kind's name."""
    if isinstance(kind, tuple):
        return "choice", kind
    if isinstance(kind, list):
        return "choices", tuple(kind)
    return str(kind), ()
