"""AppTest of the logit-lens, token-attribution and gradients-through-time pages: URL state, the numbers shown are
the probes', bad input gives a message."""
from __future__ import annotations

import json

import numpy as np

from conftest import assert_no_exception, run_page, needs_smollm2
from plotly_arrays import plotly_array
from explorer.loading.loaders import load_model
from explorer.probes.token_attribution import attribution
from explorer.probes.gradients_through_time import gradients_through_time
from explorer.probes.logit_lens import logit_lens
from explorer.text.escape import md_unescape, plotly_text
from explorer.viz.token_attribution import completeness_warning

SENT = "the keys to the old cabinet are on the table ."


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_logit_lens_page_shows_the_probe_and_its_url_state():
    at = run_page("app_pages/logit_lens.py", {"model": "builtin:tiny-gpt", "text": SENT, "layer": "0", "pos": "6"})
    assert_no_exception(at)
    tr = logit_lens(load_model("builtin:tiny-gpt"), SENT)
    grid, bars = _charts(at)[:2]
    assert grid["data"][0]["text"][0] == [plotly_text(t) for t in tr.top_tokens[0]]  # <eos> as Plotly shows it
    assert bars["data"][0]["text"] == [plotly_text(t) for t in tr.topk_tokens[0][6]]
    assert "layer 0" in bars["layout"]["title"]["text"]
    assert f"ranks {int(tr.final_rank[0, 6]) + 1} with p = {tr.final_prob[0, 6]:.4f}" in " ".join(
        md_unescape(c.value) for c in at.caption)
    assert at.query_params["layer"] in ("0", ["0"])
    captions = " ".join(md_unescape(c.value) for c in at.caption)
    assert "after layer 0 it ranks" in captions and "Layers count from 0: layer l is the output of transformer block " \
        "l, from layer 0 (the first block) to layer 1 (the last" in captions
    assert [o for o in at.selectbox(key="layer").options] == ["top 10 after layer 0", "top 10 after layer 1"]
    assert grid["data"][0]["y"] == ["layer 0", "layer 1"] and "from 0" in grid["layout"]["yaxis"]["title"]["text"]
    at = run_page("app_pages/logit_lens.py", {"model": "pretrained:minilm", "text": SENT})
    assert_no_exception(at)  # an encoder is refused from the catalogue, before it is loaded (issue 57)
    assert any("cannot open in this view: it needs a model that predicts the next token" in md_unescape(w.value)
               for w in at.warning)




@needs_smollm2
def test_logit_lens_opens_smollm2_on_a_prompt_whose_next_word_means_something():
    at = run_page("app_pages/logit_lens.py")
    assert_no_exception(at)
    assert not at.error
    assert at.session_state["model"] == "pretrained:smollm2" and at.session_state["text"] == "The capital of France is"
    tr = logit_lens(load_model("pretrained:smollm2"), "The capital of France is")
    charts = _charts(at)
    grid, full = charts[0], charts[2]  # the main grid, its bars, then every layer (below, in an expander)
    assert grid["data"][0]["y"] == [f"layer {i}" for i in range(2, 30, 3)]  # every 3rd, down from the output
    assert "(10 of 30 layers)" in grid["layout"]["title"]["text"]
    assert full["data"][0]["y"] == [f"layer {i}" for i in range(30)]
    assert "The grid shows 10 of the 30 layers: layer 2, layer 5" in " ".join(md_unescape(c.value) for c in at.caption)
    assert (f"is “{tr.final_tokens[-1]}”: after layer 29 it ranks 1"
            in " ".join(md_unescape(c.value) for c in at.caption))
    assert tr.final_tokens[-1] == "·Paris"


