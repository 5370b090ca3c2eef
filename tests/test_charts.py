"""explorer.ui.charts.show sends exactly the chart st.plotly_chart(fig) sends; explorer.viz.theme.figure's fast
(unvalidated) path builds the same figure as Plotly's validated constructor."""
from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from explorer.viz.spec import Serialized, figure_spec, serialize
from explorer.viz import self_attention as A
from explorer.viz import word_embeddings as E
from explorer.viz import decoding_strategies as D
from explorer.viz import theme as T
from explorer.viz.theme import apply

TOKENS = ["[CLS]", "the", "robot", "must", "obey", "[SEP]"]


def _figures():
    rng = np.random.default_rng(0)
    m = rng.random((6, 6)).astype(np.float32)
    coords = rng.normal(size=(50, 3)).astype(np.float32)
    words = [f"w{i}" for i in range(50)]
    return {
        "head heatmap": A.head_heatmap(m, TOKENS, TOKENS, "layer 0, head 1", highlight=2),
        "line view": A.line_view([m, m.T], ["h0", "h1"], TOKENS, TOKENS),
        "projection 3-D": E.projection_background(words, ["noun"] * 25 + [None] * 25, coords, T.NORMAL),
        "typed words 3-D": E.typed_overlay([E.Point("w1", tuple(coords[1]), E.PLACED_FIT)], 3, T.NORMAL),
        "projection 2-D": E.projection_background(words, [None] * 50, coords[:, :2], T.PROJECTOR),
        "trade-off with a one-output line": D.tradeoff_scatter(
            [{"kind": "top-k", "strategy": "Top-k", "samples": 5, "self-BLEU": 0.2, "mean log-prob": -2.0},
             {"kind": "greedy", "strategy": "Greedy", "samples": 1, "self-BLEU": None, "mean log-prob": -1.3}],
            "self-BLEU", "mean log-prob", T.NORMAL),
    }


@pytest.mark.parametrize("validate", ["1", "0"])
@pytest.mark.parametrize("name", list(_figures()))
def test_figure_spec_equals_to_dict(name, validate, monkeypatch):
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", validate)
    fig = _figures()[name]
    spec = pio.to_json(figure_spec(fig), validate=False)  # first, while an unvalidated figure is still dicts
    before = pio.to_json(fig.to_dict(), validate=False)
    assert spec == before
    assert pio.to_json(figure_spec(fig), validate=False) == before  # the figure itself is unchanged
    assert pio.to_json(fig.to_dict(), validate=False) == before


def test_dict_figure_builds_its_plotly_objects_when_asked(monkeypatch):
    """An unvalidated figure is its dicts until something asks for Plotly objects; then it is the same figure."""
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", "0")
    fig = _figures()["head heatmap"]
    assert "_layout_obj" not in fig.__dict__  # not built yet
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", "1")
    ref = _figures()["head heatmap"]
    np.testing.assert_array_equal(fig.data[0].z, ref.data[0].z)
    assert fig.layout.title.text == ref.layout.title.text == "layer 0, head 1"
    assert fig.layout.template == ref.layout.template
    assert json.loads(pio.to_json(fig, validate=False)) == json.loads(pio.to_json(ref, validate=False))
    fig.update_layout(height=123)  # an ordinary figure from now on
    assert fig.to_dict()["layout"]["height"] == 123
    import copy
    assert json.loads(pio.to_json(copy.deepcopy(fig), validate=False))["layout"]["height"] == 123


