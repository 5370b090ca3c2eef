"""Safe reading of model files: safetensors first, `.pt`/`.pth`/`.ckpt` only through torch.load(weights_only=True).

Nothing in a file is ever executed: a pickle that needs arbitrary globals (the classic "run code on
unpickling" payload) is refused by PyTorch's restricted unpickler before any of its code runs, and we turn
that refusal into a clear `UnsafeFileError`. What the file holds (a state dict, a training checkpoint, a Lightning
.ckpt, wrapper prefixes) is read by explorer.files.state_dicts.

Budgets, each checked before what it bounds is built (a refusal names the limit and its setting):
  EXPLORER_MAX_UPLOAD_MB (250)   a file's bytes, and what its tensors stand for once laid out (shape × element size;
                                 a stride-0 or overlapping view counts in full): checked after torch.load, which
                                 builds views without allocating them, before anything materialises them
  EXPLORER_MAX_HEADER_MB (8)     the part of a weights file that is not tensor data: a .pt's pickle (each list, dict
                                 or tuple counts 64 bytes: a 1-byte pickle opcode makes one) or a safetensors header
  EXPLORER_MAX_JSON_MB (40)      a JSON file of a model (real tokenizer.json files are at most ~35 MB)
  EXPLORER_MAX_JSON_VALUES (3,000,000)  values in one JSON file, counted from its bytes before parsing (an empty list
                                 takes 3 bytes of JSON and ~64 of memory); a model's files may also hold at most
                                 16 values per row of its largest weight matrix + 65,536 (vocabularies, merges)
Only the zip format of torch.save (PyTorch ≥ 1.6) is read: the legacy format interleaves its pickle with tensor
data, so its pickle cannot be bounded before it runs.
"""
from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

import torch

from explorer.files.state_dicts import NoWeightsError, Weights, unwrap
from explorer.runtime.errors import ViewError

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSON

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
WEIGHT_SUFFIXES = (".safetensors", *TORCH_SUFFIXES)
DEFAULT_MAX_UPLOAD_MB = 250  # a file and the tensors read from it fit the 512 MB upload budget
DEFAULT_MAX_HEADER_MB = 8
DEFAULT_MAX_JSON_MB = 40
DEFAULT_MAX_JSON_VALUES = 3_000_000
JSON_VALUES_PER_ROW, JSON_VALUES_BASE = 16, 65_536
CONTAINER_COST = 64  # bytes of memory one list/dict/tuple takes, for the pickle budget


class ModelLoadError(ViewError):
    """A model could not be loaded; `str(exc)` is a message fit to show a user as is."""


class UnsafeFileError(ModelLoadError):
    """The file would need arbitrary code to be unpickled: refused, nothing in it ran."""


class CorruptFileError(ModelLoadError):
    """The file is truncated, malformed or not of the type its name says."""


