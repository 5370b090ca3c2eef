"""The training loop shared by the CLI (explorer.training.train) and the app's Models page (explorer.training.jobs).

`train_model(spec, progress, should_stop, cancel)` is the single entry point: it builds the corpus (generated and
seeded, or the user's token lists), the task with its vocabulary and model (explorer.training.tasks), trains with
AdamW (linear warmup, then cosine decay to a tenth of the rate; gradient clipping), reports TrainProgress, honours
stop requests and max_seconds by ending cleanly, and returns the model with a checkpoint meta dict (see
explorer.loading.checkpoint) including held-out metrics.

Budgets (set by the app from explorer.training.budget; None for the CLI): max_seconds bounds the whole run, every
phase included (explorer.training.clock); max_vocab keeps the most frequent tokens; max_params and max_memory_mb are
checked once the vocabulary is known, before the model is built (the batch size is lowered to fit). `cancel()` (the
session that asked has gone) is checked in every phase too and ends the run within a batch, raising
TrainingCancelled.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
import torch.nn as nn

from explorer.training.clock import Clock, TrainingCancelled
from explorer.training.corpus import Corpus, Labelled, Pair, Sentence, heldout_seed, load_corpus
from explorer.training.snapshots import Snapshots, schedule
from explorer.training.spec import TrainProgress, TrainResult, TrainSpec, validate_spec
from explorer.training.decision_task import ClassifierTask
from explorer.models.build import FINE_TUNE
from explorer.training.minilm_task import FineTuneTask
from explorer.training.tasks import Task, task_for

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSON, JSONDict

B = TypeVar("B")


def lr_at(step: int, total: int, spec: TrainSpec) -> float:
    """The learning rate of optimiser step `step` of `total`: linear warmup over min(warmup_steps, total/10) steps,
    then cosine decay from spec.lr to 0.1·spec.lr."""
    warm = min(spec.warmup_steps, max(total // 10, 1))
    if step < warm:
        return spec.lr * (step + 1) / warm
    frac = (step - warm) / max(total - warm, 1)
    return spec.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


def adamw(model: nn.Module, spec: TrainSpec) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (parameters of 2 or more dimensions), none on biases and norms."""
    decays = spec.weight_decay > 0
    decay = [p for p in model.parameters() if p.dim() >= 2 and decays]
    other = [p for p in model.parameters() if not (p.dim() >= 2 and decays)]
    groups: list[dict[str, list[nn.Parameter] | float]] = [{"params": other, "weight_decay": 0.0}]
    if decay:
        groups.append({"params": decay, "weight_decay": spec.weight_decay})
    return torch.optim.AdamW(groups, lr=spec.lr)


