"""Device selection, dtype rules, and out-of-memory handling (simulated on CPU; real on CUDA, marked gpu)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.runtime import device as devices
from explorer.loading import loaders
from explorer.text.escape import md_unescape
from explorer.loading.loaders import OutOfMemoryLoadError, load_model
from families import GPT2_SMALL, tiny_model


def test_cpu_is_always_available_and_float32_only() -> None:
    assert devices.available_devices()[-1] == "cpu"
    assert devices.dtypes_for("cpu") == ["float32"]
    assert devices.resolve("cuda" if not torch.cuda.is_available() else "nope",
                           "bfloat16")[1] in ("float32", "bfloat16")
    assert devices.resolve("cpu", "bfloat16") == ("cpu", "float32")


def test_forced_device_env(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    assert devices.default_device() == "cpu"


def _load_as_if_on(dev: str):
    import explorer.loading.loaders as r

    original = r.resolve
    r.resolve = lambda d, t: (dev, "float32")
    try:
        return load_model("pretrained:minilm", dev)
    finally:
        r.resolve = original


def test_out_of_memory_becomes_a_clear_message(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(loaders, "_load_hf_source", boom)
    with pytest.raises(OutOfMemoryLoadError, match="does not fit in cpu memory"):
        load_model("pretrained:minilm")
    with pytest.raises(OutOfMemoryLoadError, match="Load it on the CPU"):
        _load_as_if_on("cuda")
    assert devices.is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert not devices.is_out_of_memory(RuntimeError("shape mismatch"))


def test_models_page_offers_cpu_after_out_of_memory(monkeypatch) -> None:
    from conftest import assert_no_exception, run_page

    import streamlit as st

    st.cache_resource.clear()  # a model loaded by an earlier test would be served from the shared cache
    monkeypatch.setattr(loaders, "_load_hf_source",
                        lambda *a, **k: (_ for _ in ()).throw(torch.OutOfMemoryError("out of memory")))
    at = run_page("app_pages/catalogue.py", {"model": "pretrained:minilm"})
    assert_no_exception(at)
    assert any("does not fit" in e.value for e in at.error)


def _pretend_cuda(monkeypatch, fail_on_cuda: bool = True) -> None:
    """Make the app believe a CUDA GPU is present on which every model load runs out of memory (CPU-only CI)."""
    monkeypatch.setattr(devices, "available_devices", lambda: ["cuda", "cpu"])
    monkeypatch.setattr(devices, "dtypes_for", lambda d: ["float32", "float16"] if d == "cuda" else ["float32"])
    monkeypatch.setattr(devices, "describe", lambda d: "cuda (simulated, 80.0 GiB)" if d == "cuda" else d)
    monkeypatch.setattr(loaders, "resolve", lambda d, t: (d or "cpu", t or "float32"))
    real = loaders._load_hf_source

    def load(label, source, local_only, device, dtype, task):
        if device == "cuda" and fail_on_cuda:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 79.19 GiB total)")
        return real(label, source, local_only, "cpu", "float32", task)

    monkeypatch.setattr(loaders, "_load_hf_source", load)


def _fallback_to_cpu_on_models_page() -> None:
    """Models page with the GPU out of memory: a clear message, then the CPU button loads the model on the CPU."""
    from conftest import assert_no_exception, run_page

    import streamlit as st

    st.cache_resource.clear()
    at = run_page("app_pages/catalogue.py", {"model": "pretrained:minilm"})
    assert_no_exception(at)
    assert at.session_state["device"] == "cuda"
    errors = [md_unescape(e.value) for e in at.error]
    assert any("pretrained:minilm does not fit in cuda memory" in e and "Load it on the CPU" in e
               for e in errors), errors
    at.button(key="cpu-fallback-pretrained:minilm").click().run()
    assert_no_exception(at)
    assert at.session_state["device"] == "cpu" and at.session_state["dtype"] == "float32"
    assert not [e.value for e in at.error if "does not fit" in e.value]
    shown = {m.label: m.value for m in at.metric}
    assert shown["Device · dtype"] == "cpu · float32" and shown["Parameters"] == "22,713,216"


def test_out_of_memory_on_the_gpu_offers_the_cpu_and_falls_back(monkeypatch) -> None:
    """The OOM message and the CPU fallback, simulated (the load raises torch.OutOfMemoryError on 'cuda')."""
    _pretend_cuda(monkeypatch)
    _fallback_to_cpu_on_models_page()


# ------------------------------------------------------------------------- real CUDA (marked gpu, skipped without)
def _tiny_hf_folder(folder) -> None:
    """A tiny random GPT-2 (2 layers x 2 heads, 32 dims) with a word-level tokenizer, saved with save_pretrained."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<|endoftext|>", "the", "girl", "near", "river", "sees", "old", "horse", "[UNK]"]
    wl = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    wl.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=wl, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                  unk_token="[UNK]")
    tiny_model("GPT2LMHeadModel", len(words), seed=0, n_positions=32, **GPT2_SMALL, n_head=2, bos_token_id=0,
               eos_token_id=0).save_pretrained(folder)
    tok.save_pretrained(folder)


