"""The shipped training series (builtin:lstm-lm and builtin:tiny-gpt, 16 float16 snapshots each) and the training-step
control every view that reads a trained model gets (explorer/ui/training_steps.py, ?train_step=).

Checked against independent computations: the first snapshot is the recipe's seeded initialisation, the last the
shipped checkpoint, each snapshot's held-out loss is recomputed from the weights the catalogue loads for `<id>@<step>`,
and a view at a step shows the numbers of that snapshot and nothing else changes."""
from __future__ import annotations

import copy
import functools
import json
import random

import numpy as np
import pytest
import torch

from conftest import assert_no_exception, run_page
from explorer.files.safe_load import ModelLoadError
from explorer.loading.catalogue import BUILTIN_DIR, ModelId, series_steps
from explorer.loading.checkpoint import read_snapshot, series_path
from explorer.loading.loaders import load_model
from explorer.training.recipes import BUILTINS
from explorer.training.snapshots import schedule, stored_weights
from plotly_arrays import plotly_array

torch.set_num_threads(1)
SERIES = ("lstm-lm", "tiny-gpt")


def meta(name: str) -> dict:
    return json.loads((BUILTIN_DIR / f"{name}.json").read_text())


@functools.lru_cache(maxsize=None)
def recipe_task(name: str):
    """The recipe's task as train_model starts it: seeded, its model the initialisation, its held-out data."""
    from explorer.training.corpus import load_corpus
    from explorer.training.tasks import task_for

    spec = BUILTINS[name]
    random.seed(spec.seed)
    torch.manual_seed(spec.seed)
    return task_for(spec, load_corpus(spec), "cpu", None)


@pytest.mark.parametrize("name", SERIES)
def test_the_shipped_series_runs_from_the_seeded_initialisation_to_the_checkpoint(name: str) -> None:
    m = meta(name)
    steps = series_steps(f"builtin:{name}")
    assert steps == schedule(m["train"]["steps"], 16) and len(m["snapshots"]) == 16
    assert all(info["dtype"] == "float16" for info in m["snapshots"])
    first, stored = read_snapshot(series_path(BUILTIN_DIR / f"{name}.safetensors"), 0)
    assert stored == "float16"
    init = stored_weights(recipe_task(name).model, torch.float16)
    assert first.keys() == init.keys() and all(torch.equal(first[k], init[k]) for k in init)
    last, _ = read_snapshot(series_path(BUILTIN_DIR / f"{name}.safetensors"), len(steps) - 1)
    trained = load_model(f"builtin:{name}").model
    final = stored_weights(trained, torch.float16)
    assert all(torch.equal(last[k], final[k]) for k in final)
    losses = [info["heldout_loss"] for info in m["snapshots"]]
    assert losses[0] > 6 and losses[-1] < 3.2 and losses[-1] == pytest.approx(m["metrics"]["heldout_loss"], abs=2e-3)


@pytest.mark.parametrize("name,index", [("lstm-lm", 0), ("lstm-lm", 10), ("tiny-gpt", 9), ("tiny-gpt", 15)])
def test_a_step_loads_its_snapshot_and_its_held_out_loss_is_the_saved_one(name: str, index: int) -> None:
    m = meta(name)
    step = m["snapshots"][index]["step"]
    loaded = load_model(f"builtin:{name}@{step}")
    assert loaded.id == f"builtin:{name}@{step}" and loaded.meta["snapshot"]["step"] == step
    assert loaded.meta["snapshot"]["base"] == f"builtin:{name}" and loaded.meta["snapshot"]["dtype"] == "float16"
    snap, _ = read_snapshot(series_path(BUILTIN_DIR / f"{name}.safetensors"), index)
    state = loaded.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in snap.items())
    task = recipe_task(name)
    saved_model = task.model
    try:
        task.model = copy.deepcopy(saved_model)
        task.model.load_state_dict(state)
        task.model.eval()
        assert task.heldout_loss() == pytest.approx(m["snapshots"][index]["heldout_loss"], abs=1e-5)
    finally:
        task.model = saved_model


@pytest.mark.parametrize("model_id,said", [
    ("builtin:lstm-lm@7", "no snapshot at step 7: its snapshots are at steps 0, 1, 2, 3, 5, 9"),
    ("builtin:gru-lm@5", "was not trained with snapshots"),
    ("pretrained:smollm2@3", "names a snapshot of a built-in or uploaded model"),
    ("builtin:lstm-lm@-1", "names a snapshot of a built-in or uploaded model"),
    ("builtin:lstm-lm@1e3", "names a snapshot of a built-in or uploaded model"),
])
def test_a_step_that_is_not_in_a_series_is_refused_with_the_steps_there_are(model_id: str, said: str) -> None:
    with pytest.raises(ModelLoadError, match=said.replace("(", r"\(")):
        load_model(model_id)


