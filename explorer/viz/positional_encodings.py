"""Figures of the positional-encodings view: position tables, similarities, rotations, RoPE, PCA, permutation.

Each builder takes arrays from a Trace of explorer.probes.position_formulas (the formula illustrations) or
explorer.probes.positional_encodings (the model's own positions) and a Theme and returns a go.Figure whose hover shows
the exact values. Large matrices are shown with a stride (at most `MAX_CELLS` cells) and the hover
still names the true indices.

Figures are built from plain trace/layout dicts by explorer.viz.theme.figure (no make_subplots, no update_* chains,
no per-property validation at run time), which keeps a control change cheap.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.viz.theme import Theme, figure

MAX_CELLS = 300_000
SIMILARITY_CELLS = 65_536  # position × position similarities: 256 × 256 cells is finer than the screen
FLOAT32_ABOVE = 16_384  # float64 matrices with more cells are sent as float32 (half the bytes)
_DASHES = ("solid", "dash", "dot", "dashdot")


def _title(text: str) -> dict:
    return {"text": text}


def _domains(n: int, gap: float = 0.04) -> list[list[float]]:
    width = (1 - gap * (n - 1)) / n
    return [[round(i * (width + gap), 4), round(i * (width + gap) + width, 4)] for i in range(n)]


def _panel_titles(titles: Sequence[str], domains: list[list[float]]) -> list[dict]:
    return [{"text": t, "x": (d[0] + d[1]) / 2, "y": 1.0, "xref": "paper", "yref": "paper", "xanchor": "center",
             "yanchor": "bottom", "showarrow": False} for t, d in zip(titles, domains)]


def strides(shape: tuple[int, int], max_cells: int = MAX_CELLS) -> tuple[int, int]:
    """Row and column strides so that the shown matrix has at most `max_cells` cells (1, 1 when it fits)."""
    rows, cols = shape
    step = 1
    while (-(-rows // step)) * (-(-cols // step)) > max_cells:
        step += 1
    return step, step


def matrix_heatmap(z: np.ndarray, theme: Theme, title: str, x_title: str, y_title: str, value: str = "value",
                   diverging: bool = True, mark: tuple[int, int] | None = None,
                   max_cells: int = MAX_CELLS, scale_from: Sequence[np.ndarray] = ()) -> go.Figure:
    """Heatmap of z (rows, cols), rows top to bottom; hover shows the true indices and the exact value. scale_from:
    tables of z's width whose colour range (robust_bound) is used, e.g. the trained model's at every training step,
    or two models' side by side."""
    z = np.asarray(z)
    rs, cs = strides(z.shape, max_cells)
    shown = z[::rs, ::cs]
    if shown.dtype == np.float64 and shown.size > FLOAT32_ABOVE:  # 7 significant digits: more than the hover shows
        shown = shown.astype(np.float32)
    bound, key = robust_bound([np.asarray(t)[::rs, ::cs] for t in scale_from] if len(scale_from) else [shown], value)
    trace: dict[str, object] = {
        "type": "heatmap", "z": shown, "x": np.arange(0, z.shape[1], cs), "y": np.arange(0, z.shape[0], rs),
        "colorscale": theme.diverging if diverging else theme.sequential,
        "hovertemplate": f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{value} %{{z:.6g}}<extra></extra>",
        "colorbar": {"title": {"text": key if diverging else value}},
    }
    if diverging:
        trace.update(zmin=-bound or -1.0, zmax=bound or 1.0, zmid=0.0)
    data = [trace] + (cell_mark(mark, theme)._data if mark is not None else [])
    step = f" (every {_ordinal(rs)} row and column shown)" if rs > 1 else ""
    return figure(data, {"title": _title(title + step), "height": 460, "xaxis": {"title": _title(x_title)},
                       "yaxis": {"title": _title(y_title), "autorange": "reversed"}})


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def cell_mark(mark: tuple[int, int], theme: Theme) -> go.Figure:
    """An open square on cell (row, col) of a matrix_heatmap; also drawn as an overlay on a cached heatmap."""
    return figure([{"type": "scatter", "x": [mark[1]], "y": [mark[0]], "mode": "markers", "hoverinfo": "skip",
                    "showlegend": False, "marker": {"symbol": "square-open", "size": theme.marker_size + 8,
                                                    "color": "black", "line": {"width": 3}}}], {})


