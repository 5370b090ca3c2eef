"""Human-readable dates -> ISO 8601, the classic small attention demo.

Tokenization (decided here, used everywhere): **both sides are character level**.
The source is the lowercased date string split into characters (spaces kept as
``" "`` tokens, see :func:`tokenize`), so any way a user types a date maps onto a
closed vocabulary of ~40 symbols; the target is the ten characters of
``YYYY-MM-DD``. Attention then shows which source characters (day digits, month
letters, year digits) each output digit reads.

All formats are unambiguous: numeric day-first formats use dots (``03.03.1997``),
year-first formats use slashes or dashes (``1997/03/03``); no ``3/3/97`` style.
Weekday names, when present, are the correct ones for the date. Years: 1900-2099.
"""

from __future__ import annotations

import datetime as _dt
import random
from typing import Callable

from .vocab import tokenize_chars

__all__ = ["TRAIN_SEED", "HELDOUT_SEED", "PRESETS", "FORMATS", "generate_pairs", "to_iso", "format_date",
           "tokenize"]

TRAIN_SEED = 1
HELDOUT_SEED = 2
FIRST_DAY = _dt.date(1900, 1, 1)
LAST_DAY = _dt.date(2099, 12, 31)

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]
MONTHS_SHORT = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS_SHORT = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_ORDINAL_WORDS = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
    "eighteenth", "nineteenth", "twentieth", "twenty-first", "twenty-second", "twenty-third",
    "twenty-fourth", "twenty-fifth", "twenty-sixth", "twenty-seventh", "twenty-eighth", "twenty-ninth",
    "thirtieth", "thirty-first",
]


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# name -> formatter(date) -> str
FORMATS = {
    "the_nth_of_month": lambda d: f"the {_ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",
    "the_word_of_month": lambda d: f"the {_ORDINAL_WORDS[d.day - 1]} of {MONTHS[d.month - 1]} {d.year}",
    "month_d_comma": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "month_nth_comma": lambda d: f"{MONTHS[d.month - 1]} {_ordinal(d.day)}, {d.year}",
    "month_the_nth": lambda d: f"{MONTHS[d.month - 1]} the {_ordinal(d.day)}, {d.year}",
    "weekday_d_month": lambda d: f"{WEEKDAYS[d.weekday()]} {d.day} {MONTHS[d.month - 1]} {d.year}",
    "weekday_comma_month_d": lambda d: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {d.day}, {d.year}",
    "wkd_d_mon": lambda d: f"{WEEKDAYS_SHORT[d.weekday()]} {d.day} {MONTHS_SHORT[d.month - 1]} {d.year}",
    "d_month": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",
    "d_mon": lambda d: f"{d.day} {MONTHS_SHORT[d.month - 1]} {d.year}",
    "dd_mon_dash": lambda d: f"{d.day:02d}-{MONTHS_SHORT[d.month - 1]}-{d.year}",
    "mon_d": lambda d: f"{MONTHS_SHORT[d.month - 1]} {d.day} {d.year}",
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "d.m.yyyy": lambda d: f"{d.day}.{d.month}.{d.year}",
    "yyyy/mm/dd": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
    "iso": lambda d: d.isoformat(),
}
_FORMAT_NAMES = list(FORMATS)


def to_iso(date: _dt.date) -> str:
    """``datetime.date`` -> ``"YYYY-MM-DD"``."""
    return f"{date.year:04d}-{date.month:02d}-{date.day:02d}"


def format_date(date: _dt.date, fmt: str) -> str:
    """Render ``date`` in one of the :data:`FORMATS` (lowercase)."""
    return FORMATS[fmt](date)


def tokenize(text: str) -> list[str]:
    """Source tokenizer: lowercased characters, whitespace runs collapsed to one ``" "``."""
    return tokenize_chars(text, lower=True)


def generate_pairs(n: int, seed: int = TRAIN_SEED,
                   stop: Callable[[], bool] | None = None) -> list[tuple[list[str], list[str]]]:
    """``n`` (source characters, target characters) pairs; the target is ``list("YYYY-MM-DD")``.

    Dates are uniform over 1900-2099, formats uniform over :data:`FORMATS`;
    deterministic for ``seed``. Source lengths are 8 to about 40 characters.
    ``stop()`` (asked every 1,000 pairs) ends the list early when it returns True.
    """
    rng = random.Random(seed)
    span = (LAST_DAY - FIRST_DAY).days
    out: list[tuple[list[str], list[str]]] = []
    for i in range(n):
        if stop is not None and i % 1000 == 0 and stop():
            break
        date = FIRST_DAY + _dt.timedelta(days=rng.randint(0, span))
        fmt = _FORMAT_NAMES[rng.randrange(len(_FORMAT_NAMES))]
        out.append((tokenize(FORMATS[fmt](date)), list(to_iso(date))))
    return out


PRESETS: list[str] = [
    "the 3rd of march 1997",
    "march 3, 1997",
    "monday 3 march 1997",
    "03.03.1997",
    "3 mar 1997",
    "the twenty-first of december 2012",
    "saturday, july 20, 1969",
    "1989/11/09",
]
