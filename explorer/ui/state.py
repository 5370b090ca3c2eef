"""View state that lives in the URL: every widget that defines a view reads ?key= and writes it back.

A page builds its widgets with `Controls("<url path>")`: each takes its label, default, range and help from the
view's declaration (explorer.views), seeds st.session_state from the URL (a valid value) before the widget exists,
and mirrors the widget's value into st.query_params after it. The page gives only what depends on the model
(options, upper bounds such as the number of layers).
"""
from __future__ import annotations

import operator
import os
from typing import TYPE_CHECKING, Any, Callable, Sequence, SupportsIndex, TypeVar

import streamlit as st

from explorer.param_kinds import parse, to_url_value
from explorer.text.escape import md_message

if TYPE_CHECKING:
    from explorer.views import Param

T = TypeVar("T")


def _max_chars() -> int:
    try:
        return max(1, int(os.environ.get("EXPLORER_MAX_CHARS", "") or 20_000))
    except ValueError:
        return 20_000


MAX_CHARS = _max_chars()  # longest text any input accepts, checked here on the server (EXPLORER_MAX_CHARS)


def text_refusal(value: str, limit: int = MAX_CHARS, what: str = "The text") -> str | None:
    """Why `value` is refused (longer than `limit` characters), naming the limit and its setting; None if it is not."""
    if len(value) <= limit:
        return None
    setting = " (set EXPLORER_MAX_CHARS to change it)" if limit == MAX_CHARS else ""
    return (f"{what} is {len(value):,} characters long, over the limit of {limit:,} characters{setting}: it was not "
            "read. Shorten it.")


def checked_text(value: object, limit: int = MAX_CHARS, what: str = "The text", stop: bool = True) -> str:
    """A text that entered the server (a widget's value), checked before anything is computed from it: within
    `limit` characters it is returned; longer, the page says so and stops (stop=False: the text is read as "").
    Browsers enforce a widget's max_chars, but a client of the websocket sends what it likes."""
    text = "" if value is None else str(value)
    message = text_refusal(text, limit, what)
    if message is None:
        return text
    st.error(message)
    if stop:
        st.stop()
    return ""


def url_value(key: str, limit: int = MAX_CHARS) -> str | None:
    """The raw query parameter `key`, or None; a value over `limit` characters is ignored, with a message."""
    try:
        value = st.query_params.get(key)
    except Exception:
        return None
    if not isinstance(value, str):
        return None
    if len(value) > limit:
        st.warning(f"?{key}= is {len(value):,} characters long, over the limit of {limit:,} characters"
                   f"{' (set EXPLORER_MAX_CHARS to change it)' if limit == MAX_CHARS else ''}: it was ignored.")
        return None
    return value


def drop_url_value(key: str) -> None:
    """Remove the query parameter `key` (a value refused with its own message, so that it is not refused twice)."""
    try:
        st.query_params.pop(key, None)
    except Exception:
        pass


def seed(key: str, default: object, parse: Callable[[str], T], valid: Callable[[T], bool] | None = None) -> None:
    """Initialise st.session_state[key] from the URL (`parse`d, e.g. `str`, and validated) or `default`, once. A URL
    value that does not parse (`inf` for a whole number: an OverflowError too) or is not valid is said, once, and the
    control opens at its default."""
    if key in st.session_state:
        return
    raw = url_value(key)
    value = default
    if raw is not None:
        taken = False
        try:
            candidate = parse(raw)
            if valid is None or valid(candidate):
                value, taken = candidate, True
        except (ValueError, TypeError, ArithmeticError):
            pass
        if not taken:
            st.warning(f"Ignoring ?{key}={md_message(raw[:40])}: not a value this control takes; it opens at "
                       f"{md_message(str(default)[:40])}.")
    st.session_state[key] = value


def write(key: str, value: object) -> None:
    """Mirror a view-state value into the URL (lists as comma-separated, bools as 0/1)."""
    text = to_url_value(value)
    try:
        if st.query_params.get(key) != text:
            st.query_params[key] = text
    except Exception:
        pass


def choice(widget: Callable[..., T], label: str, options: Sequence[T], key: str, default: T | None = None,
           **kwargs: object) -> T:
    """A single-choice widget (st.selectbox, st.radio) kept in ?key= (parsed to the type of the options)."""
    options = list(options)
    default = options[0] if default is None and options else default
    seed(key, default, lambda raw: parse("choice", raw, tuple(options)))
    if st.session_state.get(key) not in options:
        st.session_state[key] = default
    if widget is st.radio:
        kwargs.setdefault("horizontal", True)
    value = widget(label, options, key=key, **kwargs)
    write(key, value)
    return value


TOKEN_CHOICES = "_token_choices"  # {(url path, key): (tokens, value, default)}: what each token selector showed last