def pe_heatmap(pe: np.ndarray, theme: Theme, title: str, mark: tuple[int, int] | None = None,
               scale_from: Sequence[np.ndarray] = ()) -> go.Figure:
    """Position × dimension table (sinusoidal or learned); scale_from: see matrix_heatmap."""
    return matrix_heatmap(pe, theme, title, "dimension", "position", "value", mark=mark, scale_from=scale_from)


def table_difference(a: np.ndarray, b: np.ndarray, theme: Theme, title: str) -> go.Figure:
    """b − a of two position tables of one shape (position × dimension), on a diverging scale."""
    return matrix_heatmap(np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64), theme, title,
                          "dimension", "position", "B − A")


def wavelengths(wavelength: np.ndarray, theme: Theme, n_pos: int | None, selected: int | None = None,
                half: bool = False) -> go.Figure:
    """Per-pair wavelength 2π/ω_i (log scale), with the number of positions shown for reference (n_pos).
    Pair i is dimensions (2i, 2i+1), or (i, i + r/2) when `half` (Llama-style rotate_half, r = 2·len)."""
    i = np.arange(len(wavelength))
    dims = np.stack([i, i + len(i)], axis=1) if half else np.stack([2 * i, 2 * i + 1], axis=1)
    data = [{"type": "scatter", "x": i, "y": wavelength, "mode": "lines+markers", "name": "wavelength",
             "customdata": dims, "hovertemplate": "pair i=%{x} (dims %{customdata[0]}, %{customdata[1]})<br>"
                                                 "wavelength %{y:.6g} positions<extra></extra>"}]
    if selected is not None and 0 <= selected < len(wavelength):
        data.append({"type": "scatter", "x": [selected], "y": [wavelength[selected]], "mode": "markers",
                     "name": f"pair {selected}", "hoverinfo": "skip",
                     "marker": {"size": theme.marker_size + 6, "symbol": "diamond"}})
    layout = {"title": _title("Wavelength of each rotated pair" if half else "Wavelength of each sin/cos pair"),
              "height": 380, "showlegend": False,
              "xaxis": {"title": _title(f"pair i (dimensions i, i + {len(i)})" if half else
                                        "pair i (dimensions 2i, 2i+1)"), "dtick": max(1, len(i) // 16)},
              "yaxis": {"title": _title("wavelength (positions)"), "type": "log"}}
    if n_pos:
        layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": n_pos, "y1": n_pos,
                             "line": {"dash": "dot", "color": "gray"}}]
        layout["annotations"] = [{"text": f"{n_pos} positions shown", "xref": "paper", "x": 0.01,
                                  "y": float(np.log10(n_pos)), "yanchor": "bottom", "xanchor": "left",
                                  "showarrow": False}]
    return figure(data, layout)


def similarity_line(sim: np.ndarray, pos: int, theme: Theme, kind: str) -> go.Figure:
    """Row `pos` of a similarity matrix: one position against all others."""
    x = np.arange(sim.shape[0])
    data = [{"type": "scatter", "x": x, "y": sim[pos], "mode": "lines", "name": f"position {pos}",
             "customdata": x - pos,
             "hovertemplate": f"position %{{x}} (offset %{{customdata}})<br>{kind} with {pos}: "
                              f"%{{y:.6g}}<extra></extra>"}]
    return figure(data, {
        "title": _title(f"{kind} of position {pos} with every position"), "height": 360, "showlegend": False,
        "xaxis": {"title": _title("position")}, "yaxis": {"title": _title(kind)},
        "shapes": [{"type": "line", "yref": "paper", "y0": 0, "y1": 1, "x0": pos, "x1": pos,
                    "line": {"dash": "dot", "color": "gray"}}],
    })


