"""Uploaded model files, held in memory for the browser sessions that uploaded them.

`register_upload(files, owner=...)` validates the files (safetensors, or .pt read with weights_only=True, plus
JSON) and keeps them as an `UploadBundle` under the id 'upload:<hash>'. An upload belongs to the sessions that hold
it (`UploadOwner`: the session that uploaded or trained it, and any session that opened its id from a shared link);
it lives while one of them lives, and when it is dropped the `on_upload_released` hooks (the model cache) unload
what was built from it.

Budgets, one for everything an upload holds in memory: the tensors parsed here, and the files as sent, in the
server's store of uploaded files and in flight (explorer.ui.upload_store registers them with `count_stored_files`;
a 200 MB checkpoint holds 400 MB while it is both a file in its upload box and a model's tensors here):
  EXPLORER_MAX_UPLOADS (8)           uploads one session holds: its oldest claim is given up for a new one;
  EXPLORER_SESSION_UPLOAD_MB (512)   bytes one session holds: its oldest claims are given up for a new one;
  EXPLORER_UPLOADS_MB (512)          bytes held for all sessions: a new upload over it is refused with a message.
The defaults fit a replica of 2 GiB: ~1.4 GB for the class's models at work, 512 MB for uploads.
A session's budget never gives up another session's claim: an upload leaves memory only when no session holds it.
Uploads registered without an owner (tests, scripts) are kept, EXPLORER_MAX_UPLOADS at most, until a session claims
them or a newer unowned upload replaces them.
"""
from __future__ import annotations

import hashlib
import itertools
import queue
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable

import torch

from explorer.models.build import FAMILY_OF_ARCHITECTURE, FINE_TUNE, from_checkpoint
from explorer.loading.checkpoint import Meta, SERIES_SUFFIX, series_steps
from explorer.files.safe_load import (WEIGHT_SUFFIXES, CorruptFileError, ModelLoadError, check_size, first_line,
                                read_json_bytes, read_weights)
from explorer.files.state_dicts import Weights
from explorer.runtime import heap
from explorer.runtime.budget import positive_setting

if TYPE_CHECKING:
    from explorer.data.vocab import Vocab


@dataclass
class UploadBundle:
    """Parsed uploaded files, held in memory: tensors on CPU, the meta/config JSON and a vocab if given.

    found: (what, value) rows saying where the weights and the vocabulary were read (shown by the views);
    note: one sentence when the weights came out of a wrapper (a training checkpoint, a prefix), else ""."""

    id: str
    label: str
    family: str
    state_dict: dict[str, torch.Tensor]
    meta: Meta | None
    vocab: Vocab | None
    nbytes: int
    found: tuple[tuple[str, str], ...] = ()
    note: str = ""
    series: tuple[dict[str, torch.Tensor], ...] = ()  # snapshots over training (meta["snapshots"]), as stored
    task: dict[str, object] | None = None  # a task model's settings from a JSON beside it (explorer.adapters.decision)


_UPLOADS: "OrderedDict[str, UploadBundle]" = OrderedDict()
_UPLOADS_LOCK = threading.Lock()


class UploadBudgetError(ModelLoadError):
    """An upload over a session's or the server's memory budget; `str(exc)` names the limit and its setting."""


def max_uploads() -> int:
    """How many uploads one session holds at once (EXPLORER_MAX_UPLOADS, default 8)."""
    return max(1, int(positive_setting("EXPLORER_MAX_UPLOADS", 8)))


DEFAULT_UPLOADS_MB = 512  # all sessions, and one session: a 2 GiB replica's share for uploads


def session_upload_bytes() -> int:
    """Bytes of uploads one session holds (EXPLORER_SESSION_UPLOAD_MB, default 512): its parsed uploads here and its
    files in the store of uploaded files and in flight, together."""
    return int(positive_setting("EXPLORER_SESSION_UPLOAD_MB", DEFAULT_UPLOADS_MB) * 2**20)


def total_upload_bytes() -> int:
    """Bytes of uploads held for all sessions (EXPLORER_UPLOADS_MB, default 512), the same stores together."""
    return int(positive_setting("EXPLORER_UPLOADS_MB", DEFAULT_UPLOADS_MB) * 2**20)


