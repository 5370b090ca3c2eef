"""Tokens as chart labels and axis ticks that label every token up to MAX_TICKS, then every n-th with its index.

Tokens arrive as the text they stand for (explorer.text.token_text, applied by every adapter: `·` for a space, `↵` for a
newline, bytes decoded); `labels` only makes sure that nothing invisible reaches a chart, and `chart_labels` (used by
`ticks`) escapes them for Plotly, which reads a few HTML tags in every string it draws."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from explorer.text.escape import plotly_text
from explorer.text.token_text import readable

MAX_TICKS = 64


def labels(tokens: Sequence[str]) -> list[str]:
    """One visible label per token (explorer.text.token_text.readable: spaces `·`, control characters as pictures)."""
    return [readable(str(t)) for t in tokens]


def chart_labels(tokens: Sequence[str]) -> list[str]:
    """`labels` as Plotly shows them literally (ticks, hover, text, titles): `<`, `>` and `&` escaped, so that a token
    such as `<s>` is not read as one of the tags Plotly draws (<s> strikes through, <a href> is a link)."""
    return [plotly_text(t) for t in labels(tokens)]


def fit_label(token: str, room: int) -> str:
    """`token` (a label, not yet escaped) in at most `room` characters: cut with "…" when longer, "" (not drawn)
    when not even two characters fit. Where a chart cuts a label, its hover shows it whole."""
    if len(token) <= room:
        return token
    return token[:room - 1] + "…" if room >= 2 else ""


def ticks(tokens: Sequence[str], max_ticks: int = MAX_TICKS) -> dict:
    """Plotly axis settings labelling the tokens (every n-th, with its index, when there are more than max_ticks)."""
    n = len(tokens)
    step = max(1, math.ceil(n / max_ticks))
    lab = chart_labels(tokens)
    idx = list(range(0, n, step))
    return {"tickmode": "array", "tickvals": idx, "ticktext": [lab[i] if step == 1 else f"{i}:{lab[i]}" for i in idx]}


def strongest(row: np.ndarray, key_tokens: Sequence[str]) -> tuple[float, str, float]:
    """For one (S,) attention row: its largest weight, the label of that key, and the row's float64 sum."""
    row = np.asarray(row, dtype=np.float64)
    j = int(np.argmax(row))
    return float(row[j]), labels([key_tokens[j]])[0], float(row.sum())


def vector_text(v: np.ndarray, n: int = 8) -> str:
    """The first n entries of a vector, 4 decimals, with … when there are more."""
    return ", ".join(f"{x:.4f}" for x in v[:n]) + (" …" if len(v) > n else "")


def vector_summary(v: np.ndarray, n: int = 8) -> str:
    """'‖v‖ = …, D dims: first n entries' for a (D,) vector."""
    return f"‖·‖ = {float(np.linalg.norm(np.asarray(v, dtype=np.float64))):.4f}, {len(v)} dims: {vector_text(v, n)}"
