"""Device and dtype placement: cuda, then mps, then cpu.

Half precision (bfloat16/float16) is offered only on a GPU; on CPU the explorer always computes in float32
so that the numbers shown equal the reference framework's to 1e-5.
"""
from __future__ import annotations

import os

import torch

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Above this many parameters a forward pass takes ~0.1 s on one CPU thread (SmolLM2-135M: 120 ms for 17 tokens), so
# views open with less work (decoding: fewer tokens and samples; attribution: the prediction only).
LARGE_MODEL = 50_000_000


def is_large(model: torch.nn.Module | None) -> bool:
    """Whether `model` has more than LARGE_MODEL parameters (tied weights counted once)."""
    if not isinstance(model, torch.nn.Module):
        return False
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values()) > LARGE_MODEL


def available_devices() -> list[str]:
    """Devices usable here, best first: e.g. ["cuda", "cpu"]. EXPLORER_DEVICE=cpu forces the CPU."""
    forced = os.environ.get("EXPLORER_DEVICE", "").strip().lower()
    devices: list[str] = []
    if torch.cuda.is_available():
        devices.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    devices.append("cpu")
    if forced in devices:
        devices.remove(forced)
        devices.insert(0, forced)
    return devices


def default_device() -> str:
    """The automatic choice: cuda, then mps, then cpu."""
    return available_devices()[0]


def dtypes_for(device: str) -> list[str]:
    """Dtype names allowed on `device`: float32 everywhere, bfloat16 and float16 only on a GPU."""
    if device == "cuda":
        names = ["float32", "float16"]
        if torch.cuda.is_bf16_supported():
            names.insert(1, "bfloat16")
        return names
    if device == "mps":
        return ["float32", "float16"]
    return ["float32"]


def resolve(device: str | None, dtype: str | None) -> tuple[str, str]:
    """Validate a (device, dtype) request, falling back to what is available: returns names."""
    devices = available_devices()
    dev = device if device in devices else devices[0]
    allowed = dtypes_for(dev)
    dt = dtype if dtype in allowed else "float32"
    return dev, dt


def describe(device: str) -> str:
    """Human label for a device, e.g. 'cuda (NVIDIA H100 80GB HBM3, 79.1 GiB)'."""
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return f"cuda ({props.name}, {props.total_memory / 2**30:.1f} GiB)"
    if device == "mps":
        return "mps (Apple GPU)"
    return "cpu"


def is_out_of_memory(exc: BaseException) -> bool:
    """True for CUDA/MPS out-of-memory errors (torch.OutOfMemoryError or the message form)."""
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def cpu_threads() -> int:
    """CPU threads torch uses per computation."""
    return torch.get_num_threads()


def configure_threads() -> int:
    """Apply EXPLORER_TORCH_THREADS (CPU threads per computation) if set; returns the thread count in use.

    Default: 1 thread on machines with at most 4 cores, where small per-token computations (RNN steps,
    decoding) run 3-20x slower when torch's threads compete with the server and other sessions for cores;
    concurrent users then compute side by side. Larger machines keep torch's default.
    """
    raw = os.environ.get("EXPLORER_TORCH_THREADS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        wanted = int(raw)
    elif (os.cpu_count() or 1) <= 4:
        wanted = 1  # small machine: the server, the browser sessions and torch share few cores
    else:
        return torch.get_num_threads()
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
    return torch.get_num_threads()
