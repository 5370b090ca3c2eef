"""Figures of the recurrent-cell view: GateTrace -> go.Figure (plus escaped HTML and LaTeX strings).

User text reaches Plotly labels only through `label()` (HTML-escaped: Plotly reads a few tags in labels) and
reaches HTML only through `colored_tokens_html()` (every token escaped). LaTeX strings hold numbers only.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.probes.lstm_gates import LABELS, CellTerms, Comparison, GateTrace
from explorer.text.escape import plotly_text
from explorer.viz.theme import NORMAL, Theme, figure, ink_on, scale_rgb

BOUNDED01 = {"i", "f", "o", "r", "z"}


label = plotly_text  # the shared helper of explorer.text.escape, under the name this view's callers use


def token_labels(tokens: Sequence[str]) -> list[str]:
    """Unique axis labels "t · token" (tokens repeat; a categorical axis would merge them)."""
    return [f"{t} · {label(tok)}" for t, tok in enumerate(tokens)]


def _range(name: str, values: np.ndarray) -> dict:
    """Colour range: gates in [0, 1]; tanh states in [-1, 1]; c (and relu h) symmetric around 0, to the largest
    |value| of `values` (the values shown, or those of another run the scale is shared with)."""
    if name in BOUNDED01:
        return {"zmin": 0.0, "zmax": 1.0}
    bound = max(float(np.abs(values).max()) if values.size else 1.0, 1e-6)
    if name in ("g", "n", "h") and bound <= 1.0:
        bound = 1.0
    return {"zmin": -bound, "zmid": 0.0, "zmax": bound}


def value_range(name: str, values: np.ndarray) -> tuple[float, float]:
    """(lo, hi) of the colour scale for state `name` (same rule as the heatmaps)."""
    r = _range(name, values)
    return r["zmin"], r["zmax"]


def gate_heatmap(trace: GateTrace, name: str, layer: int, direction: int, units: np.ndarray,
                 theme: Theme = NORMAL, scale_from: Sequence[np.ndarray] = (), named: bool = False) -> go.Figure:
    """Token × unit heatmap of state `name` (z = gates[name][layer, direction][:, units], rows = tokens); its colour
    range from the arrays `scale_from` (values of other runs: the trained model's, a second model's) where given,
    else from z; named: the model's id in the title (two models side by side)."""
    z = trace.gates[name][layer, direction][:, units]
    colorscale = state_colorscale(name, theme)
    heat = dict(type="heatmap", z=z, x=[str(u) for u in units], y=token_labels(trace.tokens),
                colorscale=colorscale, colorbar={"title": {"text": name}},
                **_range(name, np.concatenate([np.ravel(a) for a in scale_from]) if len(scale_from) else z),
                hovertemplate="token %{y}<br>unit %{x}<br>" + name + " = %{z:.5f}<extra></extra>")
    title = f"{LABELS[name]} · layer {layer}" + (f" · {'backward' if direction else 'forward'}"
                                                 if trace.num_directions > 1 else "")
    if named:
        title = f"{label(trace.model_id)}: {title}"
    return figure([heat], {
        "title": {"text": title}, "height": min(180 + 22 * len(trace), 1400),
        "xaxis": {"title": {"text": "unit (sorted)"}, "showticklabels": len(units) <= 64, "type": "category"},
        "yaxis": {"autorange": "reversed", "type": "category", **({"dtick": 1} if len(trace) <= 40 else {})},
    })


def unit_range(traces: Sequence[GateTrace], layer: int, direction: int, unit: int) -> tuple[float, float]:
    """The y range that holds every state of `unit` in all `traces` (e.g. the trained model's and a training
    step's), padded by 5 %: a fixed axis while the step changes."""
    values = np.concatenate([tr.gates[n][layer, direction, :, unit].ravel() for tr in traces for n in tr.names
                             if n in tr.gates])
    lo, hi = float(values.min()), float(values.max())
    pad = 0.05 * max(hi - lo, 1e-6)
    return lo - pad, hi + pad


def unit_lines(trace: GateTrace, layer: int, direction: int, unit: int, theme: Theme = NORMAL,
               y_range: tuple[float, float] | None = None) -> go.Figure:
    """One unit through the sentence: its gates, cell and hidden state at every token. y_range: a fixed y axis
    (unit_range); default: fitted to this trace."""
    x = list(range(len(trace)))
    names = [n for n in ("i", "f", "o", "c", "h", "r", "z", "n") if n in trace.names]
    ticktext = [label(t) for t in trace.tokens]
    lines = [dict(type="scatter", x=x, y=trace.gates[name][layer, direction, :, unit], name=LABELS[name],
                  mode="lines+markers", line={"color": theme.categorical[k % len(theme.categorical)]},
                  customdata=ticktext,
                  hovertemplate=f"{name}" + " = %{y:.5f}<br>token %{x} · %{customdata}<extra></extra>")
             for k, name in enumerate(names)]
    return figure(lines, {
        "title": {"text": f"unit {unit} · layer {layer}"}, "height": 360, "hovermode": "x unified",
        "xaxis": {"tickmode": "array", "tickvals": x, "ticktext": ticktext},
        "yaxis": {"title": {"text": "value"}, **({"range": list(y_range)} if y_range else {})},
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
    })


