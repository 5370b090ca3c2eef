"""AppTest of the logit-lens, token-attribution and gradients-through-time pages: URL state, the numbers shown are
the probes', bad input gives a message."""
from __future__ import annotations

import base64
import json

import numpy as np

from conftest import assert_no_exception, run_page
from explorer.loaders import load_model
from explorer.probes.attribution import attribution
from explorer.probes.gradients import gradients_through_time
from explorer.probes.lens import logit_lens

SENT = "the keys to the old cabinet are on the table ."


def _array(value) -> np.ndarray:
    """A Plotly JSON array: a list, or the typed-array encoding {"dtype", "bdata"}."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_logit_lens_page_shows_the_probe_and_its_url_state():
    at = run_page("app_pages/logit_lens.py", {"model": "builtin:tiny-gpt", "text": SENT, "layer": "0", "pos": "6"})
    assert_no_exception(at)
    tr = logit_lens(load_model("builtin:tiny-gpt"), SENT)
    grid, bars = _charts(at)[:2]
    assert grid["data"][0]["text"][0] == list(tr.top_tokens[0])
    assert bars["data"][0]["text"] == list(tr.topk_tokens[0][6]) and "block 0" in bars["layout"]["title"]["text"]
    assert f"ranks {int(tr.final_rank[0, 6]) + 1} with p = {tr.final_prob[0, 6]:.4f}" in " ".join(
        str(c.value) for c in at.caption)
    assert at.query_params["layer"] in ("0", ["0"])
    at = run_page("app_pages/logit_lens.py", {"model": "pretrained:minilm", "text": SENT})
    assert_no_exception(at)
    assert any("head" in str(i.value) for i in at.info)


def test_attribution_page_text_and_completeness():
    at = run_page("app_pages/attribution.py", {"model": "builtin:tiny-gpt", "text": SENT, "steps": "16", "out": "6"})
    assert_no_exception(at)
    tr = attribution(load_model("builtin:tiny-gpt"), SENT, "", 16)
    heat = _charts(at)[0]
    assert heat["layout"]["title"]["text"].startswith("integrated gradients")
    caption = " ".join(str(c.value) for c in at.caption)
    assert f"sum to {float(tr.integrated[6].sum()):.4f}" in caption and "16 steps" in caption
    assert "onto “are”" in " ".join(str(m.value) for m in at.markdown)
    at = run_page("app_pages/attribution.py", {"model": "builtin:tiny-gpt", "text": "🙂"})
    assert_no_exception(at)
    assert at.info


def test_gradients_page_compares_the_three_cells():
    text = "the student near the old tables is"
    at = run_page("app_pages/gradients.py", {"text": text})
    assert_no_exception(at)
    lines = _charts(at)[0]["data"]
    assert len(lines) == 3
    tr = gradients_through_time(load_model("builtin:lstm-lm"), text)
    lstm = next(d for d in lines if "LSTM" in d["name"])
    np.testing.assert_allclose(_array(lstm["y"]), tr.input_grad, rtol=1e-6)
    at = run_page("app_pages/gradients.py", {"models": "builtin:tiny-gpt", "text": text})
    assert_no_exception(at)
