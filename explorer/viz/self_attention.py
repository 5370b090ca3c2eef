"""Figures of the self-attention view: model-view mosaic, head heatmap, line view, masks, step-by-step bars.

Inputs are numpy arrays and token tuples from explorer.probes.self_attention; nothing here runs a model.
Token axes are numeric (tickvals/ticktext) so repeated tokens ("the" twice) keep their own rows.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.viz.tokens import chart_labels
from explorer.viz.tokens import labels as display_tokens  # text for the page (captions, menus); charts: chart_labels
from explorer.viz.tokens import ticks
from explorer.viz.theme import NORMAL, Theme, figure

if TYPE_CHECKING:
    from explorer.probes.self_attention import Steps
MAX_LINES = 2500  # line view: at most this many query→key lines (largest weights first)
LINE_STEP = 0.025  # line view: weights are drawn rounded to this step (one trace per step)
MIN_LINE_WEIGHT = LINE_STEP / 2  # lighter lines would round to width 0
WIDTH_PER_WEIGHT = 8.0  # line view: a line of weight w is WIDTH_PER_WEIGHT · theme.line_width · w pixels wide


def difference_heatmap(a: np.ndarray, b: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], title: str,
                       theme: Theme = NORMAL) -> go.Figure:
    """Model B's attention minus model A's: b − a, (Tq, Tk), on a diverging scale from −1 to 1 (both are weights in
    0 … 1)."""
    z = np.asarray(b, dtype=np.float32) - np.asarray(a, dtype=np.float32)
    n_q = z.shape[0]
    return figure([{"type": "heatmap", "z": z, "zmin": -1.0, "zmid": 0.0, "zmax": 1.0, "colorscale": theme.diverging,
                    "colorbar": {"title": {"text": "B − A"}, "thickness": 12},
                    "hovertemplate": "query %{y} → key %{x}<br>B − A %{z:.5f}<extra></extra>"}], {
        "title": {"text": title}, "height": int(min(900, max(320, 18 * max(n_q, 8) + 120))),
        "xaxis": {"title": {"text": "key (attended to)"}, "side": "top", "tickangle": -60, **ticks(k_tokens)},
        "yaxis": {"title": {"text": "query (attending)"}, "autorange": "reversed", **ticks(q_tokens)},
    })


def largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |b − a| of two attention matrices of one shape."""
    return float(np.abs(np.asarray(b, dtype=np.float32) - np.asarray(a, dtype=np.float32)).max())


def head_heatmap(matrix: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], title: str,
                 theme: Theme = NORMAL, zmax: float | None = 1.0, rows: Sequence[int] | None = None,
                 cols: Sequence[int] | None = None, highlight: int | None = None) -> go.Figure:
    """One (Tq, Tk) attention matrix at full resolution; z is `matrix` itself (queries down, keys across).

    rows/cols: original token indices of the rows/columns (after hiding special tokens) for the hover.
    highlight: a row to outline (the selected query token).
    """
    z = np.asarray(matrix, dtype=np.float32)
    rows = list(rows) if rows is not None else list(range(z.shape[0]))
    cols = list(cols) if cols is not None else list(range(z.shape[1]))
    small = len(rows) * len(cols) <= 4096
    trace = {
        "type": "heatmap", "z": z, "zmin": 0.0, "zmax": zmax, "colorscale": theme.sequential,
        "colorbar": {"title": {"text": "weight"}, "thickness": 12},
        "hovertemplate": "query %{y}: %{customdata[0]}<br>key %{x}: %{customdata[1]}<br>weight %{z:.5f}<extra></extra>"
        if small else "query %{y} → key %{x}<br>weight %{z:.5f}<extra></extra>",
    }
    if small:
        trace["customdata"] = _pairs(q_tokens, k_tokens)
    n_q, n_k = z.shape
    side = int(min(900, max(320, 18 * max(n_q, 8) + 120)))
    layout = {
        "title": {"text": title}, "height": side,
        "xaxis": {"title": {"text": "key (attended to)"}, "side": "top", "tickangle": -60, **ticks(k_tokens)},
        "yaxis": {"title": {"text": "query (attending)"}, "autorange": "reversed", **ticks(q_tokens)},
    }
    if highlight is not None and 0 <= highlight < n_q:
        layout["shapes"] = [{"type": "rect", "x0": -0.5, "x1": n_k - 0.5, "y0": highlight - 0.5,
                             "y1": highlight + 0.5, "line": {"color": theme.categorical[5], "width": theme.line_width}}]
    return figure([trace], layout)


