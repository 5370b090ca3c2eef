"""One budget for uploads, enforced on the server before a body is read; a session's files freed when it ends.

Streamlit keeps every file PUT to /_stcore/upload_file/<session id>/<file id> in memory (its
MemoryUploadedFileManager), whether or not a widget asked for it, until the session is shut down; a session that
disconnects waits in the reconnect storage and, when it expires there, is dropped without being shut down, so its
files stayed for the life of the process. server.maxUploadSize (.streamlit/config.toml) bounds one file only, and the
upload route reads a whole body into memory before the store sees it: six 300 MB PUTs at once took a server to 6.1 GB.

`install()` (app.py, every run; it acts once per process) turns the runtime's manager into a
`BudgetedUploadedFileManager` in place, by its class: the upload routes, the runtime and every session hold that
one object, which Streamlit offers no way to replace after the server has started. Then:

- before the upload route parses a body (`starlette.requests.Request.form`, wrapped for PUTs to the upload route
  only), its `Content-Length` is reserved against the budget: over it, or undeclared, the request is refused (HTTP
  413, 411) with nothing read; the reservation lasts while the request is in flight;
- `add_file` refuses a file (HTTP 413, nothing kept) that would take the session past EXPLORER_SESSION_UPLOAD_MB or
  all sessions past EXPLORER_UPLOADS_MB; the refusal is kept for the session's page (`show_refusal()`);
- the budgets are those of explorer.loading.uploads and count everything an upload holds: the files here, the bodies
  in flight and the tensors parsed from them (`count_stored_files` both ways);
- the files of a session that no longer has a websocket (a closed tab) are dropped at the next add and by a
  sweeper thread within SWEEP_S seconds, so a closed tab keeps nothing, whether or not a widget held its files; the
  freed pages go back to the operating system (explorer.runtime.heap.trim).
"""
from __future__ import annotations

import itertools
import threading
import time
import weakref
from typing import TYPE_CHECKING, Callable, cast

import streamlit as st
from streamlit import runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from explorer.text.escape import md
from explorer.loading.uploads import (count_stored_files, mb, parsed_bytes, session_upload_bytes,
                                      total_upload_bytes)
from explorer.runtime import heap
from explorer.runtime.errors import ViewError

if TYPE_CHECKING:
    from starlette._utils import AwaitableOrContextManager
    from starlette.datastructures import FormData
    from starlette.requests import Request

SWEEP_S = 1.0  # how often the files of ended sessions are looked for
FILE_OVERHEAD = 1024  # bytes charged per file besides its data and name (the record, the dict entries)
_INSTALL_LOCK = threading.Lock()


def charge(file: UploadedFileRec) -> int:
    """Bytes one stored file counts for: its data, its name and FILE_OVERHEAD."""
    return len(file.data) + len(file.name) + FILE_OVERHEAD


class UploadRefused(ViewError):
    """A file over a budget of the upload store; `str(exc)` names the limit and its setting."""