def optimiser_step(task: Task[B], opt: torch.optim.Optimizer, batch: B, lr: float, grad_clip: float) -> float:
    """One step on `batch` at learning rate `lr` (gradients clipped to norm grad_clip unless 0); the batch's loss."""
    for g in opt.param_groups:
        g["lr"] = lr
    loss = task.loss(batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        nn.utils.clip_grad_norm_(task.model.parameters(), grad_clip)
    opt.step()
    return loss.item()


def train_model(spec: TrainSpec, progress: Callable[[TrainProgress], None] | None = None,
                should_stop: Callable[[], bool] | None = None, device: str = "cpu",
                cancel: Callable[[], bool] | None = None, snapshots: int = 0,
                snapshot_dtype: str | None = None) -> TrainResult:
    """Train `spec` from scratch (seeded). Stop requests / max_seconds end training cleanly: the model
    trained so far is evaluated (within max_seconds) and returned with meta["train"]["stopped"] = True.
    cancel() ends every phase within a batch and raises TrainingCancelled, as does max_seconds running out before
    training starts; a model over spec.max_params / max_memory_mb raises explorer.training.budget.TrainBudgetError.
    snapshots: keep that many snapshots of the weights, log-spaced in steps (explorer.training.snapshots), in
    snapshot_dtype (default: the spec's stored dtype), with the held-out loss of the weights as stored (computed with
    torch's random state put back, so the run's own steps are the same as without snapshots): TrainResult.snapshots,
    listed in meta["snapshots"]."""
    validate_spec(spec)
    clock = Clock(spec.max_seconds, should_stop, cancel)
    random.seed(spec.seed)
    torch.manual_seed(spec.seed)
    corpus = load_corpus(spec, stop=clock.over)
    clock.check("preparing the corpus")
    if spec.architecture == "rnn_classifier":  # a classifier's or tagger's task (its own module)
        task: Task[Any] = ClassifierTask(spec, cast("Corpus[Labelled]", corpus), device, clock)
    elif spec.architecture == FINE_TUNE:  # MiniLM fine-tuned
        task = FineTuneTask(spec, cast("Corpus[Labelled]", corpus), device, clock)
    else:
        task = task_for(spec, cast("Corpus[Sentence] | Corpus[Pair]", corpus), device, clock)
    clock.check("building the model")
    model = task.model.to(device)
    opt = adamw(model, spec)
    rng = random.Random(spec.seed)
    steps_per_epoch = task.steps_per_epoch()
    total_steps = steps_per_epoch * spec.epochs
    series = (Snapshots(schedule(total_steps, snapshots), getattr(torch, snapshot_dtype or spec.stored))
              if snapshots else None)
    step, stopped = 0, False
    history: list[JSON] = []
    last: JSONDict | None = None  # history's last record
    report_every = max(1, steps_per_epoch // 20)
    epoch = 0
    since = [0.0, 0]  # the training loss summed since the last snapshot, and its batches

    def snapshot(epoch: int) -> None:
        assert series is not None
        state = torch.get_rng_state()
        model.eval()
        measures = getattr(task, "heldout_measures", None)  # a labelled task's loss and accuracy in one pass
        if measures is None:
            held, more = series.heldout_loss_as_stored(model, task.heldout_loss), {}
        else:
            more = dict(series.heldout_loss_as_stored(model, measures))
            held = more.pop("heldout_loss")
        model.train()
        torch.set_rng_state(state)
        series.take(model, step, epoch, since[0] / since[1] if since[1] else None, held, more)
        since[:] = [0.0, 0]

    if series is not None and series.due(0):
        snapshot(0)
    for epoch in range(1, spec.epochs + 1):
        model.train()
        run_loss, run_n = 0.0, 0
        for batch in task.batches(rng, epoch):
            if clock.train_over():
                stopped = True
                break
            loss = optimiser_step(task, opt, batch, lr_at(step, total_steps, spec), spec.grad_clip)
            run_loss += loss
            step += 1
            run_n += 1
            if series is not None:
                since[0] += loss
                since[1] += 1
                if series.due(step):
                    snapshot(epoch)
            if progress is not None and step % report_every == 0:
                progress(TrainProgress(epoch, step, total_steps, run_loss / run_n, None, clock.elapsed()))
        if clock.cancelled():
            raise TrainingCancelled("Training was cancelled.")
        held = task.heldout_loss()
        last = {"epoch": epoch, "train_loss": run_loss / max(run_n, 1), "heldout_loss": held,
                "elapsed": round(clock.elapsed(), 2)}
        history.append(last)
        if progress is not None:
            progress(TrainProgress(epoch, step, total_steps, run_loss / max(run_n, 1), held, clock.elapsed()))
        if stopped:
            break
    if series is not None and series.infos and series.infos[-1]["step"] != step:  # stopped early: its end too
        snapshot(epoch)
    train_seconds = clock.elapsed()
    model.eval()
    if spec.stored != "float32":  # evaluate the weights that will be saved
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(getattr(torch, spec.stored)).float())
        if last is not None:
            last["heldout_loss"] = task.heldout_loss()
    metrics = task.evaluate(full=spec.full_metrics)
    if clock.cancelled():
        raise TrainingCancelled("Training was cancelled.")
    metrics["heldout_loss"] = last["heldout_loss"] if last is not None else None
    train: JSONDict = {"epochs": epoch if history else 0, "steps": step, "seconds": round(train_seconds, 1),
                       "eval_seconds": round(clock.elapsed() - train_seconds, 1), "device": str(device),
                       "torch": torch.__version__, "threads": torch.get_num_threads(), "stopped": stopped,
                       "spec": spec.to_json(), "history": history}
    if task.notes:
        train["notes"] = list(dict.fromkeys(task.notes))
    meta: JSONDict = {
        "name": spec.name, "architecture": spec.architecture, "config": {**task.config}, **task.vocab_meta(),
        "corpus": corpus_meta(spec, corpus), "metrics": metrics, "train": train,
        "description": spec.description or f"{spec.architecture} trained on the {corpus.generator} corpus."}
    if series is not None:
        meta["snapshots"] = [dict(info) for info in series.infos]
    return TrainResult(model=model, meta=meta, history=history, stopped=stopped, snapshots=series)


def corpus_meta(spec: TrainSpec, corpus: Corpus[Sentence] | Corpus[Pair] | Corpus[Labelled]) -> JSONDict:
    """What the checkpoint records of its corpus: the generator and its seeds, sizes, level."""
    return {"generator": corpus.generator, "seed": corpus.seed, "n_train": len(corpus.train),
            "n_heldout": len(corpus.heldout), "level": corpus.level, "heldout_seed": heldout_seed(spec)}