def _pairs(q_tokens: Sequence[str], k_tokens: Sequence[str]) -> np.ndarray:
    """(Tq, Tk, 2) text array: (query label, key label) of each cell, for the hover (a str array, not object:
    Plotly copies figures, and copying an object array is a Python call per cell)."""
    q = np.array(chart_labels(q_tokens), dtype=str)
    k = np.array(chart_labels(k_tokens), dtype=str)
    if not len(q) or not len(k):
        return np.empty((len(q), len(k), 2), dtype=str)
    return np.stack(np.broadcast_arrays(q[:, None], k[None, :]), axis=-1)


def model_view(thumbnails: np.ndarray, n_tokens: int, title: str, theme: Theme = NORMAL,
               selected: tuple[int, int] | None = None, gap: int = 1) -> go.Figure:
    """All layers × heads as ONE heatmap mosaic of (≤48 × ≤48) thumbnails (max-pooled when longer).

    Rows of tiles are layers (0 at the top), columns heads. customdata gives (layer, head) for the hover.
    """
    L, H, tq, tk = thumbnails.shape
    th, tw = tq + gap, tk + gap
    z = np.full((L * th - gap, H * tw - gap), np.nan, dtype=np.float32)
    ids = np.full(z.shape + (2,), -1, dtype=np.int16)
    for layer in range(L):
        for head in range(H):
            r, c = layer * th, head * tw
            z[r:r + tq, c:c + tk] = thumbnails[layer, head]
            ids[r:r + tq, c:c + tk, 0] = layer
            ids[r:r + tq, c:c + tk, 1] = head
    z = np.round(z, 4)
    layout = {
        "xaxis": {"tickmode": "array", "tickvals": [h * tw + (tk - 1) / 2 for h in range(H)],
                  "ticktext": [f"h{h}" for h in range(H)], "side": "top", "showgrid": False, "zeroline": False},
        "yaxis": {"tickmode": "array", "tickvals": [layer * th + (tq - 1) / 2 for layer in range(L)],
                  "ticktext": [f"L{layer}" for layer in range(L)], "autorange": "reversed", "showgrid": False,
                  "zeroline": False, "scaleanchor": "x"},
        "title": {"text": f"{title}: {L} layers × {H} heads, {tq}×{tk} per tile"
                          + (" (each head max-pooled to this size)" if max(tq, tk) < n_tokens else "")},
        "height": int(min(1100, max(360, 70 * L + 140))),
    }
    if selected is not None:
        layer, head = selected
        layout["shapes"] = [{"type": "rect", "x0": head * tw - 0.5, "x1": head * tw + tk - 0.5, "y0": layer * th - 0.5,
                             "y1": layer * th + tq - 0.5, "line": {"color": theme.categorical[5],
                                                                  "width": theme.line_width}}]
    return figure([{
        "type": "heatmap", "z": z, "zmin": 0.0, "zmax": 1.0, "colorscale": theme.sequential, "customdata": ids,
        "hoverongaps": False, "hovertemplate": "layer %{customdata[0]}, head %{customdata[1]}<br>weight %{z:.4f}"
                                               "<extra></extra>",
        "colorbar": {"title": {"text": "weight"}, "thickness": 12},
    }], layout)