@pytest.mark.parametrize("name", [*_figures(), "odd values"])
def test_serialized_spec_gives_the_same_json(name):
    """The once-serialised spec yields exactly the JSON Plotly makes of the spec, including values orjson cannot
    take itself (object arrays holding numpy scalars, dates) and a trace uid (dropped, as to_json drops it)."""
    if name == "odd values":
        fig = T.figure([{"type": "scatter", "uid": "u1",
                         "x": np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[D]"),
                         "y": np.array([np.float32(0.5), None], dtype=object), "text": np.array(["</script>", "ü"])}],
                       {"title": {"text": "a/b <c>"}, "width": 640})
    else:
        fig = _figures()[name]
    spec = figure_spec(fig)
    expected = pio.to_json(spec, validate=False)
    fast = serialize(figure_spec(fig))
    assert isinstance(fast, Serialized)
    assert pio.to_json(fast, validate=False) == expected
    assert fast.get("layout") == {k: v for k, v in spec["layout"].items() if k in ("width", "height")}


@pytest.mark.parametrize("name", list(_figures()))
def test_unvalidated_figure_equals_validated(name, monkeypatch):
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", "1")
    validated = json.loads(pio.to_json(_figures()[name], validate=False))
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", "0")
    fast = json.loads(pio.to_json(_figures()[name], validate=False))
    assert fast == validated


def _script_show_vs_plotly_chart():
    import numpy as np
    import streamlit as st

    from explorer.ui import settings
    from explorer.ui.charts import Origin, show
    from explorer.viz import self_attention as A
    from explorer.viz.theme import apply, export_config

    toks = ["[CLS]", "the", "robot", "[SEP]"]
    m = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
    base = A.line_view([m], ["h0"], toks, toks)
    show(A.head_heatmap(m, toks, toks, "t"), Origin("illustration"), key="a", filename="f")
    show(base, Origin("illustration"), key="b", filename="f", overlay=A.head_heatmap(m, toks, toks, "t"))
    show(base, Origin("illustration"), key="c", filename="f")  # the cached spec
    theme = settings.theme()
    ref = apply(A.head_heatmap(m, toks, toks, "t"), theme)
    cfg = export_config(theme, "f", str(st.session_state.get("export_format", "png")))
    st.plotly_chart(ref, key="d", theme="streamlit" if theme.streamlit_theme else None, config=cfg)
    combined = apply(A.line_view([m], ["h0"], toks, toks), theme)
    combined.add_traces(apply(A.head_heatmap(m, toks, toks, "t"), theme).data)
    st.plotly_chart(combined, key="e", theme="streamlit" if theme.streamlit_theme else None, config=cfg)
    st.plotly_chart(apply(A.line_view([m], ["h0"], toks, toks), theme), key="f",
                    theme="streamlit" if theme.streamlit_theme else None, config=cfg)


@pytest.mark.parametrize("validate", ["1", "0"])
@pytest.mark.parametrize("projector", [False, True])
def test_show_sends_what_plotly_chart_sends(projector, validate, monkeypatch):
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", validate)
    at = AppTest.from_function(_script_show_vs_plotly_chart)
    at.session_state["projector"] = projector
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    assert len(charts) == 6
    sent = [c.proto.spec for c in charts]  # the JSON strings, compared byte for byte
    spec = [json.loads(s) for s in sent]
    assert sent[0] == sent[3]  # show(fig) == st.plotly_chart(fig)
    assert sent[2] == sent[5]  # a second show of the same figure: same spec from the cache
    # show(base, overlay=) == one figure with both trace lists (the reference is made with add_traces, whose
    # Plotly objects order each trace's keys their own way: compared as JSON values)
    assert spec[1] == spec[4]
    assert [c.proto.config for c in charts[:3]] == [c.proto.config for c in charts[3:]]
    assert spec[0]["data"][0]["type"] == "heatmap" and len(spec[1]["data"]) == len(spec[2]["data"]) + 1


def _script_main_chart_then_more():
    import numpy as np

    from explorer.ui.charts import Origin, show
    from explorer.viz import self_attention as A

    toks = ["the", "robot", "sees"]
    m = np.eye(3, dtype=np.float32)
    show(A.head_heatmap(m, toks, toks, "main"), Origin("illustration"), key="main", fold=True)
    show(A.head_heatmap(m, toks, toks, "second"), Origin("illustration"), key="second")


