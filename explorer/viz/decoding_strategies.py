"""Figures of the decoding view: per-step bars, beam tree, diversity–quality scatter, coloured tokens."""
from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.text.escape import plotly_text
from explorer.text.token_text import marked_breaks
from explorer.viz.theme import CHAR_EM, PLOT_PX, Theme, figure
from explorer.viz.tokens import fit_label

if TYPE_CHECKING:
    from explorer.probes.decoding_strategies import ChatTemplate, StepView

GREY = "rgba(150,150,150,0.45)"


class Beam(Protocol):
    """What beam search kept and pruned at each step (explorer.adapters.generation.BeamTrace: S steps, C = 2·K
    candidates of K beams)."""

    @property
    def parent(self) -> np.ndarray: ...      # (S, C) the running beam each candidate extends
    @property
    def token(self) -> np.ndarray: ...       # (S, C) token ids
    @property
    def score(self) -> np.ndarray: ...       # (S, C) accumulated log-probability
    @property
    def step_logprob(self) -> np.ndarray: ...  # (S, C) its last token's log-probability
    @property
    def stopped(self) -> np.ndarray: ...     # (S, C) an end token or the maximum length
    @property
    def running(self) -> np.ndarray: ...     # (S, K) candidates that continue as the running beams
    @property
    def finished(self) -> np.ndarray: ...    # (S, C) entered the finished hypotheses
    @property
    def token_str(self) -> tuple[tuple[str, ...], ...]: ...
    @property
    def num_beams(self) -> int: ...


def step_bars(view: StepView, theme: Theme, title: str = "", top: float | None = None) -> go.Figure:
    """Top tokens at one step: bar = probability at the view's temperature; grey = removed by the strategy;
    the chosen token outlined and marked ★. Hover: logit, probability, sampled probability, kept. top: the y axis's
    upper end (two models' bars on one scale); default: the tallest bar."""
    tokens = [plotly_text(t) for t in view.tokens]
    labels = [("★ " if int(i) == view.chosen else "") + t for t, i in zip(tokens, view.ids)]
    colours = [theme.categorical[4] if k else GREY for k in view.kept]
    line_w = [3 if int(i) == view.chosen else 0 for i in view.ids]
    custom = np.stack([view.logits, view.raw_probs, view.final, view.kept.astype(float)], axis=1)
    x = list(range(len(tokens)))
    bar = {"type": "bar", "x": x, "y": np.asarray(view.probs), "customdata": custom, "text": labels,
           "marker": {"color": colours, "line": {"width": line_w, "color": theme.categorical[5]}},
           "textposition": "outside", "textangle": -60, "cliponaxis": False,
           "hovertemplate": ("token %{text}<br>logit (after penalties) %{customdata[0]:.4f}<br>p at T: %{y:.4f}"
                             "<br>model p (T=1) %{customdata[1]:.4f}<br>sampled p %{customdata[2]:.4f}"
                             "<br>kept %{customdata[3]:.0f}<extra></extra>")}
    return figure([bar], {
        "title": {"text": title or f"Step {view.step + 1}: {view.n_kept:,} of {view.vocab_size:,} tokens kept "
                                   f"({view.kept_mass:.1%} of the mass)"},
        "xaxis": {"tickvals": x, "ticktext": tokens, "tickangle": -60, "title": {"text": "token (by rank)"}},
        "yaxis": {"title": {"text": f"probability at T = {view.temperature:g}"}, "rangemode": "tozero",
                  **({"range": [0, top * 1.05]} if top else {})},
        "height": 420, "showlegend": False})