def rotation_block(R: np.ndarray, theme: Theme, size: int = 16) -> go.Figure:
    """The top-left size×size corner of R_k, with the numbers written in the cells."""
    n = min(size, R.shape[0])
    sub = R[:n, :n]
    data = [{"type": "heatmap", "z": sub, "x": np.arange(n), "y": np.arange(n), "colorscale": theme.diverging,
             "zmin": -1, "zmax": 1, "zmid": 0, "text": np.round(sub, 3), "texttemplate": "%{text}",
             "hovertemplate": "row %{y}, col %{x}: %{z:.6g}<extra></extra>"}]
    return figure(data, {"title": _title(f"R_k, first {n} of {R.shape[0]} dimensions (2×2 rotation blocks)"),
                       "height": 460, "xaxis": {"title": _title("input dimension")},
                       "yaxis": {"title": _title("output dimension"), "autorange": "reversed"}})


def rotation_errors(errors: np.ndarray, angles: np.ndarray, k: int, theme: Theme) -> go.Figure:
    """Left: the rotation angle k·ω_i of each pair; right: max |PE(p+k) − R_k PE(p)| for every p."""
    dom = _domains(2, 0.12)
    data = [
        {"type": "scatter", "x": np.arange(len(angles)), "y": angles, "mode": "lines+markers", "name": "angle",
         "xaxis": "x", "yaxis": "y", "hovertemplate": "pair %{x}: %{y:.6g} rad<extra></extra>"},
        {"type": "scatter", "x": np.arange(len(errors)), "y": errors, "mode": "lines", "name": "error",
         "xaxis": "x2", "yaxis": "y2", "hovertemplate": "p=%{x}: %{y:.3e}<extra></extra>"},
    ]
    return figure(data, {
        "height": 360, "showlegend": False,
        "xaxis": {"domain": dom[0], "title": _title("pair i"), "anchor": "y"},
        "yaxis": {"title": _title("radians"), "type": "log", "anchor": "x"},
        "xaxis2": {"domain": dom[1], "title": _title("position p"), "anchor": "y2"},
        "yaxis2": {"title": _title("max abs error"), "exponentformat": "e", "anchor": "x2"},
        "annotations": _panel_titles([f"angle k·ω_i of each pair (k={k})", "max |PE(p+k) − R_k PE(p)| per p"], dom),
    })


def rope_pairs(q: np.ndarray, q_rot: np.ndarray, angles: np.ndarray, pos: int, theme: Theme,
               n_pairs: int = 6) -> go.Figure:
    """Each of the first pairs of q as a 2-D arrow: dotted before rotation (position 0), solid at position `pos`."""
    n = min(n_pairs, len(angles))
    dom = _domains(n, 0.03)
    data: list[dict] = []
    layout: dict[str, object] = {
        "title": _title(f"Each pair of q turns by m·ω_i (dotted: m = 0, solid: m = {pos})"),
        "height": 300, "showlegend": False,  # the angle above each panel, its pair under it (short: 6 side by side)
        "annotations": _panel_titles([f"{angles[i]:.3g} rad" for i in range(n)], dom),
    }
    for i in range(n):
        s = "" if i == 0 else str(i + 1)
        colour = theme.categorical[i % len(theme.categorical)]
        for vec, dash, name in ((q, "dot", "position 0"), (q_rot, "solid", f"position {pos}")):
            data.append({"type": "scatter", "x": [0, vec[2 * i]], "y": [0, vec[2 * i + 1]], "mode": "lines+markers",
                         "line": {"dash": dash, "color": colour}, "xaxis": f"x{s}", "yaxis": f"y{s}",
                         "hovertemplate": f"pair {i} at {name}<br>(%{{x:.4f}}, %{{y:.4f}})<extra></extra>"})
        r = float(np.hypot(q[2 * i], q[2 * i + 1])) * 1.15 or 1.0
        layout[f"xaxis{s}"] = {"domain": dom[i], "range": [-r, r], "showticklabels": False, "anchor": f"y{s}",
                               "title": _title(f"pair {i}")}
        layout[f"yaxis{s}"] = {"range": [-r, r], "showticklabels": False, "anchor": f"x{s}", "scaleanchor": f"x{s}"}
    return figure(data, layout)


