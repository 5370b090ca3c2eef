"""Figures of the seq2seq alignment view: alignment heatmap, one step's weights, top candidates, the no-attention
reliance chart, accuracy against source length, and the beam-search tree.

Inputs are numpy arrays and token tuples from explorer.probes.seq2seq; nothing here runs a model.
Token axes are numeric (tickvals/ticktext) so repeated tokens keep their own rows and columns.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.text.escape import plotly_text
from explorer.viz.self_attention import scale_tex
from explorer.viz.tokens import chart_labels, labels, ticks
from explorer.viz.theme import NORMAL, Theme, figure

if TYPE_CHECKING:
    from explorer.probes.seq2seq import AlignmentTrace, StepMath


class Form(Protocol):
    """What an encoder-decoder's attention computes, read from the checkpoint (explorer.adapters.base.CrossForm)."""

    @property
    def kind(self) -> str: ...  # none | bahdanau | luong-dot | luong-general | luong-concat | cross
    @property
    def inputs(self) -> tuple[tuple[str, int], ...]: ...  # (symbol, size) parts of the decoder RNN's input
    @property
    def output(self) -> tuple[str, ...]: ...  # what the output layer reads
    @property
    def scaling(self) -> tuple[float | None, ...]: ...  # per layer, the factor on the dot products
    @property
    def head_dim(self) -> int: ...
    @property
    def source(self) -> str: ...  # where it was read


def alignment_title(model_id: str, kind: str, layer: int, head: int | str, prefix: str = "") -> str:
    """The alignment heatmap's title: the model, then what is drawn (an RNN's attention a_tj, with its subscript; a
    Hugging Face model's cross-attention layer and head, or their mean)."""
    what = "attention a<sub>tj</sub>" if kind == "rnn" else \
        f"cross-attention, layer {layer}, " + ("mean over heads" if head == "mean" else f"head {head}")
    return f"{prefix}{plotly_text(model_id)}: {what}"


def alignment_heatmap(matrix: np.ndarray, out_tokens: Sequence[str], src_tokens: Sequence[str], title: str,
                      theme: Theme = NORMAL, highlight: int | None = None, height: int | None = None) -> go.Figure:
    """(T, S) weights: output tokens down, source tokens across; hover shows both tokens and the exact weight."""
    z = np.asarray(matrix, dtype=np.float32)
    T, S = z.shape
    out_l, src_l = chart_labels(out_tokens), chart_labels(src_tokens)
    custom = [[[f"{t}: {out_l[t]}", f"{j}: {src_l[j]}"] for j in range(S)] for t in range(T)]
    data = [{"type": "heatmap", "z": z.tolist(), "zmin": 0.0, "zmax": 1.0, "colorscale": theme.sequential,
             "customdata": custom, "colorbar": {"title": {"text": "weight"}, "thickness": 12},
             "hovertemplate": "output %{customdata[0]}<br>source %{customdata[1]}<br>weight %{z:.5f}<extra></extra>"}]
    layout = {"title": {"text": title}, "height": height or int(min(900, 160 + 26 * T)),
              "xaxis": {"title": {"text": "source token"}, "side": "top", "tickangle": -60, **ticks(src_tokens)},
              "yaxis": {"title": {"text": "output token"}, "autorange": "reversed", **ticks(out_tokens)}}
    if highlight is not None and 0 <= highlight < T:
        layout["shapes"] = [{"type": "rect", "x0": -0.5, "x1": S - 0.5, "y0": highlight - 0.5, "y1": highlight + 0.5,
                             "line": {"color": theme.categorical[5], "width": theme.line_width + 1}}]
    return figure(data, layout)


def step_weights(alpha: np.ndarray, src_tokens: Sequence[str], out_token: str, step: int,
                 theme: Theme = NORMAL, scores: np.ndarray | None = None) -> go.Figure:
    """Bars of a_t· over the source (and the raw scores e_t· as a line on a second axis when given)."""
    x = list(range(len(src_tokens)))
    lab = chart_labels(src_tokens)
    data = [{"type": "bar", "x": x, "y": np.asarray(alpha, np.float32).tolist(), "name": "weight a",
             "marker": {"color": theme.categorical[4]}, "customdata": lab,
             "hovertemplate": "source %{x}: %{customdata}<br>a = %{y:.5f}<extra></extra>"}]
    layout = {"title": {"text": f"Step {step}: where the decoder looks while producing "
                                f"“{chart_labels([out_token])[0]}”"},
              "height": 320, "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}, "bargap": 0.15,
              "xaxis": {**ticks(src_tokens), "tickangle": -60},
              "yaxis": {"title": {"text": "weight a"}, "range": [0, 1]}}
    if scores is not None:
        data.append({"type": "scatter", "x": x, "y": np.asarray(scores, np.float32).tolist(), "name": "score e",
                     "yaxis": "y2", "mode": "lines+markers", "line": {"color": theme.categorical[5]}, "customdata": lab,
                     "hovertemplate": "source %{x}: %{customdata}<br>e = %{y:.5f}<extra></extra>"})
        layout["yaxis2"] = {"title": {"text": "score e (before softmax)"}, "overlaying": "y", "side": "right",
                            "showgrid": False}
    return figure(data, layout)


