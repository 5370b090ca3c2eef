"""Training in the background: one thread per job, so a training run never blocks other browser sessions.

A TrainingJob runs explorer.training.loop.train_model in a daemon thread, records progress (for the live loss curve)
and can be stopped; when done its model is added to the catalogue (in memory) as `upload:<hash>`, an upload
of the session that started it (`owner`).
At most EXPLORER_MAX_TRAINING_JOBS (default 1) jobs train at once on a server. A job runs within this server's
budget (explorer.training.budget: time, vocabulary, parameters, memory) and belongs to the session that started it:
when that session ends (its UploadOwner is released by the Streamlit layer's session-end hook) the run is
cancelled within a batch, its slot freed and nothing registered. Its download zip is built once, when asked.
"""
from __future__ import annotations

import io
import json
import os
import threading
import time
import zipfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from explorer.runtime.budget import positive_setting
from explorer.runtime.json_value import get
from explorer.training import budget as train_budget
from explorer.training.clock import TrainingCancelled
from explorer.training.loop import train_model
from explorer.training.spec import TrainProgress, TrainResult, TrainSpec, validate_spec

if TYPE_CHECKING:
    from explorer.loading.uploads import UploadOwner

_ACTIVE = threading.BoundedSemaphore(max(1, int(os.environ.get("EXPLORER_MAX_TRAINING_JOBS", "1") or 1)))


class TrainingBusyError(RuntimeError):
    """Another training run is using this server's training slot(s), or others wait in line first."""


class TrainingLine:
    """The sessions waiting for the training slot, first come first served. A session takes its turn when the slot is
    free and nobody is ahead of it; a session whose run ended less than `cooldown` seconds ago
    (EXPLORER_TRAINING_COOLDOWN_S, default 120) lets everyone waiting go first. A place not renewed for `ttl`
    seconds (its tab closed: the waiting page renews it every 2 s) is given up."""

    def __init__(self, cooldown: float | None = None, ttl: float = 15.0) -> None:
        self.cooldown = positive_setting("EXPLORER_TRAINING_COOLDOWN_S", 120.0) if cooldown is None else cooldown
        self.ttl = ttl
        self._lock = threading.Lock()
        self._waiting: dict[str, float] = {}  # session -> when it last said it waits (in the order they came)
        self._ended: dict[str, float] = {}  # session -> when its last run ended

    def _expire(self, now: float) -> None:
        for session in [s for s, seen in self._waiting.items() if now - seen > self.ttl]:
            del self._waiting[session]
        for session in [s for s, t in self._ended.items() if now - t > self.cooldown]:
            del self._ended[session]

    def wait(self, session: str, now: float | None = None) -> int:
        """Join the line (or renew the place held); the session's position, 1 = next."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            self._waiting[session] = now
            return list(self._waiting).index(session) + 1

    def leave(self, session: str) -> None:
        with self._lock:
            self._waiting.pop(session, None)

    def ended(self, session: str, now: float | None = None) -> None:
        """The session's run ended: its cooldown starts."""
        with self._lock:
            self._ended[session] = time.monotonic() if now is None else now

    def refusal(self, session: str, now: float | None = None) -> str:
        """Why `session` may not take the slot now though it may be free ("" when it may): others ahead in line,
        or its cooldown while others wait."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            order = list(self._waiting)
            ahead = order.index(session) if session in order else len(order)
            others = [s for s in order if s != session]
            if session in self._ended and others:
                left = self.cooldown - (now - self._ended[session])
                return (f"your last model finished training {now - self._ended[session]:.0f} s ago and "
                        f"{len(others)} other session(s) wait for the slot: they go first (for {left:.0f} s more; "
                        "EXPLORER_TRAINING_COOLDOWN_S)")
            if ahead:
                return f"{ahead} session(s) are ahead of you in line"
            return ""


LINE = TrainingLine()


@dataclass
class TrainingJob:
    """State of one background training run. `points`: dicts (step, epoch, train_loss, heldout_loss, elapsed);
    `notes`: what the budget changed (a lowered batch size) or cut short (an evaluation out of time)."""

    spec: TrainSpec
    device: str = "cpu"
    status: str = "pending"  # pending | running | done | stopped | cancelled | failed
    points: list[dict] = field(default_factory=list)
    total_steps: int = 0
    error: str | None = None
    result: TrainResult | None = None
    model_id: str | None = None
    started: float = 0.0
    finished: float = 0.0
    owner: UploadOwner | None = None  # the session's: the trained model is that session's upload
    snapshots: int = 0  # snapshots of the weights to keep over training (float16), uploaded with the model
    notes: list[str] = field(default_factory=list)
    session: str = ""  # the browser session that started it: its place in the training line (LINE)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _zip: bytes | None = None
    _zip_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "TrainingJob":
        """Put the spec within this server's budget (train_budget.apply: a TrainBudgetError names the limit and its
        setting), validate it (ValueError) and start training in a daemon thread. TrainingBusyError when the slot is
        taken, others are ahead in line, or this session's cooldown lets them go first (TrainingLine): the session
        is then in line, at the position the message names."""
        self.spec = train_budget.apply(self.spec)
        validate_spec(self.spec)
        why = LINE.refusal(self.session)
        if why or not _ACTIVE.acquire(blocking=False):
            place = LINE.wait(self.session)
            raise TrainingBusyError(f"The training slot is taken: {why or 'another model is training now'}. You are "
                                    f"number {place} in line; your model starts by itself when its turn comes.")
        LINE.leave(self.session)
        self.status, self.started = "running", time.time()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.spec.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def abandoned(self) -> bool:
        """The session that started the job has ended (its UploadOwner was released)."""
        return self.owner is not None and self.owner.released

    def _progress(self, p: TrainProgress) -> None:
        self.total_steps = p.total_steps
        self.points.append({"step": p.step, "epoch": p.epoch, "train_loss": p.train_loss,
                            "heldout_loss": p.heldout_loss, "elapsed": p.elapsed})

    def _run(self) -> None:
        try:
            result = train_model(self.spec, progress=self._progress, should_stop=self._stop.is_set, device=self.device,
                                 cancel=lambda: self.abandoned, snapshots=self.snapshots, snapshot_dtype="float16")
            if self.abandoned:
                raise TrainingCancelled("Training was cancelled: the session that started it ended.")
            notes = get(result.meta, "train", "notes")
            self.notes = [str(n) for n in notes] if isinstance(notes, list) else []
            self.model_id = register_trained(result, self.owner)
            self.result = result
            self.status = "stopped" if result.stopped else "done"
        except (TrainingCancelled, train_budget.TrainBudgetError) as exc:  # messages written for the page
            self.error = str(exc)
            self.status = "failed" if isinstance(exc, train_budget.TrainBudgetError) else "cancelled"
        except Exception as exc:  # surfaced in the page as a message
            self.error = f"{type(exc).__name__}: {exc}"
            self.status = "cancelled" if self.abandoned else "failed"
        finally:
            self.spec.user_tokens = self.spec.user_examples = None  # the corpus is not needed any more
            self.finished = time.time()
            LINE.ended(self.session)
            _ACTIVE.release()

    def zip_bytes(self) -> bytes:
        """The trained model as a zip (export_zip), built on the first call and kept: later calls return the same
        bytes. ValueError when the job has no model."""
        with self._zip_lock:
            if self._zip is None:
                if self.result is None:
                    raise ValueError("this training job has no model to download")
                self._zip = export_zip(self.result)
            return self._zip

    def stop(self) -> None:
        """Ask the run to stop after the current batch; the model trained so far is kept."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until finished (tests, CLI); True when finished."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.status in ("done", "stopped", "cancelled", "failed")

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def fraction(self) -> float:
        if self.status in ("done", "stopped"):
            return 1.0
        if not self.points or not self.total_steps:
            return 0.0
        return min(1.0, self.points[-1]["step"] / self.total_steps)


