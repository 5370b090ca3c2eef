"""Cached access to models (st.cache_resource, shared by all sessions) and probe results (a ResultCache bounded in
bytes per process and per session)."""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, ContextManager, Hashable, Iterator, NoReturn, ParamSpec, TypeVar

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit import runtime
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from explorer.runtime.lru import LoadOnceLRU
from explorer.runtime import budget
from explorer.runtime.device import is_large
from explorer.runtime.heavy import HeavyQueue, heavy_slots
from explorer.runtime.result_cache import ResultCache
from explorer.runtime.errors import ViewError
from explorer.runtime.keys import fingerprint
from explorer.loading.model_cache import ModelCache
from explorer.loading.loaders import LoadedModel, OutOfMemoryLoadError
from explorer.files.safe_load import ModelLoadError
from explorer.text.escape import md, md_message
from explorer.text.token_text import marked_breaks
from explorer.loading.catalogue import CatalogueEntry, catalogue
from explorer.loading.uploads import UploadOwner, bundle
from explorer.ui import settings
from explorer.views import default_models

R = TypeVar("R")
P = ParamSpec("P")
S = TypeVar("S")  # what a probe reports as its partial result, for `partial` to draw


@st.cache_resource(max_entries=1, show_spinner=False)
def model_cache() -> ModelCache:
    """The one process-wide LRU of loaded models (EXPLORER_MAX_MODELS, EXPLORER_MAX_MODEL_MB); the class's default
    models (each view's declared default, with the head the view loads: explorer.views.default_models) are never
    evicted to make room; every other entry is, least recently used first."""
    return ModelCache(pin=default_models())


def _release_owner(owner: UploadOwner) -> None:
    owner.release()


@st.cache_resource(scope="session", max_entries=1, on_release=_release_owner, show_spinner=False)
def upload_owner() -> UploadOwner:
    """This browser session's uploads: `upload_owner().claim(uid)` after registering one. A session-scoped cache:
    when the session disconnects Streamlit releases it, and the uploads leave the catalogue and the model cache
    (unless another live session uploaded the same files)."""
    ctx = get_script_run_ctx()
    return UploadOwner(session=ctx.session_id if ctx is not None else "")


def session_catalogue() -> list[CatalogueEntry]:
    """The catalogue as this browser session sees it: every offline model and this session's own uploads (those it
    uploaded, trained or opened from a shared link), never another session's."""
    return catalogue(upload_owner().ids)


def _claim_linked_upload(model_id: str) -> bool:
    """An upload id opened in this session (its picker, or a shared link: the id is the capability) is held by this
    session too, within its budget, so that it stays while this session lives. False, with a message, when refused."""
    model_id = model_id.partition("@")[0]  # a snapshot of an upload (upload:<hash>@<step>): the upload itself
    if not model_id.startswith("upload:") or model_id in upload_owner().ids or bundle(model_id) is None:
        return True  # not an upload, already ours, or gone (the loader says so)
    try:
        upload_owner().claim(model_id)
    except ModelLoadError as exc:
        st.error(md(exc))  # names the uploaded file
        return False
    return True


LOADS = "_explorer_model_loads"  # session state: (time.monotonic, bytes) of this session's model loads


def _load_allowed(model_id: str) -> bool:
    """Whether this session may load one more model now: the weights it loaded in the last 60 s are under
    budget.session_load_bytes(). False, with a message naming the limit and when the model opens, when they are not."""
    now, most = time.monotonic(), budget.session_load_bytes()
    recent = [(t, n) for t, n in st.session_state.get(LOADS, []) if now - t < 60]
    st.session_state[LOADS] = recent
    loaded = sum(n for _, n in recent)
    if loaded >= most:
        st.warning(f"This session has loaded {loaded / 2**20:,.0f} MB of models in the last minute, the most one "
                   f"session may (EXPLORER_SESSION_LOAD_MB = {most / 2**20:,.0f}), so that opening model after model "
                   f"cannot keep the server busy for the class. {md(model_id)} can be opened in "
                   f"{60 - (now - recent[0][0]):.0f} s; the models already loaded open at once.")
        return False
    return True


def _charge_load(loaded: LoadedModel) -> None:
    """Count a model this session loaded against its budget of loads per minute."""
    st.session_state[LOADS] = [*st.session_state.get(LOADS, []), (time.monotonic(), loaded.memory_bytes)]


def _use_cpu() -> None:
    st.session_state["device"] = "cpu"
    st.session_state["dtype"] = "float32"


