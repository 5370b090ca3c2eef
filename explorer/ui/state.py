"""View state that lives in the URL: every widget that defines a view reads ?key= and writes it back.

Pattern: `seed(key, default, parse)` puts the URL's value (if valid) in st.session_state before the widget
is created with that key; after the widget, `write(key, value)` mirrors it into st.query_params.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

import streamlit as st

T = TypeVar("T")
MAX_CHARS = 20_000  # longest text any input accepts


def url_value(key: str) -> str | None:
    """The raw query parameter `key`, or None."""
    try:
        value = st.query_params.get(key)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def seed(key: str, default: Any, parse: Callable[[str], Any] | None = None, valid: Callable[[Any], bool] | None = None) -> None:
    """Initialise st.session_state[key] from the URL (parsed and validated) or `default`, once."""
    if key in st.session_state:
        return
    raw = url_value(key)
    value = default
    if raw is not None:
        try:
            candidate = parse(raw) if parse else raw
            if valid is None or valid(candidate):
                value = candidate
        except (ValueError, TypeError):
            pass
    st.session_state[key] = value


def write(key: str, value: Any) -> None:
    """Mirror a view-state value into the URL (lists as comma-separated, bools as 0/1)."""
    if isinstance(value, bool):
        text = "1" if value else "0"
    elif isinstance(value, (list, tuple)):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    try:
        if st.query_params.get(key) != text:
            st.query_params[key] = text
    except Exception:
        pass


def _in(options: Sequence[Any]) -> Callable[[Any], bool]:
    return lambda v: v in options


def selectbox(label: str, options: Sequence[T], key: str, default: T | None = None, **kwargs: Any) -> T:
    """st.selectbox whose value is kept in ?key= (parsed to the type of the options)."""
    options = list(options)
    default = options[0] if default is None and options else default
    cast = type(options[0]) if options else str
    seed(key, default, cast, _in(options))
    if st.session_state.get(key) not in options:
        st.session_state[key] = default
    value = st.selectbox(label, options, key=key, **kwargs)
    write(key, value)
    return value


def radio(label: str, options: Sequence[T], key: str, default: T | None = None, **kwargs: Any) -> T:
    """st.radio (horizontal by default) kept in ?key=."""
    options = list(options)
    default = options[0] if default is None and options else default
    seed(key, default, type(options[0]) if options else str, _in(options))
    if st.session_state.get(key) not in options:
        st.session_state[key] = default
    kwargs.setdefault("horizontal", True)
    value = st.radio(label, options, key=key, **kwargs)
    write(key, value)
    return value


def slider(label: str, lo: int | float, hi: int | float, key: str, default: int | float, **kwargs: Any) -> Any:
    """A numeric st.slider kept in ?key= (clamped to [lo, hi])."""
    cast = type(default)
    seed(key, default, cast, lambda v: lo <= v <= hi)
    if not lo <= st.session_state[key] <= hi:
        st.session_state[key] = min(max(default, lo), hi)
    value = st.slider(label, lo, hi, key=key, **kwargs)
    write(key, value)
    return value


def toggle(label: str, key: str, default: bool = False, **kwargs: Any) -> bool:
    """st.toggle kept in ?key= as 0/1."""
    seed(key, default, lambda raw: raw.strip().lower() in ("1", "true", "yes", "on"))
    value = st.toggle(label, key=key, **kwargs)
    write(key, value)
    return bool(value)


def text_input(label: str, key: str, default: str = "", max_chars: int = MAX_CHARS, strip: bool = False,
               **kwargs: Any) -> str:
    """st.text_input kept in ?key= (secondary text boxes; the main sentence uses widgets.sentence_input)."""
    seed(key, default)
    value = str(st.text_input(label, key=key, max_chars=max_chars, **kwargs) or "")
    write(key, value)
    return value.strip() if strip else value


def multiselect(label: str, options: Sequence[T], key: str, default: Sequence[T] = (), **kwargs: Any) -> list[T]:
    """st.multiselect kept in ?key= as a comma-separated list."""
    options = list(options)
    cast = type(options[0]) if options else str

    def parse(raw: str) -> list:
        return [cast(x) for x in raw.split(",") if x != ""]

    seed(key, list(default), parse, lambda vs: all(v in options for v in vs))
    st.session_state[key] = [v for v in st.session_state[key] if v in options]
    value = st.multiselect(label, options, key=key, **kwargs)
    write(key, value)
    return list(value)