def test_model_ids_keep_their_step() -> None:
    mid = ModelId.parse("builtin:lstm-lm@127")
    assert (mid.kind, mid.name, mid.step, mid.base, str(mid)) == ("builtin", "lstm-lm", 127, "builtin:lstm-lm",
                                                                  "builtin:lstm-lm@127")
    assert series_steps("builtin:gru-lm") == () and series_steps("hf:gpt2") == () and series_steps("nonsense") == ()


# ------------------------------------------------------------------------------------------ the step control
TEXT = "the keys to the old cabinet are on the table ."


def _heatmap(at) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]


def _slider(at):
    return next(s for s in at.select_slider if s.key == "train_step")


def test_the_recurrent_cell_at_a_step_shows_that_snapshot_in_the_trained_models_frame() -> None:
    from explorer.probes.lstm_gates import rnn_gates, unit_order

    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "train_step": "127", "text": TEXT,
                                              "gate": "c", "sort": "variance", "top": "20"})
    assert_no_exception(at)
    assert _slider(at).value == 127 and list(_slider(at).options) == [f"{s:,}" for s in series_steps("builtin:lstm-lm")]
    captions = " | ".join(c.value for c in at.caption).replace("\\", "")
    assert "Step 127 of 1,878 · epoch 1 · held-out loss 4.075 · float16 weights" in captions
    snapshot, trained = (rnn_gates(load_model(i), TEXT) for i in ("builtin:lstm-lm@127", "builtin:lstm-lm"))
    units = unit_order(trained.gates["c"][0, 0], "variance", 20)  # the trained model's order, at every step
    heat = _heatmap(at)
    np.testing.assert_allclose(plotly_array(heat["z"]), snapshot.gates["c"][0, 0][:, units], atol=1e-6)
    assert heat["x"] == [str(u) for u in units]
    bound = float(np.abs(trained.gates["c"][0, 0][:, units]).max())  # and its colour range
    assert heat["zmax"] == pytest.approx(bound) and heat["zmin"] == pytest.approx(-bound)
    # the last step is the trained checkpoint; only the model changed: the sentence and the settings stay
    _slider(at).set_value(1878).run()
    assert_no_exception(at)
    assert at.query_params["train_step"] == "1878" and at.query_params["text"] == TEXT
    assert at.query_params["gate"] == "c" and at.query_params["top"] == "20"
    heat = _heatmap(at)
    np.testing.assert_allclose(plotly_array(heat["z"]), trained.gates["c"][0, 0][:, units], atol=1e-6)
    assert "Step 1,878 of 1,878: the trained model · held-out loss 3.086" in \
        " | ".join(c.value for c in at.caption).replace("\\", "")


def test_a_step_between_snapshots_shows_the_nearest_and_says_so() -> None:
    at = run_page("app_pages/logit_lens.py", {"model": "builtin:tiny-gpt", "train_step": "100", "text": TEXT})
    assert_no_exception(at)
    assert _slider(at).value == 98 and at.query_params["train_step"] == "98"
    assert "Step 100 has no snapshot: showing the nearest one, step 98." in [i.value for i in at.info]


def test_a_model_without_snapshots_has_no_step_control_and_drops_the_step() -> None:
    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:gru-lm", "train_step": "127", "text": TEXT})
    assert_no_exception(at)
    assert not [s for s in at.select_slider if s.key == "train_step"] and "train_step" not in at.query_params


@pytest.mark.parametrize("page,model", [("app_pages/self_attention.py", "builtin:tiny-gpt"),
                                        ("app_pages/logit_lens.py", "builtin:tiny-gpt"),
                                        ("app_pages/decoding_strategies.py", "builtin:lstm-lm"),
                                        ("app_pages/positional_encodings.py?panel=learned", "builtin:tiny-gpt"),
                                        ("app_pages/word_embeddings.py", "builtin:lstm-lm"),
                                        ("app_pages/token_attribution.py", "builtin:tiny-gpt"),
                                        ("app_pages/interventions.py", "builtin:lstm-lm")])
def test_every_view_that_reads_a_trained_model_has_the_step_control(page: str, model: str) -> None:
    step = series_steps(model)[3]
    page, _, extra = page.partition("?")
    at = run_page(page, {"model": model, "train_step": str(step), **dict(p.split("=") for p in extra.split("&") if p)})
    assert_no_exception(at)
    assert _slider(at).value == step and at.query_params["train_step"] == str(step)
    assert f"Step {step} of" in " | ".join(c.value for c in at.caption).replace("\\", "")


# ------------------------------------------------------------------------ runs trained in the app, uploaded series
SMALL = dict(architecture="rnn_lm", cell="lstm", n_train=300, n_heldout=30, hidden_size=16, emb_dim=8, epochs=2,
             batch_size=16)