def test_the_browser_gets_the_main_chart_alone_first(monkeypatch):
    """A folded (main) chart is followed by one pause of PAINT_PAUSE_S (so that the browser draws it before the rest
    of the page arrives); other charts are not."""
    from explorer.ui import charts

    pauses: list[float] = []
    monkeypatch.setattr(charts, "_pause", pauses.append)
    at = AppTest.from_function(_script_main_chart_then_more)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 2
    assert pauses == [charts.PAINT_PAUSE_S] and 0 < charts.PAINT_PAUSE_S <= 0.05


def test_escapes_are_plotlys():
    """The escapes made once per figure are the ones Plotly applies to its orjson output on every send."""
    from plotly.io import _json

    from explorer.viz import spec

    assert spec._SWAPS == _json._swap_orjson


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.linspace(0, 1, 7), np.arange(5), np.arange(5) * 10**6,
    np.array([0, 2**40], dtype=np.int64), np.arange(300, dtype=np.uint64), np.arange(4, dtype=np.int16),
    np.arange(20, dtype=np.float64).reshape(4, 5)[:, ::2], np.zeros(0, dtype=np.float32), np.array([-1, 1], np.int64),
], ids=lambda a: f"{a.dtype}{a.shape}")
def test_typed_array_is_plotlys(array):
    from _plotly_utils.utils import to_typed_array_spec

    from explorer.viz.spec import _typed_array

    mine, plotly = _typed_array(array), to_typed_array_spec(array)
    if isinstance(plotly, np.ndarray):
        np.testing.assert_array_equal(mine, plotly)
    else:
        assert mine == plotly


@pytest.mark.parametrize("validate", ["1", "0"])
def test_a_title_does_not_overprint_a_top_axis(validate, monkeypatch):
    """A heatmap with its key axis (its labels and title) on top gets its title under the plot, with room in the
    bottom margin, in projector and normal mode alike (in normal mode the title overprinted the first key's label);
    other figures keep the title at the top."""
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", validate)
    figs = _figures()
    heat = T.apply(figs["head heatmap"], T.PROJECTOR).to_dict()["layout"]
    assert heat["xaxis"]["side"] == "top" and heat["xaxis"]["title"]["text"]
    assert (heat["title"]["yref"], heat["title"]["y"], heat["title"]["yanchor"]) == ("paper", 0, "top")
    assert heat["margin"]["b"] >= 1.6 * T.PROJECTOR.title_size
    lines = T.apply(figs["line view"], T.PROJECTOR).to_dict()["layout"]
    assert (lines["title"]["yref"], lines["title"]["yanchor"]) == ("container", "top")
    normal = T.apply(_figures()["head heatmap"], T.NORMAL).to_dict()["layout"]
    assert (normal["title"]["yref"], normal["title"]["y"], normal["title"]["yanchor"]) == ("paper", 0, "top")
    assert normal["margin"]["b"] >= 1.6 * T.NORMAL.title_size
    normal_lines = T.apply(_figures()["line view"], T.NORMAL).to_dict()["layout"]
    assert "yref" not in normal_lines["title"]  # elsewhere the Streamlit theme places titles itself