def beam_tree(beam: Beam, theme: Theme, max_steps: int = 30) -> go.Figure:
    """Each step's 2K candidates (y = rank) linked to the running beam they extend; coloured: kept as a
    running beam; outlined: entered the finished list; grey: pruned. Hover: token, accumulated log-prob. A token
    longer than its step's column is cut with "…" (fit_label), so that neighbouring steps' labels never overlap."""
    S = min(beam.token.shape[0], max_steps)
    C = beam.token.shape[1]
    room = int(0.8 * PLOT_PX / (S + 1) / (CHAR_EM * theme.font_size))  # characters a step's column holds, spaced
    xs, ys, text, colours, symbols, hover = [], [], [], [], [], []
    ex, ey = [], []
    for s in range(S):
        running = set(int(j) for j in beam.running[s])
        for j in range(C):
            kept = j in running and not beam.stopped[s, j]
            fin = bool(beam.finished[s, j])
            xs.append(s + 1)
            ys.append(-j)
            text.append(plotly_text(fit_label(beam.token_str[s][j], room)))
            colours.append(theme.categorical[4] if kept else (theme.categorical[2] if fin else GREY))
            symbols.append("diamond" if fin else "circle")
            state = "kept (running)" if kept else ("finished hypothesis" if fin else "pruned")
            hover.append(f"step {s + 1} · {html.escape(beam.token_str[s][j])}<br>sum log-prob {beam.score[s, j]:.4f}"
                         f"<br>this token {beam.step_logprob[s, j]:.4f}<br>{state}")
            prev = int(beam.running[s - 1][int(beam.parent[s, j])]) if s > 0 else 0
            ex += [s, s + 1, None]
            ey += [-prev, -j, None]
    size = theme.marker_size + 4
    return figure([
        {"type": "scatter", "x": ex, "y": ey, "mode": "lines", "line": {"color": GREY, "width": 1},
         "hoverinfo": "skip"},
        {"type": "scatter", "x": [0], "y": [0], "mode": "markers+text", "text": ["prompt"],
         "textposition": "middle left", "marker": {"size": size, "color": theme.categorical[7]}, "hoverinfo": "skip"},
        {"type": "scatter", "x": xs, "y": ys, "mode": "markers+text", "text": text, "textposition": "top center",
         "marker": {"size": size, "color": colours, "symbol": symbols}, "hovertext": hover, "hoverinfo": "text"},
    ], {"title": {"text": f"Beam tree: {beam.num_beams} beams, {C} candidates per step"
                          + (f" (first {S} steps)" if beam.token.shape[0] > S else "")},
        "xaxis": {"title": {"text": "step"}, "dtick": 1},
        "yaxis": {"title": {"text": "candidate rank (best at top)"}, "showticklabels": False},
        "height": max(360, 40 * C), "showlegend": False})


def tradeoff_scatter(rows: Sequence[dict], x: str, y: str, theme: Theme) -> go.Figure:
    """One point per strategy: x = diversity (self-BLEU or distinct-n), y = quality (mean log-prob/perplexity).
    A strategy with one output (greedy, beam) has no diversity over samples: its quality is a dotted line. The
    legend names each point's colour; normal mode also writes the names beside the points (the projector's 22 px
    names of nearby points overprinted)."""
    pts = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    mode = "markers+text" if theme.streamlit_theme else "markers"
    data = [{"type": "scatter", "x": [r[x]], "y": [r[y]], "mode": mode, "text": [r["kind"]],
             "textposition": "top center", "name": r["strategy"],
             "marker": {"size": theme.marker_size + 8, "color": theme.categorical[i % len(theme.categorical)]},
             "hovertemplate": f"{html.escape(r['strategy'])}<br>{x} %{{x:.4f}}<br>{y} %{{y:.4f}}"
                              f"<br>samples {r['samples']}<extra></extra>"} for i, r in enumerate(pts)]
    lines = [r for r in rows if r.get(x) is None and r.get(y) is not None]
    return figure(data, {
        "title": {"text": "Diversity–quality trade-off (one point per strategy)"}, "height": 420, "showlegend": True,
        "shapes": [{"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": r[y], "y1": r[y],
                    "line": {"dash": "dot", "color": GREY}} for r in lines],
        "annotations": [{"xref": "x domain", "x": 0, "xanchor": "left", "yref": "y", "y": r[y], "yanchor": "bottom",
                         "showarrow": False, "text": html.escape(f"{r['kind']}: one output, {y} {r[y]:.3f}")}
                        for r in lines],
        "xaxis": {"title": {"text": x + (" (lower = more diverse)" if x == "self-BLEU" else
                                         " (higher = more diverse)")}},
        "yaxis": {"title": {"text": y + (" (lower = the model finds it likelier)" if y == "perplexity" else
                                         " (higher = the model finds it likelier)")}}})


OUTPUT_LINES = 3  # lines of each column's output in the first screen (the rest scrolls; every sample is in full below)
FOLD = 280  # the log-prob chart's height under the outputs in the first screen (explorer.ui.charts.show's fold)