def register_trained(result: TrainResult, owner: UploadOwner | None = None) -> str:
    """Add a freshly trained model to the in-memory catalogue as an upload of `owner` (an UploadOwner: the session
    that trained it, within its upload budget); returns its id (upload:<hash>)."""
    from safetensors.torch import save

    from explorer.loading.checkpoint import trained_state_dict

    weights = save(trained_state_dict(result.model))
    meta = json.dumps(result.meta).encode()
    from explorer.loading.uploads import register_upload

    name = result.meta.get("name", "custom")
    return register_upload([(f"{name}.safetensors", weights), (f"{name}.json", meta), *_series_file(result)],
                           max_bytes=2**40, owner=owner)


def _series_file(result: TrainResult) -> list[tuple[str, bytes]]:
    """[(<name>.snapshots.safetensors, its bytes)] when the run kept snapshots, else []."""
    from safetensors.torch import save

    series = result.snapshots
    if series is None or not series.states:
        return []
    name = result.meta.get("name", "custom")
    return [(f"{name}.snapshots.safetensors", save(series.flat()))]


def export_zip(result: TrainResult) -> bytes:
    """`<name>.safetensors` + `<name>.json` in a zip, the format of assets/builtin (loadable as local: or upload)."""
    from safetensors.torch import save

    from explorer.loading.checkpoint import trained_state_dict

    name = result.meta.get("name", "custom")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/{name}.safetensors", save(trained_state_dict(result.model)))
        zf.writestr(f"{name}/{name}.json", json.dumps(result.meta, indent=1))
        for file_name, data in _series_file(result):
            zf.writestr(f"{name}/{file_name}", data)
    return buf.getvalue()
