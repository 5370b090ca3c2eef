"""Figures of the decoding view: per-step bars, beam tree, diversity–quality scatter, coloured tokens."""
from __future__ import annotations

import html
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.viz.theme import Theme

GREY = "rgba(150,150,150,0.45)"


def step_bars(view: Any, theme: Theme, title: str = "") -> go.Figure:
    """Top tokens at one step: bar = probability at the view's temperature; grey = removed by the strategy;
    the chosen token outlined and marked ★. Hover: logit, probability, sampled probability, kept."""
    tokens = [f"{t!s}" for t in view.tokens]
    labels = [("★ " if int(i) == view.chosen else "") + t for t, i in zip(tokens, view.ids)]
    colours = [theme.categorical[4] if k else GREY for k in view.kept]
    line_w = [3 if int(i) == view.chosen else 0 for i in view.ids]
    custom = np.stack([view.logits, view.raw_probs, view.final, view.kept.astype(float)], axis=1)
    fig = go.Figure(go.Bar(
        x=list(range(len(tokens))), y=view.probs, marker={"color": colours, "line": {"width": line_w,
                                                                                        "color": theme.categorical[5]}},
        customdata=custom, text=labels, textposition="outside", textangle=-60, cliponaxis=False,
        hovertemplate=("token %{text}<br>logit (after penalties) %{customdata[0]:.4f}<br>p at T: %{y:.4f}"
                       "<br>model p (T=1) %{customdata[1]:.4f}<br>sampled p %{customdata[2]:.4f}"
                       "<br>kept %{customdata[3]:.0f}<extra></extra>"),
    ))
    fig.update_xaxes(tickvals=list(range(len(tokens))), ticktext=tokens, tickangle=-60, title="token (by rank)")
    fig.update_yaxes(title=f"probability at T = {view.temperature:g}", rangemode="tozero")
    fig.update_layout(title=title or f"Step {view.step + 1}: {view.n_kept:,} of {view.vocab_size:,} tokens kept "
                      f"({view.kept_mass:.1%} of the mass)", height=420, showlegend=False)
    return fig


def beam_tree(beam: Any, theme: Theme, max_steps: int = 30) -> go.Figure:
    """Each step's 2K candidates (y = rank) linked to the running beam they extend; coloured: kept as a
    running beam; outlined: entered the finished list; grey: pruned. Hover: token, accumulated log-prob."""
    S = min(beam.token.shape[0], max_steps)
    C = beam.token.shape[1]
    xs, ys, text, colours, symbols, hover = [], [], [], [], [], []
    ex, ey = [], []
    for s in range(S):
        running = set(int(j) for j in beam.running[s])
        for j in range(C):
            kept = j in running and not beam.stopped[s, j]
            fin = bool(beam.finished[s, j])
            xs.append(s + 1)
            ys.append(-j)
            text.append(beam.token_str[s][j])
            colours.append(theme.categorical[4] if kept else (theme.categorical[2] if fin else GREY))
            symbols.append("diamond" if fin else "circle")
            state = "kept (running)" if kept else ("finished hypothesis" if fin else "pruned")
            hover.append(f"step {s + 1} · {html.escape(beam.token_str[s][j])}<br>sum log-prob {beam.score[s, j]:.4f}"
                         f"<br>this token {beam.step_logprob[s, j]:.4f}<br>{state}")
            if s > 0:
                prev = int(beam.running[s - 1][int(beam.parent[s, j])])
                ex += [s, s + 1, None]
                ey += [-prev, -j, None]
            else:
                ex += [0, 1, None]
                ey += [0, -j, None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", line={"color": GREY, "width": 1}, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=["prompt"], textposition="middle left",
                             marker={"size": theme.marker_size + 4, "color": theme.categorical[7]}, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", text=text, textposition="top center",
                             marker={"size": theme.marker_size + 4, "color": colours, "symbol": symbols},
                             hovertext=hover, hoverinfo="text"))
    fig.update_xaxes(title="step", dtick=1)
    fig.update_yaxes(title="candidate rank (best at top)", showticklabels=False)
    fig.update_layout(title=f"Beam tree: {beam.num_beams} beams, {C} candidates per step"
                      + (f" (first {S} steps)" if beam.token.shape[0] > S else ""),
                      height=max(360, 40 * C), showlegend=False)
    return fig


def tradeoff_scatter(rows: Sequence[dict], x: str, y: str, theme: Theme) -> go.Figure:
    """One point per strategy: x = diversity (self-BLEU or distinct-n), y = quality (mean log-prob/perplexity)."""
    pts = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    fig = go.Figure()
    for i, r in enumerate(pts):
        fig.add_trace(go.Scatter(
            x=[r[x]], y=[r[y]], mode="markers+text", text=[r["kind"]], textposition="top center", name=r["strategy"],
            marker={"size": theme.marker_size + 8, "color": theme.categorical[i % len(theme.categorical)]},
            hovertemplate=f"{html.escape(r['strategy'])}<br>{x} %{{x:.4f}}<br>{y} %{{y:.4f}}"
                          f"<br>samples {r['samples']}<extra></extra>",
        ))
    for r in rows:  # one output (greedy, beam): no diversity over samples, only its quality, as a line
        if r.get(x) is None and r.get(y) is not None:
            fig.add_hline(y=r[y], line_dash="dot", line_color=GREY, annotation_text=html.escape(
                f"{r['kind']}: one output, {y} {r[y]:.3f}"), annotation_position="top left")
    fig.update_xaxes(title=x + (" (lower = more diverse)" if x == "self-BLEU" else " (higher = more diverse)"))
    fig.update_yaxes(title=y + (" (lower = the model finds it likelier)" if y == "perplexity" else
                                " (higher = the model finds it likelier)"))
    fig.update_layout(title="Diversity–quality trade-off (one point per strategy)", height=420, showlegend=True)
    return fig


def logprob_lines(labels: Sequence[str], logprobs: Sequence[np.ndarray], theme: Theme) -> go.Figure:
    """Log-probability of each generated token under the model, one line per strategy."""
    fig = go.Figure()
    for i, (lab, lp) in enumerate(zip(labels, logprobs)):
        fig.add_trace(go.Scatter(x=list(range(1, len(lp) + 1)), y=lp, mode="lines+markers", name=lab,
                                 line={"color": theme.categorical[i % len(theme.categorical)]},
                                 hovertemplate=f"{html.escape(lab)}<br>step %{{x}}<br>log p %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(title="generated token")
    fig.update_yaxes(title="log-probability under the model (T = 1)")
    fig.update_layout(title="How likely each generated token is", height=360)
    return fig


def tokens_html(prompt: str, tokens: Sequence[str], logprobs: np.ndarray, lo: float = -8.0) -> str:
    """The prompt (grey) then each generated token shaded by its probability (dark = likely); hover = log p."""
    parts = [f"<span style='opacity:0.55'>{html.escape(prompt)}</span> "]
    for tok, lp in zip(tokens, logprobs):
        a = float(np.clip(1 - lp / lo, 0.0, 1.0)) if lo < 0 else 1.0
        parts.append(
            f"<span title='log p = {lp:.3f}, p = {np.exp(lp):.3f}' style='background: rgba(0,114,178,{0.12 + 0.5 * a:.2f});"
            f" border-radius:3px; padding:0 2px; margin:0 1px'>{html.escape(str(tok))}</span>"
        )
    # <wbr> between tokens: sub-word tokens have no spaces, and without a break opportunity a long output ran
    # across the next strategy's column (projector mode)
    return "<div style='line-height:2; overflow-wrap:anywhere'>" + "<wbr>".join(parts) + "</div>"