def test_a_run_trained_in_the_app_keeps_its_snapshots_and_every_view_reads_them() -> None:
    from explorer.training.jobs import TrainingJob
    from explorer.training.spec import TrainSpec

    job = TrainingJob(TrainSpec(**SMALL, name="my-lstm-lm"), snapshots=5).start()
    assert job.wait(120) and job.status == "done", job.error
    uid = job.model_id
    steps = series_steps(uid)
    assert steps == schedule(job.result.meta["train"]["steps"], 5) and series_steps(f"{uid}@{steps[2]}") == steps
    for index in (0, 2, 4):
        loaded = load_model(f"{uid}@{steps[index]}")
        kept = job.result.snapshots.states[index]
        state = loaded.model.state_dict()
        assert all(torch.equal(state[k], v.float()) for k, v in kept.items())
        assert loaded.meta["snapshot"]["heldout_loss"] == job.result.meta["snapshots"][index]["heldout_loss"]
    at = run_page("app_pages/lstm_gates.py", {"model": uid, "train_step": str(steps[1]), "text": TEXT})
    assert_no_exception(at)
    assert _slider(at).value == steps[1]
    assert f"Step {steps[1]} of {steps[-1]}" in " | ".join(c.value for c in at.caption).replace("\\", "")
    # the exported zip holds the series too, and uploading those three files gives the same series back
    import io
    import zipfile

    from explorer.loading.uploads import register_upload

    with zipfile.ZipFile(io.BytesIO(job.zip_bytes())) as zf:
        files = [(name.split("/")[-1], zf.read(name)) for name in zf.namelist()]
    assert sorted(n for n, _ in files) == ["my-lstm-lm.json", "my-lstm-lm.safetensors",
                                           "my-lstm-lm.snapshots.safetensors"]
    again = register_upload(files)
    assert series_steps(again) == steps
    a, b = load_model(f"{again}@{steps[3]}").model.state_dict(), load_model(f"{uid}@{steps[3]}").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_series_file_that_does_not_fit_its_model_is_refused(tmp_path) -> None:
    from safetensors.torch import save

    from explorer.files.safe_load import CorruptFileError
    from explorer.loading.uploads import register_upload
    from explorer.training.loop import train_model
    from explorer.training.spec import TrainSpec

    res = train_model(TrainSpec(**{**SMALL, "epochs": 1}, name="tiny"), snapshots=3)
    weights = save({k: v.contiguous() for k, v in res.model.state_dict().items()})
    meta = json.dumps(res.meta).encode()
    wrong_shape = {f"0/{k}": torch.zeros(2, 2) for k in list(res.model.state_dict())[:1]}
    unknown = {"0/not.a.parameter": torch.zeros(2)}
    missing = {f"0/{k}": v for k, v in res.snapshots.states[0].items()}  # snapshots 1 and 2 left out
    for flat, said in ((wrong_shape, "is not a snapshot of one of the model's"),
                       (unknown, "is not a snapshot of one of the model's"), (missing, "lacks some of the 3")):
        with pytest.raises(CorruptFileError, match=said):
            register_upload([("tiny.safetensors", weights), ("tiny.json", meta),
                             ("tiny.snapshots.safetensors", save(flat))])
    no_list = json.dumps({k: v for k, v in res.meta.items() if k != "snapshots"}).encode()
    first = save({f"0/{k}": v for k, v in res.snapshots.states[0].items()})
    with pytest.raises(CorruptFileError, match="lists none"):
        register_upload([("tiny.safetensors", weights), ("tiny.json", no_list), ("tiny.snapshots.safetensors", first)])


# ------------------------------------------------------------------------------------- two models side by side
def test_the_recurrent_cell_compares_two_steps_on_one_scale_and_their_difference() -> None:
    from explorer.probes.lstm_gates import rnn_gates, unit_order

    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "compare": "builtin:lstm-lm@640",
                                              "text": TEXT, "gate": "c", "sort": "variance", "top": "20"})
    assert_no_exception(at)
    a, b = (rnn_gates(load_model(i), TEXT) for i in ("builtin:lstm-lm", "builtin:lstm-lm@640"))
    units = unit_order(a.gates["c"][0, 0], "variance", 20)
    charts = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    first, second, diff = charts[:3]
    assert first["layout"]["title"]["text"].startswith("builtin:lstm-lm: ")
    assert second["layout"]["title"]["text"].startswith("builtin:lstm-lm@640: ")
    np.testing.assert_allclose(plotly_array(first["data"][0]["z"]), a.gates["c"][0, 0][:, units], atol=1e-6)
    np.testing.assert_allclose(plotly_array(second["data"][0]["z"]), b.gates["c"][0, 0][:, units], atol=1e-6)
    # the difference is that of two single-model runs; both maps share one colour range
    np.testing.assert_allclose(plotly_array(diff["data"][0]["z"]),
                               (b.gates["c"][0, 0] - a.gates["c"][0, 0])[:, units], atol=1e-6)
    bound = max(np.abs(a.gates["c"][0, 0][:, units]).max(), np.abs(b.gates["c"][0, 0][:, units]).max())
    for chart in (first, second):
        assert chart["data"][0]["zmax"] == pytest.approx(bound) and chart["data"][0]["zmin"] == pytest.approx(-bound)
    assert diff["layout"]["title"]["text"] == "cell state c: builtin:lstm-lm@640 − builtin:lstm-lm"
    # another model whose states have another shape: drawn on its own, no difference, and the page says why
    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "compare": "builtin:gru-lm", "text": TEXT})
    assert_no_exception(at)
    assert any("the second model has no cell state c" in i.value.replace("\\", "") for i in at.info)