StoredFiles = Callable[[str], tuple[int, int]]  # session id -> (its bytes, every session's bytes)
_STORED: list[StoredFiles] = []


def count_stored_files(counter: StoredFiles) -> None:
    """Count, in the budgets above, the bytes of uploaded files held elsewhere (the server's store of uploaded files
    and the bodies in flight): counter(session id) -> (that session's bytes, all sessions' bytes). One counter; a
    later one replaces it."""
    _STORED[:] = [counter]


def stored_file_bytes(session: str) -> tuple[int, int]:
    """(bytes of `session`'s uploaded files held outside the parsed uploads, all sessions' such bytes)."""
    return _STORED[0](session) if _STORED else (0, 0)


def parsed_bytes(session: str) -> tuple[int, int]:
    """(bytes of the parsed uploads held by the owners of browser session `session`, bytes of all parsed uploads)."""
    with _UPLOADS_LOCK:
        owners = [o for o in list(_OWNERS.values()) if session and o.session == session and not o.released]
        mine = {uid for o in owners for uid in _held_by(o)}
        return sum(_UPLOADS[u].nbytes for u in mine), sum(b.nbytes for b in _UPLOADS.values())


def mb(nbytes: int) -> str:
    """Bytes as the messages print them: '1.5 MB' (MiB)."""
    return f"{nbytes / 2**20:,.1f} MB"


def bundle_from_parts(uid: str, label: str, weights: Weights, json_files: dict[str, bytes]) -> UploadBundle:
    """The files of one model: weights (explorer.files.safe_load.read_weights), and JSON files (name -> bytes): a config
    JSON with "architecture" (a built-in architecture) and a vocabulary (explorer.data.vocab_files.find_vocabulary:
    tokenizer.json, vocab.json, another JSON file or an entry of the checkpoint). Raises CorruptFileError."""
    from explorer.adapters.task_head import settings_from_json
    from explorer.data.vocab_files import find_vocabulary

    state = weights.tensors
    sizes = {int(t.shape[0]) for t in state.values() if t.dim() == 2}
    most = max(sizes, default=0)  # JSON files are bounded by the weights' rows before they are parsed
    parsed = {name: read_json_bytes(data, name, most) for name, data in sorted(json_files.items())}
    meta = next((obj for obj in parsed.values() if isinstance(obj, dict) and "architecture" in obj), None)
    task, task_file = None, ""
    for name, obj in parsed.items():
        try:
            settings = settings_from_json(obj) if obj is not meta else None
        except ValueError as exc:
            raise CorruptFileError(f"{name}: {exc}") from None
        if settings is not None:
            task, task_file = settings, name
            break
    try:
        found = find_vocabulary({n: o for n, o in parsed.items() if o is not meta and n != task_file}, weights.extras,
                                sizes, label)
    except ValueError as exc:
        raise CorruptFileError(str(exc)) from None
    vocab, rows = None, list(weights.rows)
    if found is not None:
        vocab = found[0]
        rows.append(("vocabulary read from", found[1]))
    family = "state-dict"
    if meta is not None:
        family = FAMILY_OF_ARCHITECTURE.get(str(meta.get("architecture")), "")
        if not family:
            raise CorruptFileError(
                f"{uid}: unknown architecture '{meta.get('architecture')}' in the config JSON "
                f"(known: {', '.join(FAMILY_OF_ARCHITECTURE)})."
            )
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    if task is not None:
        rows.append(("task settings read from", task_file))
    return UploadBundle(uid, label, family, state, meta, vocab, nbytes, tuple(rows), weights.note, task=task)