@pytest.mark.parametrize("validate", ["1", "0"])
@pytest.mark.parametrize("theme", [T.NORMAL, T.PROJECTOR])
def test_tick_labels_are_drawn_without_plotlys_overflow_measure(theme, validate, monkeypatch):
    """Every cartesian axis and heatmap colorbar draws its tick labels with ticklabeloverflow "allow" (Plotly's
    default for a numeric axis measures each label once per label drawn), unless the figure chose otherwise."""
    monkeypatch.setenv("EXPLORER_VALIDATE_FIGURES", validate)
    figs = _figures()
    heat = T.apply(figs["head heatmap"], theme).to_dict()
    assert heat["layout"]["xaxis"]["ticklabeloverflow"] == heat["layout"]["yaxis"]["ticklabeloverflow"] == "allow"
    assert all(t["colorbar"]["ticklabeloverflow"] == "allow" for t in heat["data"] if t["type"] == "heatmap")
    chosen = D.logprob_lines(["greedy", "top-k"], [[-1.0, -2.0], [-1.5, -0.5]], theme)
    chosen.update_layout(yaxis={"ticklabeloverflow": "hide past domain"})
    layout = T.apply(chosen, theme).to_dict()["layout"]
    assert (layout["yaxis"]["ticklabeloverflow"] == "hide past domain"
            and layout["xaxis"]["ticklabeloverflow"] == "allow")


@pytest.mark.parametrize("theme", [T.NORMAL, T.PROJECTOR])
def test_line_view_width_and_opacity_follow_the_weight(theme):
    """Every drawn line's width is WIDTH_PER_WEIGHT · line_width · w and its opacity 0.35 + 0.65·w, for its weight w
    (rounded to LINE_STEP), after the theme is applied: the title's "width ∝ weight" is what is drawn."""
    rng = np.random.default_rng(3)
    m = rng.dirichlet(np.ones(9) * 0.4, size=9).astype(np.float32)  # rows sum to 1, weights spread over (0, 1)
    fig = apply(A.line_view([m], ["h0"], TOKENS[:3] * 3, TOKENS[:3] * 3, theme), theme)
    lines = [t for t in fig.data if t.mode == "lines"]
    drawn = 0
    for t in lines:
        q, k = np.asarray(t.y[0::3], dtype=int), np.asarray(t.y[1::3], dtype=int)
        w = m[q, k]
        level = t.line.width / (A.WIDTH_PER_WEIGHT * theme.line_width)
        assert np.all(np.abs(w - level) <= A.LINE_STEP / 2 + 1e-6), (w, level)
        assert t.opacity == pytest.approx(min(1.0, 0.35 + 0.65 * level))
        drawn += len(q)
    assert drawn == int((m >= A.MIN_LINE_WEIGHT).sum())
    widths = sorted(t.line.width for t in lines)
    assert len(set(widths)) > 5 and widths[-1] / widths[0] > 5  # widths really vary with the weight


def test_decoding_main_chart_says_what_it_continues():
    """The log-probability chart's title quotes the prompt's last words (escaped: Plotly reads tags in titles)."""
    fig = D.logprob_lines(["greedy"], [np.array([-1.0, -2.0])], T.NORMAL,
                          "the girl near the river and the boy near the old house see the big <b>dog</b> with the cat")
    title = fig.layout.title.text
    assert title == "Log p of each new token after “…&lt;b&gt;dog&lt;/b&gt; with the cat”"
    assert D.prompt_end("a  cat\tsat\n") == "a cat⇥sat↵" and D.prompt_end("x" * 60, 10) == "…" + "x" * 10
    assert D.prompt_end("one two three four five six seven eight nine ten eleven twelve", 20) == "…ten eleven twelve"
    assert D.logprob_lines(["greedy"], [np.array([-1.0])], T.NORMAL).layout.title.text is None  # no prompt: no title


def test_gradient_lines_name_the_predicted_word():
    from types import SimpleNamespace

    from explorer.viz import gradients_through_time as G

    tr = SimpleNamespace(distance=[2, 1], input_grad=[0.1, 0.5], tokens=("the", "dogs"), cell="LSTM",
                         model_id="builtin:lstm-lm", target="<are>")
    assert G.gradient_lines([tr], T.NORMAL).layout.yaxis.title.text == "‖∂ log p(“&lt;are&gt;”) / ∂x_t‖"
    other = SimpleNamespace(**{**vars(tr), "target": "is"})
    assert G.gradient_lines([tr, other], T.NORMAL).layout.yaxis.title.text == "‖∂ log p(w_T) / ∂x_t‖"


