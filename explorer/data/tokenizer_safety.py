"""An uploaded tokenizer.json checked before the `tokenizers` library compiles or runs anything of it.

The library compiles every `{"Regex": ...}` pattern of a tokenizer.json (Split pre-tokenizers, Replace normalizers
and decoders) with Oniguruma and runs it in Rust holding the interpreter lock. Measured on one server: a Split regex
that backtracks, on a 2,000-character sentence, stalled every session for 161 s; one that reaches Oniguruma's retry
limit makes the Rust code panic, and pyo3's PanicException derives from BaseException, so `except Exception` misses
it and the session's script thread died.

Choice: a regex from a file runs only when it is exactly one of KNOWN_PATTERNS, the patterns the tokenizer families
ship (as transformers writes them in its converters and its GGUF mapping), each measured here to take at most
~40 ms on 20,000 characters of the worst inputs we found (runs of spaces, digits, letters, marks, apostrophes); any
other regex is refused at upload, with a message, before the library sees the file. We did not run other patterns
in a child process that a timeout kills: a regex's cost depends on the text as well as the pattern, so nothing
checked at upload clears it, and every encode (several per page run) would then be a round trip to a child; a
resident child per uploaded tokenizer costs ~100 MB of a 2 GiB replica and is one more thing a student multiplies.
Literal patterns (`{"String": ...}`) are substring searches and always allowed; the built-in pre-tokenizers
(ByteLevel, Whitespace, Metaspace, Digits, Punctuation, ...) use the library's own fixed expressions.

Panics: `guarded(call, what)` runs a library call and turns a PanicException (or any error) into TokenizerError, a
ValueError naming what failed, so that it is that upload's message and nothing else's.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from explorer.runtime.errors import ViewError

T = TypeVar("T")

# family -> its pattern, exactly as shipped (transformers' convert_slow_tokenizer.py, integrations/gguf/
# gguf_tokenizer_mapping.py, models/*/tokenization_*.py). tests/test_tokenizer_safety.py checks that transformers'
# own patterns are all here and times each on hostile text.
_WS = r"|\s*[\r\n]+|\s+(?!\S)|\s+"
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_UPPER, _LOWER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
FAMILY_PATTERNS: dict[str, str] = {
    "GPT-2 byte-level BPE": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "Llama 3 / tiktoken cl100k": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*" + _WS,
    "Qwen 2": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*" + _WS,
    "Qwen 3.5": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*" + _WS,
    "Mistral Tekken": rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*"
                      r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*" + _WS,
    "GPT-4o / tiktoken o200k": rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTIONS}?"
                               rf"|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_CONTRACTIONS}?"
                               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*" + _WS,
    "CLIP": r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
    "CLIP (converted)": r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
}
WHITESPACE_PATTERNS: dict[str, str] = {
    # SentencePiece conversions' whitespace normalizers (Pegasus, NLLB, mBART-50, XGLM, BigBird, Reformer, RemBERT,
    # DeBERTa-v2, BARThez, LayoutXLM, SeamlessM4T, CLIP). SeamlessM4T's " +▁" is left out: quadratic on a run of
    # spaces (0.67 s on 20,000).
    "runs of spaces": r" {2,}",
    "runs of whitespace or a newline/tab": r"\s{2,}|[\n\r\t]",
    "a newline or tab": r"[\n\r\t]",
    "a newline": r"\n",
    "whitespace": r"\s+",
    "only ▁ characters": r"^▁+$",
}
KNOWN_PATTERNS = {**FAMILY_PATTERNS, **WHITESPACE_PATTERNS}
_KNOWN = frozenset(KNOWN_PATTERNS.values())
_DATA = ("vocab", "merges")  # the model's data: long lists, never patterns


class TokenizerError(ViewError, ValueError):
    """An uploaded tokenizer that cannot be used here; str() says why, fit for the page."""


def regex_patterns(obj: object) -> list[tuple[str, object]]:
    """(where, pattern) of every `{"Regex": ...}` in a parsed tokenizer.json (its model's vocab and merges aside).
    `where` is a dotted path such as "pre_tokenizer.pretokenizers[0].pattern"."""
    found: list[tuple[str, object]] = []
    stack: list[tuple[str, object]] = [("", obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                name = re.sub(r"[^A-Za-z0-9_]", "", str(key))[:40] or "?"
                if key == "Regex":
                    found.append((path, item))
                elif not (path == "model" and key in _DATA):
                    stack.append((f"{path}.{name}" if path else name, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return sorted(found, key=lambda f: f[0])


def check_patterns(obj: object) -> None:
    """Raise TokenizerError when a parsed tokenizer.json holds a regex that is not one of KNOWN_PATTERNS."""
    for where, pattern in regex_patterns(obj):
        if isinstance(pattern, str) and pattern in _KNOWN:
            continue
        families = ", ".join(FAMILY_PATTERNS)
        raise TokenizerError(
            f"it holds a regular expression ({where or 'top level'}) that is not one of the patterns of known "
            f"tokenizer families ({families}, and the SentencePiece whitespace rules). It was refused before it ran: "
            "the tokenizers library runs such an expression on the server, where one that backtracks stalls every "
            "session. Use a built-in pre-tokenizer (ByteLevel, Whitespace, Metaspace) or one of those patterns.")


def is_panic(exc: BaseException) -> bool:
    """Whether exc is pyo3's PanicException (a Rust panic; it derives from BaseException, not Exception)."""
    return type(exc).__name__ == "PanicException" and type(exc).__module__ == "pyo3_runtime"


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:160]


def guarded(call: Callable[[], T], what: str) -> T:
    """call(), with a panic of the Rust library (or any error) raised as TokenizerError("{what} (...)"). Streamlit's
    own control-flow exceptions (BaseException) and KeyboardInterrupt/SystemExit pass through."""
    try:
        return call()
    except Exception as exc:
        raise TokenizerError(f"{what} ({_first(exc)})") from None
    except BaseException as exc:
        if is_panic(exc):
            raise TokenizerError(f"{what} (the library crashed: {_first(exc)})") from None
        raise