def register_upload(files: list[tuple[str, bytes]], max_bytes: int | None = None,
                    owner: "UploadOwner | None" = None) -> str:
    """Validate and keep uploaded files in memory for `owner` (a session); returns their id 'upload:<hash>'.

    files: (file name, content) pairs: exactly one weights file (.safetensors preferred, .pt/.pth/.ckpt read with
    weights_only=True) and optional JSON files (vocab.json or tokenizer.json, a config/meta JSON). The owner's
    budget gives up its own oldest uploads to make room; the server's budget refuses (UploadBudgetError). Raises
    ModelLoadError.
    """
    series = [(n, d) for n, d in files if n.lower().endswith(SERIES_SUFFIX)]
    weights = [(n, d) for n, d in files if n.lower().endswith(WEIGHT_SUFFIXES) and (n, d) not in series]
    jsons = {n: d for n, d in files if n.lower().endswith(".json")}
    others = [n for n, _ in files if not n.lower().endswith(WEIGHT_SUFFIXES + (".json",))]
    if others:
        raise ModelLoadError(f"Unsupported file(s): {', '.join(others)}. Upload .safetensors/.pt/.pth/.ckpt and .json.")
    if len(weights) != 1:
        raise ModelLoadError(f"Upload exactly one weights file (.safetensors, .pt, .pth or .ckpt); got {len(weights)}.")
    if len(series) > 1:
        raise ModelLoadError(f"Upload at most one series of snapshots ({SERIES_SUFFIX}); got {len(series)}.")
    for name, data in files:
        check_size(name, len(data), max_bytes)
    name, data = weights[0]
    digest = hashlib.sha256()
    for n, d in sorted(files):
        digest.update(n.encode() + b"\0" + hashlib.sha256(d).digest())
    uid = f"upload:{digest.hexdigest()[:16]}"
    if _reuse(uid, owner):
        return uid
    with _UPLOADS_LOCK:  # refuse before parsing when the files cannot fit (their tensors are about their size)
        _room(owner, uid, name, len(data) + sum(len(d) for _, d in series), new=True)
    try:
        bundle = bundle_from_parts(uid, name, read_weights(data, name), jsons)
        if bundle.meta is not None and bundle.meta.get("architecture") != FINE_TUNE:  # fail now, not in a view
            from_checkpoint(bundle.meta, bundle.state_dict, name)
        if series:
            bundle = with_series(bundle, *series[0])
    except ModelLoadError:
        raise
    except Exception as exc:  # whatever else a hostile file provokes is a message, not a traceback
        raise CorruptFileError(f"'{name}' could not be read: {type(exc).__name__}: {first_line(exc)}") from None
    return _store(bundle, name, owner)


def _store(bundle: UploadBundle, name: str, owner: "UploadOwner | None") -> str:
    """Keep `bundle` under its id for `owner`, within the budgets (the owner's oldest claims given up for it)."""
    uid = bundle.id
    with _UPLOADS_LOCK:
        if uid in _UPLOADS:  # another session registered the same files meanwhile
            dropped = _claim(owner, uid) if owner is not None else []
        else:
            give_up = _room(owner, uid, name, bundle.nbytes, new=True)
            _UPLOADS[uid] = bundle
            dropped = _give_up(owner, give_up)
            if owner is not None:
                _hold(owner, uid)
    _notify_released(dropped)
    return uid


def with_task_settings(uid: str, settings: dict[str, object], owner: "UploadOwner | None" = None) -> str:
    """An upload `uid` again, with a task model's settings given on the Models page ({"task", "pooling", "labels"}:
    what its weights cannot tell), as a new upload of `owner`; returns its id. Raises ModelLoadError (the upload is
    gone, or a setting is not one of the allowed ones)."""
    import json

    from explorer.adapters.task_head import settings_from_json

    held = bundle(uid)
    if held is None:
        raise ModelLoadError(f"{uid} is no longer on the server (uploads are kept in memory): upload it again.")
    try:
        checked = settings_from_json(settings) or {}
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
    digest = hashlib.sha256(f"{uid}\0{json.dumps(checked, sort_keys=True)}".encode()).hexdigest()
    new = f"upload:{digest[:16]}"
    if _reuse(new, owner):
        return new
    rows = tuple(r for r in held.found if r[0] != "task settings read from")
    return _store(replace(held, id=new, task=checked, found=(*rows, ("task settings", "set on the Models page"))),
                  held.label, owner)