def test_log_ticks_each_read_as_a_number():
    """Gradients through time: every tick of its log axes says its own value (Plotly's D2 ticks wrote "5, 2, 1, 5,
    2, 0.1, 5")."""
    from explorer.viz.gradients_through_time import log_ticks

    narrow = log_ticks([2e-3, 4e-3])
    assert narrow["ticktext"] == ["0.001", "0.002", "0.005", "0.01", "0.02", "0.05"]
    assert narrow["tickvals"] == pytest.approx([1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2])
    wide = log_ticks([3e-12, 0.4, float("nan"), 0.0])
    assert wide["ticktext"] == ["1e-12", "1e-10", "1e-08", "1e-06", "1e-04", "0.01", "1"]
    assert len(set(wide["ticktext"])) == len(wide["ticktext"]) and log_ticks([]) == {}


def test_sentence_heatmaps_are_not_washed_out_by_outlier_dimensions():
    """Positional encodings: the colour range is the 99th percentile of |value| when a few dimensions are outliers
    (said in the colour bar; the hover keeps the exact values), the largest |value| otherwise."""
    from explorer.viz import positional_encodings as V
    from explorer.viz.theme import NORMAL

    rng = np.random.default_rng(0)
    token, position = rng.normal(0, 0.1, (6, 384)), rng.normal(0, 0.1, (6, 384))
    position[:, 7] = 5.0  # one outlier dimension, as GPT-2 and BERT have
    bound, key = V.robust_bound([token, position, token + position], "value")
    flat = np.abs(np.concatenate([token.ravel(), position.ravel(), (token + position).ravel()]))
    assert bound == pytest.approx(np.percentile(flat, 99)) and bound < 1.0 and "99th pct" in key
    fig = V.sentence_vectors(list("abcdef"), token, position, token + position, NORMAL)
    assert all(t.zmax == pytest.approx(bound) for t in fig.data) and "max 5" in fig.data[2].colorbar.title.text
    assert V.robust_bound([np.array([-0.5, 0.25, 1.0])], "value") == (1.0, "value")  # nothing to clip


def test_projector_mode_draws_cell_values_at_18_px_or_not_at_all() -> None:
    """In-cell values of a heatmap: Plotly shrinks them to fit their cells (9 px on a 19-token mask), so in projector
    mode they are drawn at 18 px where that fits and left to the hover where it does not; normal mode is left as
    the figure made it."""
    import numpy as np

    from explorer.viz.theme import MIN_TEXT_PX, NORMAL, PROJECTOR, apply, figure

    def heat(rows: int, cols: int, height: int = 400) -> dict:
        trace = {"type": "heatmap", "z": np.zeros((rows, cols)), "texttemplate": "%{z:.2f}"}
        return apply(figure([trace], {"height": height}), PROJECTOR)._data[0]

    small = heat(5, 6)
    assert small["texttemplate"] == "%{z:.2f}" and small["textfont"]["size"] == MIN_TEXT_PX == 18
    assert heat(5, 19)["texttemplate"] == ""  # too many columns: 19 values side by side at 18 px do not fit
    assert heat(30, 6)["texttemplate"] == ""  # rows of 400·(22/13)/30 − margins px: under 1.3 × 18
    normal = apply(figure([{"type": "heatmap", "z": np.zeros((30, 30)), "texttemplate": "%{z}"}], {}), NORMAL)._data[0]
    assert normal["texttemplate"] == "%{z}" and "textfont" not in normal


def test_projector_mode_hides_bar_labels_it_would_shrink_under_18_px() -> None:
    from explorer.viz.theme import NORMAL, PROJECTOR, apply, figure

    bars = [{"type": "bar", "x": [0, 1], "y": [1, 2], "text": ["les", "professeurs"]}]
    assert apply(figure(bars, {}), PROJECTOR)._layout["uniformtext"] == {"minsize": 18, "mode": "hide"}
    assert "uniformtext" not in apply(figure(bars, {}), NORMAL)._layout


