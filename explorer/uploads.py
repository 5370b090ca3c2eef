"""Uploaded model files, held in memory for the browser sessions that uploaded them.

`register_upload(files)` validates the files (safetensors, or .pt read with weights_only=True, plus JSON) and keeps
them as an `UploadBundle` under the id 'upload:<hash>'. An upload lives while a browser session that made it lives
(`UploadOwner`); when it is dropped, the `on_upload_released` hooks (the model cache) unload what was built from it.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import queue
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import torch

from explorer.models.build import FAMILY_OF_ARCHITECTURE, from_checkpoint
from explorer.safe_load import (WEIGHT_SUFFIXES, CorruptFileError, ModelLoadError, check_size, first_line,
                                read_json_bytes, read_weights)
from explorer.state_dicts import Weights


@dataclass
class UploadBundle:
    """Parsed uploaded files, held in memory: tensors on CPU, the meta/config JSON and a vocab if given.

    found: (what, value) rows saying where the weights and the vocabulary were read (shown by the views);
    note: one sentence when the weights came out of a wrapper (a training checkpoint, a prefix), else ""."""

    id: str
    label: str
    family: str
    state_dict: dict[str, torch.Tensor]
    meta: dict | None
    vocab: Any
    nbytes: int
    found: tuple[tuple[str, str], ...] = ()
    note: str = ""


_UPLOADS: "OrderedDict[str, UploadBundle]" = OrderedDict()
_UPLOADS_LOCK = threading.Lock()


def max_uploads() -> int:
    return max(1, int(os.environ.get("EXPLORER_MAX_UPLOADS", "8") or 8))


def bundle_from_parts(uid: str, label: str, weights: Weights, json_files: dict[str, bytes]) -> UploadBundle:
    """The files of one model: weights (explorer.safe_load.read_weights), and JSON files (name -> bytes): a config
    JSON with "architecture" (a built-in architecture) and a vocabulary (explorer.data.vocab_files.find_vocabulary:
    tokenizer.json, vocab.json, another JSON file or an entry of the checkpoint). Raises CorruptFileError."""
    from explorer.data.vocab_files import find_vocabulary

    parsed = {name: read_json_bytes(data, name) for name, data in sorted(json_files.items())}
    meta = next((obj for obj in parsed.values() if isinstance(obj, dict) and "architecture" in obj), None)
    state = weights.tensors
    sizes = {int(t.shape[0]) for t in state.values() if t.dim() == 2}
    try:
        found = find_vocabulary({n: o for n, o in parsed.items() if o is not meta}, weights.extras, sizes, label)
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
    return UploadBundle(uid, label, family, state, meta, vocab, nbytes, tuple(rows), weights.note)


def register_upload(files: list[tuple[str, bytes]], max_bytes: int | None = None) -> str:
    """Validate and keep uploaded files in memory; returns their id 'upload:<hash>'.

    files: (file name, content) pairs: exactly one weights file (.safetensors preferred, .pt/.pth/.ckpt read with
    weights_only=True) and optional JSON files (vocab.json or tokenizer.json, a config/meta JSON). Raises
    ModelLoadError.
    """
    weights = [(n, d) for n, d in files if n.lower().endswith(WEIGHT_SUFFIXES)]
    jsons = {n: d for n, d in files if n.lower().endswith(".json")}
    others = [n for n, _ in files if not n.lower().endswith(WEIGHT_SUFFIXES + (".json",))]
    if others:
        raise ModelLoadError(f"Unsupported file(s): {', '.join(others)}. Upload .safetensors/.pt/.pth/.ckpt and .json.")
    if len(weights) != 1:
        raise ModelLoadError(f"Upload exactly one weights file (.safetensors, .pt, .pth or .ckpt); got {len(weights)}.")
    for name, data in files:
        check_size(name, len(data), max_bytes)
    name, data = weights[0]
    digest = hashlib.sha256()
    for n, d in sorted(files):
        digest.update(n.encode() + b"\0" + hashlib.sha256(d).digest())
    uid = f"upload:{digest.hexdigest()[:16]}"
    with _UPLOADS_LOCK:
        if uid in _UPLOADS:
            _UPLOADS.move_to_end(uid)
            return uid
    try:
        bundle = bundle_from_parts(uid, name, read_weights(data, name), jsons)
        if bundle.meta is not None:  # fail now, in the upload widget, rather than later in a view
            from_checkpoint(bundle.meta, bundle.state_dict, name)
    except ModelLoadError:
        raise
    except Exception as exc:  # whatever else a hostile file provokes is a message, not a traceback
        raise CorruptFileError(f"'{name}' could not be read: {type(exc).__name__}: {first_line(exc)}") from None
    evicted = []
    with _UPLOADS_LOCK:
        _UPLOADS[uid] = bundle
        while len(_UPLOADS) > max_uploads():
            evicted.append(_UPLOADS.popitem(last=False)[0])
            _CLAIMS.pop(evicted[-1], None)
    _notify_released(evicted)
    return uid


def forget_upload(uid: str) -> None:
    """Drop an uploaded bundle and every model loaded from it (through the `on_upload_released` hooks)."""
    with _UPLOADS_LOCK:
        _UPLOADS.pop(uid, None)
        _CLAIMS.pop(uid, None)
    _notify_released([uid])


def upload_ids() -> list[str]:
    """Ids of the uploads held in memory, least recently registered first."""
    with _UPLOADS_LOCK:
        return list(_UPLOADS)


def uploaded_entries() -> list[tuple[str, str, str]]:
    """(id, label, family) of every upload held, least recently registered first."""
    with _UPLOADS_LOCK:
        return [(uid, b.label, b.family) for uid, b in _UPLOADS.items()]


def bundle(uid: str) -> UploadBundle | None:
    """The files of upload `uid`, or None when it was dropped."""
    with _UPLOADS_LOCK:
        return _UPLOADS.get(uid)


# ----------------------------------------------------------------------------------- upload lifetime
# An upload lives while a browser session that made it lives. Each session holds one UploadOwner (the Streamlit
# layer keeps it in a session-scoped cache whose release hook runs when the session disconnects); the same file
# uploaded by two sessions has one id and is dropped when the last of its owners is released.
_CLAIMS: dict[str, set[int]] = {}  # upload id -> tokens of the unreleased owners holding it (under _UPLOADS_LOCK)
_TOKENS = itertools.count()
_HOOKS: list[Callable[[], Callable[[str], None] | None]] = []  # weak references to release callbacks
_HOOKS_LOCK = threading.Lock()
_PENDING: "queue.SimpleQueue[tuple[int, set[str]] | threading.Event]" = queue.SimpleQueue()
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


def _release_claims(token: int, ids: set[str]) -> list[str]:
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


def _release_later(token: int, ids: set[str]) -> None:
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
    """The uploads one browser session made (ids 'upload:<hash>').

    `release()` (the session ended) drops each claimed id that no other unreleased owner holds, from the
    catalogue and, through `on_upload_released`, from the model cache. An owner garbage-collected without
    `release()` is released the same way, from a worker thread.
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._token = next(_TOKENS)
        with _UPLOADS_LOCK:
            if not _WORKER:
                _WORKER.append(threading.Thread(target=_release_worker, name="upload-release", daemon=True))
                _WORKER[0].start()
        self._finalizer = weakref.finalize(self, _release_later, self._token, self._ids)

    @property
    def ids(self) -> frozenset[str]:
        with _UPLOADS_LOCK:
            return frozenset(self._ids)

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def claim(self, uid: str) -> None:
        """Hold `uid` until this owner is released. Raises RuntimeError on a released owner."""
        with _UPLOADS_LOCK:
            if not self._finalizer.alive:
                raise RuntimeError("this session's uploads were already released")
            self._ids.add(uid)
            _CLAIMS.setdefault(uid, set()).add(self._token)

    def release(self) -> list[str]:
        """Release every claim now (idempotent); returns the ids dropped because no other owner holds them."""
        if self._finalizer.detach() is None:
            return []
        return _release_claims(self._token, self._ids)