def with_series(bundle: UploadBundle, name: str, data: bytes) -> UploadBundle:
    """`bundle` with the snapshots of a series file (explorer.loading.checkpoint: tensor "<i>/<key>" for snapshot i
    of meta["snapshots"]), each the model's own floating-point tensors in shape. Raises CorruptFileError."""
    steps = series_steps(bundle.meta)
    if not steps:
        raise CorruptFileError(f"'{name}' is a series of snapshots, but the model's JSON lists none (\"snapshots\").")
    flat = read_weights(data, name).tensors
    snaps: list[dict[str, torch.Tensor]] = [{} for _ in steps]
    for key, tensor in flat.items():
        index, _, param = key.partition("/")
        own = bundle.state_dict.get(param)
        if not index.isdigit() or int(index) >= len(steps) or own is None or own.shape != tensor.shape \
                or not tensor.is_floating_point():
            raise CorruptFileError(f"'{name}': tensor {key[:80]!r} is not a snapshot of one of the model's "
                                   f"floating-point tensors (expected '<0…{len(steps) - 1}>/<parameter>').")
        snaps[int(index)][param] = tensor
    if any(not snap for snap in snaps):
        raise CorruptFileError(f"'{name}' lacks some of the {len(steps)} snapshots its JSON lists.")
    extra = sum(t.numel() * t.element_size() for snap in snaps for t in snap.values())
    return replace(bundle, series=tuple(snaps), nbytes=bundle.nbytes + extra)


def _reuse(uid: str, owner: "UploadOwner | None") -> bool:
    """True when `uid` is held already (the same files): `owner` now holds it too."""
    with _UPLOADS_LOCK:
        if uid not in _UPLOADS:
            return False
        if owner is None:
            _UPLOADS.move_to_end(uid)
            return True
        dropped = _claim(owner, uid)
    _notify_released(dropped)
    return True


def _held_by(owner: "UploadOwner") -> list[str]:
    """Under _UPLOADS_LOCK: the held uploads `owner` claims, oldest claim first (not those forgotten meanwhile)."""
    return [u for u in owner._ids if u in _UPLOADS and owner._token in _CLAIMS.get(u, ())]


def _hold(owner: "UploadOwner", uid: str) -> None:
    """Under _UPLOADS_LOCK: `owner` holds `uid` (its most recent claim)."""
    if not owner._finalizer.alive:
        raise RuntimeError("this session's uploads were already released")
    owner._ids.pop(uid, None)
    owner._ids[uid] = None
    _CLAIMS.setdefault(uid, set()).add(owner._token)


def _claim(owner: "UploadOwner", uid: str) -> list[str]:
    """Under _UPLOADS_LOCK: `owner` holds the held upload `uid`, giving up its oldest claims to stay within its
    budget; returns the ids no session holds any more."""
    if not owner._finalizer.alive:
        raise RuntimeError("this session's uploads were already released")
    held = _UPLOADS.get(uid)
    if held is None:
        raise ModelLoadError(f"{uid} is no longer on the server (uploads are kept in memory): upload it again.")
    if uid in _held_by(owner):
        _hold(owner, uid)
        return []
    dropped = _give_up(owner, _room(owner, uid, held.label, held.nbytes, new=False))
    _hold(owner, uid)
    return dropped