def test_attribution_page_text_and_completeness():
    at = run_page("app_pages/token_attribution.py",
                  {"model": "builtin:tiny-gpt", "text": SENT, "steps": "16", "out": "6"})
    assert_no_exception(at)
    tr = attribution(load_model("builtin:tiny-gpt"), SENT, "", 16)
    heat = _charts(at)[0]
    assert heat["layout"]["title"]["text"].startswith("integrated gradients")
    caption = " ".join(md_unescape(c.value) for c in at.caption)
    # the rule's computed numbers for the selected output (was "16 steps": the old rule's fixed midpoint count)
    assert f"sum to {float(tr.integrated[6].sum()):.4f}" in caption
    assert f"completeness error {tr.completeness[6]:.2g}, {tr.relative[6]:.2%} of the change" in caption
    assert (f"{len(tr.edges[6]) - 1} intervals, {tr.points[6]} points, {tr.evaluations[6]} gradient evaluations "
            "besides gradient × input's" in caption)
    assert f"at most {tr.steps} per output)." in caption
    # the chart's badge names the worst output
    shown = " ".join(md_unescape(e.value) for e in [*at.markdown, *at.caption])
    w = int(np.argmax(tr.relative))
    assert f"worst output {w} “{tr.outputs[w]}”: completeness error {tr.completeness[w]:.2g} " \
        f"({tr.relative[w]:.2%} of its change" in shown
    assert "The rule: adaptive composite Simpson, up to" in caption
    assert f"f = the log-probability of “are”: {tr.value[6]:.4f}; at the baseline (the zero embedding): " \
        f"{tr.baseline_value[6]:.4f}" in caption
    # 16 evaluations leave some outputs above 1 % on this sentence: the page warns about exactly those
    assert tr.unconverged and [md_unescape(w.value) for w in at.warning] == [completeness_warning(tr, 1024)]
    markdown = " ".join(md_unescape(m.value) for m in at.markdown)
    assert "onto “are” (red raises its log-probability, blue lowers it)" in markdown
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "text": "🙂"})
    assert_no_exception(at)
    assert at.info


def test_attribution_page_warns_when_the_gradients_do_not_add_up():
    """Two gradient evaluations per output (Simpson's rule on the whole path) miss the change in the log-probability
    by more than 1 %: the page says which outputs, by how much, and what to raise; the default budget does not
    warn."""
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "text": SENT, "steps": "2"})
    assert_no_exception(at)
    tr = attribution(load_model("builtin:tiny-gpt"), SENT, "", 2)
    bad = tr.unconverged
    assert bad and tr.max_relative > 0.01
    (warning,) = [md_unescape(w.value) for w in at.warning]
    assert f"{len(bad)} of {len(tr.outputs)} outputs do not add up" in warning and "within 1%" in warning
    i = bad[0]
    assert f"“{tr.outputs[i]}”: error {tr.completeness[i]:.3g} = {tr.relative[i]:.1%} of the change" in warning
    assert "Raise “Gradient evaluations” under Options (now 2, at most 1024)" in warning
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "text": SENT})
    assert not at.warning and attribution(load_model("builtin:tiny-gpt"), SENT).max_relative <= 0.01  # the default
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "text": SENT,
                                                     "method": "gradient × input", "steps": "2"})
    assert not at.warning  # gradient × input has no integral to warn about


def test_attribution_badge_gives_one_outputs_error_and_share():
    """The badge's completeness error and its share of the change are the same output's, also where the largest
    error and the largest share are two outputs' (4 gradient evaluations on this sentence)."""
    tr = attribution(load_model("builtin:tiny-gpt"), SENT, "", 4)
    big, worst = int(np.argmax(tr.completeness)), int(np.argmax(tr.relative))
    assert big != worst and f"{tr.completeness[big]:.2g}" != f"{tr.completeness[worst]:.2g}"
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "text": SENT, "steps": "4"})
    assert_no_exception(at)
    (badge,) = [md_unescape(c.value) for c in at.caption if "-badge[" in c.value and "completeness" in c.value]
    change = float(tr.value[worst] - tr.baseline_value[worst])
    assert (f"worst output {worst} “{tr.outputs[worst]}”: completeness error {tr.completeness[worst]:.2g} "
            f"({tr.relative[worst]:.2%} of its change {change:+.3g} in the log-probability).") in badge
    assert abs(tr.completeness[worst] - tr.relative[worst] * abs(change)) < 1e-4  # the share is of its own change
    assert f"{tr.completeness[big]:.2g}" not in badge and f"{tr.relative[big]:.2%}" not in badge


def test_only_integrated_gradients_greys_the_input_its_baseline_keeps(tmp_path, monkeypatch):
    """A rotary model's baseline keeps the first input: integrated gradients show it as kept; gradient × input has no
    baseline, and its value there (measured) is shown."""
    import re

    from families import save

    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    mid, text = save(tmp_path, "llama"), "the red car is fast ."
    tr = attribution(load_model(mid), text)
    out = len(tr.outputs) - 1
    assert tr.kept == (0,) and tr.integrated[out, 0] == 0 and abs(tr.gradient_x_input[out, 0]) > 1e-4

    def first_title(method: str) -> str:
        at = run_page("app_pages/token_attribution.py", {"model": mid, "text": text, "method": method})
        assert_no_exception(at)
        (body,) = [h.proto.body for h in at.get("html") if "<span title=" in h.proto.body]
        return re.findall(r"<span title='([^']*)' style='([^']*)'", body)[0]

    title, style = first_title("gradient × input")
    assert title == f"{tr.gradient_x_input[out, 0]:+.4f}" and "background" in style
    assert first_title("integrated gradients") == ("kept in the baseline", "opacity:0.35")


