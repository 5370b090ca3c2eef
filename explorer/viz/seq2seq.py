"""Figures of the seq2seq alignment view: alignment heatmap, one step's weights, top candidates, the no-attention
reliance chart, accuracy against source length, and the beam-search tree.

Inputs are numpy arrays and token tuples from explorer.probes.seq2seq; nothing here runs a model.
Token axes are numeric (tickvals/ticktext) so repeated tokens keep their own rows and columns.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.viz.theme import NORMAL, Theme, figure

MAX_TICKS = 60
STATUS_COLOURS = {"kept": 2, "finished": 4, "pruned": 7}  # indices into theme.categorical


def labels(tokens: Sequence[str]) -> list[str]:
    """Readable token labels: spaces (date characters) as ␣, SentencePiece ▁ / GPT-2 Ġ as a leading dot."""
    out = []
    for t in tokens:
        t = str(t).replace("▁", "·").replace("Ġ", "·")
        out.append("␣" if t == " " else (t if t.strip() else repr(t)))
    return out


def _ticks(tokens: Sequence[str]) -> dict:
    n = len(tokens)
    step = max(1, int(np.ceil(n / MAX_TICKS)))
    lab = labels(tokens)
    idx = list(range(0, n, step))
    return {"tickmode": "array", "tickvals": idx, "ticktext": [lab[i] if step == 1 else f"{i}:{lab[i]}" for i in idx]}


def alignment_heatmap(matrix: np.ndarray, out_tokens: Sequence[str], src_tokens: Sequence[str], title: str,
                      theme: Theme = NORMAL, highlight: int | None = None, height: int | None = None) -> go.Figure:
    """(T, S) weights: output tokens down, source tokens across; hover shows both tokens and the exact weight."""
    z = np.asarray(matrix, dtype=np.float32)
    T, S = z.shape
    out_l, src_l = labels(out_tokens), labels(src_tokens)
    custom = [[[f"{t}: {out_l[t]}", f"{j}: {src_l[j]}"] for j in range(S)] for t in range(T)]
    data = [{"type": "heatmap", "z": z.tolist(), "zmin": 0.0, "zmax": 1.0, "colorscale": theme.sequential,
             "customdata": custom, "colorbar": {"title": {"text": "weight"}, "thickness": 12},
             "hovertemplate": "output %{customdata[0]}<br>source %{customdata[1]}<br>weight %{z:.5f}<extra></extra>"}]
    layout = {"title": {"text": title}, "height": height or int(min(900, 160 + 26 * T)),
              "xaxis": {"title": {"text": "source token"}, "side": "top", "tickangle": -60, **_ticks(src_tokens)},
              "yaxis": {"title": {"text": "output token"}, "autorange": "reversed", **_ticks(out_tokens)}}
    if highlight is not None and 0 <= highlight < T:
        layout["shapes"] = [{"type": "rect", "x0": -0.5, "x1": S - 0.5, "y0": highlight - 0.5, "y1": highlight + 0.5,
                             "line": {"color": theme.categorical[5], "width": theme.line_width + 1}}]
    return figure(data, layout)


def step_weights(alpha: np.ndarray, src_tokens: Sequence[str], out_token: str, step: int,
                 theme: Theme = NORMAL, scores: np.ndarray | None = None) -> go.Figure:
    """Bars of a_t· over the source (and the raw scores e_t· as a line on a second axis when given)."""
    x = list(range(len(src_tokens)))
    lab = labels(src_tokens)
    data = [{"type": "bar", "x": x, "y": np.asarray(alpha, np.float32).tolist(), "name": "weight a",
             "marker": {"color": theme.categorical[4]}, "customdata": lab,
             "hovertemplate": "source %{x}: %{customdata}<br>a = %{y:.5f}<extra></extra>"}]
    layout = {"title": {"text": f"Step {step}: where the decoder looks while producing “{labels([out_token])[0]}”"},
              "height": 320, "legend": {"orientation": "h", "y": -0.35}, "bargap": 0.15,
              "xaxis": {**_ticks(src_tokens), "tickangle": -60},
              "yaxis": {"title": {"text": "weight a"}, "range": [0, 1]}}
    if scores is not None:
        data.append({"type": "scatter", "x": x, "y": np.asarray(scores, np.float32).tolist(), "name": "score e",
                     "yaxis": "y2", "mode": "lines+markers", "line": {"color": theme.categorical[5]}, "customdata": lab,
                     "hovertemplate": "source %{x}: %{customdata}<br>e = %{y:.5f}<extra></extra>"})
        layout["yaxis2"] = {"title": {"text": "score e (before softmax)"}, "overlaying": "y", "side": "right",
                            "showgrid": False}
    return figure(data, layout)


def topk_bars(tokens: Sequence[str], probs: np.ndarray, chosen: str, theme: Theme = NORMAL) -> go.Figure:
    """Top next-token candidates at one step (the produced / forced token highlighted)."""
    real = [t for t in tokens if t != ""]
    lab = labels(real)
    p = np.asarray(probs, np.float32)[: len(lab)].tolist()
    colours = [theme.categorical[2] if t == chosen else theme.categorical[1] for t in real]
    data = [{"type": "bar", "x": p[::-1], "y": lab[::-1], "orientation": "h", "marker": {"color": colours[::-1]},
             "hovertemplate": "%{y}: p = %{x:.5f}<extra></extra>"}]
    layout = {"title": {"text": "Top next-token candidates"}, "height": 260,
              "xaxis": {"title": {"text": "probability"}, "range": [0, 1]}, "yaxis": {"type": "category"}}
    return figure(data, layout)


def reliance_figure(out_tokens: Sequence[str], with_source: np.ndarray, without: np.ndarray,
                    theme: Theme = NORMAL) -> go.Figure:
    """No-attention model: log p(y_t) with the single context vector and with it zeroed, per output token."""
    x = list(range(len(out_tokens)))
    lab = labels(out_tokens)
    data = [{"type": "bar", "x": x, "y": np.asarray(with_source, np.float32).tolist(), "name": "with the source vector c",
             "marker": {"color": theme.categorical[4]}, "customdata": lab,
             "hovertemplate": "%{customdata}: log p = %{y:.4f}<extra>with c</extra>"},
            {"type": "bar", "x": x, "y": np.asarray(without, np.float32).tolist(), "name": "c and s₀ set to 0",
             "marker": {"color": theme.categorical[5]}, "customdata": lab,
             "hovertemplate": "%{customdata}: log p = %{y:.4f}<extra>without c</extra>"}]
    layout = {"barmode": "group", "height": 340, "legend": {"orientation": "h", "y": -0.3},
              "title": {"text": "How much each output token relies on the final encoder state"},
              "xaxis": {**_ticks(out_tokens), "tickangle": -60}, "yaxis": {"title": {"text": "log p(output token)"}}}
    return figure(data, layout)


def length_accuracy_figure(curves: Sequence[tuple[str, Sequence[str], Sequence[float], Sequence[int]]],
                           theme: Theme = NORMAL) -> go.Figure:
    """Exact match against source length: one line per (label, buckets, accuracy, n)."""
    data = [{"type": "scatter", "x": list(buckets), "y": list(acc), "name": name, "mode": "lines+markers",
             "line": {"color": theme.categorical[i % len(theme.categorical)]}, "customdata": list(n),
             "hovertemplate": "source length %{x}<br>exact match %{y:.3f}<br>n = %{customdata}<extra>" + name
                              + "</extra>"}
            for i, (name, buckets, acc, n) in enumerate(curves)]
    layout = {"title": {"text": "Accuracy against source length"}, "height": 340,
              "legend": {"orientation": "h", "y": -0.3},
              "xaxis": {"title": {"text": "source length (tokens)"}, "type": "category"},
              "yaxis": {"title": {"text": "exact match (held-out)"}, "range": [0, 1.02]}}
    return figure(data, layout)


def beam_tree(steps: Sequence[Sequence], theme: Theme = NORMAL, best: Sequence[str] = ()) -> go.Figure:
    """The beam-search tree: x = step, one dot per candidate (kept / finished / pruned), edges to parents.

    steps: per step, nodes with .tokens, .score, .norm_score, .parent (index among the previous step's kept
    nodes) and .status, as in explorer.probes.seq2seq.BeamNode.
    """
    fig = go.Figure()
    pos: list[list[tuple[int, float]]] = []
    ex: list[float | None] = []
    ey: list[float | None] = []
    pts = {s: ([], [], [], []) for s in STATUS_COLOURS}
    best = tuple(best)
    best_xy: list[tuple[int, float]] = []
    for t, step in enumerate(steps):
        kept_prev = [p for p, n in zip(pos[t - 1], steps[t - 1]) if n.status == "kept"] if t > 0 else [(-1, 0.0)]
        row: list[tuple[int, float]] = []
        for i, node in enumerate(step):
            y = -float(i)
            row.append((t, y))
            if node.parent is not None and 0 <= node.parent < len(kept_prev) and node.status != "pruned":
                px, py = kept_prev[node.parent]
                ex += [px, t, None]
                ey += [py, y, None]
            xs, ys, texts, hov = pts.get(node.status, pts["pruned"])
            xs.append(t)
            ys.append(y)
            texts.append(labels([node.tokens[-1]])[0] if node.tokens else "")
            hov.append(f"{' '.join(labels(node.tokens))}<br>log p = {node.score:.4f}<br>"
                       f"length-normalised = {node.norm_score:.4f}<br>{node.status}")
            if best and node.status == "finished" and tuple(node.tokens[:-1]) == best[: len(node.tokens) - 1] \
                    and len(node.tokens) == len(best):
                best_xy.append((t, y))
        pos.append(row)
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", line={"color": "rgba(128,128,128,0.6)", "width": 1.5},
                             hoverinfo="skip", showlegend=False))
    for status, (xs, ys, texts, hov) in pts.items():
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", name=status, text=texts,
                                     textposition="middle right", hovertext=hov, hoverinfo="text",
                                     marker={"size": theme.marker_size + 4,
                                             "color": theme.categorical[STATUS_COLOURS[status]],
                                             "symbol": "x" if status == "pruned" else "circle"}))
    if best_xy:
        fig.add_trace(go.Scatter(x=[best_xy[0][0]], y=[best_xy[0][1]], mode="markers", name="best",
                                 marker={"size": theme.marker_size + 14, "color": "rgba(0,0,0,0)",
                                         "line": {"width": 3, "color": theme.categorical[5]}}, hoverinfo="skip"))
    fig.update_xaxes(title_text="decoding step", dtick=1)
    fig.update_yaxes(title_text="candidate rank at that step", showticklabels=False, zeroline=False)
    n_rows = max((len(s) for s in steps), default=1)
    fig.update_layout(title={"text": "Beam search: kept, finished and pruned hypotheses"},
                      height=int(min(900, 200 + 34 * n_rows)), legend={"orientation": "h", "y": -0.15})
    return fig