def _room(owner: "UploadOwner | None", uid: str, name: str, nbytes: int, new: bool) -> list[str]:
    """Under _UPLOADS_LOCK: the ids `owner` gives up (its oldest first; unowned uploads for owner None) so that
    adding `uid` (`nbytes`) keeps its count and bytes within budget, and, when `new`, the server's bytes. Raises
    UploadBudgetError when even that cannot make room; nothing is changed."""
    if owner is not None and not owner._finalizer.alive:
        raise RuntimeError("this session's uploads were already released")
    per_session, total = session_upload_bytes(), total_upload_bytes()
    files_mine, files_all = stored_file_bytes(owner.session) if owner is not None else (0, 0)
    if owner is not None and nbytes + files_mine > per_session:
        with_files = f" besides its {mb(files_mine)} of uploaded files" if files_mine else ""
        raise UploadBudgetError(
            f"'{name}' takes {mb(nbytes)} in memory{with_files}, over the {mb(per_session)} one session may hold "
            "(set EXPLORER_SESSION_UPLOAD_MB to change it).")
    if owner is None:
        mine = [u for u in _UPLOADS if u != uid and not _CLAIMS.get(u)]
    else:
        mine = [u for u in _held_by(owner) if u != uid]
    give_up, count, used = [], len(mine) + 1, sum(_UPLOADS[u].nbytes for u in mine) + nbytes + files_mine
    now = sum(b.nbytes for b in _UPLOADS.values()) + files_all
    held, token = now + (nbytes if new else 0), owner._token if owner is not None else None
    while mine and (count > max_uploads() or (owner is not None and used > per_session) or (new and held > total)):
        u = mine.pop(0)
        give_up.append(u)
        count, used = count - 1, used - _UPLOADS[u].nbytes
        if _CLAIMS.get(u, set()) <= {token}:  # nobody else holds it: it leaves memory
            held -= _UPLOADS[u].nbytes
    if new and held > total:
        raise UploadBudgetError(
            f"The server holds {mb(now)} of uploads (models and their files) for all sessions; '{name}' "
            f"({mb(nbytes)}) would pass the {mb(total)} limit (set EXPLORER_UPLOADS_MB to change it). "
            "Try again when other sessions have ended, or upload a smaller model.")
    return give_up


def _give_up(owner: "UploadOwner | None", ids: list[str]) -> list[str]:
    """Under _UPLOADS_LOCK: `owner` (None: unowned uploads) gives up `ids`; returns those no session holds now."""
    dropped = []
    for uid in ids:
        holders = _CLAIMS.get(uid, set())
        if owner is not None:
            owner._ids.pop(uid, None)
            holders.discard(owner._token)
        if not holders:
            _CLAIMS.pop(uid, None)
            _UPLOADS.pop(uid, None)
            dropped.append(uid)
    return dropped


def forget_upload(uid: str) -> None:
    """Drop an uploaded bundle and every model loaded from it (through the `on_upload_released` hooks)."""
    with _UPLOADS_LOCK:
        _UPLOADS.pop(uid, None)
        _CLAIMS.pop(uid, None)
    _notify_released([uid])


def upload_ids() -> list[str]:
    """Ids of the uploads held in memory for all sessions, least recently registered first (never shown to one)."""
    with _UPLOADS_LOCK:
        return list(_UPLOADS)


def held_bytes() -> int:
    """Bytes of the uploads held in memory for all sessions."""
    with _UPLOADS_LOCK:
        return sum(b.nbytes for b in _UPLOADS.values())


def uploaded_entries(ids: Iterable[str]) -> list[tuple[str, str, str]]:
    """(id, label, family) of the uploads among `ids` (one session's: UploadOwner.ids) still held, in that order."""
    with _UPLOADS_LOCK:
        return [(uid, b.label, b.family) for uid in ids if (b := _UPLOADS.get(uid)) is not None]


def bundle(uid: str) -> UploadBundle | None:
    """The files of upload `uid`, or None when it was dropped."""
    with _UPLOADS_LOCK:
        return _UPLOADS.get(uid)


# ----------------------------------------------------------------------------------- upload lifetime
# An upload lives while a browser session that holds it lives. Each session holds one UploadOwner (the Streamlit
# layer keeps it in a session-scoped cache whose release hook runs when the session disconnects); the same file
# uploaded by two sessions has one id and is dropped when the last of its owners is released or gives it up.
_CLAIMS: dict[str, set[int]] = {}  # upload id -> tokens of the unreleased owners holding it (under _UPLOADS_LOCK)
_OWNERS: "weakref.WeakValueDictionary[int, UploadOwner]" = weakref.WeakValueDictionary()  # token -> live owner
_TOKENS = itertools.count()
_HOOKS: list[Callable[[], Callable[[str], None] | None]] = []  # weak references to release callbacks
_HOOKS_LOCK = threading.Lock()
_PENDING: "queue.SimpleQueue[tuple[int, dict[str, None]] | threading.Event]" = queue.SimpleQueue()
_WORKER: list[threading.Thread] = []


def on_upload_released(callback: Callable[[str], None]) -> None:
    """Call `callback(upload id)` whenever an upload is dropped (forgotten, evicted or released by its owners).

    Bound methods are held weakly: a model cache that is itself discarded is no longer called.
    """
    ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else (lambda: callback)
    with _HOOKS_LOCK:
        _HOOKS[:] = [r for r in _HOOKS if r() is not None] + [ref]