def test_attribution_colours_are_named_by_the_theme_in_use():
    """The sentence under the heatmap names the colours its palette draws: red/blue (RdBu) normally, orange/purple
    (PuOr) in projector mode, and the coloured tokens use the same palette's ends."""
    from explorer.viz.token_attribution import attribution_html
    from explorer.viz.theme import NORMAL, PROJECTOR, colorscale

    def hue(colour: str) -> float:
        import colorsys
        r, g, b = (int(v) / 255 for v in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3])
        return 360 * colorsys.rgb_to_hsv(r, g, b)[0]

    names = {"red": (330, 360), "orange": (15, 45), "blue": (195, 250), "purple": (250, 300)}
    for theme in (NORMAL, PROJECTOR):
        low, high = colorscale(theme.diverging)[1][1], colorscale(theme.diverging)[-2][1]
        for name, colour in zip(theme.diverging_ends, (low, high)):
            lo, hi = names[name]
            assert lo <= hue(colour) <= hi, (theme.name, name, colour)
        markup = attribution_html(["a", "b"], np.array([1.0, -1.0]), 2, theme)
        for colour in (low, high):  # 'rgb(r,g,b)' drawn as 'rgba(r,g,b,opacity)'
            assert colour.replace("rgb(", "rgba(").rstrip(")") + "," in markup
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "text": SENT, "projector": "1"})
    assert_no_exception(at)
    text = " ".join(md_unescape(m.value) for m in at.markdown)
    assert "(orange raises its log-probability, purple lowers it)" in text and "red raises" not in text


def test_gradients_page_compares_the_three_cells():
    text = "the student near the old tables is"
    at = run_page("app_pages/gradients_through_time.py", {"text": text})
    assert_no_exception(at)
    lines = _charts(at)[0]["data"]
    assert len(lines) == 3
    tr = gradients_through_time(load_model("builtin:lstm-lm-wordnet"), text)  # the defaults: real English
    lstm = next(d for d in lines if "LSTM" in d["name"])
    np.testing.assert_allclose(plotly_array(lstm["y"], float), tr.input_grad, rtol=1e-6)
    said = " ".join(md_unescape(m.value) for m in at.markdown)
    assert f"LSTM p = {tr.prob:.3g}" in said  # three significant digits: a real-English model's p is small
    at = run_page("app_pages/gradients_through_time.py", {"models": "builtin:tiny-gpt", "text": text})
    assert_no_exception(at)
    warned = " ".join(md_unescape(w.value) for w in at.warning)
    assert "builtin:tiny-gpt is a Transformer decoder (causal LM): gradients through time are computed for recurrent " \
           "models" in warned and "showing the built-in recurrent models instead" in warned
    assert len(_charts(at)[0]["data"]) == 3  # the defaults are shown, and said so


def test_gradients_page_names_each_model_it_leaves_out():
    """A transformer (installed or not), a word-vector table or a malformed value in ?models= is named and left out;
    the recurrent models of the same list are kept (not the whole list replaced by the defaults)."""
    text = "the student near the old tables is"
    at = run_page("app_pages/gradients_through_time.py", {"models": "builtin:lstm-lm,pretrained:smollm2,"
                                                       "builtin:word2vec,pretrained:minilm,<b>x</b>", "text": text})
    assert_no_exception(at)
    warned = [md_unescape(w.value) for w in at.warning]
    assert warned[0].startswith("pretrained:smollm2 is a Transformer decoder (causal LM): gradients through time are "
                                "computed for recurrent models") and "showing builtin:lstm-lm" in warned[0]
    assert warned[1].startswith("builtin:word2vec holds word embeddings: gradients through time are computed")
    assert warned[2].startswith("pretrained:minilm is a Transformer encoder: ")
    assert warned[3] == "1 value(s) of ?models= are not model ids: left out." and "<b>" not in " ".join(warned)
    assert at.session_state["models"] == ["builtin:lstm-lm"] and len(_charts(at)[0]["data"]) == 1