def test_self_attention_compares_a_head_across_training() -> None:
    from explorer.probes.self_attention import attention_trace

    at = run_page("app_pages/self_attention.py", {"model": "builtin:tiny-gpt", "compare": "builtin:tiny-gpt@98",
                                                  "text": TEXT, "mode": "head", "layer": "1", "head": "2"})
    assert_no_exception(at)
    a, b = (attention_trace(load_model(i), TEXT, arithmetic=False) for i in ("builtin:tiny-gpt",
                                                                               "builtin:tiny-gpt@98"))
    charts = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    titles = [c["layout"]["title"]["text"] for c in charts]
    assert titles[:3] == ["A: builtin:tiny-gpt", "B: builtin:tiny-gpt@98", "B − A"]  # side by side, before the lines
    def rows(node):  # the blocks whose children are columns, each holding charts
        for child in getattr(node, "children", {}).values():
            columns = [c for c in getattr(child, "children", {}).values() if type(c).__name__ == "Column"]
            if len(columns) == 3 and all(len(c.get("plotly_chart")) == 1 for c in columns):
                yield columns
            yield from rows(child)

    row = next(rows(at.main))  # A, B and B − A in one row of three columns
    assert [json.loads(c.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"] for c in row] == titles[:3]
    second, diff = charts[1], charts[2]
    from explorer.text.escape import md_unescape

    assert "layer 1, head 2: A = builtin:tiny-gpt, B = builtin:tiny-gpt@98" in " ".join(
        md_unescape(c.value) for c in at.caption)
    np.testing.assert_allclose(plotly_array(second["data"][0]["z"]), b.attentions[1, 2], atol=1e-6)
    np.testing.assert_allclose(plotly_array(diff["data"][0]["z"]), b.attentions[1, 2] - a.attentions[1, 2], atol=1e-6)
    assert (diff["data"][0]["zmin"], diff["data"][0]["zmax"]) == (-1.0, 1.0)
    at = run_page("app_pages/self_attention.py", {"model": "builtin:tiny-gpt", "compare": "pretrained:minilm",
                                                  "text": TEXT, "mode": "head"})
    assert_no_exception(at)
    assert any("read the sentence as different tokens" in i.value for i in at.info)


def test_compare_offers_the_other_steps_and_refuses_a_malformed_id() -> None:
    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm@640", "compare": "nonsense", "text": TEXT})
    assert_no_exception(at)
    box = next(s for s in at.selectbox if s.key == "compare")
    assert box.value == "none" and "step 0 of this model" in box.options  # the other steps, not the one shown
    assert "step 640 of this model" not in box.options and "step 1,878 of this model (trained)" in box.options
    assert _slider(at).value == 640  # a snapshot's id in ?model= opens the slider at its step
    assert any("Ignoring ?compare=" in w.value for w in at.warning)


def test_the_logit_lens_compares_the_probability_of_the_first_models_prediction() -> None:
    from explorer.probes.logit_lens import logit_lens, probability_of

    at = run_page("app_pages/logit_lens.py", {"model": "builtin:tiny-gpt", "compare": "builtin:tiny-gpt@452",
                                              "text": TEXT})
    assert_no_exception(at)
    a, b = (logit_lens(load_model(i), TEXT) for i in ("builtin:tiny-gpt", "builtin:tiny-gpt@452"))
    tracked = probability_of(load_model("builtin:tiny-gpt@452"), TEXT, a.final_ids)
    # independent checks of the tracked probabilities: the first model's own, and the second's where both predict
    # the same token
    np.testing.assert_allclose(probability_of(load_model("builtin:tiny-gpt"), TEXT, a.final_ids), a.final_prob,
                               atol=1e-7)
    same = [t for t in range(len(a.tokens)) if a.final_tokens[t] == b.final_tokens[t]]
    assert same and np.allclose(tracked[:, same], b.final_prob[:, same], atol=1e-7)
    charts = {json.loads(el.proto.spec)["layout"]["title"]["text"]: json.loads(el.proto.spec)
              for el in at.get("plotly_chart")}
    grid_b = charts[next(t for t in charts if t.startswith("builtin:tiny-gpt@452: Logit lens"))]
    np.testing.assert_allclose(plotly_array(grid_b["data"][0]["z"]), b.top_probs, atol=1e-6)
    diff = charts["p of builtin:tiny-gpt's prediction: builtin:tiny-gpt@452 − builtin:tiny-gpt"]
    np.testing.assert_allclose(plotly_array(diff["data"][0]["z"]), tracked - a.final_prob, atol=1e-6)


def test_token_attribution_compares_two_steps_on_one_scale() -> None:
    from explorer.probes.token_attribution import attribution

    # a sentence of its own: the attributions go into the model's prefix memo, which other tests expect empty
    dog = "the dog that the farmers feed sleeps in the garden ."
    at = run_page("app_pages/token_attribution.py", {"model": "builtin:tiny-gpt", "compare": "builtin:tiny-gpt@98",
                                                     "text": dog, "method": "integrated gradients", "steps": "64"})
    assert_no_exception(at)
    a, b = (attribution(load_model(i), dog, "", 64, "all") for i in ("builtin:tiny-gpt", "builtin:tiny-gpt@98"))
    charts = {json.loads(el.proto.spec)["layout"]["title"]["text"]: json.loads(el.proto.spec)
              for el in at.get("plotly_chart")}
    first = charts["builtin:tiny-gpt: integrated gradients: each output (row) onto the inputs"]["data"][0]
    second = charts["builtin:tiny-gpt@98: integrated gradients: each output (row) onto the inputs"]["data"][0]
    diff = charts["integrated gradients: builtin:tiny-gpt@98 − builtin:tiny-gpt"]["data"][0]
    np.testing.assert_allclose(plotly_array(first["z"]), a.integrated, atol=1e-6)
    np.testing.assert_allclose(plotly_array(second["z"]), b.integrated, atol=1e-6)
    np.testing.assert_allclose(plotly_array(diff["z"]), b.integrated - a.integrated, atol=1e-6)
    bound = max(np.abs(a.integrated).max(), np.abs(b.integrated).max())
    assert first["zmax"] == second["zmax"] == pytest.approx(bound)


def test_word_embeddings_at_a_step_are_placed_on_the_trained_models_pca_axes() -> None:
    from sklearn.decomposition import PCA

    from explorer.probes import word_embeddings as E
    from explorer.projections import reduce as PR
    from explorer.ui.word_embeddings import projection

    snap, trained = (E.embedding_table(load_model(i), "input") for i in ("builtin:tiny-gpt@98", "builtin:tiny-gpt"))
    rows = np.arange(len(snap.words))
    proj, job = projection(snap, rows, "pca", 2, PR.params_for("pca"), reference=trained)
    assert job is None and proj.placement == f"the PCA axes of {trained.source}"
    pca = PCA(n_components=2, svd_solver="full").fit(trained.vectors[rows].astype(np.float64))
    expected = pca.transform(snap.vectors[rows].astype(np.float64))
    signs = np.sign((proj.coords * expected).sum(axis=0))  # a component's sign is arbitrary
    np.testing.assert_allclose(proj.coords * signs, expected, atol=1e-3)
    at = run_page("app_pages/word_embeddings.py", {"model": "builtin:tiny-gpt", "train_step": "98", "src": "model"})
    assert_no_exception(at)
    captions = " | ".join(c.value for c in at.caption).replace("\\", "")
    assert "placed on the PCA axes of builtin:tiny-gpt" in captions


def test_the_learned_position_table_at_a_step_is_coloured_on_the_trained_tables_scale() -> None:
    from explorer.probes.positional_encodings import learned_positions
    from explorer.viz.positional_encodings import robust_bound

    at = run_page("app_pages/positional_encodings.py", {"model": "builtin:tiny-gpt", "train_step": "98",
                                                        "panel": "learned"})
    assert_no_exception(at)
    snap, trained = (learned_positions(load_model(i)).weight for i in ("builtin:tiny-gpt@98", "builtin:tiny-gpt"))
    heat = next(json.loads(el.proto.spec)["data"][0] for el in at.get("plotly_chart")
                if "position × dimension" in json.loads(el.proto.spec)["layout"]["title"]["text"])
    np.testing.assert_allclose(plotly_array(heat["z"]), snap, atol=1e-6)
    bound, _ = robust_bound([trained], "value")
    assert heat["zmax"] == pytest.approx(bound) and bound > 1.5 * robust_bound([snap], "value")[0]


def test_the_learned_position_tables_of_two_steps_side_by_side() -> None:
    from explorer.probes.positional_encodings import learned_positions
    from explorer.viz.positional_encodings import robust_bound

    at = run_page("app_pages/positional_encodings.py", {"model": "builtin:tiny-gpt", "compare": "builtin:tiny-gpt@98",
                                                        "panel": "learned"})
    assert_no_exception(at)
    a, b = (learned_positions(load_model(i)).weight for i in ("builtin:tiny-gpt", "builtin:tiny-gpt@98"))
    charts = {json.loads(el.proto.spec)["layout"]["title"]["text"]: json.loads(el.proto.spec)["data"][0]
              for el in at.get("plotly_chart")}
    first = charts["builtin:tiny-gpt · wpe: position × dimension"]
    second = charts["builtin:tiny-gpt@98 · wpe: position × dimension"]
    diff = charts["builtin:tiny-gpt@98 − builtin:tiny-gpt: position × dimension"]
    np.testing.assert_allclose(plotly_array(second["z"]), b, atol=1e-6)
    np.testing.assert_allclose(plotly_array(diff["z"]), b - a, atol=1e-6)
    bound, _ = robust_bound([a, b], "value")
    assert first["zmax"] == second["zmax"] == pytest.approx(bound)


def test_decoding_compares_two_steps_after_the_same_context() -> None:
    from explorer.adapters.generation import Strategy
    from explorer.probes import decoding_strategies as D

    params = {"model": "builtin:lstm-lm", "compare": "builtin:lstm-lm@127", "text": "the dog that the farmers",
              "strategies": "greedy,top-k", "max_new": "6", "step": "3", "col": "0"}
    at = run_page("app_pages/decoding_strategies.py", params)
    assert_no_exception(at)
    a, b = (load_model(i) for i in ("builtin:lstm-lm", "builtin:lstm-lm@127"))
    strategies = (Strategy("greedy"), Strategy("top-k"))
    run_a, run_b = (D.decode_all(m, params["text"], strategies, 0, 6) for m in (a, b))
    charts = {json.loads(el.proto.spec)["layout"]["title"]["text"]: json.loads(el.proto.spec)
              for el in at.get("plotly_chart")}
    lines = next(c for t, c in charts.items() if t.startswith("Log p of each new token"))
    dashed = [d for d in lines["data"] if d["line"]["dash"] == "dash"]
    assert [d["name"] for d in dashed] == ["Greedy · builtin:lstm-lm@127", "Top-k · builtin:lstm-lm@127"]
    for d, gen in zip(dashed, run_b.generations):  # the second model's own log-probabilities of its own output
        np.testing.assert_allclose(plotly_array(d["y"]), gen.outputs[0].logprobs, atol=1e-6)
    out = run_a.generations[0].outputs[0]  # greedy of the first model: both read its first two tokens
    sv = D.step_view(a, run_a.prompt_ids, run_a.start_ids, out.ids, strategies[0], 2, 1.0)
    own_b = D.step_view(b, run_a.prompt_ids, run_a.start_ids, out.ids, strategies[0], 2, 1.0)
    bars_b = charts["builtin:lstm-lm@127, same context"]["data"][0]
    np.testing.assert_allclose(plotly_array(bars_b["y"]), own_b.probs, atol=1e-6)
    top = max(sv.probs.max(), own_b.probs.max())  # both bar charts on one scale
    for title in ("builtin:lstm-lm, step 3", "builtin:lstm-lm@127, same context"):
        assert charts[title]["layout"]["yaxis"]["range"] == pytest.approx([0, top * 1.05])
    diff = next(c for t, c in charts.items() if t.startswith("Step 3: p(builtin:lstm-lm@127) − p(builtin:lstm-lm)"))
    # the difference is that of two single-model runs: B's softmax at A's top tokens minus A's
    np.testing.assert_allclose(plotly_array(diff["data"][0]["y"]),
                               _next_probs(b, run_a.prompt_ids, out.ids[:2])[sv.ids]
                               - _next_probs(a, run_a.prompt_ids, out.ids[:2])[sv.ids], atol=1e-5)
    # a model that reads the prompt as other tokens: its columns, no difference, and the page says why
    at = run_page("app_pages/decoding_strategies.py", {**params, "compare": "builtin:lstm-lm-wordnet"})
    assert_no_exception(at)
    assert any("does not read this prompt as the same tokens" in i.value for i in at.info)


def _next_probs(loaded, prompt_ids, generated) -> np.ndarray:
    """softmax of the model's own next-token logits after the prompt and `generated`: one forward pass of the whole
    sequence through the recurrent language model (not the adapter's step by step)."""
    with torch.inference_mode():
        logits, _ = loaded.model(torch.tensor([list(prompt_ids) + list(generated)]))
        return torch.softmax(logits[0, -1].float(), -1).numpy()


def _perturbed_masked_lm() -> str:
    """builtin:masked-lm with every weight moved by 2 % noise, uploaded: another model of the same vocabulary."""
    from safetensors.torch import load, save

    from explorer.loading.uploads import register_upload

    weights = load((BUILTIN_DIR / "masked-lm.safetensors").read_bytes())
    gen = torch.Generator().manual_seed(0)
    moved = {k: (v + 0.02 * v.abs().mean() * torch.randn(v.shape, generator=gen)).to(v.dtype)
             if v.is_floating_point() else v for k, v in weights.items()}
    return register_upload([("masked-lm.safetensors", save(moved)),
                            ("masked-lm.json", (BUILTIN_DIR / "masked-lm.json").read_bytes())])


def test_masked_words_compares_two_models_of_one_vocabulary_at_each_mask() -> None:
    from explorer.probes.masked_words import masked_fill

    other = _perturbed_masked_lm()
    text = "the keys to the cabinet [MASK] on the table ."
    at = run_page("app_pages/masked_words.py", {"model": "builtin:masked-lm", "compare": other, "text": text,
                                                "b": ""})
    assert_no_exception(at)
    a, b = load_model("builtin:masked-lm", task="masked-lm"), load_model(other, task="masked-lm")
    ta, tb = masked_fill(a, text), masked_fill(b, text)
    with torch.inference_mode():  # independent: each model's own forward pass, softmax at the mask
        enc = a.adapter.encode(text.replace("[MASK]", ta.tokens[ta.positions[0]]))
        pa, pb = (torch.softmax(torch.as_tensor(m.adapter.run(enc, names=("logits",))["logits"][ta.positions[0]]),
                                -1).numpy() for m in (a, b))
    charts = {json.loads(el.proto.spec)["layout"]["title"]["text"]: json.loads(el.proto.spec)
              for el in at.get("plotly_chart")}
    bars_b = charts[f"{other}: [MASK] at token {ta.positions[0]}"]
    np.testing.assert_allclose(plotly_array(bars_b["data"][0]["x"]), tb.probs[0], atol=1e-6)
    top = max(ta.probs[0].max(), tb.probs[0].max())  # both on one scale
    for title in (f"builtin:masked-lm: [MASK] at token {ta.positions[0]}", bars_b["layout"]["title"]["text"]):
        assert charts[title]["layout"]["xaxis"]["range"] == pytest.approx([0, min(1.0, top * 1.25 + 0.02)])
    diff = charts[f"[MASK] at token {ta.positions[0]}: p({other}) − p(builtin:masked-lm)"]
    np.testing.assert_allclose(plotly_array(diff["data"][0]["x"]), pb[ta.top_ids[0]] - pa[ta.top_ids[0]], atol=1e-5)


def test_word_embeddings_reads_the_first_models_neighbours_in_the_second() -> None:
    at = run_page("app_pages/word_embeddings.py", {"model": "builtin:lstm-lm", "compare": "builtin:lstm-lm@43",
                                                   "section": "neighbours", "nn": "dog", "k": "10"})
    assert_no_exception(at)
    own, theirs, both = (d.value for d in at.dataframe[-3:])
    a, b = (load_model(i) for i in ("builtin:lstm-lm", "builtin:lstm-lm@43"))
    itos = a.adapter.token_strings(list(range(a.adapter.vocab_size)))

    def cos(model, w1: str, w2: str) -> float:  # independent: the embedding matrix of the model's own state dict
        emb = next(v for k, v in model.model.state_dict().items() if k.endswith("embedding.weight")).double()
        u, v = emb[itos.index(w1)], emb[itos.index(w2)]
        return float(u @ v / (u.norm() * v.norm()))

    assert list(both["word"]) == list(own["word"])
    for w, ca, cb, d in zip(both["word"], both["cos in builtin:lstm-lm"], both["cos in builtin:lstm-lm@43"],
                            both["B − A"]):
        assert ca == pytest.approx(cos(a, "dog", w), abs=1e-4) and cb == pytest.approx(cos(b, "dog", w), abs=1e-4)
        assert d == pytest.approx(cb - ca, abs=2e-4)
    assert theirs["cosine"].iloc[0] == pytest.approx(cos(b, "dog", theirs["word"].iloc[0]), abs=1e-4)
    shared = len(set(own["word"]) & set(theirs["word"]))
    assert any(f"{shared} of builtin" in c.value for c in at.caption)


def test_interventions_compare_two_steps_cell_by_cell() -> None:
    from explorer.probes import interventions as I

    params = {"model": "builtin:tiny-gpt", "compare": "builtin:tiny-gpt@272", "text": "the keys to the cabinet",
              "corrupt": "the key to the cabinet", "answer": "are", "wrong": "is", "site": "resid",
              "direction": "denoise", "method": "exact"}
    at = run_page("app_pages/interventions.py", params)
    assert_no_exception(at)
    args = (params["text"], params["corrupt"], "are", "is", "resid", "denoise", -1, "fwd")
    a, b = (I.patching(load_model(i), *args) for i in ("builtin:tiny-gpt", "builtin:tiny-gpt@272"))
    charts = {json.loads(el.proto.spec)["layout"]["title"]["text"]: json.loads(el.proto.spec)
              for el in at.get("plotly_chart")}
    grid_b = charts["builtin:tiny-gpt@272: Denoising: residual stream restored"]["data"][0]
    np.testing.assert_allclose(plotly_array(grid_b["z"]), b.restored, atol=1e-6)
    assert (grid_b["zmin"], grid_b["zmax"]) == (-1.0, 1.0)  # the first grid's scale
    diff = charts["restored: builtin:tiny-gpt@272 − builtin:tiny-gpt"]["data"][0]
    np.testing.assert_allclose(plotly_array(diff["z"]), b.restored - a.restored, atol=1e-6)
    # a recurrent model has no residual stream: said, and the first model's grid stays
    at = run_page("app_pages/interventions.py", {**params, "compare": "builtin:lstm-lm"})
    assert_no_exception(at)
    assert any("cannot be compared here" in w.value for w in at.warning)


# ------------------------------------------------------------------------------------- fixed frames at every step
def test_procrustes_alignment_recovers_a_turn_and_places_new_points_in_the_same_frame() -> None:
    from explorer.projections import reduce as PR

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6)).astype(np.float32)
    proj = PR.fit(X, "pca", 2)
    theta = 0.7
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]) @ np.diag([1.0, -1.0])
    target = 2.5 * proj.coords.astype(np.float64) @ R + np.array([3.0, -1.0])  # turned, mirrored, scaled, shifted
    turned = PR.aligned(proj, target, "test")
    np.testing.assert_allclose(turned.coords, target, atol=1e-4)
    # a new point goes through the same turn: the fitted rows, transformed again, land on their aligned places
    np.testing.assert_allclose(PR.transform(turned, X[:5]), target[:5], atol=1e-4)