def line_view(matrices: Sequence[np.ndarray], labels: Sequence[str], q_tokens: Sequence[str],
              k_tokens: Sequence[str], theme: Theme = NORMAL, query: int | None = None,
              rows: Sequence[int] | None = None, cols: Sequence[int] | None = None) -> go.Figure:
    """Tokens on two sides (queries left, keys right); a line per (query, key): width ∝ weight, opacity rising with it.

    matrices: one (Tq, Tk) matrix per overlaid head (labels name them, one colour each). query: a row index
    of the matrices to isolate (None = all rows). Lines below MIN_LINE_WEIGHT are dropped, and at most
    MAX_LINES of the largest are drawn. A line of weight w (rounded to LINE_STEP) is
    WIDTH_PER_WEIGHT · theme.line_width · w pixels wide, with opacity 0.35 + 0.65·w: one trace per rounded weight.
    """
    nq, nk = matrices[0].shape
    qlab = chart_labels(q_tokens)
    klab = chart_labels(k_tokens)
    rows = list(rows) if rows is not None else list(range(nq))
    cols = list(cols) if cols is not None else list(range(nk))
    traces: list[dict] = []
    budget = max(1, MAX_LINES // max(1, len(matrices)))
    for n, (m, label) in enumerate(zip(matrices, labels)):
        m = np.asarray(m, dtype=np.float32)
        sel = np.zeros_like(m, dtype=bool)
        if query is not None and 0 <= query < nq:
            sel[query] = True
        else:
            sel[:] = True
        sel &= m >= MIN_LINE_WEIGHT
        qi, kj = np.nonzero(sel)
        w = m[qi, kj]
        if len(w) > budget:
            keep = np.argsort(w)[-budget:]
            qi, kj, w = qi[keep], kj[keep], w[keep]
        colour = theme.categorical[n % len(theme.categorical)]
        level = np.maximum(1, np.rint(w / LINE_STEP)).astype(int)  # weight ≈ level · LINE_STEP, ± LINE_STEP / 2
        for b in np.unique(level):
            pick = level == b
            xs = np.full(pick.sum() * 3, np.nan)  # (0, query) → (1, key), then a NaN gap before the next line
            ys = np.full(pick.sum() * 3, np.nan)
            xs[0::3], xs[1::3] = 0.0, 1.0
            ys[0::3], ys[1::3] = qi[pick], kj[pick]
            weight = float(b * LINE_STEP)
            traces.append(dict(
                type="scatter", x=xs, y=ys, mode="lines", hoverinfo="skip",
                showlegend=bool(b == level.max()) and len(matrices) > 1, legendgroup=label, name=label,
                line={"color": colour, "width": WIDTH_PER_WEIGHT * theme.line_width * weight},
                opacity=min(1.0, 0.35 + 0.65 * weight),
            ))
    traces.append(dict(type="scatter", x=[0.0] * nq, y=list(range(nq)), mode="text", text=qlab,
                       textposition="middle left", hovertext=[f"query {rows[i]}: {qlab[i]}" for i in range(nq)],
                       hoverinfo="text", showlegend=False, textfont={"size": theme.font_size}))
    traces.append(dict(type="scatter", x=[1.0] * nk, y=list(range(nk)), mode="text", text=klab,
                       textposition="middle right", hovertext=[f"key {cols[j]}: {klab[j]}" for j in range(nk)],
                       hoverinfo="text", showlegend=False, textfont={"size": theme.font_size}))
    return figure(traces, {
        "xaxis": {"visible": False, "range": [-0.6, 1.6]}, "yaxis": {"visible": False, "autorange": "reversed"},
        "height": int(min(2400, max(300, 22 * max(nq, nk) + 80))),
        "title": {"text": f"Line view: queries (left) → keys (right), width ∝ weight (to {LINE_STEP:g})"},
        "legend": {"orientation": "h", "y": -0.02},
    })


def mask_figure(mask: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], title: str,
                theme: Theme = NORMAL) -> go.Figure:
    """The additive mask M (0 allowed, −∞ blocked) added to q·k/√d before the softmax."""
    blocked = ~np.isfinite(mask)
    z = blocked.astype(np.float32)
    n = z.shape[0] * z.shape[1]
    text = np.where(blocked, "−∞", "0") if n <= 1600 else None
    two = [[0, "#f7f7f7"], [0.5, "#f7f7f7"], [0.5, "#444444"], [1, "#444444"]]  # 0: allowed, 1: blocked
    trace = {"type": "heatmap", "z": z, "zmin": 0, "zmax": 1, "colorscale": two,
             "colorbar": {"tickvals": [0.25, 0.75], "ticktext": ["0", "−∞"], "len": 0.9, "thickness": 14,
                          "title": {"text": "M"}},  # the key when the cells are too small for their values
             "hovertemplate": "query %{y} → key %{x}<br>%{z}<extra>1 = −∞ (blocked)</extra>"}
    if text is not None:
        trace.update(text=text, texttemplate="%{text}")
    return figure([trace], {
        "xaxis": {"title": {"text": "key"}, "side": "top", "tickangle": -60, **ticks(k_tokens)},
        "yaxis": {"title": {"text": "query"}, "autorange": "reversed", **ticks(q_tokens)},
        "title": {"text": title}, "height": int(min(800, max(300, 18 * z.shape[0] + 120))),
    })


