"""Cached glue of the word-embeddings view: the table it reads (a model's or an uploaded file's, picked by
`pick_vectors`) and its projections, shared by every browser session (st.cache_resource): shipped ones opened at
once, others fitted in the background with a progress bar while the page shows the PCA of the same rows."""
from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.adapters.protocols import Loaded
from explorer.files.vector_text import EmbeddingFileError
from explorer.loading.catalogue import builtin_names
from explorer.presenters import word_embeddings as WP
from explorer.projections import reduce as PR
from explorer.projections import assets as A
from explorer.probes import word_embeddings as P
from explorer.projections.jobs import FitJob, FitJobs
from explorer.text.escape import md, md_message
from explorer.ui.cache import get_model
from explorer.ui.state import Controls
from explorer.ui.widgets import model_picker

MAX_FITS = 8  # fitted projections kept per server process (LRU; a UMAP of 30k rows holds ~100 MB)


@st.cache_resource(max_entries=8, show_spinner=False)
def _model_table(model_id: str, device: str, dtype: str, source: str, _loaded: Loaded) -> P.EmbeddingTable:
    return P.embedding_table(_loaded, source)


def model_table(loaded: Loaded, source: str) -> P.EmbeddingTable:
    """The embedding table `source` of a loaded model, built once per (model, device, dtype, source)."""
    return _model_table(loaded.id, loaded.device, loaded.dtype, source, loaded)


@st.cache_resource(max_entries=4, show_spinner=False)
def _file_table(digest: str, name: str, _data: bytes) -> P.EmbeddingTable:
    return P.text_file_table(_data, name)


def file_table(name: str, data: bytes) -> P.EmbeddingTable:
    """An uploaded text file of vectors, parsed once per content. Raises EmbeddingFileError."""
    return _file_table(hashlib.sha256(data).hexdigest(), name, data)


@st.cache_resource(max_entries=1, show_spinner=False)
def _fits() -> FitJobs:
    """Process-wide fitted projections (LRU of MAX_FITS) and the background fits under way."""
    return FitJobs(MAX_FITS)


def _label(table: P.EmbeddingTable, n: int, method: str, dims: int) -> str:
    return f"{dims}-D {PR.METHODS[method]} of {n:,} vectors × {table.dim} dimensions"


def _builder(table: P.EmbeddingTable, rows: np.ndarray, method: str, dims: int, params: dict):
    def build(progress: PR.Progress) -> PR.Projection:
        proj = PR.fit(table.vectors[rows], method, dims, params, progress=progress)
        if proj.can_transform:  # compile the transform now (numba), not when the user types
            progress(1.0, "preparing the transform for typed words")
            PR.transform(proj, table.vectors[rows[:1]])
        return proj
    return build