def state_colorscale(name: str, theme: Theme = NORMAL) -> str:
    """The colour scale of state `name` in every chart of the view: sequential for gates in [0, 1], else diverging."""
    return theme.sequential if name in BOUNDED01 else theme.diverging


def scale_words(name: str, theme: Theme = NORMAL) -> str:
    """How the colours of state `name` read, e.g. "red high, blue low" (the theme's own diverging ends)."""
    if name in BOUNDED01:
        return f"{theme.sequential}: dark low, bright high"
    low, high = theme.diverging_ends
    return f"{high} high, {low} low"


def _mix(value: float, lo: float, hi: float, colorscale: str) -> tuple[str, str]:
    """(background, text colour) of a value on `colorscale` over lo…hi: the heatmap's own colour, and black or white
    text, whichever reads on it."""
    if hi <= lo:
        return "rgba(255,255,255,0)", "inherit"
    s = float(np.clip((value - lo) / (hi - lo), 0.0, 1.0))
    rgb = scale_rgb(colorscale, s)
    return "rgb({},{},{})".format(*(int(c) for c in rgb)), ink_on(rgb)


def colored_tokens_html(tokens: Sequence[str], values: np.ndarray, lo: float = -1.0, hi: float = 1.0,
                        colorscale: str = NORMAL.diverging) -> str:
    """LSTMVis / Karpathy-style sentence: each token's background coloured by the unit's value on `colorscale` (the
    heatmap's, `state_colorscale`: one palette for one quantity), escaped HTML."""
    spans = []
    for tok, v in zip(tokens, values):
        background, text = _mix(float(v), lo, hi, colorscale)
        spans.append(
            f'<span title="{html.escape(f"{v:.5f}")}" style="background:{background};'
            f'padding:2px 4px;margin:1px;border-radius:3px;display:inline-block;color:{text}">'
            f"{html.escape(tok)}</span>"
        )
    return '<div style="line-height:2.1;font-size:1.1em">' + " ".join(spans) + "</div>"


def saturation_scatter(sat: dict[str, tuple[np.ndarray, np.ndarray]], theme: Theme = NORMAL) -> go.Figure:
    """Karpathy et al. (2015) Fig. 3: per unit, fraction of tokens left- (< 0.1) vs right-saturated (> 0.9)."""
    dots = [dict(type="scatter", x=left, y=right, mode="markers", name=LABELS[name], customdata=np.arange(len(left)),
                 marker={"color": theme.categorical[k % len(theme.categorical)], "size": theme.marker_size,
                         "opacity": 0.75},
                 hovertemplate="unit %{customdata}<br>&lt; 0.1: %{x:.3f}<br>&gt; 0.9: %{y:.3f}"
                               "<extra>" + name + "</extra>")
            for k, (name, (left, right)) in enumerate(sat.items())]
    return figure(dots, {
        "title": {"text": "Gate saturation per unit"}, "height": 420,
        "shapes": [{"type": "line", "x0": 0, "y0": 1, "x1": 1, "y1": 0,
                    "line": {"dash": "dot", "color": "grey", "width": 1}}],
        "xaxis": {"title": {"text": "fraction of tokens with gate &lt; 0.1 (left-saturated)"}, "range": [-0.02, 1.02]},
        "yaxis": {"title": {"text": "fraction with gate &gt; 0.9 (right-saturated)"}, "range": [-0.02, 1.02]},
    })


def next_token_rows(trace: GateTrace) -> list[dict[str, str]]:
    """One row per position: the token read and the top-k next tokens with their probabilities, and the unknown-word
    token's probability in a column of its own where the vocabulary has one (it is left out of the ranking)."""
    rows = []
    for t, tok in enumerate(trace.tokens):
        row = {"position": str(t), "after": tok}
        for k, (cand, p) in enumerate(zip(trace.next_tokens[t], trace.next_probs[t])):
            row[f"#{k + 1}"] = f"{cand}  ({p:.1%})"
        if trace.unknown_probs is not None:
            row[f"unknown word ({trace.unknown_token})"] = f"{float(trace.unknown_probs[t]):.1%}"
        rows.append(row)
    return rows


def diff_heatmap(cmp: Comparison, units: np.ndarray, theme: Theme = NORMAL) -> go.Figure:
    """Sentence B − sentence A, position × unit, for the units in `units`."""
    z = cmp.diff[:, units]
    bound = max(float(np.abs(z).max()) if z.size else 1.0, 1e-6)
    y = [f"{t} · {label(a)}" + ("" if a == b else f" → {label(b)}")
         for t, (a, b) in enumerate(zip(cmp.tokens_a, cmp.tokens_b))]
    heat = dict(type="heatmap", z=z, x=[f"unit {u}" for u in units], y=y, colorscale=theme.diverging,
                zmin=-bound, zmid=0, zmax=bound, colorbar={"title": {"text": "B − A"}},
                hovertemplate="%{y}<br>%{x}<br>B − A = %{z:.5f}<extra></extra>")
    return figure([heat], {
        "title": {"text": f"{LABELS[cmp.name]}: sentence B − sentence A (units sorted by mean |difference|)"},
        "height": min(180 + 22 * len(y), 1200), "yaxis": {"autorange": "reversed", "type": "category"},
        "xaxis": {"showticklabels": len(units) <= 64},
    })