def token_value(old_tokens: Sequence[str], value: object, old_default: object, tokens: Sequence[str], default: object,
                first: int = 0) -> object:
    """The value that points, in `tokens`, at what `value` pointed at in `old_tokens` (value v is token v − first):
    the same token text, at the same occurrence when the new tokens have as many, else at its first; the view's
    `default` when the new tokens lack it, or when `value` was the old tokens' default (a selection never moved from
    the default, such as the last token, stays the default). A value that is not a token (−1: "every token") is
    kept."""
    if value == old_default:
        return default
    if not isinstance(value, SupportsIndex):  # what operator.index refuses
        return value
    try:
        i = operator.index(value) - first  # an int, numpy's too
    except TypeError:
        return value
    if isinstance(value, bool) or not 0 <= i < len(old_tokens):
        return value
    word = old_tokens[i]
    at = [j for j, t in enumerate(tokens) if t == word]
    if not at:
        return default
    occurrence = list(old_tokens[:i]).count(word)
    return first + (at[occurrence] if occurrence < len(at) else at[0])


def follow_tokens(view: str, key: str, tokens: tuple[str, ...], default: object, first: int = 0) -> None:
    """Before the token selector `key` of `view` is created: when the tokens it indexes are not those it was last
    shown with (a new sentence, another model), its value is re-derived from the new tokens (`token_value`) and written
    to the session and the URL. A value set since by something else (a lesson step, a link) is kept; a selector not
    drawn on the last run (its widget state dropped) is followed from the value it left in the URL."""
    memo = st.session_state.get(TOKEN_CHOICES, {}).get((view, key))
    if memo is None or memo[0] == tokens:
        return
    old_tokens, old_value, old_default = memo
    if key in st.session_state:
        if st.session_state[key] != old_value:
            return
    elif url_value(key) != str(old_value):
        return
    value = token_value(old_tokens, old_value, old_default, tokens, default, first)
    st.session_state[key] = value
    write(key, value)


def remember_tokens(view: str, key: str, tokens: tuple[str, ...], value: object, default: object) -> None:
    """After the token selector `key` of `view` is created: the tokens it was shown with, its value and default."""
    st.session_state.setdefault(TOKEN_CHOICES, {})[(view, key)] = (tokens, value, default)


def forget_tokens(view: str) -> None:
    """Forget what the token selectors of `view` pointed at (a lesson step sets them from its URL)."""
    memo = st.session_state.get(TOKEN_CHOICES, {})
    for k in [k for k in memo if k[0] == view]:
        del memo[k]


def toggle(label: str, key: str, default: bool = False, **kwargs: Any) -> bool:
    """st.toggle kept in ?key= as 0/1."""
    seed(key, default, lambda raw: parse("bool", raw))
    value = st.toggle(label, key=key, **kwargs)
    write(key, value)
    return bool(value)