def projection(table: P.EmbeddingTable, rows: np.ndarray, method: str, dims: int,
               params: dict, reference: P.EmbeddingTable | None = None) -> tuple[PR.Projection, FitJob | None]:
    """What to draw now for table rows `rows` (N,): (the requested projection, None) when it is stored, shipped
    with the app (an exact match, explorer.projections.assets) or a PCA (fitted here, fast); otherwise (the PCA of
    the same rows, the job fitting the requested one in the background, shared by every session, or its failure).
    reference: a table of the same words and width (the trained model's, when `table` is a snapshot's): a PCA is then
    fitted on the reference and `table` placed on its axes, so that every step of a training is seen in one frame.
    Raises ProjectionError when even the PCA cannot be fitted."""
    jobs = _fits()
    if reference is not None and method == "pca" and reference.words == table.words and reference.dim == table.dim:
        ref, _ = projection(reference, rows, "pca", dims, params)
        on_axes: tuple = (table.key, "on the axes of", reference.key,
                          hashlib.sha1(np.ascontiguousarray(rows).tobytes()).hexdigest(), dims)
        placement = f"the PCA axes of {reference.source}"

        def placed() -> PR.Projection:
            coords = PR.transform(ref, table.vectors[rows])
            assert coords is not None  # a PCA places new rows
            return PR.Projection("pca", dims, ref.params, coords, ref.model, ref.seconds, ref.explained,
                                 placement=placement)

        return jobs.store.get(on_axes, placed), None
    if reference is not None and reference.words == table.words and reference.dim == table.dim:
        # t-SNE / UMAP of a training step: its own fit, turned onto the trained model's map of the same rows
        own, job = projection(table, rows, method, dims, params)
        if job is None:
            ref, job = projection(reference, rows, method, dims, params)
        if job is not None:  # meanwhile: the PCA on the trained model's axes
            return projection(table, rows, "pca", dims, PR.params_for("pca"), reference)[0], job
        turned: tuple = (table.key, "aligned to", reference.key,
                         hashlib.sha1(np.ascontiguousarray(rows).tobytes()).hexdigest(), method, dims,
                         tuple(sorted(params.items())))
        return jobs.store.get(turned, lambda: PR.aligned(
            own, ref.coords, f"its own {PR.METHODS[method]}, turned and scaled onto the {PR.METHODS[method]} of "
                             f"{reference.source}")), None
    key = (table.key, hashlib.sha1(np.ascontiguousarray(rows).tobytes()).hexdigest(), method, dims,
           tuple(sorted(params.items())))
    proj = jobs.ready(key)
    if proj is not None:
        return proj, None
    job = jobs.job(key)
    if job is None:
        shipped = A.find(table, rows, method, dims, params)
        if shipped is not None:
            return jobs.store.get(key, lambda: shipped), None
        if method == "pca":
            return jobs.store.get(key, lambda: PR.fit(table.vectors[rows], "pca", dims, params)), None
        job = jobs.start(key, _builder(table, rows, method, dims, params), _label(table, len(rows), method, dims))
        proj = jobs.ready(key) if job.status == "done" else None  # finished between the two looks
        if proj is not None:
            return proj, None
    return projection(table, rows, "pca", dims, PR.params_for("pca"))[0], job


def fit_status(job: FitJob) -> None:
    """Where the requested fit stands, above the stand-in PCA: a progress bar polled each second (the page reruns
    when the fit ends), or why it failed, with a button to try again."""
    if job.status == "failed":
        st.error(f"The {job.label} could not be computed: {md_message(job.error.rstrip('.'))}. The PCA of the same "
                 "rows is shown instead.")
        if st.button("Try again", key="fit_retry"):
            _fits().retry(job.key)
            st.rerun()
        return
    _progress(job)


@st.fragment(run_every=1.0)
def _progress(job: FitJob) -> None:
    if job.status != "running":
        st.rerun()  # the whole page: it draws the finished fit (or the failure)
    st.progress(job.fraction, text=f"Computing the {job.label} in the background ({job.elapsed:.0f} s): "
                                   f"{md_message(job.message)}. It is shared by every session of this server and shown "
                                   "here when ready; PCA meanwhile.")


def pick_vectors(c: Controls, vectors: DeltaGenerator, col_model: DeltaGenerator) -> WP.Vectors:
    """The vectors' origin (under the Vectors popover), then the model and its table or the uploaded file; stops
    the page with a message when there is none."""
    with vectors:
        origin: str = c.radio("src", format_func=WP.SOURCES.get)
    if origin == "model":
        default_model = c.params["model"].default if "word2vec" in builtin_names() else "pretrained:minilm"
        with col_model:
            model_id = model_picker(c.view.needs, default=default_model)
            loaded = get_model(model_id)
        if loaded is None:
            st.stop()
        sources = P.table_sources(loaded)
        source = next(iter(sources))
        if len(sources) > 1:
            with vectors:
                source = c.radio("table", list(sources), format_func=lambda k: md(sources[k]))  # radio: Markdown
        try:
            return WP.model_vectors(model_table(loaded, source), loaded, source, model_id)
        except P.EmbeddingError as exc:
            st.error(md_message(exc))
            st.stop()
    with col_model:
        upload = st.file_uploader("Embedding file (text)", type=["txt", "vec", "csv", "tsv"], key="emb_file",
                                  help="One `word v1 v2 … vD` per line (GloVe / word2vec text format; an optional "
                                       "first line `N D`).")
    if upload is None:
        st.info(md_message(WP.UPLOAD))
        st.stop()
    try:
        return WP.file_vectors(file_table(upload.name, upload.getvalue()))
    except EmbeddingFileError as exc:
        st.error(md_message(WP.file_error(upload.name, exc)))
        st.stop()