def test_projector_titles_fit_one_line_left_of_the_fullscreen_button() -> None:
    """A projector title keeps 28 px where it fits TITLE_PX (780 px at 0.5 em a character), shrinks to fit down to
    20 px, and only then wraps at spaces (each line within the room, tags and entities counted as what they show);
    a chart in a third of the view gets a third of the room. Titles sit at the left, clear of the button."""
    from explorer.viz.theme import CHAR_EM, MIN_TITLE_PX, PROJECTOR, TITLE_PX, apply, figure, fit_title, wrap_title

    assert fit_title("PCA of the 776 first entries (token-id order)", 28) == (
        "PCA of the 776 first entries (token-id order)", 28)
    text = "Log p of each new token after “…time, in a small village,”"  # 58 characters
    assert fit_title(text, 28) == (text, int(TITLE_PX / (CHAR_EM * len(text)))) == (text, 26)
    long = " ".join(["word"] * 40)  # 199 characters
    wrapped, size = fit_title(long, 28)
    assert size == MIN_TITLE_PX
    assert all(len(line) * CHAR_EM * MIN_TITLE_PX <= TITLE_PX for line in wrapped.split("<br>"))
    assert wrapped.replace("<br>", " ") == long  # every word kept, in order
    assert wrap_title("a &lt;bos&gt; b<sub>t</sub> c", 9) == "a &lt;bos&gt;<br>b<sub>t</sub> c"  # "<bos>" is 5 wide
    _, third = fit_title(text, 28, share=1 / 3)
    assert third == MIN_TITLE_PX
    layout = apply(figure([], {"title": {"text": long}}), PROJECTOR)._layout
    assert layout["title"]["x"] == 0 and layout["title"]["xanchor"] == "left" and layout["title"]["font"]["size"] == 20
    lines = layout["title"]["text"].count("<br>")  # each further line: 25 px more room above the plot, and the
    assert layout["title"]["pad"]["t"] == 4 + int(lines * 1.25 * 20)  # title moved down by as much
    assert layout["margin"]["t"] == int(1.3 * 20) + 12 + int(lines * 1.25 * 20)


def test_projector_token_ticks_are_thinned_not_overprinted() -> None:
    """Rotated token ticks need ~1.25 lines each: 40 tokens in a half-width chart (a 260 px plot) keep every 5th; 10
    in a whole one keep all; normal mode keeps all."""
    from explorer.viz.theme import NORMAL, PROJECTOR, apply, figure
    from explorer.viz.tokens import ticks

    def xaxis(n: int, theme, share: float = 1.0) -> dict:
        layout = {"xaxis": {"tickangle": -60, **ticks([f"w{i}" for i in range(n)])}}
        return apply(figure([{"type": "heatmap", "z": [[0] * n]}], layout), theme, share)._layout["xaxis"]

    half = xaxis(40, PROJECTOR, 0.5)
    assert half["tickvals"] == list(range(0, 40, 5)) and half["ticktext"] == [f"w{i}" for i in range(0, 40, 5)]
    assert len(xaxis(10, PROJECTOR)["tickvals"]) == 10 and len(xaxis(40, NORMAL, 0.5)["tickvals"]) == 40


def test_projector_legends_above_the_plot_get_room_under_the_title() -> None:
    from explorer.viz.theme import PROJECTOR, apply, figure

    traces = [{"type": "scatter", "y": [1, 2], "name": "input gate i"}, {"type": "scatter", "y": [2], "name": "f"}]
    top = {"title": {"text": "unit 133 · layer 0"}, "legend": {"orientation": "h", "x": 0, "y": 1.0,
                                                                "yanchor": "bottom"}}
    assert apply(figure(traces, top), PROJECTOR)._layout["margin"]["t"] == int(1.3 * 28) + 12 + int(1.6 * 22)
    side = {"title": {"text": "unit 133 · layer 0"}}
    assert apply(figure(traces, side), PROJECTOR)._layout["margin"]["t"] == int(1.3 * 28) + 12


