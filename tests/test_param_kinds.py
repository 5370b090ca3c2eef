"""One parser per kind of view parameter (explorer.param_kinds), read by the URL controls, lessons and
Param.validate alike (issue 58 item 5)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from explorer import lessons as L
from explorer.param_kinds import parse, split_kind, to_url_value
from explorer.views import PARAMS, VIEWS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind, value, choices, expected", [
    ("int", "3", (), 3), ("int", " -12 ", (), -12), ("int", "3.0", (), 3), ("int", 7, (), 7), ("int", 4.0, (), 4),
    ("float", "0.25", (), 0.25), ("float", 2, (), 2.0), ("float", "1e-3", (), 0.001),
    ("bool", "YES", (), True), ("bool", "off", (), False), ("bool", True, (), True), ("bool", 1, (), True),
    ("ints", "1, 2,3", (), [1, 2, 3]), ("ints", [4, 5], (), [4, 5]), ("ints", "", (), []),
    ("choice", "beam", ("greedy", "beam"), "beam"), ("choice", "3", (2, 3), 3), ("choice", "7", ("mean", int), 7),
    ("choice", 3, (2, 3), 3), ("choices", "greedy,beam", ("greedy", "top-k", "beam"), ["greedy", "beam"]),
    ("choices", ["top-k"], ("greedy", "top-k"), ["top-k"]),
    ("text", "  as typed  ", (), "  as typed  "), ("model", " builtin:lstm-lm ", (), "builtin:lstm-lm"),
])
def test_a_value_is_read_as_its_kind(kind: str, value: object, choices: tuple, expected: object) -> None:
    got = parse(kind, value, choices)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("kind, value, choices, words", [
    ("int", "2.5", (), "must be a whole number (got '2.5')"), ("int", True, (), "must be a whole number"),
    ("int", "inf", (), "must be a whole number"), ("int", "9" * 41, (), "must be a whole number"),
    ("float", "nan", (), "must be a number (got 'nan')"), ("float", "1e999", (), "must be a number"),
    ("float", False, (), "must be a number"), ("float", None, (), "must be a number, not empty"),
    ("bool", "maybe", (), "must be true or false (got 'maybe')"), ("bool", [1], (), "must be true or false, not list"),
    ("ints", "1,x", (), "must be a list of whole numbers (got '1,x')"),
    ("choice", "bean", ("greedy", "beam"), "must be one of greedy, beam (got 'bean') (did you mean 'beam'?)"),
    ("choice", "x", ("mean", int), "must be one of mean or a whole number (got 'x')"),
    ("choices", "greedy,nope", ("greedy", "beam"), "must be one of greedy, beam (got 'nope')"),
    ("text", 5, (), "must be text, got int '5': put it in quotes"),
])
def test_a_value_of_another_kind_is_refused_saying_what_it_must_be(kind: str, value: object, choices: tuple,
                                                                  words: str) -> None:
    with pytest.raises(ValueError) as info:
        parse(kind, value, choices)
    assert words in str(info.value)


def test_every_declared_default_survives_its_url_and_the_lesson_check() -> None:
    """Each view's default, written as the URL writes it, reads back as itself, and a lesson step that sets it gets
    the same URL text."""
    checked = 0
    for view in VIEWS:
        for key, p in view.params.items():
            if p.default is None or p.kind in ("model", "model or none"):
                continue
            url = to_url_value(p.default)
            back = p.parse(url)
            want = list(p.default) if isinstance(p.default, tuple) else p.default
            assert back == want, (view.url_path, key, url, back)
            if view.url_path in PARAMS:
                assert L.check_value(view.url_path, key, PARAMS[view.url_path][key], p.default) == url
            checked += 1
    assert checked > 100


def test_validate_reads_with_the_parser_and_then_keeps_the_bounds() -> None:
    beam = next(v for v in VIEWS if v.url_path == "seq2seq").params["beam"]
    assert beam.validate("3.0") == (3, None)
    assert beam.validate("2.5") == (4, "Beam size must be a whole number; got '2.5', using 4.")
    assert beam.validate("99")[0] == 8 and beam.validate("0")[0] == 1
    temperature = next(v for v in VIEWS if v.url_path == "decoding-strategies").params["temperature"]
    value, msg = temperature.validate("inf")
    assert value == 1.0 and msg is not None and "must be a number" in msg and math.isfinite(value)


def test_lesson_kinds_split_into_the_parser_kinds() -> None:
    assert split_kind(("a", int)) == ("choice", ("a", int))
    assert split_kind(["x", "y"]) == ("choices", ("x", "y"))
    assert split_kind("float") == ("float", ())


def test_no_other_module_parses_a_kind_of_its_own() -> None:
    """The words a bool is written with, and the whole-number check, live in explorer/param_kinds.py only."""
    offenders = []
    for path in [*(ROOT / "explorer").rglob("*.py"), *(ROOT / "app_pages").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        if path.name != "param_kinds.py" and ('"yes", "on"' in text or r'r"[+-]?\d+"' in text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
