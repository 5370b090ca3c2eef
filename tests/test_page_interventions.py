"""AppTest of the interventions page: the grid and equation are the probe's numbers, the URL state, presets,
messages for pairs that cannot be patched, ablation, and reruns that recompute nothing."""
from __future__ import annotations

import json

import numpy as np

from conftest import assert_no_exception, needs_smollm2, run_page
from plotly_arrays import plotly_array
from explorer.loading.loaders import load_model
from explorer.probes import interventions as I
from explorer.text.escape import md_unescape
from explorer.ui import cache

PAGE = "app_pages/interventions.py"
CLEAN, CORRUPT = "the keys to the cabinet", "the key to the cabinet"


def _text(elements) -> str:
    return " ".join(md_unescape(e.value) for e in elements)


def test_the_grid_and_the_equation_are_the_probes_numbers():
    at = run_page(PAGE, {"model": "builtin:tiny-gpt"})
    assert_no_exception(at)
    assert not at.error and not at.info, _text(at.info)
    assert (at.text_input(key="corrupt").value, at.text_input(key="answer").value,
            at.text_input(key="wrong").value) == (CORRUPT, "are", "is")  # the preset follows the default prompt
    grid = I.patching(load_model("builtin:tiny-gpt"), CLEAN, CORRUPT, "are", "is")
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    main = charts[0]["data"][0]
    np.testing.assert_allclose(plotly_array(main["z"]), grid.restored, atol=1e-9)
    assert main["y"] == list(grid.rows) and main["y"][0] == "before layer 0" and main["y"][-1] == "after layer 1"
    row, col = grid.strongest()
    latex = at.latex[0].value
    assert f"= {grid.restored[row, col]:.3f}" in latex and f"{grid.values[row, col]:.3f}" in latex
    c = I.contrast(load_model("builtin:tiny-gpt"), CLEAN, CORRUPT, "are", "is")
    assert f"Clean: {c.clean.ld:.3f} (p = {c.clean.p_answer:.3f}" in _text(at.caption)
    assert at.query_params["corrupt"] in (CORRUPT, [CORRUPT])


def test_changing_the_highlighted_cell_recomputes_nothing():
    at = run_page(PAGE, {"model": "builtin:tiny-gpt"})
    before = len(cache.COMPUTE_LOG)
    at.selectbox(key="layer").set_value(0).run()
    at.selectbox(key="col").set_value(2).run()
    assert_no_exception(at)
    assert len(cache.COMPUTE_LOG) == before  # no probe ran again
    assert "= 1.000" in at.latex[0].value  # before layer 0 at the only differing token: exactly 1
    at.radio(key="range").set_value("fit").run()
    assert len(cache.COMPUTE_LOG) == before  # the colour range redraws the figure only
    grid = I.patching(load_model("builtin:tiny-gpt"), CLEAN, CORRUPT, "are", "is")
    main = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert main["zmax"] == -main["zmin"] == float(np.abs(grid.restored).max())
    at.selectbox(key="site").set_value("mlp").run()
    assert len(cache.COMPUTE_LOG) == before + 1  # a new grid is one probe run


def test_url_values_win_over_the_preset_and_bad_pairs_are_messages():
    at = run_page(PAGE, {"model": "builtin:tiny-gpt", "corrupt": "the key to the old cabinet"})
    assert_no_exception(at)
    assert not at.error
    assert "same number of tokens" in _text(at.info)
    assert at.text_input(key="corrupt").value == "the key to the old cabinet"
    assert at.get("plotly_chart"), "the ablation section still shows the next tokens"
    at = run_page(PAGE, {"model": "builtin:tiny-gpt", "answer": "are", "wrong": "are"})
    assert "start with the same token" in _text(at.info)
    at = run_page(PAGE, {"model": "builtin:masked-lm"})  # refused from the catalogue, before loading (issue 57)
    assert not at.exception and "cannot open in this view" in md_unescape(" ".join(w.value for w in at.warning))


