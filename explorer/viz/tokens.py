"""Tokens as chart labels: readable (GPT-2's Ġ and SentencePiece's ▁ as a leading dot, a space as ␣, a newline as
\\n), and axis ticks that label every token up to MAX_TICKS, then every n-th with its index."""
from __future__ import annotations

import math
from typing import Sequence

MAX_TICKS = 64


def labels(tokens: Sequence[str]) -> list[str]:
    """One readable label per token (blank tokens shown by their repr)."""
    out = []
    for t in tokens:
        t = str(t).replace("Ġ", "·").replace("▁", "·").replace("Ċ", "\\n")
        out.append("␣" if t == " " else (t if t.strip() else repr(t)))
    return out


def ticks(tokens: Sequence[str], max_ticks: int = MAX_TICKS) -> dict:
    """Plotly axis settings labelling the tokens (every n-th, with its index, when there are more than max_ticks)."""
    n = len(tokens)
    step = max(1, math.ceil(n / max_ticks))
    lab = labels(tokens)
    idx = list(range(0, n, step))
    return {"tickmode": "array", "tickvals": idx, "ticktext": [lab[i] if step == 1 else f"{i}:{lab[i]}" for i in idx]}