NO_ATTENTION = ("No attention, so no alignment: every output token is computed from ONE context vector c, the "
                "encoder's final state.")


def reliance_figure(out_tokens: Sequence[str], with_source: np.ndarray, without: np.ndarray,
                    theme: Theme = NORMAL) -> go.Figure:
    """No-attention model: log p(y_t) with the single context vector and with it zeroed, per output token."""
    x = list(range(len(out_tokens)))
    lab = chart_labels(out_tokens)
    data = [{"type": "bar", "x": x, "y": np.asarray(with_source, np.float32).tolist(),
             "name": "with the source vector c", "marker": {"color": theme.categorical[4]}, "customdata": lab,
             "hovertemplate": "%{customdata}: log p = %{y:.4f}<extra>with c</extra>"},
            {"type": "bar", "x": x, "y": np.asarray(without, np.float32).tolist(), "name": "c and s₀ set to 0",
             "marker": {"color": theme.categorical[5]}, "customdata": lab,
             "hovertemplate": "%{customdata}: log p = %{y:.4f}<extra>without c</extra>"}]
    layout = {"barmode": "group", "height": 340, "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
              "title": {"text": "How much each output token relies on the final encoder state"},
              "xaxis": {**ticks(out_tokens), "tickangle": -60}, "yaxis": {"title": {"text": "log p(output token)"}}}
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
              "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
              "xaxis": {"title": {"text": "source length (tokens)"}, "type": "category"},
              "yaxis": {"title": {"text": "exact match (held-out)"}, "range": [0, 1.02]}}
    return figure(data, layout)


#: the score of each built-in attention, as the model computes it
def equation(form: Form) -> tuple[str, str]:
    """The formula the checkpoint computes, from its CrossForm (explorer.adapters.base): (LaTeX, a sentence on
    where it was read)."""
    if form.kind == "cross":
        scaled, words = scale_tex(form.scaling, form.head_dim, r"Q^{(l,h)}_{\text{dec}}K^{(l,h)\top}_{\text{enc}}")
        return (rf"A^{{(l,h)}}=\mathrm{{softmax}}\Big({scaled}\Big),\qquad \text{{row }}t:\ \text{{output position }}"
                r"t\text{ reading the source}", f"{words} Read from {form.source}.")
    x = form.inputs[0][0] if len(form.inputs) == 1 else "[" + ";".join(sym for sym, _ in form.inputs) + "]"
    gru = rf"s_t=\mathrm{{GRU}}({x},s_{{t-1}})"
    out = rf"p(y_t)=\mathrm{{softmax}}(W_o[{';'.join(form.output)}])" if len(form.output) > 1 else \
        rf"p(y_t)=\mathrm{{softmax}}(W_s{form.output[0]})"
    if form.kind == "none":
        parts = [r"c=h_S\ \text{(last encoder state, the same at every step)}", r"s_0=h_S", gru, out]
    else:
        parts = [rf"e_{{tj}}={SCORE_FORMULAS[form.kind]}", r"a_{tj}=\frac{\exp e_{tj}}{\sum_k\exp e_{tk}}",
                 r"c_t=\sum_j a_{tj}h_j"]
        parts = parts + [gru, out] if form.kind == "bahdanau" else \
            [gru] + parts + [r"\tilde h_t=\tanh(W_c[c_t;s_t])", out]
    return r",\quad ".join(parts), f"Read from the checkpoint: {form.source}."


SCORE_FORMULAS = {"bahdanau": r"v_a^\top\tanh(W_a s_{t-1}+U_a h_j)", "luong-dot": r"s_t^\top h_j",
                  "luong-general": r"s_t^\top W_a h_j", "luong-concat": r"v_a^\top\tanh(W_a[s_t;h_j])"}


def topk_columns(trace: AlignmentTrace, t: int) -> dict[str, list]:
    """The top next-token candidates at step t (◀ marks the token produced or forced), as table columns."""
    rows = [(f"{labels([tok])[0]}{' ◀' if int(i) == trace.out_ids[t] else ''}", round(float(p), 4))
            for i, tok, p in zip(trace.topk_ids[t], trace.topk_tokens[t], trace.topk_probs[t]) if tok != ""]
    return {"next token": [r[0] for r in rows], "p": [r[1] for r in rows]}


# the score formulas' parts (explorer.probes.seq2seq.SCORE_PARTS, LaTeX) as a table's column names
_PLAIN = (("_{t-1}", "ₜ₋₁"), ("_a", "ₐ"), ("_j", "ⱼ"), ("_t", "ₜ"), (r"\tanh(\dots)", "tanh(…)"))


def part_name(tex: str) -> str:
    """A part of a score formula ("W_a s_{t-1}") as plain text ("Wₐ sₜ₋₁")."""
    for a, b in _PLAIN:
        tex = tex.replace(a, b)
    return tex


def math_columns(m: StepMath) -> dict[str, list]:
    """The leading dimensions of the vectors in one step's score formula, as table columns (dim, then each part)."""
    return {"dim": list(range(len(m.parts[0][1]))),
            **{part_name(name): [round(float(v), 4) for v in vals] for name, vals in m.parts}}
