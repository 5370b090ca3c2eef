"""Figures of token attribution: outputs × inputs heatmap, one output's inputs as coloured text, and what the page
says about the integration (the colours' meaning, the completeness warning)."""
from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.text.escape import plotly_text
from explorer.viz.theme import NORMAL, Theme, colorscale, figure
from explorer.viz.tokens import chart_labels, labels, ticks

if TYPE_CHECKING:
    from explorer.probes.token_attribution import AttributionTrace


def peak(values: np.ndarray) -> float | None:
    """The largest |value| of an attribution (None when all are 0): the end of a colour scale shared with it."""
    top = float(np.abs(values).max()) if np.size(values) else 0.0
    return top or None


def shared_peak(a: np.ndarray, b: np.ndarray, given: float | None = None) -> float | None:
    """The end of one colour scale for two attributions (and a given end, e.g. the trained model's)."""
    found = [p for p in (given, peak(a), peak(b)) if p]
    return max(found) if found else None


def largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |b − a| of two attributions of one shape."""
    return float(np.abs(np.asarray(b) - np.asarray(a)).max()) if np.size(a) else 0.0


def difference_heatmap(a: np.ndarray, b: np.ndarray, inputs: Sequence[str], outputs: Sequence[str], method: str,
                       a_id: str, b_id: str, theme: Theme) -> go.Figure:
    """b − a (M, N): model B's attribution minus model A's on one sentence, centred on 0."""
    return attribution_heatmap(np.asarray(b) - np.asarray(a), inputs, outputs, method, theme,
                               title=f"{method}: {plotly_text(b_id)} − {plotly_text(a_id)}", bar="B − A")


def attribution_heatmap(values: np.ndarray, inputs: Sequence[str], outputs: Sequence[str], method: str,
                        theme: Theme, selected: int | None = None, peak: float | None = None,
                        model: str = "", title: str = "", bar: str = "") -> go.Figure:
    """values (M, N): rows are the output tokens attributed, columns the input tokens; signed, the theme's diverging
    colours centred on 0 (its positive end raises the output's log-probability or logit, its negative end lowers it),
    from −peak to peak (default: the largest |value|; e.g. another run's, to share its scale)."""
    M, N = values.shape
    peak = peak or float(np.abs(values).max()) or 1.0
    out = chart_labels(outputs)
    data = [{"type": "heatmap", "z": values, "x": list(range(N)), "y": list(range(M)), "zmin": -peak, "zmax": peak,
             "colorscale": theme.diverging, "colorbar": {"title": {"text": bar or method}},
             "customdata": [chart_labels(inputs) for _ in range(M)],
             "hovertemplate": "output %{y}: “%{text}”<br>input %{x}: “%{customdata}”<br>%{z:.4f}<extra></extra>",
             "text": [[out[i]] * N for i in range(M)]}]
    title = title or (f"{plotly_text(model)}: " if model else "") + f"{method}: each output (row) onto the inputs"
    layout = {"title": {"text": title},
              "height": int(min(2000, max(320, 24 * M + 160))), "xaxis": {**ticks(inputs), "title": {"text": "input"}},
              "yaxis": {**ticks(outputs), "autorange": "reversed", "title": {"text": "output"}}}
    if selected is not None:
        layout["shapes"] = [{"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": selected - 0.5,
                             "y1": selected + 0.5, "line": {"color": theme.categorical[5], "width": theme.line_width}}]
    return figure(data, layout)


def so_far(trace: AttributionTrace, method: str, first: str = "gradient × input") -> tuple[str, str, np.ndarray]:
    """(method shown, its label, (M, N) values) of a trace handed over while it is computed: LRP (final: one forward
    and one backward pass); integrated gradients once the integration's first round is done ("so far"); before
    that, `first` (LRP or gradient × input, final after one pass), said to be standing in for them."""
    if method == "LRP" and trace.lrp is not None:
        return method, "LRP", trace.lrp.relevance
    if trace.relevance_only and trace.lrp is not None:  # nothing else is known yet
        return "LRP", f"LRP ({method} to follow)", trace.lrp.relevance
    if method == "integrated gradients" and not trace.integrating:
        return method, "integrated gradients (so far)", trace.integrated
    if method == "integrated gradients" and first == "LRP" and trace.lrp is not None:
        return "LRP", "LRP (integrated gradients to follow)", trace.lrp.relevance
    if method == "integrated gradients":
        return "gradient × input", "gradient × input (integrated gradients to follow)", trace.gradient_x_input
    return "gradient × input", "gradient × input", trace.gradient_x_input


def colour_key(theme: Theme, of: str = "log-probability") -> str:
    """What the colours of both figures mean, in the theme's own colour names; of: what is attributed."""
    low, high = theme.diverging_ends
    return f"{high} raises its {of}, {low} lowers it"


def _ends(theme: Theme) -> tuple[str, str]:
    """rgba templates (with {a} for the opacity) of the theme's diverging scale one step in from each end."""
    scale = colorscale(theme.diverging)
    rgb = [re.findall(r"[\d.]+", scale[i][1])[:3] for i in (1, -2)]
    low, high = ("rgba(" + ",".join(c) + ",{a:.2f})" for c in rgb)
    return low, high


BASELINE_METHODS = ("integrated gradients",)  # the methods that attribute from a baseline


def kept_inputs(trace: AttributionTrace, method: str) -> tuple[int, ...]:
    """The inputs `method` does not attribute because its baseline keeps them as they are: the trace's `kept` for
    integrated gradients; none for gradient × input, which has no baseline (its value there is measured)."""
    return tuple(trace.kept) if method in BASELINE_METHODS else ()


def attribution_html(inputs: Sequence[str], values: np.ndarray, reach: int, theme: Theme = NORMAL,
                     kept: Sequence[int] = ()) -> str:
    """The input tokens coloured by their attribution to one output with the theme's diverging colours (positive
    end +, negative end −, opacity ∝ |value| / max); tokens beyond `reach` cannot influence it and the `kept`
    ones are part of the baseline (`kept_inputs`: integrated gradients only): both grey."""
    peak = float(np.abs(values[:reach]).max()) or 1.0
    low, high = _ends(theme)
    parts = []
    for j, (tok, v) in enumerate(zip(labels(inputs), values)):
        if j >= reach or j in kept:
            style = "opacity:0.35"
        else:
            a = 0.1 + 0.7 * min(1.0, abs(float(v)) / peak)
            style = f"background:{(high if v >= 0 else low).format(a=a)}; border-radius:3px; padding:0 3px"
        title = "kept in the baseline" if j in kept and j < reach else f"{float(v):+.4f}"
        parts.append(f"<span title='{title}' style='{style}'>{html.escape(tok)}</span>")
    return "<div style='line-height:2.2; overflow-wrap:anywhere'>" + " ".join(parts) + "</div>"


def explained(trace: AttributionTrace, method: str, i: int | None = None) -> str:
    """What `method` attributes, in words: the log-probability or the logit (LRP: always the logit, where its
    relevance starts), of output i's token (None: "the output token"), minus the foil's where there is one."""
    of = "logit" if method == "LRP" else trace.of
    token = "the output token" if i is None else f"“{labels(trace.outputs)[i]}”"
    foil = trace.foils[i] if i is not None and trace.foils else ("the foil" if trace.foil else "")
    return f"the {of} of {token}" + (f" minus that of {'“' + labels([foil])[0] + '”' if i is not None else foil}"
                                     if foil else "")


def terms(parts: Sequence[tuple[float, str]]) -> str:
    """A sum written out with its signs (plain text): "1.3642 (the inputs) − 1.2637 (biases) + 0.0000 (…)"."""
    out = ""
    for j, (v, what) in enumerate(parts):
        sign = ("−" if v < 0 else "") if j == 0 else (" − " if v < 0 else " + ")
        out += f"{sign}{abs(v):.4f} ({what})"
    return out


def conservation(trace: AttributionTrace, i: int) -> str:
    """LRP's conservation for output i (plain text): f explained as the inputs' relevance plus what the biases, the
    per-position addends (position vectors, masks, initial states) absorbed, plus what the rules did not conserve
    (the softmax rule, ε)."""
    r = trace.lrp
    if r is None:
        return ""
    return (f"LRP: f = {explained(trace, 'LRP', i)} = {float(r.value[i]):.4f} = " + terms([
        (float(r.relevance[i].sum()), "the inputs' relevance"), (float(r.biases[i]), "absorbed by biases"),
        (float(r.positions[i]), "by position vectors and other per-position addends"),
        (float(r.rest[i]), "not conserved: the softmax rule and ε")]) + ".")


def worst_conservation(trace: AttributionTrace) -> str:
    """What LRP's rules did not conserve, at the output where it is largest, in one phrase (plain text)."""
    r = trace.lrp
    if r is None or not len(trace.outputs):
        return "no output"
    i = int(np.argmax(np.abs(r.rest)))
    return (f"the most the softmax rule and ε did not conserve is {float(r.rest[i]):+.3g}, at output {i} "
            f"“{labels(trace.outputs)[i]}” (f = {float(r.value[i]):+.3g}; the inputs' relevance "
            f"{float(r.relevance[i].sum()):+.3g}, biases {float(r.biases[i]):+.3g}, position vectors "
            f"{float(r.positions[i]):+.3g})")


def worst_output(trace: AttributionTrace) -> str:
    """The integrated gradients' completeness error in one phrase (plain text): the output whose error is the largest
    share of its change in f (the log-probability or the logit), with that output's own error and change (the
    largest error and the largest share may be two outputs')."""
    if not len(trace.outputs):
        return "no output"
    i = int(np.argmax(trace.relative))
    change = float(trace.value[i] - trace.baseline_value[i])
    share = f"{trace.relative[i]:.2%} of its change {change:+.3g} in the {trace.of}" if change else \
        f"its {trace.of} does not change"
    return f"worst output {i} “{labels(trace.outputs)[i]}”: completeness error {trace.completeness[i]:.2g} ({share})"


def completeness_warning(trace: AttributionTrace, most: int) -> str | None:
    """The page's warning when some outputs' integrated gradients miss f(E) − f(B) by more than the tolerance:
    which outputs, by how much, and what to do (None: every output is within it). most: the largest budget."""
    bad = trace.unconverged
    if not bad:
        return None
    names = labels(trace.outputs)
    shown = "; ".join(f"“{names[i]}”: error {trace.completeness[i]:.3g} = {trace.relative[i]:.1%} of the change "
                      f"{trace.value[i] - trace.baseline_value[i]:+.3g}" for i in bad[:6])
    more = f" and {len(bad) - 6} more" if len(bad) > 6 else ""
    if getattr(trace, "capped", False):
        advice = (f"This server's budget per request allows {trace.steps} gradient evaluations per output here (the "
                  "note above names its settings): attribute the model's prediction only, or a shorter sentence, for "
                  "more; read these rows' attributions as approximate.")
    elif trace.steps < most:
        advice = f"Raise “Gradient evaluations” under Options (now {trace.steps}, at most {most}) to refine them."
    else:
        advice = "Even the largest budget does not reach it here: read these rows' attributions as approximate."

    return (f"The integrated gradients of {len(bad)} of {len(trace.outputs)} outputs do not add up to the change in "
            f"their {trace.of} within {trace.tolerance:.0%} ({shown}{more}). {advice}")