def settings_line(seed: int, max_new: int, min_new: int, stop_eos: bool, n: int, strategies: Sequence) -> str:
    """The settings every column shares, in words (the Settings popover is closed in class): seed, lengths, end
    token, samples, and the penalties that are on."""
    rep, ngram = strategies[0].repetition_penalty, strategies[0].no_repeat_ngram_size
    sampled = any(s.do_sample for s in strategies)
    return " · ".join(part for part in (
        f"seed {seed}" if sampled else "",
        f"up to {max_new} new tokens" + (f" (at least {min_new})" if min_new else ""),
        "stops at the end token" if stop_eos else "never stops early",
        f"{n} samples per sampling strategy" if sampled else "",
        f"repetition penalty {rep:g}" if rep != 1.0 else "",
        f"no repeated {ngram}-grams" if ngram else "",
    ) if part)


def logprob_lines(labels: Sequence[str], logprobs: Sequence[np.ndarray], theme: Theme, prompt: str = "",
                  reply: bool = False, second: Sequence[np.ndarray] | None = None,
                  names: tuple[str, str] = ("", ""), source: bool = False) -> go.Figure:
    """Log-probability of each generated token under the model, one line per strategy; the title quotes the end of
    the prompt (so that an exported chart says what it continues), of the message the model replies to
    (`reply`: a chat template) or of the source an encoder-decoder's output is for (`source`). second: a second
    model's lines for the same strategies, dashed in the same colours on the same axes, `names` the two models' ids
    (in each legend entry)."""
    xaxis: dict[str, object] = {"title": {"text": "generated token"}, "tick0": 1}
    layout: dict[str, object] = {"height": 360, "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
                              "margin": {"t": 40}, "xaxis": xaxis,
                              "yaxis": {"title": {"text": "log p (model, T = 1)"}}}
    if prompt.strip():  # the title above the legend: short enough for a projector's font
        what = "Log p of each token of the reply to" if reply else "Log p of each output token for" if source else \
            "Log p of each new token after"
        layout["title"] = {"text": f"{what} “{html.escape(prompt_end(prompt, 26))}”"}
        layout["margin"] = {"t": 64}
        layout["height"] = 400
    sets = [(logprobs, names[0], "solid")] + ([(second, names[1], "dash")] if second is not None else [])
    traces = []
    for lines, model, dash in sets:
        for i, (lab, lp) in enumerate(zip(labels, lines)):
            name = html.escape(f"{lab} · {model}" if second is not None else lab)
            traces.append({"type": "scatter", "x": list(range(1, len(lp) + 1)), "y": np.asarray(lp),
                           "mode": "lines+markers", "name": name,
                           "line": {"color": theme.categorical[i % len(theme.categorical)], "dash": dash},
                           "hovertemplate": f"{name}<br>step %{{x}}<br>log p %{{y:.4f}}<extra></extra>"})
    longest = max((len(lp) for lines, _, _ in sets for lp in lines), default=1)
    xaxis["dtick"] = max(1, math.ceil(longest / 12))  # whole tokens only, at most 12 ticks
    return figure(traces, layout)


def step_difference(a: StepView, b: StepView, names: tuple[str, str], theme: Theme) -> go.Figure:
    """p_B − p_A of model A's top tokens at one step (two StepViews of the same tokens `ids`, same context, same
    temperature): bars above zero where model B gives the token more probability."""
    tokens = [plotly_text(t) for t in a.tokens]
    diff = np.asarray(b.probs, dtype=float) - np.asarray(a.probs, dtype=float)
    x = list(range(len(tokens)))
    colours = [theme.categorical[0] if d >= 0 else theme.categorical[3] for d in diff]
    custom = np.stack([np.asarray(a.probs, dtype=float), np.asarray(b.probs, dtype=float)], axis=1)
    bar = {"type": "bar", "x": x, "y": diff, "customdata": custom, "marker": {"color": colours}, "text": tokens,
           "hovertemplate": (f"token %{{text}}<br>{html.escape(names[0])}: p %{{customdata[0]:.4f}}<br>"
                             f"{html.escape(names[1])}: p %{{customdata[1]:.4f}}<br>B − A %{{y:+.4f}}<extra></extra>")}
    return figure([bar], {
        "title": {"text": f"Step {a.step + 1}: p({html.escape(names[1])}) − p({html.escape(names[0])}), "
                          f"{html.escape(names[0])}'s top {len(tokens)}"},
        "xaxis": {"tickvals": x, "ticktext": tokens, "tickangle": -60, "title": {"text": "token (A's rank)"}},
        "yaxis": {"title": {"text": f"B − A, probability at T = {a.temperature:g}"}, "zeroline": True},
        "height": 420, "showlegend": False})