def rope_scores(offsets: np.ndarray, starts: np.ndarray, scores: np.ndarray, theme: Theme) -> go.Figure:
    """q·k after rotation against the offset, one line per query position m (they coincide)."""
    data = [{"type": "scatter", "x": offsets, "y": scores[r], "mode": "lines", "name": f"query at m={m}",
             "line": {"dash": _DASHES[r % 4]},
             "hovertemplate": f"m={m}, offset %{{x}}<br>q·k %{{y:.6g}}<extra></extra>"}
            for r, m in enumerate(starts)]
    title = "(R<sub>m</sub> q)·(R<sub>m+offset</sub> k): depends only on the offset"  # subscripts, not raw markup
    return figure(data, {"title": _title(title), "height": 380,
                       "xaxis": {"title": _title("offset (key − query)")},
                       "yaxis": {"title": _title("q·k after rotation")}})


def head_bias_lines(x: np.ndarray, bias: np.ndarray, theme: Theme, title: str, x_title: str) -> go.Figure:
    """One line per head: the position term (H, K) a model adds to its scores, against x (K,)."""
    data = [{"type": "scatter", "x": x, "y": bias[h], "mode": "lines", "name": f"head {h}",
             "hovertemplate": f"head {h}<br>{x_title} %{{x}}<br>bias %{{y:.6g}}<extra></extra>"}
            for h in range(bias.shape[0])]
    return figure(data, {"title": _title(title), "height": 380, "xaxis": {"title": _title(x_title)},
                         "yaxis": {"title": _title("added to the score")}})


def pca_positions(coords: np.ndarray, explained: np.ndarray, theme: Theme, dims: int = 2,
                  frame: np.ndarray | None = None, axes_of: str = "") -> go.Figure:
    """Position vectors projected on principal axes, coloured by position index. frame: more coordinates (the
    trained model's table on the same axes) that the axes' ranges hold too, so that the frame stays put from one
    training step to the next; axes_of: whose principal axes these are (default: the table's own)."""
    idx = np.arange(coords.shape[0])
    marker = {"color": idx, "colorscale": theme.sequential, "size": max(3, theme.marker_size - 3),
              "colorbar": {"title": {"text": "position"}}}
    labels = [f"PC{j + 1}{' of ' + axes_of if axes_of else ''} ({100 * explained[j]:.1f}%)"
              for j in range(min(3, coords.shape[1]))]
    line = {"color": "rgba(128,128,128,0.4)", "width": 1}
    layout: dict[str, object] = {"title": _title("PCA of the position vectors"), "height": 480, "showlegend": False}
    ranges: list[list[float] | None] = [None, None, None]
    if frame is not None:
        both = np.concatenate([np.asarray(coords, dtype=float), np.asarray(frame, dtype=float)])
        lo, hi = both.min(axis=0), both.max(axis=0)
        pad = 0.05 * np.maximum(hi - lo, 1e-9)
        ranges = [[float(lo[j] - pad[j]), float(hi[j] + pad[j])] for j in range(both.shape[1])] + [None] * 3
    if dims == 3 and coords.shape[1] >= 3:
        data = [{"type": "scatter3d", "x": coords[:, 0], "y": coords[:, 1], "z": coords[:, 2], "mode": "markers+lines",
                 "marker": marker, "line": line, "customdata": idx,
                 "hovertemplate": "position %{customdata}<br>(%{x:.4f}, %{y:.4f}, %{z:.4f})<extra></extra>"}]
        layout["scene"] = {name: {"title": _title(labels[j]), **({"range": ranges[j]} if ranges[j] else {})}
                           for j, name in enumerate(("xaxis", "yaxis", "zaxis"))}
    else:
        y = coords[:, 1] if coords.shape[1] > 1 else np.zeros(len(idx))
        data = [{"type": "scattergl", "x": coords[:, 0], "y": y, "mode": "markers+lines", "marker": marker,
                 "line": line, "customdata": idx,
                 "hovertemplate": "position %{customdata}<br>(%{x:.4f}, %{y:.4f})<extra></extra>"}]
        layout["xaxis"] = {"title": _title(labels[0]), **({"range": ranges[0]} if ranges[0] else {})}
        layout["yaxis"] = {"title": _title(labels[1] if len(labels) > 1 else ""),
                           **({"range": ranges[1]} if ranges[1] and coords.shape[1] > 1 else {})}
    return figure(data, layout)


