"""Catalogue ids, safe loading of hostile/broken files, HF models from configs, the model cache."""
from __future__ import annotations

import io
import pickle
import threading
from pathlib import Path

import pytest
import torch

from explorer.loading import catalogue, loaders
from explorer.loading.model_cache import ModelCache
from explorer.loading.catalogue import ModelId
from explorer.loading.loaders import load_model
from explorer.files.safe_load import ModelLoadError
from explorer.loading.uploads import register_upload
from explorer.files.safe_load import CorruptFileError, UnsafeFileError
from families import ENC_DEC_SMALL, GPT2_SMALL, SMALL, T5_SMALL, tiny_model
from hostile import WritesAFile, pickle_payload_pt


# ------------------------------------------------------------------------------------------- ids
@pytest.mark.parametrize("text", ["builtin:lstm-lm", "pretrained:minilm", "hf:gpt2", "hf:google-bert/bert-base-uncased",
                                  "local:my_model.v2", "upload:0123456789abcdef"])
def test_ids_round_trip(text: str) -> None:
    mid = ModelId.parse(text)
    assert str(mid) == text
    assert ModelId.parse(str(mid)) == mid


@pytest.mark.parametrize("text", ["", "lstm", "evil:x", "hf:../etc/passwd", "hf:/etc/passwd", "local:../secret",
                                  "local:a/b", "hf:a/b/c", "builtin:", "upload:..", "hf:x" * 300])
def test_bad_ids_are_refused(text: str) -> None:
    with pytest.raises(ModelLoadError):
        ModelId.parse(text)


def test_hf_id_naming_a_server_folder_is_refused(tmp_path, monkeypatch) -> None:
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match="never opens server paths"):
        load_model("hf:models")


def test_unknown_hf_model_offline_gives_help(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_ALLOW_HUB", "0")
    with pytest.raises(ModelLoadError) as info:
        load_model("hf:someone/does-not-exist-anywhere")
    msg = str(info.value)
    assert "someone/does-not-exist-anywhere" in msg and "EXPLORER_MODEL_PATH" in msg and "cache" in msg


# --------------------------------------------------------------------------------- packaged MiniLM
def test_minilm_loads_offline_with_6_layers_12_heads() -> None:
    loaded = load_model("pretrained:minilm")
    assert loaded.family == "encoder"
    assert (loaded.n_layers, loaded.n_heads) == (6, 12)
    assert loaded.tokenizer is not None and loaded.tokenizer.vocab_size == 30522
    enc = loaded.tokenizer("the animal was tired", return_tensors="pt")
    with torch.inference_mode():
        out = loaded.model(**enc, output_attentions=True)
    T = enc["input_ids"].shape[1]
    assert len(out.attentions) == 6 and out.attentions[0].shape == (1, 12, T, T)
    assert torch.allclose(out.attentions[3].sum(-1), torch.ones(1, 12, T), atol=1e-5)


# ----------------------------------------------------------------------- tiny HF models as local:
def _tiny_hf_models(root: Path) -> dict[str, str]:
    torch.manual_seed(0)  # once: the four models are built one after the other from this generator
    models = {
        "tiny-bert": (tiny_model("BertModel", 100, max_position_embeddings=64, **SMALL), "encoder"),
        "tiny-gpt2": (tiny_model("GPT2LMHeadModel", 100, n_positions=64, **GPT2_SMALL, n_head=4), "decoder"),
        "tiny-t5": (tiny_model("T5ForConditionalGeneration", 100, **T5_SMALL, decoder_start_token_id=0),
                    "encoder-decoder"),
        "tiny-marian": (tiny_model("MarianMTModel", 100, **ENC_DEC_SMALL, pad_token_id=0, decoder_start_token_id=0),
                        "encoder-decoder"),
    }
    for name, (model, _) in models.items():
        model.save_pretrained(root / name)
    return {name: family for name, (_, family) in models.items()}


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("hfmodels")
    return root, _tiny_hf_models(root)


def test_tiny_hf_models_load_as_local_with_attentions(hf_folder, monkeypatch) -> None:
    root, families = hf_folder
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(root))
    listed = {e.id for e in catalogue.catalogue()}
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    for name, family in families.items():
        assert f"local:{name}" in listed
        loaded = load_model(f"local:{name}")
        assert loaded.family == family, name
        # loaded with eager attention, then switched once by its adapter to the family's own eager function that
        # can report what it multiplies (explorer.adapters.hf_attention)
        assert loaded.model.config._attn_implementation == "explorer_eager"
        with torch.inference_mode():
            if family == "encoder-decoder":
                out = loaded.model(input_ids=ids, decoder_input_ids=torch.tensor([[0, 5, 6]]), output_attentions=True)
                assert len(out.cross_attentions) == 2 and out.cross_attentions[0].shape == (1, 4, 3, 5)
                assert out.encoder_attentions[0].shape == (1, 4, 5, 5)
                assert out.decoder_attentions[1].shape == (1, 4, 3, 3)
            else:
                out = loaded.model(input_ids=ids, output_attentions=True)
                assert len(out.attentions) == 2 and out.attentions[0].shape == (1, 4, 5, 5)
                if family == "decoder":  # causal: nothing above the diagonal
                    assert torch.triu(out.attentions[0][0, 0], diagonal=1).abs().max() == 0
        assert (loaded.n_layers, loaded.n_heads) == (2, 4)