SENTENCE = "the girl near the river sees the old horse"
HALF_TOLERANCE = {"bfloat16": 0.1, "float16": 0.02}  # max |difference| from float32 of values in [-1, 1] or [0, 1]


@pytest.mark.gpu
def test_cuda_is_picked_first_and_half_precision_is_offered(monkeypatch) -> None:
    monkeypatch.delenv("EXPLORER_DEVICE", raising=False)  # conftest forces the CPU for the other tests
    assert devices.available_devices()[0] == "cuda" and devices.default_device() == "cuda"
    assert devices.resolve(None, None) == ("cuda", "float32")
    assert devices.dtypes_for("cuda")[:1] == ["float32"] and "float16" in devices.dtypes_for("cuda")
    assert ("bfloat16" in devices.dtypes_for("cuda")) == torch.cuda.is_bf16_supported()
    assert devices.describe("cuda").startswith("cuda (") and "GiB" in devices.describe("cuda")
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    assert devices.default_device() == "cpu"  # EXPLORER_DEVICE=cpu still forces the CPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_builtin_lstm_on_cuda_matches_float32(dtype: str) -> None:
    from explorer.probes.lstm_gates import rnn_gates

    if dtype not in devices.dtypes_for("cuda"):
        pytest.skip(f"this GPU has no {dtype}")
    loaded = load_model("builtin:lstm-lm", "cuda", dtype)
    weight = next(loaded.model.parameters())
    assert weight.dtype == devices.DTYPES[dtype] and weight.device.type == "cuda"
    assert (loaded.device, loaded.dtype) == ("cuda", dtype)
    half = rnn_gates(loaded, SENTENCE)
    full = rnn_gates(load_model("builtin:lstm-lm"), SENTENCE)
    assert half.tokens == full.tokens
    for name in ("i", "f", "g", "o", "h"):
        diff = float(np.abs(half.gates[name].astype(np.float64) - full.gates[name]).max())
        assert diff < HALF_TOLERANCE[dtype], (name, diff)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_hf_models_on_cuda_match_float32(dtype: str, tmp_path, monkeypatch) -> None:
    """A tiny Hugging Face GPT-2 (local folder) and MiniLM: attention on cuda in half precision vs float32 on CPU."""
    from explorer.probes.self_attention import attention_trace

    if dtype not in devices.dtypes_for("cuda"):
        pytest.skip(f"this GPU has no {dtype}")
    _tiny_hf_folder(tmp_path / "tiny-gpt2")
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    for mid in ("local:tiny-gpt2", "pretrained:minilm"):
        loaded = load_model(mid, "cuda", dtype)
        assert next(loaded.model.parameters()).dtype == devices.DTYPES[dtype]
        assert next(loaded.model.parameters()).device.type == "cuda"
        half = attention_trace(loaded, SENTENCE, "", "", 0)
        full = attention_trace(load_model(mid), SENTENCE, "", "", 0)
        assert half.tokens == full.tokens, mid
        att = half.attentions.astype(np.float64)  # (layers, heads, T, T)
        assert np.allclose(att.sum(-1), 1.0, atol=2e-2), mid
        diff = float(np.abs(att - full.attentions).max())
        assert diff < HALF_TOLERANCE[dtype], (mid, diff)


@pytest.mark.gpu
def test_real_cuda_out_of_memory_is_caught() -> None:
    free, _ = torch.cuda.mem_get_info()
    with pytest.raises(Exception) as info:
        torch.empty(int(free * 4), dtype=torch.uint8, device="cuda")
    assert devices.is_out_of_memory(info.value)
    torch.cuda.empty_cache()