def test_projector_log_axes_draw_their_2s_and_5s_at_18_px_and_has_no_toolbar() -> None:
    from explorer.viz.theme import NORMAL, PROJECTOR, apply, export_config, figure

    layout = apply(figure([], {"yaxis": {"type": "log"}, "xaxis": {}}), PROJECTOR)._layout
    assert layout["yaxis"]["tickfont"]["size"] * 0.75 >= 18 and layout["xaxis"]["tickfont"]["size"] == 22
    assert export_config(PROJECTOR)["displayModeBar"] is False and export_config(NORMAL)["displayModeBar"] is True


def test_a_folded_heatmap_labels_every_nth_row_in_projector_mode() -> None:
    """A main chart capped to the first screen with more token rows than fit at 18 px labels every n-th row at
    18 px (projector); normal mode shrinks the labels down to 12 px, and labels every n-th row where even 12 px
    rows would overprint."""
    import numpy as np

    from explorer.ui.charts import _themed_spec, fold_cap
    from explorer.viz.theme import NORMAL, PROJECTOR, figure
    from explorer.viz.tokens import ticks

    def spec(theme) -> dict:
        fig = figure([{"type": "heatmap", "z": np.zeros((40, 5))}], {"height": 1200, "yaxis": ticks(
            [f"t{i}" for i in range(40)])})
        return json.loads(pio.to_json(_themed_spec(fig, theme, 430), validate=False))

    y = spec(PROJECTOR)["layout"]["yaxis"]
    assert y["tickfont"]["size"] == 18 and y["tickvals"] == list(range(0, 40, 4))  # (430 − 200)·0.95/40: 5 px a row
    assert fold_cap(figure([{"type": "heatmap", "z": np.zeros((40, 5))}], {"yaxis": {"ticktext": ["a"]}}),
                    PROJECTOR, 430) == 150 + 22 * 40
    n = spec(NORMAL)["layout"]["yaxis"]
    assert n["tickfont"]["size"] == 12 and n["tickvals"] == list(range(0, 40, 3))


def test_beam_tree_and_projection_labels_fit_the_projector() -> None:
    """A beam tree's token is cut with "…" to its step's column (or not drawn when two characters do not fit; the
    hover has it whole); a projector projection has at most PROJECTOR_LEGEND legend entries besides the typed
    words, which fit beside a folded chart at 22 px."""
    from explorer.viz.tokens import fit_label
    from explorer.viz.word_embeddings import PROJECTOR_LEGEND, legend_classes

    assert (fit_label("économique", 3), fit_label("le", 3), fit_label("abc", 1)) == ("éc…", "le", "")
    classes = [f"class {i}" for i in range(20) for _ in range(20 - i)]
    shown, other = legend_classes(classes, PROJECTOR_LEGEND)
    assert len(set(shown.values())) == PROJECTOR_LEGEND and other == "14 other classes"
    assert shown["class 0"] == "class 0" and shown["class 19"] == other  # the largest classes keep their entry


def test_projector_upright_token_ticks_turn_before_they_thin() -> None:
    """Eleven "clean/corrupted" labels (9 characters at 22 px: ~107 px) in a 700 px plot: upright they would
    overprint, turned to −60° all eleven fit."""
    from explorer.viz.theme import PROJECTOR, apply, figure

    labels = [f"keys/key{i}" for i in range(11)]
    layout = {"xaxis": {"tickmode": "array", "tickvals": list(range(11)), "ticktext": labels}}
    x = apply(figure([{"type": "heatmap", "z": [[0] * 11]}], layout), PROJECTOR)._layout["xaxis"]
    assert x["tickangle"] == -60 and x["ticktext"] == labels
