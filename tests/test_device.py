"""Device selection, dtype rules, and out-of-memory handling (simulated on CPU; real on CUDA, marked gpu)."""
from __future__ import annotations

import pytest
import torch

from explorer import device as devices
from explorer import registry
from explorer.registry import OutOfMemoryLoadError, load_model


def test_cpu_is_always_available_and_float32_only() -> None:
    assert devices.available_devices()[-1] == "cpu"
    assert devices.dtypes_for("cpu") == ["float32"]
    assert devices.resolve("cuda" if not torch.cuda.is_available() else "nope", "bfloat16")[1] in ("float32", "bfloat16")
    assert devices.resolve("cpu", "bfloat16") == ("cpu", "float32")


def test_forced_device_env(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    assert devices.default_device() == "cpu"


def _load_as_if_on(dev: str):
    import explorer.registry as r

    original = r.resolve
    r.resolve = lambda d, t: (dev, "float32")
    try:
        return load_model("pretrained:minilm", dev)
    finally:
        r.resolve = original


def test_out_of_memory_becomes_a_clear_message(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(registry, "_load_hf_source", boom)
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
    monkeypatch.setattr(registry, "_load_hf_source", lambda *a, **k: (_ for _ in ()).throw(torch.OutOfMemoryError("out of memory")))
    at = run_page("pages/models.py", {"model": "pretrained:minilm"})
    assert_no_exception(at)
    assert any("does not fit" in e.value for e in at.error)


@pytest.mark.gpu
def test_cuda_is_picked_first_and_bfloat16_loads() -> None:
    assert devices.default_device() == "cuda"
    assert "bfloat16" in devices.dtypes_for("cuda")
    loaded = load_model("pretrained:minilm", "cuda", "bfloat16")
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    assert next(loaded.model.parameters()).device.type == "cuda"
    enc = loaded.tokenizer("the animal was tired", return_tensors="pt").to("cuda")
    with torch.inference_mode():
        out = loaded.model(**enc, output_attentions=True)
    assert torch.allclose(out.attentions[0].float().sum(-1), torch.ones_like(out.attentions[0][..., 0].float()), atol=1e-2)


@pytest.mark.gpu
def test_real_cuda_out_of_memory_is_caught() -> None:
    free, _ = torch.cuda.mem_get_info()
    with pytest.raises(Exception) as info:
        torch.empty(int(free * 4), dtype=torch.uint8, device="cuda")
    assert devices.is_out_of_memory(info.value)
    torch.cuda.empty_cache()
