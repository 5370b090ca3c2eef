"""save_checkpoint, then the app's loading path (read_meta + from_checkpoint), round trips and validation
(safetensors only)."""
from __future__ import annotations

import json

import pytest
import torch

from explorer.loading import checkpoint as ck
from explorer.models.build import build_model, from_checkpoint
from explorer.files.safe_load import ModelLoadError, read_state_dict_file

torch.set_num_threads(1)  # tiny models: 1 thread is fastest, above all on a shared CPU

VOCAB = ["<pad>", "<unk>", "<bos>", "<eos>"] + [f"w{i}" for i in range(26)]

CASES = {
    "rnn_lm": dict(vocab_size=30, emb_dim=8, hidden_size=8, num_layers=2, cell="lstm", tie_weights=True),
    "tiny_gpt": dict(vocab_size=30, block_size=8, n_layer=1, n_head=2, n_embd=16),
    "seq2seq": dict(src_vocab_size=30, tgt_vocab_size=30, emb_dim=8, hidden_size=8, attention="luong-general"),
    "word2vec": dict(vocab_size=30, dim=8),
}


def _meta(arch):
    meta = {"architecture": arch, "config": CASES[arch], "description": "test",
            "corpus": {"generator": "english", "seed": 1, "n_train": 1, "n_heldout": 1, "level": "word"},
            "metrics": {}, "train": {"epochs": 0, "seconds": 0, "device": "cpu", "torch": torch.__version__}}
    if arch == "seq2seq":
        meta.update(src_vocab=VOCAB, tgt_vocab=VOCAB)
    else:
        meta["vocab"] = VOCAB
    return meta


def _load(w, m):
    """(model, meta) as the app loads a checkpoint: the JSON meta checked, the weights read without unpickling."""
    meta = ck.read_meta(m)
    return from_checkpoint(meta, read_state_dict_file(w), w.name), meta


def _outputs(model, arch):
    ids = torch.tensor([[2, 5, 6, 7]])
    if arch == "seq2seq":
        return model(ids, ids)[0]
    if arch == "word2vec":
        return model.in_embed.weight
    out = model(ids)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("arch", list(CASES))
def test_round_trip_equal_outputs(tmp_path, arch):
    torch.manual_seed(0)
    model = build_model(arch, CASES[arch]).eval()
    w, m = ck.save_checkpoint(model, _meta(arch), tmp_path, "tiny")
    assert w.name == "tiny.safetensors" and m.name == "tiny.json"
    loaded, meta = _load(w, m)
    assert not loaded.training and meta["name"] == "tiny"
    assert torch.equal(_outputs(model, arch), _outputs(loaded, arch))
    if arch == "rnn_lm":
        assert loaded.decoder.weight is loaded.embedding.weight


def test_load_rejects_bad_meta(tmp_path):
    model = build_model("rnn_lm", CASES["rnn_lm"])
    w, m = ck.save_checkpoint(model, _meta("rnn_lm"), tmp_path, "a")
    bad = json.loads(m.read_text())
    del bad["config"]
    m.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="missing"):
        _load(w, m)
    m.write_text("{not json")
    with pytest.raises(ValueError, match="JSON"):
        _load(w, m)
    meta = _meta("rnn_lm")
    meta["vocab"] = VOCAB[:-1]
    with pytest.raises(ValueError, match="vocab"):
        ck.save_checkpoint(model, meta, tmp_path, "b")
    with pytest.raises(ValueError, match="name"):
        ck.save_checkpoint(model, _meta("rnn_lm"), tmp_path, "../evil")


def test_load_rejects_shape_mismatch(tmp_path):
    model = build_model("rnn_lm", CASES["rnn_lm"])
    w, m = ck.save_checkpoint(model, _meta("rnn_lm"), tmp_path, "a")
    meta = json.loads(m.read_text())
    meta["config"]["hidden_size"] = 16
    meta["config"]["emb_dim"] = 16
    m.write_text(json.dumps(meta))
    with pytest.raises(ModelLoadError, match="has shape"):
        _load(w, m)


def test_load_rejects_missing_tensors(tmp_path):
    from safetensors.torch import save_file
    model = build_model("word2vec", CASES["word2vec"])
    w, m = ck.save_checkpoint(model, _meta("word2vec"), tmp_path, "a")
    save_file({"in_embed.weight": torch.zeros(30, 8)}, str(w))
    with pytest.raises(ModelLoadError, match="missing tensor"):
        _load(w, m)


def test_list_builtin_matches_files():
    from explorer.loading.catalogue import BUILTIN_DIR, builtin_names

    for n in builtin_names():
        assert (BUILTIN_DIR / f"{n}.safetensors").is_file() and (BUILTIN_DIR / f"{n}.json").is_file()