def test_word_embeddings_tsne_at_a_step_is_turned_onto_the_trained_models_map() -> None:
    import time

    from explorer.probes import word_embeddings as E
    from explorer.projections import reduce as PR
    from explorer.ui.word_embeddings import projection

    snap, trained = (E.embedding_table(load_model(i), "input") for i in ("builtin:lstm-lm@127", "builtin:lstm-lm"))
    rows = np.arange(300)
    params = PR.params_for("tsne")
    deadline = time.monotonic() + 240
    while True:  # the fits run in the background; meanwhile the PCA on the trained model's axes stands in
        proj, job = projection(snap, rows, "tsne", 2, params, reference=trained)
        if job is None or time.monotonic() > deadline:
            break
        assert proj.placement.startswith("the PCA axes of")
        time.sleep(1)
    assert job is None and proj.frame is not None and "turned and scaled onto the t-SNE of" in proj.placement
    own, _ = projection(snap, rows, "tsne", 2, params)
    ref, _ = projection(trained, rows, "tsne", 2, params)
    # the same map (every distance kept up to one scale), as close to the trained map as such a turn can bring it
    d_own = np.linalg.norm(own.coords[:, None] - own.coords[None], axis=-1)
    d_turned = np.linalg.norm(proj.coords[:, None] - proj.coords[None], axis=-1)
    scale = d_turned.sum() / d_own.sum()
    np.testing.assert_allclose(d_turned, scale * d_own, rtol=1e-3, atol=1e-3)
    err = np.linalg.norm(proj.coords - ref.coords)
    assert err < np.linalg.norm(scale * (own.coords - own.coords.mean(0)) + ref.coords.mean(0) - ref.coords)


