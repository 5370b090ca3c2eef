"""Safe reading of model files: safetensors first, `.pt`/`.pth`/`.ckpt` only through torch.load(weights_only=True).

Nothing in a file is ever executed: a pickle that needs arbitrary globals (the classic "run code on
unpickling" payload) is refused by PyTorch's restricted unpickler before any of its code runs, and we turn
that refusal into a clear `UnsafeFileError`. What the file holds (a state dict, a training checkpoint, a Lightning
.ckpt, wrapper prefixes) is read by explorer.state_dicts.
"""
from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from explorer.state_dicts import NoWeightsError, Weights, unwrap

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
WEIGHT_SUFFIXES = (".safetensors", *TORCH_SUFFIXES)
DEFAULT_MAX_UPLOAD_MB = 500


class ModelLoadError(Exception):
    """A model could not be loaded; `str(exc)` is a message fit to show a user as is."""


class UnsafeFileError(ModelLoadError):
    """The file would need arbitrary code to be unpickled: refused, nothing in it ran."""


class CorruptFileError(ModelLoadError):
    """The file is truncated, malformed or not of the type its name says."""


def max_upload_bytes() -> int:
    """Upload size limit in bytes: EXPLORER_MAX_UPLOAD_MB (default 500)."""
    try:
        mb = float(os.environ.get("EXPLORER_MAX_UPLOAD_MB", DEFAULT_MAX_UPLOAD_MB))
    except ValueError:
        mb = DEFAULT_MAX_UPLOAD_MB
    return int(max(mb, 0) * 1024 * 1024)


def check_size(name: str, size: int, limit: int | None = None) -> None:
    """Raise ModelLoadError when a file of `size` bytes exceeds the upload limit."""
    limit = max_upload_bytes() if limit is None else limit
    if size > limit:
        raise ModelLoadError(
            f"'{name}' is {size / 2**20:.1f} MB, over the {limit / 2**20:.0f} MB limit "
            "(set EXPLORER_MAX_UPLOAD_MB to change it)."
        )


def _unwrapped(obj: Any, name: str) -> Weights:
    try:
        return unwrap(obj)
    except NoWeightsError as exc:
        raise CorruptFileError(f"'{name}' {exc}") from None


def read_weights(data: bytes, name: str) -> Weights:
    """Parse an uploaded weights file (bytes): its tensors on the CPU, where they were found, and its plain extras.

    `.safetensors` is parsed by the safetensors library; `.pt`/`.pth`/`.bin`/`.ckpt` only with
    torch.load(weights_only=True). Raises UnsafeFileError / CorruptFileError with a user-facing message.
    """
    lower = name.lower()
    if lower.endswith(".safetensors"):
        from safetensors.torch import load as load_safetensors

        try:
            return _unwrapped(dict(load_safetensors(data)), name)
        except CorruptFileError:
            raise
        except Exception as exc:  # safetensors raises SafetensorError / ValueError variants
            raise CorruptFileError(f"'{name}' is not a valid safetensors file ({_short(exc)}).") from None
    if lower.endswith(TORCH_SUFFIXES):
        return _unwrapped(_torch_load_weights_only(io.BytesIO(data), name), name)
    raise ModelLoadError(f"'{name}': unsupported file type; use .safetensors (preferred), .pt, .pth or .ckpt.")


def read_weights_file(path: Path) -> Weights:
    """Like `read_weights` for a file inside an EXPLORER_MODEL_PATH folder."""
    if path.suffix.lower() == ".safetensors":
        from safetensors.torch import load_file

        try:
            state = dict(load_file(str(path), device="cpu"))
        except Exception as exc:
            raise CorruptFileError(f"'{path.name}' is not a valid safetensors file ({_short(exc)}).") from None
        return _unwrapped(state, path.name)
    with open(path, "rb") as fh:
        return _unwrapped(_torch_load_weights_only(fh, path.name), path.name)


def read_state_dict(data: bytes, name: str) -> dict[str, torch.Tensor]:
    """{parameter name: tensor} of an uploaded weights file (see `read_weights`)."""
    return read_weights(data, name).tensors


def read_state_dict_file(path: Path) -> dict[str, torch.Tensor]:
    """{parameter name: tensor} of a weights file in a model folder (see `read_weights_file`)."""
    return read_weights_file(path).tensors


def check_torch_zip(fh: Any, name: str) -> None:
    """Refuse a zip-format torch file whose members would unpack to more than the file holds (a zip bomb).

    torch.save stores its records uncompressed, so their declared sizes add up to at most the file's size; a
    compressed member, or declared sizes beyond the file, is refused from the zip directory alone, before
    anything is unpacked or allocated. Non-zip files (the legacy format) are left to torch.load.
    """
    start = fh.tell()
    try:
        size = fh.seek(0, os.SEEK_END) - start
        fh.seek(start)
        if not zipfile.is_zipfile(fh):
            return
        fh.seek(start)
        with zipfile.ZipFile(fh) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        return  # not a readable zip directory: torch.load reports what is wrong
    finally:
        fh.seek(start)
    packed = [m.filename for m in members if m.compress_type != zipfile.ZIP_STORED]
    if packed:
        raise CorruptFileError(
            f"'{name}' is a zip archive with compressed members ({packed[0]}{', …' if len(packed) > 1 else ''}): "
            "torch.save never compresses, and a compressed member can unpack to far more than the file's size "
            "(a zip bomb). Refused without unpacking anything."
        )
    declared = sum(m.file_size for m in members)
    if declared > size:
        raise CorruptFileError(
            f"'{name}' declares {declared / 2**20:,.1f} MB of contents in a {size / 2**20:,.1f} MB file: refused "
            "without unpacking anything (a zip bomb or a corrupt file)."
        )


def _torch_load_weights_only(fh: Any, name: str) -> Any:
    check_torch_zip(fh, name)
    try:
        return torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as exc:
        msg = str(exc)
        if "weights_only" in msg or "Unsupported global" in msg or "GLOBAL" in msg or "unpickl" in msg.lower():
            needed = re.search(r"GLOBAL ([\w.]+)", msg)
            held = f" (it holds a {needed.group(1)} object)" if needed else ""
            raise UnsafeFileError(
                f"'{name}' was refused: it is not a plain tensor file{held}, and loading it would need arbitrary "
                "code from the file to run (pickle). Nothing in it was executed. Save your weights with "
                "safetensors (`safetensors.torch.save_file(model.state_dict(), 'model.safetensors')`) or "
                "`torch.save(model.state_dict(), ...)` (a training dict of state dicts, numbers, strings, lists "
                "and dicts is fine; a whole model saved with `torch.save(model, ...)` is not)."
            ) from None
        raise CorruptFileError(f"'{name}' could not be read as a PyTorch file ({_short(exc)}).") from None


def read_json_bytes(data: bytes, name: str) -> Any:
    """Parse JSON bytes with a clear error naming the file, line and column."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptFileError(f"'{name}' is not UTF-8 text, so it cannot be JSON.") from None
    except json.JSONDecodeError as exc:
        raise CorruptFileError(
            f"'{name}' is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None


def read_json_file(path: Path) -> Any:
    """Read a JSON file from a model folder (size-checked, clear errors)."""
    check_size(path.name, path.stat().st_size, limit=64 * 2**20)
    return read_json_bytes(path.read_bytes(), path.name)


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:limit]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message for a page (no terminal colour codes, at most 300 characters)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
