"""Cached glue of the word-embeddings view: tables (per model or uploaded file) and fitted projections, shared by
every browser session (st.cache_resource), with a progress bar for a first fit."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import streamlit as st

from explorer import projection as PR
from explorer.lru import LoadOnceLRU
from explorer.probes import embeddings as P

MAX_FITS = 8  # fitted projections kept per server process (LRU; a UMAP of 30k rows holds ~100 MB)


@st.cache_resource(max_entries=8, show_spinner=False)
def _model_table(model_id: str, device: str, dtype: str, source: str, _loaded: Any) -> P.EmbeddingTable:
    return P.embedding_table(_loaded, source)


def model_table(loaded: Any, source: str) -> P.EmbeddingTable:
    """The embedding table `source` of a loaded model, built once per (model, device, dtype, source)."""
    return _model_table(loaded.id, loaded.device, loaded.dtype, source, loaded)


@st.cache_resource(max_entries=4, show_spinner=False)
def _file_table(digest: str, name: str, _data: bytes) -> P.EmbeddingTable:
    return P.parse_text_embeddings(_data, name)


def file_table(name: str, data: bytes) -> P.EmbeddingTable:
    """An uploaded text file of vectors, parsed once per content. Raises EmbeddingFileError."""
    return _file_table(hashlib.sha256(data).hexdigest(), name, data)


@st.cache_resource(max_entries=1, show_spinner=False)
def _fits() -> LoadOnceLRU[PR.Projection]:
    """Process-wide store of fitted projections keyed by (table key, n, method, dims, params)."""
    return LoadOnceLRU(MAX_FITS)


def _fit_with_progress(table: P.EmbeddingTable, rows: np.ndarray, method: str, dims: int, params: dict) -> PR.Projection:
    label = f"{PR.METHODS[method]} of {len(rows):,} vectors × {table.dim} dimensions"
    with st.status(f"Fitting {label}…", expanded=True) as status:
        bar = st.progress(0.0, text="starting")
        proj = PR.fit(table.vectors[rows], method, dims, params,
                      progress=lambda frac, msg: bar.progress(min(1.0, max(0.0, frac)), text=msg))
        if proj.can_transform:  # compile the transform now (numba), not when the user types
            PR.transform(proj, table.vectors[rows[:1]])
        status.update(label=f"{label}: fitted in {proj.seconds:.1f} s (kept for this server)", state="complete",
                      expanded=False)
    return proj


def projection(table: P.EmbeddingTable, rows: np.ndarray, method: str, dims: int, params: dict) -> PR.Projection:
    """One fit per key even when several sessions ask at once; later calls reuse it."""
    key = (table.key, hashlib.sha1(np.ascontiguousarray(rows).tobytes()).hexdigest(), method, dims,
           tuple(sorted(params.items())))
    return _fits().get(key, lambda: _fit_with_progress(table, rows, method, dims, params))