def prompt_line(tokens: Sequence[str], encoder_decoder: bool = False, chat: bool = False, most: int = 80) -> str:
    """The prompt as the model reads it, token by token as text (special tokens included), in one caption line."""
    what = "the chat as the model reads it (template included)" if chat else "prompt as the model reads it"
    return (f"{what} ({len(tokens)} tokens): " + " · ".join(tokens[:most]) + (" …" if len(tokens) > most else "")
            + (" — the encoder reads it; the decoder starts from its start token." if encoder_decoder else ""))


def chat_line(model_id: str, template: ChatTemplate, chat: bool, system: str | None, stop_eos: bool) -> str:
    """What the page says about an instruct model with a chat template: how the prompt is read, the system prompt it
    read (the template's own or the one given), and where the reply ends."""
    end = " or ".join(template.end) or "its end token"
    if not chat:
        return (f"{model_id} is an instruct model with a chat template (tuned on conversations): here it continues the "
                "raw text. Turn on Chat template to send the prompt as a user turn, as it was tuned to read it.")
    if system is None:
        said = "no system prompt (the template adds none)"
    elif system == template.default_system:
        said = f"the template's own system prompt “{system}”"
    else:
        said = f"the system prompt “{system}”"
    stop = f"each reply ends at {end}, the model's end-of-turn token" if stop_eos else \
        f"'Stop at end of sequence' is off: generation goes on past {end}"
    return (f"{model_id} is an instruct model with a chat template: the prompt is a user turn, after {said}, and the "
            f"columns are the assistant's reply; {stop}.")


def prompt_end(prompt: str, chars: int = 48) -> str:
    """The last words of `prompt` in at most `chars` characters, "…" in front when cut (runs of spaces collapsed;
    line breaks and tabs shown as the tokens show them, ↵ and ⇥: the model reads them)."""
    words = marked_breaks(prompt).split()
    out: list[str] = []
    while words and len(" ".join([words[-1], *out])) <= chars:
        out.insert(0, words.pop())
    if not out and words:  # one word longer than `chars`
        return "…" + words[-1][-chars:]
    return ("…" if words else "") + " ".join(out)


def metric_columns(generations: Sequence) -> dict[str, list]:
    """One table for the columns' first outputs: a row per metric, a column per strategy (4 decimals; None, shown
    empty, for a metric that does not apply: each column stays numeric)."""
    out: dict[str, list] = {"metric": list(generations[0].outputs[0].metrics) if generations else []}
    for gen in generations:
        out[gen.strategy.label] = [(None if v is None else round(float(v), 4))
                                   for v in gen.outputs[0].metrics.values()]
    return out


def summary_rows(rows: Sequence[dict]) -> list[dict]:
    """The diversity–quality table: one row per strategy, 4 decimals; a metric over samples that does not apply
    (self-BLEU of a strategy with one output) reads "n/a (one output)" (that column is text throughout)."""
    out = []
    for r in rows:
        row = {k: round(v, 4) if isinstance(v, float) else v
               for k, v in r.items() if k not in ("kind", "deterministic")}
        bleu = r.get("self-BLEU")
        row["self-BLEU"] = (f"{bleu:.4f}" if bleu is not None
                            else ("n/a (one output)" if r.get("deterministic") else "—"))
        out.append(row)
    return out


def tokens_html(prompt: str, tokens: Sequence[str], logprobs: np.ndarray, lo: float = -8.0,
                max_lines: int | None = None) -> str:
    """The prompt (grey) then each generated token shaded by its probability (dark = likely); hover = log p.
    max_lines: the box shows at most this many lines and scrolls for the rest (the side-by-side columns stay short
    enough for the chart below them to be in the first screen with a real model's long outputs)."""
    parts = [f"<span style='opacity:0.55'>{html.escape(prompt)}</span> "]
    for tok, lp in zip(tokens, logprobs):
        a = float(np.clip(1 - lp / lo, 0.0, 1.0)) if lo < 0 else 1.0
        parts.append(
            f"<span title='log p = {lp:.3f}, p = {np.exp(lp):.3f}' "
            f"style='background: rgba(0,114,178,{0.12 + 0.5 * a:.2f});"
            f" border-radius:3px; padding:0 2px; margin:0 1px'>{html.escape(str(tok))}</span>"
        )
    # <wbr> between tokens: sub-word tokens have no spaces, and without a break opportunity a long output ran
    # across the next strategy's column (projector mode)
    box = f" max-height:{1.75 * max_lines:g}em; overflow-y:auto;" if max_lines else ""
    return f"<div style='line-height:1.75; overflow-wrap:anywhere;{box}'>" + "<wbr>".join(parts) + "</div>"
