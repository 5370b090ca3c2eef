"""Budgets on Streamlit's own store of uploaded files, enforced on the server; a session's files freed when it ends.

Streamlit keeps every file PUT to /_stcore/upload_file/<session id>/<file id> in memory (its
MemoryUploadedFileManager), whether or not a widget asked for it, until the session is shut down; a session that
disconnects waits in the reconnect storage and, when it expires there, is dropped without being shut down, so its
files stayed for the life of the process. server.maxUploadSize (.streamlit/config.toml) bounds one file only.

`install()` (app.py, every run; it acts once per process) turns the runtime's manager into a
`BudgetedUploadedFileManager` in place, by its class: the upload routes, the runtime and every session hold that
one object, which Streamlit offers no way to replace after the server has started. Then:

- `add_file` refuses a file (HTTP 413, nothing kept) that would take the session's files past
  EXPLORER_SESSION_UPLOAD_MB or all sessions' files past EXPLORER_UPLOADS_MB (the settings of explorer.loading.uploads,
  applied to this store separately); the refusal is kept for the session's page (`show_refusal()`);
- the files of a session that no longer has a websocket (a closed tab) are dropped at the next add and by a
  sweeper thread within SWEEP_S seconds, so a closed tab keeps nothing, whether or not a widget held its files.
"""
from __future__ import annotations

import threading
import time
import weakref

import streamlit as st
from streamlit import runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from explorer.text.escape import md
from explorer.loading.uploads import mb, session_upload_bytes, total_upload_bytes
from explorer.runtime.errors import ViewError

SWEEP_S = 1.0  # how often the files of ended sessions are looked for
FILE_OVERHEAD = 1024  # bytes charged per file besides its data and name (the record, the dict entries)
_INSTALL_LOCK = threading.Lock()


def charge(file: UploadedFileRec) -> int:
    """Bytes one stored file counts for: its data, its name and FILE_OVERHEAD."""
    return len(file.data) + len(file.name) + FILE_OVERHEAD


class UploadRefused(ViewError):
    """A file over a budget of the upload store; `str(exc)` names the limit and its setting."""


class BudgetedUploadedFileManager(MemoryUploadedFileManager):
    """Streamlit's memory store of uploaded files, with a byte budget per session and for all sessions."""

    _refusals: dict[str, str]
    _add_lock: threading.Lock

    def _start_budget(self) -> None:
        self._refusals = {}
        self._add_lock = threading.Lock()

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        """Keep `file` for `session_id` unless it passes a budget: then raise an HTTP 413 with the reason."""
        self.drop_ended_sessions()
        with self._add_lock:  # one add at a time: the sums below stay true until super().add_file
            try:
                self._check(session_id, file)
            except UploadRefused as exc:
                from starlette.exceptions import HTTPException

                with self._lock:
                    self._refusals[session_id] = str(exc)
                raise HTTPException(status_code=413, detail=str(exc)) from None
            super().add_file(session_id, file)

    def _check(self, session_id: str, file: UploadedFileRec) -> None:
        size = charge(file)
        with self._lock:
            mine = sum(charge(f) for fid, f in self.file_storage.get(session_id, {}).items() if fid != file.file_id)
            every = sum(charge(f) for sid, files in self.file_storage.items() for fid, f in files.items()
                        if (sid, fid) != (session_id, file.file_id))
        name = f"'{file.name[:80]}' ({mb(len(file.data))})"
        per_session, total = session_upload_bytes(), total_upload_bytes()
        if mine + size > per_session:
            raise UploadRefused(
                f"{name} was not kept: this session's uploaded files would take {mb(mine + size)}, over the "
                f"{mb(per_session)} one session may hold (set EXPLORER_SESSION_UPLOAD_MB to change it). Remove a "
                "file from an upload box first.")
        if every + size > total:
            raise UploadRefused(
                f"{name} was not kept: the uploaded files of all sessions would take {mb(every + size)}, over the "
                f"server's {mb(total)} (set EXPLORER_UPLOADS_MB to change it). Try again when other sessions have "
                "ended.")

    def session_bytes(self, session_id: str) -> int:
        """Bytes the files of `session_id` count for (charge())."""
        with self._lock:
            return sum(charge(f) for f in self.file_storage.get(session_id, {}).values())

    def total_bytes(self) -> int:
        """Bytes the files of all sessions count for."""
        with self._lock:
            return sum(charge(f) for files in self.file_storage.values() for f in files.values())

    def pop_refusal(self, session_id: str) -> str | None:
        """The last refusal of a file of `session_id` not yet shown, or None."""
        with self._lock:
            return self._refusals.pop(session_id, None)

    def drop_ended_sessions(self) -> list[str]:
        """Remove the files (and refusals) of sessions without a websocket; returns their ids."""
        if not runtime.exists():
            return []
        live = runtime.get_instance().is_active_session
        with self._lock:
            ended = [sid for sid in {*self.file_storage, *self._refusals} if not live(sid)]
            for sid in ended:
                self._refusals.pop(sid, None)
        for sid in ended:
            self.remove_session_files(sid)
        return ended


def _sweep(manager: "weakref.ref[BudgetedUploadedFileManager]") -> None:
    while (found := manager()) is not None:
        try:
            found.drop_ended_sessions()
        except Exception:  # a runtime shutting down: try again, never stop sweeping
            pass
        del found
        time.sleep(SWEEP_S)


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
            BudgetedUploadedFileManager._start_budget(manager)  # type: ignore[arg-type]
            manager.__class__ = BudgetedUploadedFileManager
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