def _exhaust_cuda(real_place):
    """A `loaders._place` that first asks CUDA for four times its free memory: a real OutOfMemoryError."""
    def place(module, device, dtype):
        if device == "cuda":
            free, _ = torch.cuda.mem_get_info()
            torch.empty(int(free * 4), dtype=torch.uint8, device="cuda")
        return real_place(module, device, dtype)
    return place


@pytest.mark.gpu
def test_real_cuda_out_of_memory_while_loading_is_a_message_and_the_cpu_works(monkeypatch) -> None:
    monkeypatch.delenv("EXPLORER_DEVICE", raising=False)
    monkeypatch.setattr(loaders, "_place", _exhaust_cuda(loaders._place))
    before = torch.cuda.memory_allocated()
    with pytest.raises(OutOfMemoryLoadError, match=r"builtin:lstm-lm does not fit in cuda memory .*Load it on the CPU"):
        load_model("builtin:lstm-lm", "cuda", "float32")
    assert torch.cuda.memory_allocated() <= before + 64 * 2**20  # nothing of the failed load is left on the GPU
    cpu = load_model("builtin:lstm-lm", "cpu")
    assert next(cpu.model.parameters()).device.type == "cpu"


@pytest.mark.gpu
def test_real_cuda_out_of_memory_on_the_models_page_falls_back_to_cpu(monkeypatch) -> None:
    monkeypatch.delenv("EXPLORER_DEVICE", raising=False)
    real = loaders._load_hf_source

    def load(label, source, local_only, device, dtype, task):
        if device == "cuda":
            free, _ = torch.cuda.mem_get_info()
            torch.empty(int(free * 4), dtype=torch.uint8, device="cuda")  # a real CUDA OutOfMemoryError
        return real(label, source, local_only, device, dtype, task)

    monkeypatch.setattr(loaders, "_load_hf_source", load)
    _fallback_to_cpu_on_models_page()


@pytest.mark.gpu
def test_a_request_on_cuda_is_priced_in_the_gpus_seconds() -> None:
    """A model on the GPU is priced with the GPU's own rate (not the CPU's), and a refusal says GPU seconds."""
    from explorer.probes import self_attention as SA
    from explorer.runtime import budget

    loaded = load_model("builtin:tiny-gpt", "cuda", "float32")
    shape = budget.shape_of(loaded.model)
    assert (shape.device, shape.dtype) == ("cuda", torch.float32)
    assert budget.throughput("cuda", torch.float32) > budget.throughput("cpu")
    on_cpu = budget.shape_of(load_model("builtin:tiny-gpt").model)
    assert SA.price(shape, 512).seconds < SA.price(on_cpu, 512).seconds
    assert SA.price(shape, 512).device == "cuda" and "s of GPU" in budget.limits(device="cuda")


@pytest.mark.parametrize("mid", ["builtin:tiny-gpt", "builtin:lstm-lm", "local:tiny-gpt2"])
def test_half_precision_weights_read_float32_states(mid: str, tmp_path, monkeypatch) -> None:
    """The lens and attribution keep states and embeddings in float32; a model in bfloat16 (as on a GPU; here on the
    CPU, where bfloat16 arithmetic also runs) gets them in its own dtype and gives float32 results near float32's."""
    from explorer.probes.logit_lens import logit_lens
    from explorer.probes.token_attribution import attribution

    _tiny_hf_folder(tmp_path / "tiny-gpt2")
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    full, half = load_model(mid), load_model(mid)
    half.model.to(torch.bfloat16)
    for probe in (logit_lens, lambda m, s: attribution(m, s, outputs="prediction", steps=16)):
        a, b = probe(full, SENTENCE), probe(half, SENTENCE)
        assert getattr(a, "tokens", None) == getattr(b, "tokens", None)
        if hasattr(a, "final_prob"):
            assert b.final_prob.dtype == np.float32 or b.final_prob.dtype == np.float64
            assert float(np.abs(np.asarray(a.final_prob) - np.asarray(b.final_prob)).max()) < 0.25
        else:
            assert np.isfinite(b.integrated).all() and b.integrated.shape == a.integrated.shape
