"""A process-wide least-recently-used cache of loaded models, keyed by (id, device, dtype).

The Streamlit layer keeps one instance with st.cache_resource, so every browser session shares it.
Bounded by the bytes of the models' parameters and buffers (EXPLORER_MAX_MODEL_MB, default 2048), so the 1-3 MB
built-ins never push out a real model; EXPLORER_MAX_MODELS (default 64) only caps the count. The class's default
models (the views' declared defaults, loaded with their own head: `pinned`) are never evicted from the server's cache
(`pin=`) to make room; everything else is, least recently used first. A model larger than the
budget on its own still loads, and is then the only one held. Models loaded from an upload are unloaded when the
upload is dropped (its sessions ended, see explorer.loading.uploads.UploadOwner).
"""
from __future__ import annotations

import os
from typing import Callable, Hashable, Iterable

import torch

from explorer.runtime import heap
from explorer.runtime.lru import LoadOnceLRU
from explorer.loading.loaders import LoadedModel, load_model
from explorer.loading.uploads import on_upload_released

HF_KINDS = ("hf:", "pretrained:", "local:")  # ids whose loading depends on the task (a head or none)
DEFAULT_MAX_MODEL_MB = 2048  # SmolLM2-135M (513 MiB in float32), MiniLM (87 MiB) and every built-in fit together
DEFAULT_MAX_MODELS = 64  # a cap on the count only; the bytes are the binding limit


def _env_number(name: str, default: float) -> float:
    """A positive number from the environment variable `name`; `default` when unset, empty or not positive."""
    raw = os.environ.get(name, "").strip()
    value = float(raw) if raw else default
    return value if value > 0 else default


Key = tuple[str, ...]  # (model id, device, dtype[, task])


def _key(model_id: str, device: str, dtype: str, task: str | None) -> Key:
    """The cache key, also the loader's arguments: the task only for a Hugging Face model (the others have no head
    to choose)."""
    return (model_id, device, dtype) if task is None or not model_id.startswith(HF_KINDS) else \
        (model_id, device, dtype, task)


def _model_and_head(key: Key) -> tuple[str, str | None]:
    """(model id, task) of a cache key (`_key`: the task is its fourth item, when it has one)."""
    return str(key[0]), str(key[3]) if len(key) == 4 else None


def pinned(key: Hashable, ids: frozenset[tuple[str, str | None]]) -> bool:
    """Whether a cache key holds one of the class's default models, loaded with the head its view loads it with
    (`ids`: (model id, task) of the views' declared defaults): never evicted to make room. Another head on the same
    checkpoint (SmolLM2 asked for as a masked LM by a link), a snapshot (`builtin:lstm-lm@127`), any other built-in
    or packaged model, an upload or a folder's model can be: the byte budget holds whatever sequence of links."""
    return isinstance(key, tuple) and _model_and_head(key) in ids


class ModelCache:
    """Thread-safe LRU of LoadedModel; each key is loaded once even under concurrent requests."""

    def __init__(self, max_models: int | None = None, max_bytes: int | None = None,
                 loader: Callable[[str, str, str], LoadedModel] = load_model,
                 pin: Iterable[tuple[str, str | None]] = ()) -> None:
        """pin: (model id, task) of the class's default models, never evicted to make room (`pinned`; the server's
        cache)."""
        max_models = max_models or max(1, int(_env_number("EXPLORER_MAX_MODELS", DEFAULT_MAX_MODELS)))
        if max_bytes is None:
            max_bytes = int(_env_number("EXPLORER_MAX_MODEL_MB", DEFAULT_MAX_MODEL_MB) * 2**20)
        self._loader = loader
        ids = frozenset(_model_and_head(_key(m, "", "", t)) for m, t in pin)
        self._epochs: dict[int, int] = {}  # id(LoadedModel) -> heap.epoch() when it was loaded
        self._store: LoadOnceLRU[LoadedModel] = LoadOnceLRU(max_models, max_bytes, lambda m: m.memory_bytes,
                                                             on_evict=self._release,
                                                             pinned=lambda key: pinned(key, ids) if ids else False)
        on_upload_released(self._upload_released)

    def _upload_released(self, upload_id: str) -> None:
        self.unload(upload_id)

    @property
    def max_models(self) -> int:
        return self._store.max_items

    @property
    def max_bytes(self) -> int | None:
        return self._store.max_bytes

    @property
    def total_bytes(self) -> int:
        """Bytes held by the parameters and buffers of the cached models."""
        return sum(m.memory_bytes for m in self._store.values())

    def held(self) -> str:
        """What the cache holds against its limits, in words: "610 MB of weights held of a budget of 2,048 MB
        (EXPLORER_MAX_MODEL_MB) and at most 64 models"."""
        budget = f"{self.max_bytes / 2**20:,.0f} MB" if self.max_bytes else "no byte limit"
        return (f"{self.total_bytes / 2**20:,.0f} MB of weights held of a budget of {budget} (EXPLORER_MAX_MODEL_MB) "
                f"and at most {self.max_models} models")

    @property
    def loads(self) -> int:
        """How many times a loader actually ran (for tests and bench)."""
        return self._store.builds

    def get(self, model_id: str, device: str = "cpu", dtype: str = "float32", task: str | None = None,
            progress: Callable[[float, str], None] | None = None) -> LoadedModel:
        """The cached model, loading it (once) if needed; evicts least recently used beyond the limits.
        task (Hugging Face models only, see loaders.load_model): cached apart from the model loaded without one.
        progress(fraction, what): reported by a load that does long first-time work (see loaders.load_model)."""
        extra = {"progress": progress} if progress is not None else {}
        key = _key(model_id, device, dtype, task)
        return self._store.get(key, lambda: self._loaded(self._loader(*key, **extra)))

    def has(self, model_id: str, device: str = "cpu", dtype: str = "float32", task: str | None = None) -> bool:
        """Whether `get` with these arguments would return a model already loaded (no load)."""
        return self._store.peek(_key(model_id, device, dtype, task)) is not None

    def _loaded(self, model: LoadedModel) -> LoadedModel:
        self._epochs[id(model)] = heap.epoch()
        return model

    def _release(self, dropped: list[LoadedModel]) -> None:
        """Free the memory of dropped models: a plain collection, or a thawing one when a freeze ran after one of
        them was loaded (explorer.runtime.heap): the thawing one holds the interpreter lock for every session ~0.5 s."""
        loaded_at = [self._epochs.pop(id(m), -1) for m in dropped]
        dropped.clear()  # the store's list: no reference left to them during the collection
        _release_memory(thaw=min(loaded_at) < heap.epoch())

    def loaded(self) -> list[LoadedModel]:
        """Cached models, most recently used last."""
        return self._store.values()

    def unload(self, model_id: str, device: str | None = None, dtype: str | None = None) -> int:
        """Drop matching entries; returns how many were dropped."""
        return self._store.drop(lambda k: isinstance(k, tuple) and k[0] == model_id and device in (None, k[1])
                                and dtype in (None, k[2]))

    def clear(self) -> None:
        self._store.drop(lambda k: True)


def _release_memory(thaw: bool = True) -> None:
    heap.collect(thaw)  # evicted models sit in reference cycles, and may be frozen (explorer.runtime.heap)
    heap.trim()  # and their pages go back to the operating system
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
