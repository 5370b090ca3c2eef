"""Cached access to models (st.cache_resource, shared by all sessions) and probe results (st.cache_data)."""
from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

import streamlit as st

from explorer.model_cache import ModelCache
from explorer.registry import LoadedModel, ModelLoadError, OutOfMemoryLoadError
from explorer.ui import settings

R = TypeVar("R")


@st.cache_resource(show_spinner=False)
def model_cache() -> ModelCache:
    """The one process-wide LRU of loaded models (EXPLORER_MAX_MODELS, EXPLORER_MAX_MODEL_MB)."""
    return ModelCache()


def get_model(model_id: str, device: str | None = None, dtype: str | None = None) -> LoadedModel | None:
    """Load (or reuse) `model_id` on the sidebar's device/dtype; shows a clear error and returns None on failure."""
    device = device or settings.device()
    dtype = dtype or settings.dtype()
    try:
        with st.spinner(f"Loading {model_id} on {device}…"):
            loaded = model_cache().get(model_id, device, dtype)
    except OutOfMemoryLoadError as exc:
        st.error(str(exc))
        if device != "cpu" and st.button("Load it on the CPU instead", key=f"cpu-fallback-{model_id}"):
            st.session_state["device"] = "cpu"
            st.session_state["dtype"] = "float32"
            st.rerun()
        return None
    except ModelLoadError as exc:
        st.error(str(exc))
        return None
    for note in loaded.notes:
        st.info(note)
    return loaded


COMPUTE_LOG: list[tuple[str, float]] = []  # (probe name, seconds) of each uncached probe run, for bench/


@st.cache_data(max_entries=512, show_spinner=False, ttl=3600)
def _cached_call(fn_name: str, model_key: tuple, args: tuple, kwargs: tuple, _fn: Callable, _loaded: Any) -> Any:
    start = time.perf_counter()
    result = _fn(_loaded, *args, **dict(kwargs))
    COMPUTE_LOG.append((fn_name, time.perf_counter() - start))
    del COMPUTE_LOG[:-1000]
    return result


def probe(fn: Callable[..., R], loaded: LoadedModel, *args: Any, **kwargs: Any) -> R:
    """Run `fn(loaded, *args, **kwargs)` once per (fn, model id, device, dtype, args): results cached.

    Arguments other than the model must be hashable by st.cache_data (str, numbers, tuples...).
    """
    key = (loaded.id, loaded.device, loaded.dtype)
    return _cached_call(f"{fn.__module__}.{fn.__qualname__}", key, args, tuple(sorted(kwargs.items())), fn, loaded)