def test_choosing_another_example_brings_its_corrupted_prompt():
    at = run_page(PAGE, {"model": "builtin:tiny-gpt"})
    at.text_input(key="text").set_value("the dog that the farmers feed").run()
    assert_no_exception(at)
    assert (at.text_input(key="corrupt").value, at.text_input(key="answer").value,
            at.text_input(key="wrong").value) == ("the dogs that the farmers feed", "sleeps", "sleep")


def test_ablation_and_attribution_beside_exact_on_the_lstm():
    at = run_page(PAGE, {"model": "builtin:lstm-lm", "site": "c", "method": "both", "ablate": "L0U133",
                         "how": "resample"})
    assert_no_exception(at)
    assert not at.error
    assert list(at.selectbox(key="site").options) == ["hidden state h", "cell state c"]
    assert len(at.get("plotly_chart")) == 4  # exact, estimate, their scatter, ablation
    m = load_model("builtin:lstm-lm")
    ab = I.ablation(m, CLEAN, ("L0U133",), "resample", CORRUPT, "are", "is")
    assert f"The logit difference goes from {ab.before.ld:.3f} to {ab.after.ld:.3f}" in _text(at.caption)
    agree = I.agreement(I.patching(m, CLEAN, CORRUPT, "are", "is", "c"),
                        I.attribution(m, CLEAN, CORRUPT, "are", "is")["c"])
    assert f"Pearson r = {agree.r:.3f}" in _text(at.markdown)
    at = run_page(PAGE, {"model": "builtin:lstm-lm", "ablate": "L0H1,L0U7"})  # a head: not in a recurrent model
    assert_no_exception(at)
    assert "L0H1 from the link is not offered here; ignored." in _text(at.warning)
    assert at.multiselect(key="ablate").value == ["L0U7"]


@needs_smollm2
def test_smollm2_opens_on_the_fact_and_patches_its_heads_at_one_position():
    at = run_page(PAGE, {"site": "heads", "pos": "8"})
    assert_no_exception(at)
    assert at.session_state["model"] == "pretrained:smollm2"
    assert at.session_state["text"] == "The Eiffel Tower is in the city of"
    assert at.text_input(key="answer").value == "Paris" and at.text_input(key="wrong").value == "Rome"
    main = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert plotly_array(main["z"]).shape == (30, 9) and main["x"] == list(range(9))


def test_a_shipped_classifier_is_patched_toward_its_labels():
    """The sentiment classifier opens on its own pair (negation): the grid is the probe's, the caption reads the
    label where the classifier reads it, the what-to-notice point is computed, and the ablation bars are labels."""
    at = run_page(PAGE, {"model": "builtin:sentiment-lstm"})
    assert_no_exception(at)
    assert (at.text_input(key="corrupt").value, at.text_input(key="answer").value,
            at.text_input(key="wrong").value) == ("The food was very good.", "negative", "positive")
    loaded = load_model("builtin:sentiment-lstm")
    args = ("The food was not good.", "The food was very good.", "negative", "positive")
    grid = I.patching(loaded, *args, "h")
    main = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    np.testing.assert_allclose(plotly_array(main["z"]), grid.restored, atol=1e-9)
    captions = _text(at.caption)
    assert "logit(“negative”) − logit(“positive”) of the label the classifier gives the whole prompt" in captions
    c = I.contrast(loaded, *args)
    assert f"Clean: {c.clean.ld:.3f}" in captions and f"corrupted: {c.corrupted.ld:.3f}" in captions
    notice = " ".join(md_unescape(m.value) for m in at.markdown)
    assert f"(here {grid.restored[-1, -1]:.6f})" in notice  # the top layer's last h hands the head the clean state
    bars = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert sorted(bars["layout"]["xaxis"]["ticktext"]) == ["negative", "positive"]
    assert bars["layout"]["title"]["text"].startswith("Labels of the clean prompt")
