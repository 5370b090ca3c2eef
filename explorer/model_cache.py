"""A process-wide least-recently-used cache of loaded models, keyed by (id, device, dtype).

The Streamlit layer keeps one instance with st.cache_resource, so every browser session shares it.
Bounded by a count (EXPLORER_MAX_MODELS, default 4) and optionally by bytes (EXPLORER_MAX_MODEL_MB).
"""
from __future__ import annotations

import gc
import os
import threading
from collections import OrderedDict
from typing import Callable

import torch

from explorer.registry import LoadedModel, load_model

Key = tuple[str, str, str]


class ModelCache:
    """Thread-safe LRU of LoadedModel; each key is loaded once even under concurrent requests."""

    def __init__(self, max_models: int | None = None, max_bytes: int | None = None,
                 loader: Callable[[str, str, str], LoadedModel] = load_model) -> None:
        self.max_models = max_models or max(1, int(os.environ.get("EXPLORER_MAX_MODELS", "4") or 4))
        env_mb = os.environ.get("EXPLORER_MAX_MODEL_MB")
        self.max_bytes = max_bytes if max_bytes is not None else (int(float(env_mb) * 2**20) if env_mb else None)
        self._loader = loader
        self._models: "OrderedDict[Key, LoadedModel]" = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[Key, threading.Lock] = {}
        self.loads = 0  # how many times a loader actually ran (for tests and bench)

    def get(self, model_id: str, device: str = "cpu", dtype: str = "float32") -> LoadedModel:
        """The cached model, loading it (once) if needed; evicts least recently used beyond the limits."""
        key = (model_id, device, dtype)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._models:
                    return self._models[key]
            loaded = self._loader(model_id, device, dtype)
            with self._lock:
                self.loads += 1
                self._models[key] = loaded
                self._evict_locked(keep=key)
                self._key_locks.pop(key, None)
            return loaded

    def _evict_locked(self, keep: Key) -> None:
        def over() -> bool:
            if len(self._models) > self.max_models:
                return True
            return self.max_bytes is not None and self.total_bytes_locked() > self.max_bytes

        evicted = False
        while over() and len(self._models) > 1:
            oldest = next(iter(self._models))
            if oldest == keep:
                break
            del self._models[oldest]
            evicted = True
        if evicted:
            _release_memory()

    def total_bytes_locked(self) -> int:
        return sum(m.memory_bytes for m in self._models.values())

    def loaded(self) -> list[LoadedModel]:
        """Cached models, most recently used last."""
        with self._lock:
            return list(self._models.values())

    def unload(self, model_id: str, device: str | None = None, dtype: str | None = None) -> int:
        """Drop matching entries; returns how many were dropped."""
        with self._lock:
            keys = [k for k in self._models if k[0] == model_id and device in (None, k[1]) and dtype in (None, k[2])]
            for k in keys:
                del self._models[k]
        if keys:
            _release_memory()
        return len(keys)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
        _release_memory()


def _release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