def _setting(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        value = default
    return max(value, 0)


def max_upload_bytes() -> int:
    """Upload size limit in bytes: EXPLORER_MAX_UPLOAD_MB (default 250)."""
    return int(_setting("EXPLORER_MAX_UPLOAD_MB", DEFAULT_MAX_UPLOAD_MB) * 2**20)


def max_header_bytes() -> int:
    """Limit on the non-tensor part of a weights file (pickle, safetensors header): EXPLORER_MAX_HEADER_MB (8)."""
    return int(_setting("EXPLORER_MAX_HEADER_MB", DEFAULT_MAX_HEADER_MB) * 2**20)


def max_json_bytes() -> int:
    """Limit on one JSON file of a model: EXPLORER_MAX_JSON_MB (default 40)."""
    return int(_setting("EXPLORER_MAX_JSON_MB", DEFAULT_MAX_JSON_MB) * 2**20)


def max_json_values() -> int:
    """Limit on the values of one JSON file: EXPLORER_MAX_JSON_VALUES (default 3,000,000)."""
    return int(_setting("EXPLORER_MAX_JSON_VALUES", DEFAULT_MAX_JSON_VALUES))


def check_size(name: str, size: int, limit: int | None = None, setting: str = "EXPLORER_MAX_UPLOAD_MB") -> None:
    """Raise ModelLoadError when a file of `size` bytes exceeds `limit` (default: the upload limit), naming the
    setting that changes it."""
    limit = max_upload_bytes() if limit is None else limit
    if size > limit:
        raise ModelLoadError(
            f"'{name}' is {size / 2**20:.1f} MB, over the {_limit(limit)} MB limit "
            f"(set {setting} to change it)."
        )


def _mb(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.1f} MB"


def _limit(nbytes: int) -> str:
    """A limit in MB as it was set: "500", "1.5", "0.01"."""
    mb = nbytes / 2**20
    return f"{mb:,.0f}" if mb >= 100 or mb == round(mb) else f"{mb:.2g}"


def _unwrapped(obj: object, name: str) -> Weights:
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
    budget = max(max_upload_bytes(), len(data))
    if lower.endswith(".safetensors"):
        from safetensors.torch import load as load_safetensors

        check_safetensors_header(io.BytesIO(data), name)
        try:
            return _checked(_unwrapped(dict(load_safetensors(data)), name), name, budget)
        except ModelLoadError:
            raise
        except Exception as exc:  # safetensors raises SafetensorError / ValueError variants
            raise CorruptFileError(f"'{name}' is not a valid safetensors file ({_short(exc)}).") from None
    if lower.endswith(TORCH_SUFFIXES):
        return _checked(_unwrapped(_torch_load_weights_only(io.BytesIO(data), name), name), name, budget)
    raise ModelLoadError(f"'{name}': unsupported file type; use .safetensors (preferred), .pt, .pth or .ckpt.")


def read_weights_file(path: Path) -> Weights:
    """Like `read_weights` for a file inside an EXPLORER_MODEL_PATH folder (the tensor budget is at least the
    file's size: a teacher's large checkpoint is read, a view standing for more than the file holds is not)."""
    budget = max(max_upload_bytes(), path.stat().st_size)
    if path.suffix.lower() == ".safetensors":
        from safetensors.torch import load_file

        with open(path, "rb") as fh:
            check_safetensors_header(fh, path.name)
        try:
            state = dict(load_file(str(path), device="cpu"))
        except Exception as exc:
            raise CorruptFileError(f"'{path.name}' is not a valid safetensors file ({_short(exc)}).") from None
        return _checked(_unwrapped(state, path.name), path.name, budget)
    with open(path, "rb") as fh:
        return _checked(_unwrapped(_torch_load_weights_only(fh, path.name), path.name), path.name, budget)


# ------------------------------------------------------------------------------------------ tensor budget
def _overlaps(t: torch.Tensor) -> bool:
    """Whether two indices of `t` may address the same element (a stride-0 broadcast, an overlapping as_strided
    view). Conservative: a non-overlapping layout whose strides interleave is reported too (it is then copied)."""
    reach = 0  # the largest offset the smaller-stride dimensions reach
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


def _refuse_tensors(name: str, total: int, budget: int, worst: tuple[str, torch.Tensor] | None) -> None:
    detail = ""
    if worst is not None:
        key, t = worst
        held = t.untyped_storage().nbytes()
        shape = str(tuple(t.shape))
        detail = (f"; the tensor '{key[:80]}' of shape {shape[:80]}{'…' if len(shape) > 80 else ''} {t.dtype} alone "
                  f"stands for {_mb(t.numel() * t.element_size())}"
                  + (f" held in {_mb(held)} (a stride-0 or overlapping view)" if _overlaps(t) else ""))
    raise CorruptFileError(
        f"'{name}': its tensors stand for {_mb(total)} once laid out{detail}, over the {_limit(budget)} MB "
        "limit (set EXPLORER_MAX_UPLOAD_MB to change it). Refused before anything was allocated.")


def check_tensors(tensors: dict[str, torch.Tensor], name: str, budget: int) -> dict[str, torch.Tensor]:
    """The tensors of a weights file, bounded before anything materialises them.

    torch.load rebuilds a view (`zeros(1).expand(2**30)`, `as_strided`) over the file's small storage without
    allocating it; the first `.contiguous()`, `.to(dtype)` or matrix product would. Each distinct view counts its
    logical size (numel × element size; tied weights once) and each storage its bytes; either total above `budget`
    is refused (CorruptFileError naming the largest tensor). Within the budget, overlapping views are copied to dense
    tensors, so nothing downstream meets one. Non-strided layouts (sparse, ...) are refused."""
    logical, storages, views = 0, {}, set()
    for key, t in tensors.items():
        if t.layout != torch.strided:
            raise CorruptFileError(f"'{name}': the tensor '{key[:80]}' is {t.layout}; only dense tensors are read "
                                   "(save the weights with .to_dense()).")
        st = t.untyped_storage()
        storages[(st.data_ptr(), st.nbytes())] = st.nbytes()
        view = (st.data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if view not in views:
            views.add(view)
            logical += t.numel() * t.element_size()
    held = sum(storages.values())
    if logical > budget or held > budget:
        worst = max(tensors.items(), key=lambda kv: kv[1].numel() * kv[1].element_size(), default=None)
        _refuse_tensors(name, max(logical, held), budget, worst)
    return {k: (t.contiguous() if t.numel() and _overlaps(t) else t) for k, t in tensors.items()}


def _checked(weights: Weights, name: str, budget: int) -> Weights:
    weights.tensors = check_tensors(weights.tensors, name, budget)
    return weights


def check_safetensors_header(fh: IO[bytes], name: str) -> None:
    """Refuse a safetensors file whose header (JSON: one entry per tensor) is over EXPLORER_MAX_HEADER_MB, before the
    library parses it. The library itself checks every tensor's shape × dtype against its byte range in the file
    (so a safetensors file stands for no more than it holds) and names what is wrong; this leaves those to it."""
    start = fh.tell()
    try:
        size = fh.seek(0, os.SEEK_END) - start
        fh.seek(start)
        head = fh.read(8)
    finally:
        fh.seek(start)
    n = int.from_bytes(head, "little") if len(head) == 8 else 0
    limit = max_header_bytes()
    if limit < n <= size - 8:
        raise CorruptFileError(f"'{name}': its safetensors header is {_mb(n)}, over the {_limit(limit)} MB limit "
                               "(set EXPLORER_MAX_HEADER_MB to change it). Refused before it was parsed.")


def read_state_dict(data: bytes, name: str) -> dict[str, torch.Tensor]:
    """{parameter name: tensor} of an uploaded weights file (see `read_weights`)."""
    return read_weights(data, name).tensors


def read_state_dict_file(path: Path) -> dict[str, torch.Tensor]:
    """{parameter name: tensor} of a weights file in a model folder (see `read_weights_file`)."""
    return read_weights_file(path).tensors


_PICKLE_CONTAINERS = b"]}(\x85\x86\x87\x8fR\x81"  # opcodes that build a list, dict, tuple, set or object


def check_torch_zip(fh: IO[bytes], name: str) -> None:
    """Refuse, before torch.load, a torch file it cannot read within bounds.

    torch.save stores its records uncompressed, so their declared sizes add up to at most the file's size; a
    compressed member, or declared sizes beyond the file, is refused from the zip directory alone, before
    anything is unpacked or allocated (a zip bomb). The pickle (data.pkl) may cost at most EXPLORER_MAX_HEADER_MB:
    its bytes plus 64 per list/dict/tuple/object opcode (torch's restricted unpickler runs in Python: a 4.8 MB pickle
    of empty lists took 7 s and 348 MB). A file that is not a zip (PyTorch's pre-1.6 format, or not a torch file)
    is refused: its pickle sits among the tensor data and cannot be bounded before it runs.
    """
    start = fh.tell()
    try:
        size = fh.seek(0, os.SEEK_END) - start
        fh.seek(start)
        if not zipfile.is_zipfile(fh):
            raise CorruptFileError(
                f"'{name}' could not be read as a PyTorch file: it is not in the zip format torch.save has written "
                "since PyTorch 1.6 (an older format, or not a PyTorch file). Save it again with torch.save in a "
                "recent PyTorch, or as safetensors.")
        fh.seek(start)
        with zipfile.ZipFile(fh) as archive:
            members = archive.infolist()
            pickles = [(m.filename, m.file_size, archive.read(m) if m.file_size <= max_header_bytes() else b"")
                       for m in members if m.filename.endswith("data.pkl") and m.compress_type == zipfile.ZIP_STORED]
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
    limit = max_header_bytes()
    for member, nbytes, data in pickles:
        cost = nbytes + CONTAINER_COST * sum(data.count(op) for op in _PICKLE_CONTAINERS) if data else nbytes
        if cost > limit:
            raise CorruptFileError(
                f"'{name}': its pickle ({member[:80]}, the non-tensor part: names, numbers, lists) would take about "
                f"{_mb(cost)} to unpickle ({_mb(nbytes)} of bytes, 64 bytes per list, dict or tuple), over the "
                f"{_limit(limit)} MB limit (set EXPLORER_MAX_HEADER_MB to change it). Refused before it ran.")


def _torch_load_weights_only(fh: IO[bytes], name: str) -> object:
    """What torch.load(weights_only=True) rebuilds: tensors in dicts, lists, tuples, numbers and strings."""
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


def json_values(data: bytes) -> int:
    """An upper bound on the values and keys of a JSON text, counted without parsing it: each one but the first
    follows a comma, a colon or an opening bracket (those inside strings only make the bound looser)."""
    return 1 + sum(data.count(c) for c in (b",", b":", b"[", b"{"))


def check_json_budget(data: bytes, name: str, rows: int | None = None) -> None:
    """Refuse, before parsing, a JSON file over EXPLORER_MAX_JSON_MB or EXPLORER_MAX_JSON_VALUES, or (rows given:
    the largest weight matrix's rows) with more values than files for such weights need (16 per row + 65,536)."""
    check_size(name, len(data), max_json_bytes(), "EXPLORER_MAX_JSON_MB")
    values, cap = json_values(data), max_json_values()
    if values > cap:
        raise CorruptFileError(f"'{name}' holds up to {values:,} JSON values, over the {cap:,} limit "
                               "(set EXPLORER_MAX_JSON_VALUES to change it). Refused before parsing.")
    if rows is not None and values > (fit := JSON_VALUES_PER_ROW * rows + JSON_VALUES_BASE):
        raise CorruptFileError(
            f"'{name}' holds up to {values:,} JSON values, far more than a vocabulary or config of these weights "
            f"needs: their largest weight matrix has {rows:,} rows, which allows {fit:,} values "
            f"({JSON_VALUES_PER_ROW} per row + {JSON_VALUES_BASE:,}). Refused before parsing.")


def read_json_bytes(data: bytes, name: str, rows: int | None = None) -> JSON:
    """Parse JSON bytes within the budgets of `check_json_budget`, with a clear error naming the file, line and
    column."""
    check_json_budget(data, name, rows)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptFileError(f"'{name}' is not UTF-8 text, so it cannot be JSON.") from None
    except json.JSONDecodeError as exc:
        raise CorruptFileError(
            f"'{name}' is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None
    except RecursionError:
        raise CorruptFileError(f"'{name}' nests lists or objects too deeply to be read.") from None


def read_json_file(path: Path, rows: int | None = None) -> JSON:
    """Read a JSON file from a model folder (size-checked before it is read, clear errors)."""
    check_size(path.name, path.stat().st_size, max_json_bytes(), "EXPLORER_MAX_JSON_MB")
    return read_json_bytes(path.read_bytes(), path.name, rows)


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:limit]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message for a page (no terminal colour codes, at most 300 characters)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