def steps_figure(key_tokens: Sequence[str], scaled: np.ndarray | None, probs: np.ndarray, query_token: str,
                 theme: Theme = NORMAL) -> go.Figure:
    """Bars of q·k/√d (before the softmax; None when unavailable) and the softmax weights for one query token."""
    labels = chart_labels(key_tokens)
    x = list(range(len(labels)))
    traces = []
    if scaled is not None:
        finite = np.where(np.isfinite(scaled), scaled, np.nan)
        traces.append({"type": "bar", "x": x, "y": finite, "name": "q·k/√d (score)",
                       "marker": {"color": theme.categorical[1]}, "customdata": labels,
                       "hovertemplate": "%{customdata}: %{y:.4f}<extra>score</extra>"})
    traces.append({"type": "bar", "x": x, "y": probs, "name": "softmax weight",
                   "marker": {"color": theme.categorical[0]}, "yaxis": "y2", "customdata": labels,
                   "hovertemplate": "%{customdata}: %{y:.5f}<extra>weight</extra>"})
    return figure(traces, {
        "title": {"text": f"Query “{chart_labels([query_token])[0]}”: scores and softmax weights"},
        "barmode": "group", "yaxis": {"title": {"text": "score"}},
        "yaxis2": {"title": {"text": "weight"}, "overlaying": "y", "side": "right", "range": [0, 1]},
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}, "height": 380,
        "xaxis": {"tickmode": "array", "tickvals": x, "ticktext": labels, "tickangle": -60},
    })


def compare_bars(tokens_a: Sequence[str], weights_a: np.ndarray, tokens_b: Sequence[str], weights_b: np.ndarray,
                 title: str, theme: Theme = NORMAL) -> go.Figure:
    """The attention row of the same word in two sentences, side by side (two bar traces)."""
    traces = []
    for n, (toks, w, name) in enumerate(((tokens_a, weights_a, "sentence A"), (tokens_b, weights_b, "sentence B"))):
        labels = chart_labels(toks)
        traces.append({"type": "bar", "x": [f"{i}:{t}" for i, t in enumerate(labels)], "y": w, "name": name,
                       "marker": {"color": theme.categorical[n]}, "xaxis": "x" if n == 0 else "x2",
                       "yaxis": "y" if n == 0 else "y2", "hovertemplate": "%{x}: %{y:.5f}<extra>" + name + "</extra>"})
    return figure(traces, {
        "title": {"text": title}, "height": 420, "showlegend": False,
        "xaxis": {"domain": [0, 0.48], "tickangle": -60}, "xaxis2": {"domain": [0.52, 1], "tickangle": -60},
        "yaxis": {"range": [0, 1], "title": {"text": "weight"}}, "yaxis2": {"range": [0, 1], "anchor": "x2"},
    })


def scale_tex(scalings: Sequence[float | None], head_dim: int = 0, qk: str = r"QK^\top") -> tuple[str, str]:
    """The factor on q·k as the model applies it: (LaTeX of the scaled product, a sentence saying what it is).

    scalings: per layer, as read from the model (None: not read). 1/√d is written as such when it is exactly that."""
    known = [s for s in scalings if s is not None]
    if not known or len(known) < len(scalings):
        return rf"s\,{qk}", "The factor s was not read from this model's attention modules."
    first = known[0]
    if all(abs(s - first) <= 1e-9 * max(1.0, abs(first)) for s in known):
        if head_dim and abs(first * math.sqrt(head_dim) - 1) < 1e-6:
            return rf"\frac{{{qk}}}{{\sqrt{{d}}}}", f"d = {head_dim}: every layer scales by 1/√d = {first:.6g}."
        if first == 1.0:
            return qk, "This model does not scale the dot products (its attention modules multiply by 1)."
        return rf"{first:.6g}\,{qk}", f"Every layer scales the dot products by {first:.6g}."
    listed = ", ".join(f"{s:.4g}" for s in known[:12]) + (" …" if len(known) > 12 else "")
    return rf"s_l\,{qk}", f"The factor depends on the layer l: s = {listed}."