def test_the_learned_positions_pca_at_a_step_uses_the_trained_tables_axes() -> None:
    from explorer.probes.positional_encodings import learned_positions

    at = run_page("app_pages/positional_encodings.py", {"model": "builtin:tiny-gpt", "train_step": "98",
                                                        "panel": "learned", "pca": "2"})
    assert_no_exception(at)
    snap, trained = (learned_positions(load_model(i)).weight.astype(np.float64)
                     for i in ("builtin:tiny-gpt@98", "builtin:tiny-gpt"))
    chart = next(json.loads(el.proto.spec) for el in at.get("plotly_chart")
                 if json.loads(el.proto.spec)["layout"]["title"]["text"] == "PCA of the position vectors")
    _, _, vt = np.linalg.svd(trained - trained.mean(0), full_matrices=False)  # independent: the trained table's axes
    expected = (snap - trained.mean(0)) @ vt[:2].T
    got = np.stack([plotly_array(chart["data"][0]["x"]), plotly_array(chart["data"][0]["y"])], axis=1)
    signs = np.sign((got * expected).sum(axis=0))
    np.testing.assert_allclose(got * signs, expected, atol=1e-4)
    assert "of the trained table" in chart["layout"]["xaxis"]["title"]["text"]
    own = (trained - trained.mean(0)) @ vt[:2].T  # the axes' ranges hold the trained table too
    lo = min(got[:, 0].min(), (own * signs)[:, 0].min())
    assert chart["layout"]["xaxis"]["range"][0] < lo


