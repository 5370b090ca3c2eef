"""train_model: tiny runs, progress callbacks, stop requests and input validation (fast)."""
from __future__ import annotations

import pytest
import torch

from explorer.training.loop import train_model
from explorer.training.recipes import BUILTINS
from explorer.training.spec import TrainSpec, validate_spec
from explorer.training.train import main

torch.set_num_threads(1)  # tiny models: 1 thread is fastest, above all on a shared CPU

TINY = dict(n_train=200, n_heldout=20, hidden_size=16, emb_dim=8, epochs=1, batch_size=32)


@pytest.mark.parametrize("arch,extra", [
    ("rnn_lm", dict(cell="gru")),
    ("tiny_gpt", dict(n_head=2, block_size=48)),
    ("word2vec", dict(batch_size=512)),
    ("seq2seq", dict(corpus="dates", attention="luong-dot", n_train=100)),
])
def test_tiny_run_calls_progress(arch, extra):
    seen = []
    res = train_model(TrainSpec(architecture=arch, **{**TINY, **extra}), progress=seen.append)
    assert seen and seen[-1].epoch == 1 and seen[-1].heldout_loss is not None
    assert seen[-1].step == seen[-1].total_steps > 0
    assert all(p.elapsed >= 0 and p.train_loss > 0 for p in seen)
    assert not res.stopped and not res.model.training
    meta = res.meta
    for key in ("name", "architecture", "config", "corpus", "metrics", "train", "description"):
        assert key in meta
    assert ("src_vocab" in meta) if arch == "seq2seq" else ("vocab" in meta)
    assert meta["train"]["epochs"] == 1 and meta["train"]["torch"] == torch.__version__


def test_should_stop_ends_cleanly():
    calls = {"n": 0}

    def stop():
        calls["n"] += 1
        return calls["n"] > 3

    res = train_model(TrainSpec(architecture="rnn_lm", **{**TINY, "epochs": 5}), should_stop=stop)
    assert res.stopped and res.meta["train"]["stopped"]
    assert res.meta["train"]["steps"] == 3 and res.meta["train"]["epochs"] == 1
    assert res.meta["metrics"]["heldout_perplexity"] > 0


def test_user_corpus_char_level():
    from explorer.data.user_text import corpus_from_text
    text = "the cat sat on the mat.\nthe dog sat on the log.\na bird flew over the house.\n" * 5
    toks = corpus_from_text(text, level="char")
    res = train_model(TrainSpec(architecture="rnn_lm", corpus="user", user_tokens=toks, level="char",
                                **{k: v for k, v in TINY.items() if not k.startswith("n_")}))
    assert res.meta["corpus"]["generator"] == "user" and res.meta["corpus"]["level"] == "char"


@pytest.mark.parametrize("kwargs,match", [
    (dict(epochs=0), "epochs"),
    (dict(epochs=1000), "epochs"),
    (dict(hidden_size=4096), "hidden_size"),
    (dict(num_layers=5), "num_layers"),
    (dict(lr=0), "lr"),
    (dict(architecture="bert"), "architecture"),
    (dict(corpus="dates"), "corpus"),
    (dict(corpus="user", user_tokens=[]), "user_tokens"),
    (dict(corpus="user", user_tokens=[["a"]]), "too short"),
    (dict(architecture="tiny_gpt", hidden_size=30, n_head=4), "divisible"),
    (dict(batch_size=-1), "batch_size"),
    (dict(max_seconds=-5), "max_seconds"),
    (dict(cell="tree"), "cell"),
    (dict(tie_weights=True), "emb_dim == hidden_size"),  # 128 and 256 by default
    (dict(architecture="tiny_gpt", tie_weights=True, emb_dim=128, hidden_size=128), "architecture rnn_lm"),
    (dict(tie_weights="yes"), "true or false"),
])
def test_validate_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        validate_spec(TrainSpec(**kwargs))


def test_a_tied_language_model_has_one_matrix_for_its_embedding_and_output():
    res = train_model(TrainSpec(architecture="rnn_lm", **{**TINY, "emb_dim": 32, "hidden_size": 32, "epochs": 1},
                                tie_weights=True))
    assert res.meta["config"]["tie_weights"] is True and res.model.decoder.weight is res.model.embedding.weight
    assert "tie_weights" not in train_model(TrainSpec(architecture="rnn_lm", **{**TINY, "epochs": 1})).meta["config"]


def test_max_seconds_stops():
    res = train_model(TrainSpec(architecture="rnn_lm", **{**TINY, "epochs": 50, "max_seconds": 0.5}))
    assert res.stopped and res.meta["train"]["epochs"] < 50


def test_cli_lists_builtins(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out.split()
    assert out == [*BUILTINS, "minilm-mlm"]  # pretrained:minilm-mlm's recipe is explorer.training.minilm_mlm
    assert main(["nope"]) == 2