class BudgetedUploadedFileManager(MemoryUploadedFileManager):
    """Streamlit's memory store of uploaded files, with one byte budget per session and for all sessions (files
    here, bodies in flight, parsed uploads)."""

    _refusals: dict[str, str]
    _add_lock: threading.Lock
    _reserved: dict[tuple[str, str], tuple[int, int]]  # (session, file id) -> (bytes declared, reservation token)
    _tokens: itertools.count

    def _start_budget(self) -> None:
        self._refusals = {}
        self._add_lock = threading.Lock()
        self._reserved = {}
        self._tokens = itertools.count()

    def reserve(self, session_id: str, file_id: str, nbytes: int, name: str = "") -> int:
        """Hold `nbytes` (a body's declared length) for a file of `session_id` until it is added or `unreserve`d;
        returns the reservation's token. Raises UploadRefused (kept for the session's page) when over a budget."""
        self.drop_ended_sessions()
        with self._add_lock:
            self._refuse_over_budget(session_id, file_id, nbytes, name or "The file")
            with self._lock:
                token = next(self._tokens)
                self._reserved[(session_id, file_id)] = (nbytes, token)
            return token

    def unreserve(self, session_id: str, file_id: str, token: int) -> None:
        """Give back reservation `token` (its request ended) unless its file was added or a newer one replaced it."""
        with self._lock:
            if self._reserved.get((session_id, file_id), (0, None))[1] == token:
                del self._reserved[(session_id, file_id)]

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        """Keep `file` for `session_id` unless it passes a budget: then raise an HTTP 413 with the reason."""
        self.drop_ended_sessions()
        with self._add_lock:  # one add at a time: the sums below stay true until super().add_file
            try:
                self._refuse_over_budget(session_id, file.file_id, charge(file),
                                         f"'{file.name[:80]}' ({mb(len(file.data))})")
            except UploadRefused as exc:
                from starlette.exceptions import HTTPException

                raise HTTPException(status_code=413, detail=str(exc)) from None
            finally:
                with self._lock:  # the file replaces its body's reservation
                    self._reserved.pop((session_id, file.file_id), None)
            super().add_file(session_id, file)

    def _refuse_over_budget(self, session_id: str, file_id: str, size: int, name: str) -> None:
        try:
            self._check(session_id, file_id, size, name)
        except UploadRefused as exc:
            with self._lock:
                self._refusals[session_id] = str(exc)
            raise

    def held(self, session_id: str, file_id: str = "") -> tuple[int, int]:
        """(bytes of `session_id`'s files and bodies in flight, all sessions'), leaving out file `file_id`'s."""
        with self._lock:
            stored = [(sid, fid, charge(f)) for sid, files in self.file_storage.items() for fid, f in files.items()]
            flying = [(sid, fid, n) for (sid, fid), (n, _) in self._reserved.items()]
        counted = [(sid, n) for sid, fid, n in stored + flying if (sid, fid) != (session_id, file_id)]
        return sum(n for sid, n in counted if sid == session_id), sum(n for _, n in counted)

    def _check(self, session_id: str, file_id: str, size: int, name: str) -> None:
        files_mine, files_all = self.held(session_id, file_id)
        tensors_mine, tensors_all = parsed_bytes(session_id)
        mine, every = files_mine + tensors_mine + size, files_all + tensors_all + size
        per_session, total = session_upload_bytes(), total_upload_bytes()
        models = lambda n: f" (models read from uploads: {mb(n)})" if n else ""  # noqa: E731
        if mine > per_session:
            raise UploadRefused(
                f"{name} was not kept: this session's uploads would take {mb(mine)}{models(tensors_mine)}, over the "
                f"{mb(per_session)} one session may hold (set EXPLORER_SESSION_UPLOAD_MB to change it). Remove a "
                "file from an upload box first.")
        if every > total:
            raise UploadRefused(
                f"{name} was not kept: the uploads of all sessions would take {mb(every)}{models(tensors_all)}, over "
                f"the server's {mb(total)} (set EXPLORER_UPLOADS_MB to change it). Try again when other sessions have "
                "ended.")

    def pop_refusal(self, session_id: str) -> str | None:
        """The last refusal of a file of `session_id` not yet shown, or None."""
        with self._lock:
            return self._refusals.pop(session_id, None)

    def remove_file(self, session_id: str, file_id: str) -> None:
        """A file removed from its upload box (the route's DELETE): its pages go back to the system."""
        super().remove_file(session_id, file_id)
        heap.trim()

    def drop_ended_sessions(self) -> list[str]:
        """Remove the files, reservations and refusals of sessions without a websocket; returns their ids."""
        if not runtime.exists():
            return []
        live = runtime.get_instance().is_active_session
        with self._lock:
            ended = [sid for sid in {*self.file_storage, *self._refusals, *(s for s, _ in self._reserved)}
                     if not live(sid)]
            for sid in ended:
                self._refusals.pop(sid, None)
            for key in [k for k in self._reserved if k[0] in ended]:
                del self._reserved[key]
        for sid in ended:
            self.remove_session_files(sid)
        if ended:
            heap.trim()
        return ended


# ------------------------------------------------------------------------------- before a body is read
# starlette's Request.form, before `_guard_bodies` wrapped it
_FORM: list[Callable[..., AwaitableOrContextManager[FormData]]] = []