def get_model(model_id: str, device: str | None = None, dtype: str | None = None,
              task: str | None = None) -> LoadedModel | None:
    """Load (or reuse) `model_id` on the sidebar's device/dtype; shows a clear error and returns None on failure.
    task: a Hugging Face head to load (explorer.loading.loaders.load_model), e.g. "masked-lm"."""
    device = device or settings.device()
    dtype = dtype or settings.dtype()
    if not _claim_linked_upload(model_id):
        return None
    cold = not model_cache().has(model_id, device, dtype, task)
    if cold and not _load_allowed(model_id):
        return None
    bar: list[DeltaGenerator] = []

    def progress(fraction: float, what: str) -> None:  # long first-time work (converting a packaged model)
        text = f"Preparing {md(model_id)} (once per machine): {md_message(what)}"
        if not bar:
            bar.append(st.progress(0.0, text=text))
        bar[0].progress(min(max(float(fraction), 0.0), 1.0), text=text)

    try:
        with st.spinner(f"Loading {md(model_id)} on {md(device)}…"):
            loaded = model_cache().get(model_id, device, dtype, task, progress=progress)
    except OutOfMemoryLoadError as exc:
        st.error(md_message(exc))
        if device != "cpu":  # a callback: the sidebar's device widget already exists in this run
            st.button("Load it on the CPU instead", key=f"cpu-fallback-{model_id}", on_click=_use_cpu)
        return None
    except ModelLoadError as exc:
        st.error(md_message(exc))
        return None
    if cold:
        _charge_load(loaded)
    if bar:
        bar[0].empty()
    for note in loaded.notes:
        st.info(md_message(note))
    return loaded


COMPUTE_LOG: list[tuple[str, float]] = []  # (probe name, seconds) of each uncached probe run, for bench/


def _timed(fn_name: str, call: Callable[[], R]) -> R:
    """call(), its seconds added to COMPUTE_LOG under fn_name."""
    start = time.perf_counter()
    result = call()
    COMPUTE_LOG.append((fn_name, time.perf_counter() - start))
    del COMPUTE_LOG[:-1000]
    return result


@st.cache_resource(max_entries=1, show_spinner=False)
def results() -> ResultCache[Any]:
    """The process's probe results, bounded in bytes: EXPLORER_RESULTS_MB (default 256) for all sessions,
    EXPLORER_SESSION_RESULTS_MB (default 128) for the results one session holds, an hour at most
    (explorer.runtime.result_cache, explorer.runtime.budget). Shared read-only by every session that asks for the
    same thing."""
    return ResultCache(budget.result_bytes(), budget.session_result_bytes(), ttl_s=3600)


def _end_session_results(session: str) -> None:
    results().end_session(session)


@st.cache_resource(scope="session", max_entries=1, on_release=_end_session_results, show_spinner=False)
def session_id() -> str:
    """This browser session's id ("" outside a script run); when the session ends Streamlit releases it and the
    session gives up its results (those no other session holds are dropped)."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


@st.cache_resource(max_entries=1, show_spinner=False)
def heavy_queue() -> HeavyQueue:
    """The server's turns for heavy computations (explorer.runtime.heavy: EXPLORER_HEAVY_SLOTS at once)."""
    return HeavyQueue(heavy_slots())


def _turn(loaded: LoadedModel, heavy: bool) -> ContextManager[None]:
    """A heavy computation's turn on a large model (waiting, the page says where it is in the queue); no wait for
    anything else."""
    if not heavy or not is_large(getattr(loaded, "model", None)):
        return contextlib.nullcontext()
    slot = st.empty()
    queue = heavy_queue()

    def waiting(ahead: int) -> None:
        slot.info(f"Waiting for the server: {ahead} heavy run{'s' if ahead != 1 else ''} (decoding, attribution or "
                  f"interventions on a large model) ahead of yours; {queue.slots} run{'s' if queue.slots != 1 else ''}"
                  " at once (EXPLORER\\_HEAVY\\_SLOTS). Yours starts by itself.")

    @contextlib.contextmanager
    def turn() -> Iterator[None]:
        with queue.turn(session_id(), waiting):
            slot.empty()
            yield

    return turn()


def _build(fn_name: str, fn: Callable[..., R], loaded: LoadedModel, args: tuple[Hashable, ...],
           kwargs: dict[str, object], heavy: bool) -> R:
    with _turn(loaded, heavy):
        return _timed(fn_name, lambda: fn(loaded, *args, **kwargs))


def _cached_call(fn_name: str, model_key: tuple[str, str, str], args: tuple[Hashable, ...],
                 kwargs: tuple[tuple[str, Hashable], ...], fn: Callable[..., R], loaded: LoadedModel,
                 heavy: bool = False) -> R:
    key = (fn_name, model_key, args, kwargs)
    return results().get(key, session_id(), lambda: _build(fn_name, fn, loaded, args, dict(kwargs), heavy))