def test_a_units_line_at_a_step_keeps_the_trained_models_y_axis() -> None:
    from explorer.probes.lstm_gates import rnn_gates

    params = {"model": "builtin:lstm-lm", "train_step": "43", "text": TEXT, "unit": "5", "gate": "c"}
    at = run_page("app_pages/lstm_gates.py", params)
    assert_no_exception(at)
    chart = next(json.loads(el.proto.spec) for el in at.get("plotly_chart")
                 if json.loads(el.proto.spec)["layout"]["title"]["text"].startswith("unit 5 "))
    a, b = (rnn_gates(load_model(i), TEXT) for i in ("builtin:lstm-lm", "builtin:lstm-lm@43"))
    values = np.concatenate([t.gates[n][0, 0, :, 5] for t in (a, b) for n in t.names])
    pad = 0.05 * (values.max() - values.min())
    assert chart["layout"]["yaxis"]["range"] == pytest.approx([values.min() - pad, values.max() + pad], abs=1e-5)


def test_a_model_without_snapshots_says_why_it_has_no_step_control() -> None:
    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm-wordnet"})
    assert_no_exception(at)
    picker = next(s for s in at.selectbox if s.key == "model")
    assert "builtin\\:lstm-lm-wordnet was trained without snapshots" in picker.help
    assert "builtin\\:lstm-lm" in picker.help and "Watch it learn" in picker.help