def steps_table(steps: Steps, n_dims: int = 4) -> dict[str, list]:
    """The step-by-step table of one query: per key, q·k, the scaled product, the model's position term (T5 bias,
    ALiBi) if any, the mask, the softmax (recomputed and the model's), and the first dimensions of k, v and a·v."""
    nd = min(n_dims, steps.d)
    table: dict[str, list] = {
        "key": display_tokens(steps.key_tokens), "q·k": list(steps.dots),
        "÷√d" if steps.standard_scale else f"× {steps.scale:.6g}": list(steps.scaled)}
    if steps.bias is not None:
        table["+ bias"] = list(steps.bias)
    table.update({"mask": ["−∞" if not np.isfinite(m) else "0" for m in steps.mask],
                  "softmax": list(steps.probs), "model's weight": list(steps.model_probs)})
    for name, arr in (("k", steps.keys), ("v", steps.values), ("a·v", steps.weighted)):
        for c in range(nd):
            table[f"{name}[{c}]"] = list(arr[:, c])
    return table


def steps_formula(steps: Steps) -> str:
    """a_ij = softmax_j(…) as this model computes it: its scaling, its position term b_ij, its soft-cap."""
    inner = r"\frac{q_i\cdot k_j}{\sqrt{d}}" if steps.standard_scale else rf"{steps.scale:.6g}\;q_i\cdot k_j"
    if steps.bias is not None:
        inner += r"+b_{ij}"
    if steps.softcap:
        inner = rf"{steps.softcap:g}\tanh\!\big(({inner})/{steps.softcap:g}\big)"
    return rf"a_{{ij}}=\mathrm{{softmax}}_j\Big({inner}+M_{{ij}}\Big),\qquad z_i=\sum_j a_{{ij}}\,v_j"


def steps_notes(steps: Steps) -> list[str]:
    """Sentences on the model-specific terms of the step table: grouped-query heads, the position term, soft-cap,
    rotary embedding (with the computed checks)."""
    notes = []
    if steps.kv_groups > 1:
        notes.append(f"Grouped-query attention: query head {steps.head} reads key/value head {steps.kv_head}, which "
                     f"{steps.kv_groups} query heads share; k and v below are that head's.")
    if steps.bias is not None:
        notes.append(f"b_ij is the model's {steps.bias_name}, added to the scaled product before the softmax.")
    if steps.softcap:
        notes.append(f"Scores are soft-capped: {steps.softcap:g}·tanh(score / {steps.softcap:g}) before the mask.")
    if steps.angles is not None:
        notes.append(f"Rotary positions (RoPE): before the product, q and k were turned in {steps.rotated // 2} "
                     f"planes, dimension i with i + {steps.rotated // 2} (rotate_half), by position × θ_i; "
                     f"{steps.rotated} of the {steps.d} dimensions rotate. Rotating the model's q and k before the "
                     f"rotation with its own cos/sin gives its q and k to {steps.rope_error:.1e}; cos(position·θ_i) "
                     f"from its frequencies θ_i matches its cos table to {steps.theta_error:.1e}.")
    return notes


def rope_table(steps: Steps, n: int = 4) -> dict[str, list]:
    """The query's rotation for the first n planes: dimensions (i, i + r/2), θ_i, the angle position·θ_i, and q
    before → after."""
    half = steps.rotated // 2
    rows = range(min(n, half))
    inv_freq, angles, q_pre = steps.inv_freq, steps.angles, steps.q_pre
    if inv_freq is None or angles is None or q_pre is None:  # no rotary embedding: rotated is 0, no row reads them
        inv_freq = angles = q_pre = np.zeros(0)
    return {"dims": [f"({i}, {i + half})" for i in rows], "θ_i": [float(inv_freq[i]) for i in rows],
            f"angle = {steps.query}·θ_i": [float(angles[i]) for i in rows],
            "q before": [f"({q_pre[i]:.4f}, {q_pre[i + half]:.4f})" for i in rows],
            "q after": [f"({steps.q[i]:.4f}, {steps.q[i + half]:.4f})" for i in rows]}