def test_broken_config_json_gives_clear_error(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert", "hidden_size": ')
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    with pytest.raises(CorruptFileError, match="config.json"):
        load_model("local:broken")


def test_config_json_of_unknown_model_type(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "weird"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "no-such-architecture"}')
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    with pytest.raises(ModelLoadError, match="local:weird"):
        load_model("local:weird")


def test_local_name_outside_model_path_is_not_opened(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path / "nothing-here"))
    with pytest.raises(ModelLoadError, match="no model folder"):
        load_model("local:etc")


# ------------------------------------------------------------------------------- hostile files
def test_pickle_payload_upload_is_refused_and_does_not_run(tmp_path) -> None:
    marker = tmp_path / "pwned.txt"
    data = pickle_payload_pt(marker)
    assert not marker.exists()  # torch.save did not call open(); only unpickling would
    with pytest.raises(UnsafeFileError, match="Nothing in it was executed"):
        register_upload([("model.pt", data)])
    assert not marker.exists()
    # the same bytes with plain pickle WOULD write the file: the test payload is real
    pickle.loads(pickle.dumps(WritesAFile(str(marker))))
    assert marker.exists()


def test_pickle_payload_in_local_folder_is_refused(tmp_path, monkeypatch) -> None:
    marker = tmp_path / "pwned2.txt"
    folder = tmp_path / "models" / "evil"
    folder.mkdir(parents=True)
    (folder / "model.pt").write_bytes(pickle_payload_pt(marker))
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path / "models"))
    with pytest.raises(UnsafeFileError):
        load_model("local:evil")
    assert not marker.exists()


def test_corrupt_and_truncated_safetensors(tmp_path) -> None:
    from safetensors.torch import save

    good = save({"w": torch.randn(4, 4)})
    for data in (b"not a safetensors file at all", good[: len(good) // 2], b"\xff" * 8 + b"{}", b""):
        with pytest.raises(CorruptFileError, match="not a valid safetensors file"):
            register_upload([("m.safetensors", data)])


def test_oversize_upload_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "0.001")  # about 1 KB
    from safetensors.torch import save

    data = save({"w": torch.zeros(1000)})
    with pytest.raises(ModelLoadError, match="over the"):
        register_upload([("big.safetensors", data)])


def test_plain_state_dict_upload_round_trips(tmp_path) -> None:
    from safetensors.torch import save

    lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)
    data = save({f"rnn.{k}": v.contiguous() for k, v in lstm.state_dict().items()})
    vocab = b'["<pad>", "<unk>", "<bos>", "<eos>", "cat", "dog"]'
    uid = register_upload([("lstm.safetensors", data), ("vocab.json", vocab)])
    assert uid.startswith("upload:") and uid in {e.id for e in catalogue.catalogue([uid])}
    loaded = load_model(uid)
    assert loaded.family == "state-dict" and loaded.model is None
    assert torch.equal(loaded.state_dict["rnn.weight_hh_l1"], lstm.weight_hh_l1)
    assert loaded.vocabs["vocab"].itos[4:] == ["cat", "dog"]
    assert register_upload([("lstm.safetensors", data), ("vocab.json", vocab)]) == uid  # same content, same id


def test_bad_vocab_and_bad_json_uploads() -> None:
    from safetensors.torch import save

    data = save({"w": torch.zeros(2)})
    with pytest.raises(CorruptFileError, match="vocab.json"):
        register_upload([("m.safetensors", data), ("vocab.json", b'{"a": 0, "b": 0}')])
    with pytest.raises(CorruptFileError, match="not valid JSON"):
        register_upload([("m.safetensors", data), ("config.json", b"{nope")])
    with pytest.raises(ModelLoadError, match="exactly one weights file"):
        register_upload([("vocab.json", b"[]")])
    with pytest.raises(ModelLoadError, match="Unsupported"):
        register_upload([("m.safetensors", data), ("run.sh", b"rm -rf /")])


def test_pt_without_tensors_is_refused() -> None:
    buf = io.BytesIO()
    torch.save({"epoch": 3, "note": "no tensors"}, buf)
    with pytest.raises(CorruptFileError, match="no tensors"):
        register_upload([("m.pt", buf.getvalue())])


# ----------------------------------------------------------------------------------- the cache
def test_model_cache_is_lru_and_loads_once() -> None:
    calls: list[str] = []

    def fake_loader(mid: str, device: str, dtype: str):
        calls.append(mid)
        return loaders.LoadedModel(mid, "state-dict", None, device, dtype, state_dict={"w": torch.zeros(10)})

    cache = ModelCache(max_models=2, loader=fake_loader)
    threads = [threading.Thread(target=cache.get, args=("a",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["a"]
    cache.get("b")
    cache.get("a")  # a becomes most recent
    cache.get("c")  # evicts b
    assert [m.id for m in cache.loaded()] == ["a", "c"]
    assert cache.unload("a") == 1 and [m.id for m in cache.loaded()] == ["c"]


def test_model_cache_byte_limit() -> None:
    def loader(mid, device, dtype):
        return loaders.LoadedModel(mid, "state-dict", None, device, dtype, state_dict={"w": torch.zeros(1000)})

    cache = ModelCache(max_models=10, max_bytes=9000, loader=loader)  # each holds 4000 bytes
    for mid in "abc":
        cache.get(mid)
    assert [m.id for m in cache.loaded()] == ["b", "c"]