class Controls:
    """The widgets of one view, each taking its label, default, range and help from the view's declaration
    (explorer.views): a page names the key, and gives only what depends on the model (options, upper bounds)."""

    def __init__(self, url_path: str) -> None:
        from explorer.views import BY_PATH

        self.view = BY_PATH[url_path]
        self.params = self.view.params

    def _kw(self, key: str, kwargs: dict[str, object]) -> tuple[Param, str]:
        """The declaration of `key` and the widget's label (kwargs' `label`, else the declared one); the declared help
        is added to `kwargs` (the widget's other arguments) unless they give one."""
        p = self.params[key]
        label = kwargs.pop("label", p.label or key)
        assert isinstance(label, str), label  # a widget's label is text
        if p.help and "help" not in kwargs:
            kwargs["help"] = p.help
        return p, label

    def _choice(self, widget: Callable[..., T], key: str, options: Sequence[T] | None, default: T | None,
                kwargs: dict[str, object]) -> T:
        p, label = self._kw(key, kwargs)
        options = list(p.choices if options is None else options)
        default = default if default is not None else (p.default if p.default in options else None)
        return choice(widget, label, options, key, default, **kwargs)

    def selectbox(self, key: str, options: Sequence[T] | None = None, default: T | None = None,
                  **kwargs: object) -> T:
        return self._choice(st.selectbox, key, options, default, kwargs)

    def radio(self, key: str, options: Sequence[T] | None = None, default: T | None = None, **kwargs: object) -> T:
        return self._choice(st.radio, key, options, default, kwargs)

    def token(self, key: str, tokens: Sequence[str], default: int, options: Sequence[int] | None = None,
              first: int = 0, slider: bool = False, **kwargs: Any) -> int:
        """A selector of one of `tokens` (those of the chart it sits with) that follows the sentence: when the tokens
        change (another sentence, another model), its value points at the same token text in the new ones (the same
        occurrence, else the first), else at `default` (`follow_tokens`), before the widget exists.
        Value v is token v − first. options: the selectbox's values (every token when None; one outside the tokens,
        such as −1 for "every token", is kept as it is); slider: a slider (Controls.number; kwargs may give `hi`)."""
        tokens = tuple(str(t) for t in tokens)
        path = self.view.url_path
        follow_tokens(path, key, tokens, default, first)
        if slider:
            value = self.number(key, hi=kwargs.pop("hi", first + len(tokens) - 1), default=default, slider=True,
                                **kwargs)
        else:
            values = list(range(first, first + len(tokens))) if options is None else list(options)
            value = self.selectbox(key, values, default, **kwargs)
        remember_tokens(path, key, tokens, value, default)
        return value

    def toggle(self, key: str, **kwargs: Any) -> bool:
        p, label = self._kw(key, kwargs)
        return toggle(label, key, bool(p.default), **kwargs)

    def multiselect(self, key: str, options: Sequence[T] | None = None, **kwargs: Any) -> list[T]:
        """st.multiselect kept in ?key= as a comma-separated list; at most `hi` choices when the declaration has one
        (a longer list from the URL or the websocket keeps its first `hi`, with a message)."""
        p, label = self._kw(key, kwargs)
        options = list(p.choices if options is None else options)
        raw = url_value(key) if key not in st.session_state else None
        offered = {str(o) for o in options}
        unknown = [x for x in (raw or "").split(",") if x and x not in offered]
        if unknown:
            st.warning(f"{label}: {md_message(', '.join(unknown[:5]))} from the link "
                       f"{'is' if len(unknown) == 1 else 'are'} not offered here; ignored.")
        seed(key, list(p.default or ()), lambda raw: parse("choices", [x for x in raw.split(",") if x in offered],
                                                           tuple(options)))
        chosen = [v for v in st.session_state[key] if v in options]
        most = int(p.hi) if p.hi is not None else None
        if most is not None:
            kwargs.setdefault("max_selections", most)
            if len(chosen) > most:
                st.warning(f"{label}: at most {most} may be chosen; got {len(chosen)}, using the first {most}.")
                chosen = chosen[:most]
        st.session_state[key] = chosen
        value = st.multiselect(label, options, key=key, **kwargs)
        write(key, value)
        return list(value)

    def text_input(self, key: str, default: str | None = None, max_chars: int = MAX_CHARS, strip: bool = False,
                   **kwargs: Any) -> str:
        """st.text_input kept in ?key= (secondary text boxes; the main sentence uses widgets.sentence_input)."""
        p, label = self._kw(key, kwargs)
        seed(key, (p.default or "") if default is None else default, str)
        value = checked_text(st.text_input(label, key=key, max_chars=max_chars, **kwargs), max_chars, label)
        write(key, value)
        return value.strip() if strip else value

    def number(self, key: str, hi: float | None = None, default: float | None = None, slider: bool = False,
               **kwargs: Any) -> Any:
        """An int or float widget (a slider, or a number box) kept in ?key=; a URL value or typed value out of range
        (or odd where it must be even) gets a warning saying what was used instead (Param.validate).
        hi, default: the upper bound and the default where they depend on the model."""
        p, label = self._kw(key, kwargs)
        cast = float if p.kind == "float" else int
        top = p.hi if hi is None else hi
        if p.lo is None or top is None:  # float(None) / int(None): the TypeError it always was, saying what is missing
            raise TypeError(f"{key}: a number needs a lower and an upper bound (declared, or hi=)")
        lo, hi = cast(p.lo), cast(top)
        default = cast(p.default if default is None else default)
        value: float | None
        if key not in st.session_state:
            raw = url_value(key)
            value = default
            if raw is not None:
                value, msg = p.validate(raw, lo, hi, label)
                if msg:
                    st.warning(md_message(msg))
            st.session_state[key] = value
        current = st.session_state[key]
        if not isinstance(current, (int, float)) or not lo <= current <= hi:
            st.session_state[key] = min(max(default, lo), hi)
        step = cast(kwargs.pop("step", p.step if p.step is not None else (2 if p.even else 1)))
        if hi <= lo:
            st.session_state[key] = lo
            st.caption(f"{label}: {lo} (the only choice)")
            value = lo
        elif slider:
            value = st.slider(label, lo, hi, key=key, step=step, **kwargs)
        else:
            fmt = {"format": "%g"} if p.kind == "float" else {}
            value = st.number_input(label, min_value=lo, max_value=hi, step=step, key=key, **fmt, **kwargs)
        value, msg = p.validate(value, lo, hi, label)
        if msg:
            st.warning(md_message(msg))
        write(key, value)
        return value


def follow_default(key: str, default: str) -> None:
    """Call before the widget `key` is drawn: a value that is still the default the page put there for another
    model follows the model (the same-word pair: causal models need the deciding words first). A value typed, or
    given by the URL, is kept."""
    mark = f"_default_{key}"
    previous = st.session_state.get(mark)
    if previous is not None and previous != default and st.session_state.get(key) == previous:
        st.session_state[key] = default
    st.session_state[mark] = default
