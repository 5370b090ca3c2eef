"""Defaults that teach at first sight: the self-attention view opens on the head with the most visible pattern on the
model's own example sentence (computed here from transformers' own attentions), and says how it was chosen; a
layer and head in the URL win."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import assert_no_exception, run_page
from explorer.loading import pretrained
from explorer.loading.loaders import load_model
from explorer.text.escape import md_unescape

needs_minilm = pytest.mark.skipif(not pretrained.is_installed("minilm"), reason="MiniLM is not installed")


def _selected(at, key: str) -> int:
    return next(s.value for s in at.selectbox if s.key == key)


@needs_minilm
def test_self_attention_opens_on_the_most_visible_head():
    m = load_model("pretrained:minilm")
    text = m.adapter.examples("attention").default
    enc = m.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        A = torch.stack(m.model(**enc, output_attentions=True).attentions)[:, 0].double().numpy()  # (L, H, T, T)
    T = A.shape[-1]
    keep = np.ones(T, dtype=bool)
    keep[[0, T - 1]] = False  # [CLS] and [SEP]
    off = A * (1 - np.eye(T))  # a token's weight on itself is not a pattern
    score = off[:, :, keep][..., keep].max(-1).mean(-1)
    want = np.unravel_index(int(score.argmax()), score.shape)

    at = run_page("app_pages/self_attention.py", {"model": "pretrained:minilm"})
    assert_no_exception(at)
    assert (_selected(at, "layer"), _selected(at, "head")) == tuple(int(i) for i in want)
    said = md_unescape(" ".join(c.value for c in at.caption))
    assert f"opens on layer {want[0]}, head {want[1]}" in said and f"on average {score.max():.2f}" in said

    at = run_page("app_pages/self_attention.py", {"model": "pretrained:minilm", "layer": "3", "head": "1"})
    assert (_selected(at, "layer"), _selected(at, "head")) == (3, 1)