def probe(fn: Callable[..., R], loaded: LoadedModel, *args: Hashable, heavy: bool = False, raising: bool = False,
          progress: bool = False, label: str | None = None, partial: Callable[[S], None] | None = None,
          **kwargs: Hashable) -> R:
    """The one way a page runs a probe: `fn(loaded, *args, **kwargs)`, once per (fn, model id, device, dtype,
    arguments), the result kept in the results cache (explorer.runtime.result_cache) and shared read-only.

    Arguments other than the model must be hashable (str, numbers, tuples...). A ViewError the probe raises (a
    message for the user) is shown once, as the alert its class names, escaped, and stops the page (`stop_with`):
    pages need no except block of their own; `raising=True` raises it instead, for a page that does something else
    with it (a fallback, a message naming more, a section that ends while the rest of the page goes on). heavy: a
    view's heavy computation (explorer.views.View.heavy): on a large model it waits for its turn
    (explorer.runtime.heavy), saying where it is in the queue.

    A computation that lasts over half a second says what it computes, on which model and for which sentence, with
    the seconds so far, where its chart will be (st.spinner shows only after 0.5 s: a cached result shows nothing).
    progress=True: long work that reports its progress (`fn(..., progress=callback)`: `_with_progress`), drawn as a
    bar labelled `label` with `partial(shown)` under it; a newer rerun or a closed tab cancels it.
    """
    try:
        if progress:
            return _with_progress(fn, loaded, args, kwargs, label, partial, heavy)
        key = (loaded.id, loaded.device, loaded.dtype)
        with st.spinner(working_on(fn, loaded.id, args), show_time=True):
            return _cached_call(f"{fn.__module__}.{fn.__qualname__}", key, args, tuple(sorted(kwargs.items())), fn,
                                loaded, heavy)
    except ViewError as exc:
        if raising:
            raise
        stop_with(exc)


def working_on(fn: Callable[..., object], model_id: str, args: tuple[object, ...]) -> str:
    """What a probe call is computing, as Markdown: its work (WORK, else its name), the model and the first
    non-empty text argument (its end, line breaks as ↵), e.g. 'Computing integrated gradients on
    pretrained:smollm2 for “…capital of France is”'."""
    what = WORK.get(f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}") or fn.__name__.replace("_", " ")
    text = next((a for a in args if isinstance(a, str) and a.strip()), "")
    shown = marked_breaks(text)
    shown = shown if len(shown) <= 60 else "…" + shown[-59:]
    return f"Computing {md(what)} on {md(model_id)}" + (f" for “{md(shown)}”" if shown else "") + "…"


WORK = {  # <probe module>.<function> -> its work, for the probes whose name does not say it
    "decoding_strategies.decode_all": "every decoding strategy",
    "decoding_strategies.step_view": "that step's distribution",
    "token_attribution.attribution": "gradient × input and integrated gradients",
    "self_attention.attention_trace": "every layer's attention",
    "lstm_gates.rnn_gates": "the recurrent cell's gates and states",
    "contextual_embeddings.contextual": "the hidden states of every layer",
    "masked_words.masked_fill": "the fillers of each mask",
    "decision.decide": "the label probabilities (and each prefix's)",
    "decision.attribute": "gradient × input and integrated gradients of the label",
    "seq2seq.alignment_trace": "the decoder's alignment",
    "interventions.contrast": "the clean and corrupted runs",
    "interventions.attribution": "attribution patching",
    "interventions.ablation": "the ablated run",
    "positional_encodings.sentence_vectors": "the sentence's input vectors",
    "positional_encodings.permutation_experiment": "the order shuffles",
}


FIRST_DRAW_S = 0.15  # long work shows its progress from this many seconds on (a quick result draws nothing)
REDRAW_S = 0.25  # and redraws it at most this often (each draw is a message to the browser)