def largest(values: np.ndarray) -> float:
    """The largest |value| (0 for none)."""
    return float(np.abs(values).max()) if np.size(values) else 0.0


def model_diff_heatmap(diff: np.ndarray, units: np.ndarray, tokens: Sequence[str], name: str, a: str, b: str,
                       theme: Theme = NORMAL) -> go.Figure:
    """Model B − model A on one sentence: diff (T, H) at the units `units`, token × unit, symmetric colour range."""
    z = diff[:, units]
    bound = max(float(np.abs(z).max()) if z.size else 1.0, 1e-6)
    heat = dict(type="heatmap", z=z, x=[str(u) for u in units], y=token_labels(tokens), colorscale=theme.diverging,
                zmin=-bound, zmid=0, zmax=bound, colorbar={"title": {"text": "B − A"}},
                hovertemplate="token %{y}<br>unit %{x}<br>B − A = %{z:.5f}<extra></extra>")
    return figure([heat], {
        "title": {"text": f"{LABELS[name]}: {label(b)} − {label(a)}"},
        "height": min(180 + 22 * len(tokens), 1400), "yaxis": {"autorange": "reversed", "type": "category"},
        "xaxis": {"title": {"text": "unit (sorted as above)"}, "showticklabels": len(units) <= 64, "type": "category"},
    })


# --------------------------------------------------------------------------------------- equations
def _n(v: float) -> str:
    return f"{v:.4f}"


def equations_latex(terms: CellTerms) -> str:
    """The cell's equations with the numbers of one token and unit (PyTorch's definitions), one per line."""
    return (r"\begin{aligned}" + r" \\[4pt] ".join(line.replace("=", "&=", 1) for line in equation_lines(terms))
            + r"\end{aligned}")


def equation_lines(terms: CellTerms) -> list[str]:
    """The equations of `equations_latex`, one string each."""
    x, hp, v, prev = terms.x_part, terms.h_part, terms.value, terms.prev
    if terms.cell == "lstm":
        def gate(g: str, fn: str, W: str) -> str:
            return (rf"{g}_t = {fn}(\underbrace{{W_{{i{W}}} x_t + b_{{i{W}}}}}_{{{_n(x[g])}}} + "
                    rf"\underbrace{{W_{{h{W}}} h_{{t-1}} + b_{{h{W}}}}}_{{{_n(hp[g])}}}) = "
                    rf"{fn}({_n(x[g] + hp[g])}) = {_n(v[g])}")
        return [
            gate("i", r"\sigma", "i"), gate("f", r"\sigma", "f"), gate("g", r"\tanh", "g"), gate("o", r"\sigma", "o"),
            rf"c_t = f_t \odot c_{{t-1}} + i_t \odot g_t = {_n(v['f'])} \cdot {_n(prev['c'])} + "
            rf"{_n(v['i'])} \cdot {_n(v['g'])} = {_n(v['c'])}",
            rf"h_t = o_t \odot \tanh(c_t) = {_n(v['o'])} \cdot \tanh({_n(v['c'])}) = {_n(v['h'])}",
        ]
    if terms.cell == "gru":
        def gate(g: str) -> str:
            return (rf"{g}_t = \sigma(\underbrace{{W_{{i{g}}} x_t + b_{{i{g}}}}}_{{{_n(x[g])}}} + "
                    rf"\underbrace{{W_{{h{g}}} h_{{t-1}} + b_{{h{g}}}}}_{{{_n(hp[g])}}}) = {_n(v[g])}")
        return [
            gate("r"), gate("z"),
            rf"n_t = \tanh(\underbrace{{W_{{in}} x_t + b_{{in}}}}_{{{_n(x['n'])}}} + r_t \odot "
            rf"\underbrace{{(W_{{hn}} h_{{t-1}} + b_{{hn}})}}_{{{_n(hp['n'])}}}) = "
            rf"\tanh({_n(x['n'])} + {_n(v['r'])} \cdot {_n(hp['n'])}) = {_n(v['n'])}",
            rf"h_t = (1 - z_t) \odot n_t + z_t \odot h_{{t-1}} = "
            rf"(1 - {_n(v['z'])}) \cdot {_n(v['n'])} + {_n(v['z'])} \cdot {_n(prev['h'])} = {_n(v['h'])}",
        ]
    fn = r"\operatorname{relu}" if terms.nonlinearity == "relu" else r"\tanh"
    return [rf"h_t = {fn}(\underbrace{{W_{{ih}} x_t + b_{{ih}}}}_{{{_n(x['h'])}}} + "
            rf"\underbrace{{W_{{hh}} h_{{t-1}} + b_{{hh}}}}_{{{_n(hp['h'])}}}) = "
            rf"{fn}({_n(x['h'] + hp['h'])}) = {_n(v['h'])}"]