def _upload_target(request: Request) -> tuple[str, str] | None:
    """(session id, file id) when `request` is a PUT to Streamlit's upload route, else None."""
    scope = request.scope
    params = scope.get("path_params") or {}
    if scope.get("type") != "http" or scope.get("method") != "PUT" or set(params) != {"session_id", "file_id"} \
            or "/_stcore/upload_file/" not in str(scope.get("path", "")):
        return None
    return str(params["session_id"]), str(params["file_id"])


def _admit(manager: BudgetedUploadedFileManager, request: Request, target: tuple[str, str]) -> None:
    """Reserve the declared length of an upload's body before it is read, for as long as `request` lives; an HTTP
    411 when it declares none, 413 when it is over a budget."""
    from starlette.exceptions import HTTPException

    declared = request.headers.get("content-length", "")
    if not declared.strip().isdigit():
        raise HTTPException(status_code=411, detail="An upload must declare its length (Content-Length).")
    session_id, file_id = target
    try:
        token = manager.reserve(session_id, file_id, int(declared), f"A file of {mb(int(declared))}")
    except UploadRefused as exc:
        raise HTTPException(status_code=413, detail=str(exc)) from None
    weakref.finalize(request, manager.unreserve, session_id, file_id, token)


def _guard_bodies(manager: BudgetedUploadedFileManager) -> None:
    """Wrap starlette's Request.form (once) so that a PUT to the upload route is admitted by `manager` first."""
    from starlette.requests import Request

    if _FORM:
        return
    _FORM.append(Request.form)
    ref = weakref.ref(manager)

    def form(self: Request, *args: object, **kwargs: object) -> AwaitableOrContextManager[FormData]:
        target, found = _upload_target(self), ref()
        if target is not None and found is not None:
            _admit(found, self, target)
        return _FORM[0](self, *args, **kwargs)

    Request.form = form  # type: ignore[method-assign,assignment]


def _sweep(manager: "weakref.ref[BudgetedUploadedFileManager]") -> None:
    while (found := manager()) is not None:
        try:
            found.drop_ended_sessions()
        except Exception:  # a runtime shutting down: try again, never stop sweeping
            pass
        del found
        time.sleep(SWEEP_S)


def _counter(ref: "weakref.ref[BudgetedUploadedFileManager]") -> Callable[[str], tuple[int, int]]:
    """The store's bytes for the uploads' budgets (explorer.loading.uploads.count_stored_files), held weakly."""
    def held(session_id: str) -> tuple[int, int]:
        found = ref()
        return found.held(session_id) if found is not None else (0, 0)
    return held


def put_budgets_on(manager: MemoryUploadedFileManager) -> BudgetedUploadedFileManager:
    """Turn Streamlit's store `manager` into a BudgetedUploadedFileManager in place (its class), counted by the
    uploads' budgets (explorer.loading.uploads.count_stored_files); returns it."""
    BudgetedUploadedFileManager._start_budget(manager)  # type: ignore[arg-type]
    manager.__class__ = BudgetedUploadedFileManager
    budgeted = cast(BudgetedUploadedFileManager, manager)
    count_stored_files(_counter(weakref.ref(budgeted)))
    return budgeted


def install() -> BudgetedUploadedFileManager | None:
    """Put the budgets on this process's upload store (once); returns it, or None without a Streamlit server
    (AppTest, scripts) or when the store is not Streamlit's memory store."""
    if not runtime.exists():
        return None
    manager = runtime.get_instance().uploaded_file_mgr
    if isinstance(manager, BudgetedUploadedFileManager):
        return manager
    if type(manager) is not MemoryUploadedFileManager:
        return None
    with _INSTALL_LOCK:
        if not isinstance(manager, BudgetedUploadedFileManager):
            budgeted = put_budgets_on(manager)
            _guard_bodies(budgeted)
            threading.Thread(target=_sweep, args=(weakref.ref(manager),), name="upload-store-sweep",
                             daemon=True).start()
    return manager  # type: ignore[return-value]


def show_refusal() -> None:
    """Show, once, why the last file this session sent to an upload box was not kept (beside the upload boxes)."""
    if not runtime.exists():
        return
    manager = runtime.get_instance().uploaded_file_mgr
    ctx = get_script_run_ctx()
    if isinstance(manager, BudgetedUploadedFileManager) and ctx is not None:
        message = manager.pop_refusal(ctx.session_id)
        if message:
            st.error(md(message))