def _with_progress(fn: Callable[..., R], loaded: LoadedModel, args: tuple[Hashable, ...], kwargs: dict[str, Hashable],
                   label: str | None, partial: Callable[[S], None] | None, heavy: bool) -> R:
    """`probe(..., progress=True)`: `fn(loaded, *args, progress=callback, **kwargs)` reports (fraction, what[, shown])
    to a progress bar (labelled `label`, else with `working_on`: the work, the model, the text), shown only while it
    computes (from FIRST_DRAW_S on, every REDRAW_S at most; a kept result shows none), and `partial(shown)` draws
    what is known so far under it, in place (e.g. the decoding view's text as it is generated). A newer rerun of
    the session (a new sentence) cancels the work at its next drawn report: Streamlit stops the script there, and
    nothing is kept. A closed tab cancels it at its next report too (`abandoned`), whether or not Streamlit has
    stopped the disconnected session's script (1.67 does, at its next message). Kept in the same results cache;
    the bar goes before a ViewError reaches `probe`."""
    slot = st.empty()
    started, drawn = time.perf_counter(), [0.0]
    said = label if label is not None else working_on(fn, loaded.id, args).removesuffix("…")
    session = session_id()

    def progress(fraction: float, what: str, shown: S | None = None) -> None:
        if abandoned(session):
            raise StopException()  # ends this script run quietly; the results cache keeps nothing of it
        now = time.perf_counter()
        if now - started < FIRST_DRAW_S or now - drawn[0] < REDRAW_S:  # quick work draws nothing; then 4 a second
            return
        drawn[0] = now
        with slot.container():
            st.progress(min(max(float(fraction), 0.0), 1.0), text=f"{said}: {md_message(what)}")
            if shown is not None and partial is not None:
                partial(shown)

    name = f"{fn.__module__}.{fn.__qualname__}"
    key = (name, (loaded.id, loaded.device, loaded.dtype), args, tuple(sorted(kwargs.items())), "progress")
    try:
        result: R = results().get(key, session_id(),
                                  lambda: _build(name, fn, loaded, args, dict(kwargs, progress=progress), heavy))
    except ViewError:
        slot.empty()
        raise
    slot.empty()
    return result


def abandoned(session: str) -> bool:
    """Whether the browser session `session` has no websocket any more (its tab closed): its work is for nobody."""
    return bool(session) and runtime.exists() and not runtime.get_instance().is_active_session(session)


def stop_with(exc: ViewError) -> NoReturn:
    """Show a user-facing error as its class's alert (st.info, st.warning or st.error), escaped, and stop the page."""
    show = {"info": st.info, "warning": st.warning, "error": st.error}[exc.alert]
    show(md_message(exc))
    st.stop()


@st.cache_data(max_entries=256, show_spinner=False, ttl=3600)
def _cached_compute(fn_name: str, args: tuple[object, ...], kwargs: tuple[tuple[str, object], ...],
                    _fn: Callable[..., R]) -> R:
    return _fn(*args, **dict(kwargs))


def compute(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` for computations without a model (e.g. a sinusoidal table), cached per arguments.

    Defined here, once, rather than as decorated functions in a page script, which Streamlit would re-decorate
    (hashing their source) on every rerun.
    """
    return _cached_compute(f"{fn.__module__}.{fn.__qualname__}", args, tuple(sorted(kwargs.items())), fn)


def _figure_bytes(fig: go.Figure) -> int:
    """Rough memory of a cached figure: its arrays, counted three times (arrays, base64 spec, JSON)."""
    total = 0
    for trace in fig._data:
        for value in trace.values():
            if isinstance(value, np.ndarray):
                total += value.nbytes
            elif isinstance(value, list):
                total += 16 * len(value)
    return 3 * total + 20_000


@st.cache_resource(max_entries=1, show_spinner=False)
def _figure_store() -> LoadOnceLRU[go.Figure]:
    """Process-wide LRU of built figures (EXPLORER_MAX_FIGURES, default 128; EXPLORER_MAX_FIGURE_MB, default 256)."""
    return LoadOnceLRU(int(os.environ.get("EXPLORER_MAX_FIGURES", "128")),
                       max_bytes=int(float(os.environ.get("EXPLORER_MAX_FIGURE_MB", "256")) * 2**20),
                       size=_figure_bytes)


def figure_of(build: Callable[P, go.Figure], *args: P.args, **kwargs: P.kwargs) -> go.Figure:
    """build(*args, **kwargs), built once and shared by every session: kept under the function's name and the
    fingerprints of all its arguments (explorer.runtime.keys), so no control, model or theme can be left out of the
    key. A rerun that shows an unchanged figure then costs only its JSON (explorer.ui.charts.show keeps the figure's
    spec with it). `build` must be a module-level function: a lambda or a closure could read a value the key never
    sees (TypeError)."""
    name = f"{build.__module__}.{build.__qualname__}"
    if "<" in build.__qualname__ or getattr(build, "__closure__", None):
        raise TypeError(f"figure_of needs a module-level function, not {name}")
    key = (name, fingerprint(args), fingerprint(kwargs))
    return _figure_store().get(key, lambda: build(*args, **kwargs))