def _notify_released(uids: list[str]) -> None:
    if not uids:
        return
    with _HOOKS_LOCK:
        _HOOKS[:] = [ref for ref in _HOOKS if ref() is not None]
        callbacks = [ref() for ref in _HOOKS]
    for callback in callbacks:
        for uid in uids:
            if callback is not None:
                callback(uid)
    heap.trim()  # the uploads' tensors are freed: their pages go back to the operating system


def _release_claims(token: int, ids: dict[str, None]) -> list[str]:
    """Drop owner `token`'s claim on each id; ids no owner holds any more leave the catalogue. Returns those ids."""
    dropped = []
    with _UPLOADS_LOCK:
        for uid in sorted(ids):
            holders = _CLAIMS.get(uid, set())
            holders.discard(token)
            if holders:
                continue
            _CLAIMS.pop(uid, None)
            _UPLOADS.pop(uid, None)
            dropped.append(uid)
        ids.clear()
    _notify_released(dropped)
    return dropped


def _release_worker() -> None:
    while True:
        item = _PENDING.get()
        if isinstance(item, threading.Event):
            item.set()
        else:
            try:
                _release_claims(*item)
            except Exception:  # a failing hook must not stop later releases
                pass


def _release_later(token: int, ids: dict[str, None]) -> None:
    """Finalizer of an UploadOwner that was garbage collected unreleased. It may run inside the garbage collector,
    on any thread, possibly while that thread holds one of the locks above: hand the work to the worker thread
    (SimpleQueue.put is safe there)."""
    _PENDING.put((token, ids))


def wait_for_releases(timeout: float = 10.0) -> bool:
    """Block until the releases queued by garbage-collected owners so far are done (for tests); False on timeout."""
    done = threading.Event()
    _PENDING.put(done)
    return done.wait(timeout)


class UploadOwner:
    """The uploads one browser session holds (ids 'upload:<hash>'), oldest claim first: those it uploaded or
    trained, and those it opened from a shared link (an id is a capability: 64 bits of the files' SHA-256).

    `release()` (the session ended) drops each claimed id that no other unreleased owner holds, from the
    catalogue and, through `on_upload_released`, from the model cache. An owner garbage-collected without
    `release()` is released the same way, from a worker thread.
    """

    def __init__(self, session: str = "") -> None:
        """session: the id of the browser session it belongs to ("": none), whose uploaded files count in the same
        budget (`count_stored_files`)."""
        self._ids: dict[str, None] = {}  # insertion-ordered: the oldest claim first
        self._token = next(_TOKENS)
        self.session = session
        _OWNERS[self._token] = self
        with _UPLOADS_LOCK:
            if not _WORKER:
                _WORKER.append(threading.Thread(target=_release_worker, name="upload-release", daemon=True))
                _WORKER[0].start()
        self._finalizer = weakref.finalize(self, _release_later, self._token, self._ids)
        self._finalizer.atexit = False  # at interpreter exit nothing is left to release (a late release aborted it)

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids this session holds, oldest claim first."""
        with _UPLOADS_LOCK:
            return tuple(_held_by(self))

    @property
    def nbytes(self) -> int:
        """Bytes of the uploads this session holds."""
        with _UPLOADS_LOCK:
            return sum(_UPLOADS[uid].nbytes for uid in _held_by(self))

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def claim(self, uid: str) -> None:
        """Hold the held upload `uid` until this owner is released, giving up this owner's oldest claims to stay
        within its budget (EXPLORER_MAX_UPLOADS, EXPLORER_SESSION_UPLOAD_MB). Raises ModelLoadError when `uid` is
        not held or alone passes the budget, RuntimeError on a released owner."""
        with _UPLOADS_LOCK:
            dropped = _claim(self, uid)
        _notify_released(dropped)

    def release(self) -> list[str]:
        """Release every claim now (idempotent); returns the ids dropped because no other owner holds them."""
        if self._finalizer.detach() is None:
            return []
        return _release_claims(self._token, self._ids)