CLIP_PERCENTILE = 99.0


def robust_bound(arrays: Sequence[np.ndarray], value: str) -> tuple[float, str]:
    """The colour range ±b of a diverging map of `arrays` and its colour-bar title: b the 99th percentile of |value|,
    so that a few outlier dimensions (GPT-2's and BERT's have values 10–100× the rest) do not wash every other cell
    out to white; the title says so when it clips (the hover keeps the exact values), else b is the largest |value|."""
    flat = np.concatenate([np.abs(np.ravel(a)) for a in arrays]) if arrays else np.zeros(0)
    flat = flat[np.isfinite(flat)]
    if not flat.size or not flat.max():
        return 1.0, value
    top, bound = float(flat.max()), float(np.percentile(flat, CLIP_PERCENTILE))
    if bound <= 0 or top <= 1.05 * bound:
        return top, value
    return bound, f"{value}<br>±{bound:.2g}: {CLIP_PERCENTILE:g}th pct.<br>(max {top:.2g})"


def sentence_vectors(tokens: Sequence[str], token: np.ndarray, position: np.ndarray, total: np.ndarray,
                     theme: Theme) -> go.Figure:
    """Three token × dimension heatmaps: token embedding, position vector, their sum (shared colour range)."""
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    bound, key = robust_bound([token, position, total], "value")
    dom = _domains(3, 0.03)
    names = ("token embedding", "position vector", "sum (input to layer 0)")
    data, layout = [], {"height": max(300, 80 + 24 * len(tokens)),
                        "yaxis": {"type": "category", "autorange": "reversed", "anchor": "x"},
                        "annotations": _panel_titles(names, dom)}
    for c, (name, z) in enumerate(zip(("token", "position", "sum"), (token, position, total))):
        s = "" if c == 0 else str(c + 1)
        data.append({"type": "heatmap", "z": z, "y": labels, "x": np.arange(z.shape[1]), "colorscale": theme.diverging,
                     "zmin": -bound, "zmax": bound, "zmid": 0, "showscale": c == 2, "xaxis": f"x{s}", "yaxis": "y",
                     "colorbar": {"title": {"text": key}},
                     "hovertemplate": f"%{{y}}<br>dim %{{x}}<br>{name} %{{z:.6g}}<extra></extra>"})
        layout[f"xaxis{s}"] = {"domain": dom[c], "title": _title("dimension"), "anchor": "y"}
    return figure(data, layout)


def vector_lines(token: np.ndarray, position: np.ndarray, total: np.ndarray, label: str, theme: Theme) -> go.Figure:
    """The three vectors of one token, dimension by dimension."""
    data = [{"type": "scatter", "x": np.arange(len(v)), "y": v, "mode": "lines", "name": name,
             "hovertemplate": f"{name}<br>dim %{{x}}: %{{y:.6g}}<extra></extra>"}
            for name, v in (("token embedding", token), ("position vector", position), ("sum", total))]
    return figure(data, {"title": _title(f"Vectors of {label}"), "height": 340, "xaxis": {"title": _title("dimension")},
                       "yaxis": {"title": _title("value")}})


def permutation_bars(tokens: Sequence[str], diff_nopos: np.ndarray, diff_pos: np.ndarray,
                     diff_causal: np.ndarray | None, theme: Theme) -> go.Figure:
    """Per token: max |output − un-shuffled output of the shuffled sentence|, without and with positions (log y)."""
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    series = [("without positions", diff_nopos), ("with positions", diff_pos)]
    if diff_causal is not None:
        series.append(("without positions, causal mask on", diff_causal))
    data = [{"type": "bar", "x": labels, "y": np.maximum(d, 1e-12), "name": name, "customdata": d,
             "hovertemplate": f"%{{x}}<br>{name}<br>max |difference| %{{customdata:.3e}}<extra></extra>"}
            for name, d in series]
    return figure(data, {"title": _title("max |difference| after un-shuffling, per token"), "barmode": "group",
                       "height": 400, "yaxis": {"type": "log", "title": _title("max |difference| (log)")},
                       "xaxis": {"type": "category", "title": _title("token (original order)")}})
