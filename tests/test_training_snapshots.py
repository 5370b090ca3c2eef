"""Snapshots over training (explorer.training.snapshots): the schedule, the weights kept against the run's own, the
held-out loss of each against an independent recomputation, and the run unchanged by taking them."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.training.loop import train_model
from explorer.training.snapshots import read, schedule, stored_weights
from explorer.training.spec import TrainSpec

torch.set_num_threads(1)

SPEC = dict(architecture="rnn_lm", cell="lstm", n_train=400, n_heldout=40, hidden_size=16, emb_dim=8, epochs=3,
            batch_size=16, stored="float16")


@pytest.mark.parametrize("total,count", [(1000, 30), (75, 30), (20, 30), (5, 3), (1, 30), (100_000, 30)])
def test_schedule_is_log_spaced_from_the_start_to_the_end(total: int, count: int) -> None:
    steps = schedule(total, count)
    assert steps[0] == 0 and steps[-1] == total and list(steps) == sorted(set(steps))
    assert len(steps) == min(count, total + 1)
    inner = np.array([s for s in steps if s > 0], dtype=float)
    if len(inner) > 4 and total > 10 * count:  # evenly spaced in log(step): ratios of neighbours about equal
        ratios = inner[-5:][1:] / inner[-5:][:-1]
        assert np.allclose(ratios, (total / inner[-5]) ** 0.25, rtol=0.05)
        assert steps[1] == 1  # early change is seen


def test_snapshots_hold_the_runs_weights_and_their_held_out_loss(tmp_path) -> None:
    spec = TrainSpec(**SPEC)
    plain = train_model(spec)
    res = train_model(spec, snapshots=8)
    series = res.snapshots
    total = res.meta["train"]["steps"]
    assert [i["step"] for i in series.infos] == list(schedule(total, 8))
    assert res.meta["snapshots"] == series.infos and len(series.states) == 8
    # taking snapshots (their held-out losses) does not change the run: the same final weights as without
    for (k, a), b in zip(res.model.state_dict().items(), plain.model.state_dict().values()):
        assert torch.equal(a, b), k
    # the last snapshot is the trained model as stored (float16), the first the seeded initialisation
    last = stored_weights(res.model, torch.float16)
    assert all(torch.equal(series.states[-1][k].float(), v) for k, v in last.items())
    import random

    from explorer.training.corpus import load_corpus
    from explorer.training.tasks import task_for

    random.seed(spec.seed)  # as train_model starts a run
    torch.manual_seed(spec.seed)
    task = task_for(spec, load_corpus(spec), "cpu", None)
    first = stored_weights(task.model, torch.float16)
    assert all(torch.equal(series.states[0][k].float(), v) for k, v in first.items())
    # each snapshot's held-out loss is that of its own weights, recomputed on a fresh copy of the model
    path = tmp_path / "run.snapshots.safetensors"
    assert series.save(path) == res.meta["snapshots"]
    for info, state in read(path, res.meta)[::3]:
        model = copy.deepcopy(task.model)
        model.load_state_dict(state)
        task.model = model.eval()
        assert task.heldout_loss() == pytest.approx(info["heldout_loss"], abs=1e-6), info  # of the stored weights
    losses = [i["heldout_loss"] for i in series.infos]
    assert losses[-1] < losses[0] and series.infos[0]["train_loss"] is None
    assert all(i["train_loss"] > 0 for i in series.infos[1:])


def test_the_command_line_saves_the_series_beside_the_checkpoint(tmp_path, monkeypatch) -> None:
    import json

    from explorer.training.recipes import BUILTINS
    from explorer.training.train import main

    monkeypatch.setitem(BUILTINS, "tiny-lstm", TrainSpec(**{**SPEC, "epochs": 1}))
    assert main(["tiny-lstm", "--snapshots", "4", "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "tiny-lstm.json").read_text())
    series = read(tmp_path / "tiny-lstm.snapshots.safetensors", meta)
    assert [info["step"] for info, _ in series] == list(schedule(meta["train"]["steps"], 4))
    final = {k: v for k, v in series[-1][1].items()}
    from explorer.files.safe_load import read_state_dict_file

    saved = read_state_dict_file(tmp_path / "tiny-lstm.safetensors")
    assert final.keys() == {k for k, v in saved.items() if v.is_floating_point()}
    assert all(torch.equal(final[k], saved[k].float()) for k in final)  # the last snapshot is the checkpoint
