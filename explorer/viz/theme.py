"""Normal and projector styles for every figure.

Normal mode leaves colours of the layout to the Streamlit theme (light or dark); projector mode uses large
fonts, thick lines, white background with black text, and colour-blind-safe scales (cividis, Okabe–Ito, PuOr).
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import plotly.graph_objects as go
from plotly.colors import sample_colorscale
import plotly.io as pio
from _plotly_utils.basevalidators import ColorscaleValidator

_COLORSCALE = ColorscaleValidator("colorscale", "heatmap")
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]


@dataclass(frozen=True)
class Theme:
    """Style parameters shared by the figure builders."""

    name: str
    font_size: int
    title_size: int
    line_width: float
    marker_size: int
    sequential: str  # Plotly colorscale name for weights/probabilities (0..1)
    diverging: str  # for signed values (activations, differences)
    categorical: tuple[str, ...]
    streamlit_theme: bool  # let st.plotly_chart apply the Streamlit (light/dark) theme
    export_scale: int  # multiplier for the toolbar's image export (projector resolution)
    diverging_ends: tuple[str, str] = ("blue", "red")  # the colours of `diverging`'s negative and positive ends


NORMAL = Theme("normal", 13, 16, 2.0, 7, "Viridis", "RdBu_r", tuple(OKABE_ITO), True, 3, ("blue", "red"))
PROJECTOR = Theme("projector", 22, 28, 4.5, 12, "Cividis", "PuOr_r", tuple(OKABE_ITO), False, 3, ("purple", "orange"))


@lru_cache(maxsize=64)
def colorscale(name: str) -> list[list]:
    """A named colorscale as Plotly's explicit [[fraction, colour], ...] list. Validation expands names in Python;
    unvalidated figures must too, since plotly.js knows only a few names (not "RdBu_r" or "PuOr_r")."""
    return [list(step) for step in _COLORSCALE.validate_coerce(name)]


def _resolve_colorscales(trace: Mapping[str, object]) -> None:
    for holder in (trace, trace.get("marker")):
        if isinstance(holder, dict) and isinstance(holder.get("colorscale"), str):
            holder["colorscale"] = colorscale(holder["colorscale"])


@lru_cache(maxsize=1)
def _default_template() -> dict:
    return pio.templates[pio.templates.default].to_plotly_json()


class _DictFigure(go.Figure):
    """A go.Figure kept as the plain trace and layout dicts it was made from (`_data`, `_layout`, what
    theme.apply and explorer.ui.charts read), whose Plotly objects (trace and layout objects, deep copies of every
    array: ~0.5 ms a figure) are built the first time anything else is asked of it (fig.data, fig.layout, ...)."""

    _layout: dict[str, object]  # go.Figure's (its layout's own dict), once built

    def __init__(self, data: Sequence[Mapping[str, object]], layout: Mapping[str, object]) -> None:
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_layout", layout)
        object.__setattr__(self, "_frame_objs", ())
        object.__setattr__(self, "_pending", True)

    def __getattr__(self, name: str) -> object:  # only for attributes not set yet
        state = self.__dict__
        if not state.get("_pending"):
            raise AttributeError(name)
        state["_pending"] = False
        data, layout = state.pop("_data"), state.pop("_layout")
        template = layout.get("template")
        go.Figure.__init__(self, data=data, layout={**layout, "template": {}}, _validate=False)
        self._layout["template"] = template  # shared, never modified: Figure() would deep-copy it (~0.5 ms)
        return getattr(self, name)

    def __reduce__(self):  # copies and pickles are ordinary figures
        return go.Figure, (self.to_dict(),)


def figure(data: Sequence[Mapping[str, object]], layout: Mapping[str, object]) -> go.Figure:
    """A go.Figure from plain trace and layout dicts, without Plotly's per-property validation.

    Validating tick lists, z matrices and custom data costs 5-20 ms per figure on every rerun, and building the
    Plotly objects without validation still ~0.5 ms: the figure keeps the dicts and builds its objects only if
    asked. The tests set EXPLORER_VALIDATE_FIGURES=1, which validates every figure built here, so a misspelt
    property fails a test. The dicts are the figure's own from here on: callers must not reuse them.
    """
    if os.environ.get("EXPLORER_VALIDATE_FIGURES") == "1":
        return go.Figure(data=data, layout=layout)
    for trace in data:
        _resolve_colorscales(trace)
    return _DictFigure(data, {"template": _default_template(), **layout})


def get_theme(projector: bool) -> Theme:
    return PROJECTOR if projector else NORMAL


def apply(fig: go.Figure, theme: Theme, share: float = 1.0) -> go.Figure:
    """Apply fonts, line widths (of lines that set none) and (projector) high-contrast layout to `fig` in place.
    share: the fraction of the view's width the chart is drawn in (0.5: one of two columns); projector mode fits
    its title and token ticks to that width.

    The patch is merged into the figure's own layout/trace dicts (fig._layout, fig._data): under 1 ms, where
    Plotly's validated `update_*` calls and named templates cost 15-170 ms on every rerun of every chart.
    """
    size = theme.font_size
    layout: dict = {
        "font": {"size": size},
        "hoverlabel": {"font": {"size": size}},
        "colorway": list(theme.categorical),
    }
    title = fig._layout.get("title")
    if isinstance(title, str):  # the dict form, which the patch below merges into
        title = fig._layout["title"] = {"text": title}
    axes = ["xaxis", "yaxis", *(k for k in fig._layout if k.startswith(("xaxis", "yaxis")) and k[5:])]
    # the title goes under the plot when an x axis (its ticks, its title) is on top: Plotly's title automargin does
    # not make room for a top-side axis's labels, and the two would overprint
    caption = isinstance(title, dict) and bool(title.get("text")) and any(
        isinstance(v, dict) and v.get("side") == "top" for k, v in fig._layout.items() if k.startswith("xaxis"))
    lines, title_px = 1, theme.title_size
    if isinstance(title, dict) and title.get("text"):
        layout["title"] = {"font": {"size": theme.title_size}}
        if theme.streamlit_theme and caption:
            layout["title"].update(yref="paper", y=0, yanchor="top", pad={"t": 12}, x=0, xref="container",
                                   xanchor="left")
            margin = dict(fig._layout.get("margin") or {})
            layout["margin"] = {**margin, "b": int(max(margin.get("b", 0) or 0, 40) + 1.6 * theme.title_size)}
        if not theme.streamlit_theme:
            # left-aligned, on one line at a smaller size where long (wrapped only past TITLE_PX at 20 px), clear of
            # Streamlit's fullscreen button at the right (tests/test_browser.py measures it on every lesson step)
            text, title_px = fit_title(str(title["text"]), theme.title_size, share)
            lines = text.count("<br>") + 1
            layout["title"].update(text=text, x=0, xref="container", xanchor="left", font={"size": title_px})
            # above everything (container top), or under the plot (caption)
            # (anchored at its top, a wrapped title is drawn one line higher per further line, its first line cut
            # by the chart's edge: the top padding moves it down by as much)
            shift = int((lines - 1) * 1.25 * MIN_TITLE_PX)
            layout["title"].update(yref="paper", y=0, yanchor="top", pad={"l": 16, "t": 12 + shift}) if caption \
                else layout["title"].update(yref="container", y=1, yanchor="top", pad={"l": 16, "t": 4 + shift})
    if not theme.streamlit_theme:
        axis = {"showline": True, "linewidth": 2, "linecolor": "black", "tickfont": {"size": size, "color": "black"},
                "title": {"font": {"size": size, "color": "black"}}, "gridcolor": "#dddddd", "zerolinecolor": "#999999",
                "automargin": True}  # margins grow to fit the larger tick labels
        layout.update(paper_bgcolor="white", plot_bgcolor="white", font={"size": size, "color": "black"},
                      legend={"font": {"size": size, "color": "black"}},
                      # a bar's label that Plotly would shrink under MIN_TEXT_PX to fit the bar is not drawn (hover)
                      uniformtext={"minsize": MIN_TEXT_PX, "mode": "hide"})
        for name in axes:
            layout[name] = axis
            if name.startswith("xaxis"):
                _thin_ticks(fig._layout.get(name), size, share)
            else:  # at most this many numbers up the axis: 22 px labels need the room (a stacked subplot has less)
                domain = (fig._layout.get(name) or {}).get("domain") or (0, 1)
                layout[name] = {**layout[name], "nticks": 4 if domain[1] - domain[0] < 0.6 else 6}
            if (fig._layout.get(name) or {}).get("type") == "log":  # Plotly draws a log axis's 2s and 5s at 3/4 size
                log_size = max(size, math.ceil(MIN_TEXT_PX / 0.75))
                layout[name] = {**axis, "tickfont": {"size": log_size, "color": "black"}}
    if not theme.streamlit_theme:  # projector: bigger fonts need taller figures and room for the title
        scale = theme.font_size / NORMAL.font_size
        height = fig._layout.get("height")
        if isinstance(height, (int, float)):
            layout["height"] = int(min(height * scale, 2400))
        margin = dict(fig._layout.get("margin") or {})
        extra = int((lines - 1) * 1.25 * MIN_TITLE_PX)  # a wrapped title's further lines (at MIN_TITLE_PX)
        # the title's lines, then a legend or panel titles drawn above the plot (_above_plot)
        margin["t"] = max(int(margin.get("t") or 0), int(1.3 * title_px) + 12 + extra + _above_plot(fig, size, share)) \
            if "title" in layout and not caption else margin.get("t")
        if caption:
            margin["b"] = int(max(margin.get("b", 0) or 0, 40) * scale + 1.6 * theme.title_size) + extra
        margin["l"] = int((margin.get("l") or 40) * min(scale, 1.5))
        layout["margin"] = {k: v for k, v in margin.items() if v is not None}
    # Merge into the figure's underlying dicts: Plotly's validated update path costs 15-170 ms per figure.
    _merge(fig._layout, layout)
    for name in axes:
        _allow_overflow(fig._layout.setdefault(name, {}))
    for trace in fig._data:
        kind = trace.get("type")
        if kind == "heatmap":
            trace.setdefault("colorbar", {})
        for holder in (trace, trace.get("marker")):
            if isinstance(holder, dict):
                _allow_overflow(holder.get("colorbar"))
        if kind in ("scatter", "scattergl"):
            if "lines" in trace.get("mode", "lines"):  # a width the figure chose (it may encode data) is kept
                trace.setdefault("line", {}).setdefault("width", theme.line_width)
            if not theme.streamlit_theme:
                trace.setdefault("marker", {}).setdefault("size", theme.marker_size)
        if kind == "heatmap" and "colorscale" not in trace:
            trace["colorscale"] = colorscale(theme.sequential)
        if kind == "heatmap" and not theme.streamlit_theme and trace.get("texttemplate"):
            _cell_text(trace, fig._layout, share)
    return fig


# Projector mode: the pixels a title may take on one line, what a chart beside the lesson panel at 1280 px (~880 px
# wide) leaves left of Streamlit's fullscreen button, and an average character's width (Open Sans: ~0.45 em).
TITLE_PX, CHAR_EM, MIN_TITLE_PX = 780, 0.5, 20
CHART_PX, PLOT_PX = 880, 700  # such a chart, and its plot area (its axes' labels and colour bar take the rest)


TITLE_CHARS = int(TITLE_PX / (CHAR_EM * MIN_TITLE_PX))  # characters on a line at the smallest title size


def plot_px(share: float = 1.0) -> int:
    """The plot area's width of a chart drawn in `share` of the view's width (the labels' 180 px do not shrink)."""
    return max(80, int(CHART_PX * min(share, 1.0)) - (CHART_PX - PLOT_PX))


def shown_len(text: str) -> int:
    """The characters Plotly draws for `text` (its tags dropped, each entity one character)."""
    return len(re.sub(r"&[#\w]+;", "x", re.sub(r"<[^>]*>", "", text)))


def label_every(axis: dict, n: int) -> None:
    """Keep every n-th tick of an axis's tick array (tickvals and ticktext)."""
    axis["tickvals"], axis["ticktext"] = list(axis["tickvals"])[::n], list(axis["ticktext"])[::n]


def fit_title(text: str, size: int, share: float = 1.0) -> tuple[str, int]:
    """A projector title and its font size: at `size` when it fits `share` of TITLE_PX, else at the size that fits
    (down to MIN_TITLE_PX), else wrapped at that size."""
    room = TITLE_PX * min(share, 1.0)
    fits = int(room / (CHAR_EM * max(shown_len(text), 1)))
    if fits >= size:
        return text, size
    if fits >= MIN_TITLE_PX:
        return text, fits
    return wrap_title(text, int(room / (CHAR_EM * MIN_TITLE_PX))), MIN_TITLE_PX


def _thin_ticks(axis: object, size: int, share: float) -> None:
    """Projector mode: an x axis's token ticks (a tick array) that would overlap at `size` px in a plot of
    plot_px(share): upright labels wider than their slot are turned to −60° (then they need ~1.25 lines apart), and
    where even that overlaps, every n-th token is labelled. The hover still names every token."""
    if not isinstance(axis, dict) or axis.get("tickvals") is None or axis.get("ticktext") is None:
        return
    vals, text = list(axis["tickvals"]), list(axis["ticktext"])
    if len(vals) < 2:
        return
    slot = plot_px(share) / len(vals)
    if abs(float(axis.get("tickangle") or 0)) < 30 and CHAR_EM * size * max(len(str(t)) for t in text) + 8 > slot:
        axis["tickangle"] = -60
    step = math.ceil(1.25 * size / slot) if abs(float(axis.get("tickangle") or 0)) >= 30 else 1
    if step > 1:
        label_every(axis, step)


def _above_plot(fig: go.Figure, size: int, share: float = 1.0) -> int:
    """Pixels of what is drawn above the plot, under the title, in the top margin (Plotly makes the margin as tall
    as that, not as that and the title): a horizontal legend at y ≥ 1 (its rows at `size` px, the entries laid out
    across rows of `share` × TITLE_PX), or a line of annotations at paper y ≥ 1 (panel titles)."""
    legend = fig._layout.get("legend")
    names = [str(t.get("name") or "") for t in fig._data if t.get("showlegend", True) is not False and t.get("name")]
    if isinstance(legend, dict) and legend.get("orientation") == "h" and float(legend.get("y", 0) or 0) >= 1 \
            and names and fig._layout.get("showlegend") is not False:
        return int(math.ceil(sum(len(n) + 4 for n in names) * CHAR_EM * size / (TITLE_PX * min(share, 1.0)))
                   * 1.6 * size)
    notes = fig._layout.get("annotations") or ()
    if any(isinstance(a, dict) and a.get("yref") == "paper" and float(a.get("y", 0) or 0) >= 1 for a in notes):
        return int(1.6 * size)
    return 0


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """`text` (Plotly's HTML subset: tags and entities) broken with <br> at spaces into lines of at most `width`
    visible characters (a longer word stays whole); existing <br> breaks are kept."""
    out = []
    for part in re.split(r"<br\s*/?>", text):
        line, seen = "", 0
        for word in part.split(" "):
            n = shown_len(word)
            if line and seen + 1 + n > width:
                out.append(line)
                line, seen = word, n
            else:
                line, seen = (f"{line} {word}", seen + 1 + n) if line else (word, n)
        out.append(line)
    return "<br>".join(out)


MIN_TEXT_PX = 18  # projector mode: no text smaller (tests/test_browser.py measures it on every lesson step)
CELL_COLUMNS = 12  # at most this many columns of in-cell values at MIN_TEXT_PX in a chart ("-0.52" is ~45 px wide)


def _cell_text(trace: dict, layout: dict, share: float = 1.0) -> None:
    """Projector mode: a heatmap's in-cell values at MIN_TEXT_PX (Plotly would shrink them to fit the cells), or not
    drawn when that size cannot fit: more than CELL_COLUMNS columns (in a chart of `share` of the width, that share of
    them), or rows under 1.3 × MIN_TEXT_PX high. The hover still shows every value."""
    z = trace.get("z")
    rows = len(z) if z is not None else 0
    first = z[0] if z is not None and rows else None
    cols = len(first) if first is not None and hasattr(first, "__len__") else 0
    margin = layout.get("margin") or {}
    plot = (layout.get("height") or 450) - (margin.get("t") or 100) - (margin.get("b") or 80)
    if not rows or cols > CELL_COLUMNS * min(share, 1.0) or plot / rows < 1.3 * MIN_TEXT_PX:
        trace["texttemplate"] = ""
    else:
        trace.setdefault("textfont", {})["size"] = max(MIN_TEXT_PX, (trace.get("textfont") or {}).get("size") or 0)


def _allow_overflow(axis: object) -> None:
    """Tick labels of `axis` (an axis or colorbar dict; anything else is left alone) are drawn without Plotly's
    overflow check unless the figure asks for one. Its default for a numeric axis or a colorbar ("hide past div")
    measures every label's box once per label drawn (quadratic in the labels, each measure a forced layout): 125 ms
    per rerun on the seq2seq heatmaps in software-rendering Chromium. The margins are sized to the labels
    (automargin), so nothing overflows to hide."""
    if isinstance(axis, dict):
        axis.setdefault("ticklabeloverflow", "allow")


def _merge(target: dict, patch: dict) -> None:
    """Recursive dict merge of `patch` into `target` (patch wins)."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = dict(value) if isinstance(value, dict) else value


def export_config(theme: Theme, filename: str = "explorer", fmt: str = "png") -> dict:
    """Plotly config: the toolbar camera saves `fmt` ('png' or 'svg') at projector resolution. Projector mode has no
    toolbar: on a projected chart it covered the title and axis titles (drag still zooms, a double click resets)."""
    return {
        "displayModeBar": theme.streamlit_theme,
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": fmt if fmt in ("png", "svg") else "png",
            "filename": filename,
            "width": 1920,
            "height": 1080,
            "scale": 1 if fmt == "svg" else 2,
        },
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


def contrast(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (0-255 channels): 1 (same) to 21 (black on white)."""
    def luminance(rgb: tuple[float, float, float]) -> float:
        lin = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def scale_rgb(colorscale: str, value: float) -> tuple[float, float, float]:
    """The (r, g, b) colour (0-255) of `value` (0…1, clipped) on `colorscale`."""
    r, g, b = (float(c) for c in sample_colorscale(colorscale, [min(1.0, max(0.0, value))])[0][4:-1].split(","))
    return r, g, b


def ink_on(rgb: tuple[float, float, float]) -> str:
    """Black or white, whichever has the higher contrast on `rgb` (at least 4.58:1 on any colour, WCAG's 4.5:1)."""
    return "#000" if contrast(rgb, (0, 0, 0)) >= contrast(rgb, (255, 255, 255)) else "#fff"


def ink(colorscale: str, value: float) -> str:
    """Black or white, whichever reads on the colour of `value` (0…1) on `colorscale`."""
    return ink_on(scale_rgb(colorscale, value))
