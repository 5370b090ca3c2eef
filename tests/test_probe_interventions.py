"""Interventions (explorer/probes/interventions.py) against independent computations: forward hooks on a separate copy
of each model (transformers), nn.LSTM/GRU run step by step (recurrent), autograd on the copy (attribution)."""
from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
import torch

from explorer.adapters.gpt import GPTAdapter
from explorer.adapters.interventions import Patch
from explorer.loading.loaders import LoadedModel, load_model
from explorer.probes import interventions as I

CLEAN, CORRUPT, ANSWER, WRONG = "the keys to the cabinet", "the key to the cabinet", "are", "is"
HF = ("the red car is", "the old car is", "fast", "table")  # the tiny tokenizer's words (tests/families.py)
TOL = 1e-5


def prompts(model_id: str) -> tuple[str, str, str, str]:
    return (CLEAN, CORRUPT, ANSWER, WRONG) if model_id.startswith("builtin:") else HF


@pytest.fixture(scope="module")
def hf_zoo(tmp_path_factory):
    """Tiny GPT-2 and tiny Llama (grouped-query attention, rotary) as local: models with a word-level tokenizer."""
    from families import save

    root = tmp_path_factory.mktemp("interventions")
    ids = {name: save(root, name) for name in ("gpt2", "llama")}
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: the monkeypatch fixture is per test
        mp.setenv("EXPLORER_MODEL_PATH", str(root))
        yield ids


def _ids(loaded, text):
    return I._encode(loaded.adapter, text, "test")[0]


def _tokens(loaded, args=(CLEAN, CORRUPT, ANSWER, WRONG)):
    c = I.contrast(loaded, *args)
    return c, torch.tensor([list(c.ids)]), torch.tensor([list(c.corrupt_ids)])


# ------------------------------------------------------------------------ an independent implementation (hooks)
def _hf_parts(model):
    base = model.transformer if hasattr(model, "transformer") else model.model
    blocks = base.h if hasattr(base, "h") else base.layers
    attn = [b.attn if hasattr(b, "attn") else b.self_attn for b in blocks]
    proj = [a.c_proj if hasattr(a, "c_proj") else a.o_proj for a in attn]
    return blocks, attn, [b.mlp for b in blocks], proj


def _gpt_parts(model):
    return model.h, [b.attn for b in model.h], [b.mlp for b in model.h], [b.attn.c_proj for b in model.h]


def _logits(model, ids):
    out = model(ids) if not hasattr(model, "config") or not hasattr(model.config, "model_type") else \
        model(input_ids=ids, use_cache=False)
    return (out.logits if hasattr(out, "logits") else out)[0, -1]


def _reference_grid(model, parts, kind, clean_ids, corrupt_ids, answer, wrong, n_heads):
    """Denoising by forward hooks on a copy: capture each site on the clean run, then one full forward of the
    corrupted prompt per cell with that site replaced at one position (heads: one head at every position)."""
    model = copy.deepcopy(model)
    blocks, attn, mlp, proj = parts(model)
    L, T = len(blocks), clean_ids.shape[1]
    store: dict = {}

    def grab(name):
        def hook(module, args, output=None):
            x = args[0] if output is None else (output[0] if isinstance(output, tuple) else output)
            store[name] = x.detach().clone()
        return hook

    handles = []
    for layer in range(L):
        handles.append(blocks[layer].register_forward_pre_hook(grab(("resid", layer))))
        handles.append(attn[layer].register_forward_hook(grab(("attn", layer))))
        handles.append(mlp[layer].register_forward_hook(grab(("mlp", layer))))
        handles.append(proj[layer].register_forward_pre_hook(grab(("heads", layer))))
    handles.append(blocks[L - 1].register_forward_hook(grab(("resid", L))))
    with torch.no_grad():
        _logits(model, clean_ids)
    for h in handles:
        h.remove()
    rows = L + 1 if kind == "resid" else L
    K = n_heads if kind == "heads" else T
    grid = np.zeros((rows, K))
    for r in range(rows):
        for k in range(K):
            src = store[(kind, r)]

            def pre(module, args, src=src, k=k):
                x = args[0].clone()
                if kind == "heads":
                    d = x.shape[-1] // n_heads
                    x[..., k * d:(k + 1) * d] = src[..., k * d:(k + 1) * d]
                else:
                    x[:, k] = src[:, k]
                return (x, *args[1:])

            def post(module, args, output, src=src, k=k):
                x = (output[0] if isinstance(output, tuple) else output).clone()
                x[:, k] = src[:, k]
                return (x, *output[1:]) if isinstance(output, tuple) else x

            if kind == "resid" and r < L:
                h = blocks[r].register_forward_pre_hook(pre)
            elif kind == "resid":
                h = blocks[L - 1].register_forward_hook(post)
            elif kind == "heads":
                h = proj[r].register_forward_pre_hook(pre)
            else:
                h = (attn if kind == "attn" else mlp)[r].register_forward_hook(post)
            with torch.no_grad():
                logits = _logits(model, corrupt_ids)
            h.remove()
            grid[r, k] = float(logits[answer] - logits[wrong])
    return grid


@pytest.mark.parametrize("model_id", ["builtin:tiny-gpt", "gpt2", "llama"])
@pytest.mark.parametrize("kind", ["resid", "attn", "mlp", "heads"])
def test_exact_patching_equals_hooks_on_a_copy(model_id, kind, hf_zoo):
    loaded = load_model(hf_zoo.get(model_id, model_id))
    args = prompts(model_id)
    c, clean_ids, corrupt_ids = _tokens(loaded, args)
    parts = _gpt_parts if model_id.startswith("builtin") else _hf_parts
    grid = I.patching(loaded, *args, kind)
    ref = _reference_grid(loaded.model, parts, kind, clean_ids, corrupt_ids, c.answer_id, c.wrong_id,
                          loaded.caps.patching.intervention_layout().n_heads)
    np.testing.assert_allclose(grid.values, ref, atol=TOL, rtol=0)
    assert grid.check <= TOL  # the fast path (resuming at a block) was used and reproduces the model's own numbers
    np.testing.assert_allclose(grid.restored, (ref - c.corrupted.ld) / (c.clean.ld - c.corrupted.ld), atol=1e-4)


def test_resume_equals_the_whole_run_on_smollm2_sized_llama(hf_zoo):
    """The fast path is exact on rotary GQA blocks: every row of a residual grid computed both ways."""
    loaded = load_model(hf_zoo["llama"])
    fast = I.patching(loaded, *HF, "resid")
    slow_adapter = loaded.caps.patching
    original = slow_adapter.resume_logits
    try:
        slow_adapter.resume_logits = lambda *a, **k: (_ for _ in ()).throw(NotImplementedError())
        slow = I.patching(loaded, *HF, "resid")
    finally:
        slow_adapter.resume_logits = original
    assert slow.check == float("inf")  # the replay was refused, every cell was a whole run
    np.testing.assert_allclose(fast.values, slow.values, atol=TOL)


def _recurrent_reference(net, clean_ids, corrupt_ids, state, answer, wrong):
    """Denoising h (or c) by running each layer's own nn.LSTM/GRU copy one step at a time, replacing the state."""
    rnn = net.rnn
    L, H = rnn.num_layers, rnn.hidden_size
    cls = type(rnn)

    def layer_module(layer):
        m = cls(rnn.input_size if layer == 0 else H, H, batch_first=True)
        m.load_state_dict({k.replace(f"_l{layer}", "_l0"): v for k, v in rnn.state_dict().items()
                           if k.endswith(f"_l{layer}")})
        return m

    layers = [layer_module(layer) for layer in range(L)]

    def run(ids, patch=None, source=None):
        x = net.embedding(ids)
        seen = {}
        for layer, m in enumerate(layers):
            hidden, outs = None, []
            for t in range(x.shape[1]):
                out, hidden = m(x[:, t:t + 1], hidden)
                if patch == (layer, t):
                    if state == "h":
                        h_new = source[(layer, t)]["h"]
                        hidden = (h_new, hidden[1]) if isinstance(hidden, tuple) else h_new
                        out = h_new.transpose(0, 1)
                    else:
                        hidden = (hidden[0], source[(layer, t)]["c"])
                seen[(layer, t)] = {"h": hidden[0] if isinstance(hidden, tuple) else hidden,
                                    "c": hidden[1] if isinstance(hidden, tuple) else None}
                outs.append(out)
            x = torch.cat(outs, dim=1)
        logits = net.decoder(x)[0, -1]
        return float(logits[answer] - logits[wrong]), seen

    with torch.no_grad():
        _, clean = run(clean_ids)
        return np.array([[run(corrupt_ids, (layer, t), clean)[0] for t in range(clean_ids.shape[1])]
                         for layer in range(L)])


@pytest.mark.parametrize("model_id, states", [("builtin:lstm-lm", ("h", "c")), ("builtin:gru-lm", ("h",))])
def test_recurrent_patching_equals_the_modules_stepped(model_id, states):
    loaded = load_model(model_id)
    c, clean_ids, corrupt_ids = _tokens(loaded)
    for state in states:
        grid = I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, state)
        ref = _recurrent_reference(loaded.adapter.net, clean_ids, corrupt_ids, state, c.answer_id, c.wrong_id)
        np.testing.assert_allclose(grid.values, ref, atol=TOL, rtol=0)


# ------------------------------------------------------------------------ the sanity checks of the issue
@pytest.mark.parametrize("model_id", ["builtin:tiny-gpt", "builtin:lstm-lm", "llama"])
def test_nothing_patched_is_corrupted_and_everything_at_the_input_is_clean(model_id, hf_zoo):
    loaded = load_model(hf_zoo.get(model_id, model_id))
    args = prompts(model_id)
    c, clean_ids, corrupt_ids = _tokens(loaded, args)
    adapter, layout = I._adapter(loaded)
    site = layout.site("h" if "h" in layout.kinds else "resid", 0)
    src = adapter.patched_logits(clean_ids, keep=[site]).kept[site]
    T = clean_ids.shape[1]
    nothing = Patch(site, torch.tensor([0]), torch.zeros(1, T, 1, dtype=torch.bool), src)
    everything = Patch(site, torch.tensor([0]), torch.ones(1, T, 1, dtype=torch.bool), src)
    with torch.inference_mode():
        none_ld, all_ld = (float(r.logits[0, c.answer_id] - r.logits[0, c.wrong_id]) for r in
                           (adapter.patched_logits(corrupt_ids, [nothing]), adapter.patched_logits(corrupt_ids,
                                                                                                    [everything])))
    assert none_ld == pytest.approx(c.corrupted.ld, abs=TOL)
    if "resid" in layout.kinds:  # the first residual stream is the whole input: patched everywhere, the clean run
        assert all_ld == pytest.approx(c.clean.ld, abs=TOL)
    grid = I.patching(loaded, *args, layout.kinds[0])
    differs = c.differs
    assert differs.sum() == 1  # keys/key: one token differs
    expected = differs.astype(float) if "resid" in layout.kinds else None
    if expected is not None:  # at layer 0 only the differing position restores, exactly 1
        np.testing.assert_allclose(grid.restored[0], expected, atol=1e-4)
    else:  # recurrent: h before the differing token is the same in both runs
        np.testing.assert_allclose(grid.restored[0][: int(np.argmax(differs))], 0.0, atol=1e-5)


def test_at_layer_0_only_differing_positions_restore_on_a_longer_difference():
    loaded = load_model("builtin:tiny-gpt")
    clean, corrupt = "the dog that the farmers feed", "the dogs that the farmers feed"
    c = I.contrast(loaded, clean, corrupt, "sleeps", "sleep")
    grid = I.patching(loaded, clean, corrupt, "sleeps", "sleep", "resid")
    np.testing.assert_allclose(grid.restored[0], c.differs.astype(float), atol=1e-4)
    noise = I.patching(loaded, clean, corrupt, "sleeps", "sleep", "resid", "noise")
    np.testing.assert_allclose(noise.restored[0], 1.0 - c.differs.astype(float), atol=1e-4)
    # each patched run's probabilities: at layer 0, the clean run's where the patch makes the input clean
    differs = int(np.argmax(c.differs))
    assert grid.probabilities(0, differs) == pytest.approx((c.clean.p_answer, c.clean.p_wrong), abs=1e-6)
    assert grid.probabilities(0, 0) == pytest.approx((c.corrupted.p_answer, c.corrupted.p_wrong), abs=1e-6)
    assert I.attribution(loaded, clean, corrupt, "sleeps", "sleep")["resid"].probabilities(0, 0) is None


# ------------------------------------------------------------------------ attribution patching
def _reference_attribution(model, parts, clean_ids, corrupt_ids, answer, wrong):
    """resid rows: ∂LD/∂resid_pre(l) on the corrupted run by autograd on a copy, times (clean − corrupted)."""
    model = copy.deepcopy(model)
    for p in model.parameters():
        p.requires_grad_(True)
    blocks = parts(model)[0]
    L = len(blocks)
    acts: dict = {}

    def grab(layer):
        def hook(module, args):
            acts[layer] = args[0]
            if args[0].requires_grad:
                args[0].retain_grad()
        return hook

    handles = [blocks[layer].register_forward_pre_hook(grab(layer)) for layer in range(L)]
    with torch.no_grad():
        _logits(model, clean_ids)
    clean = {k: v.detach().clone() for k, v in acts.items()}
    logits = _logits(model, corrupt_ids)
    (logits[answer] - logits[wrong]).backward()
    for h in handles:
        h.remove()
    return np.stack([((clean[layer] - acts[layer]) * acts[layer].grad).sum(-1)[0].detach().numpy()
                     for layer in range(L)])


@pytest.mark.parametrize("model_id", ["builtin:tiny-gpt", "gpt2", "llama"])
def test_attribution_is_the_gradient_times_the_difference(model_id, hf_zoo):
    loaded = load_model(hf_zoo.get(model_id, model_id))
    args = prompts(model_id)
    c, clean_ids, corrupt_ids = _tokens(loaded, args)
    parts = _gpt_parts if model_id.startswith("builtin") else _hf_parts
    est = I.attribution(loaded, *args)["resid"]
    ref = _reference_attribution(loaded.model, parts, clean_ids, corrupt_ids, c.answer_id, c.wrong_id)
    np.testing.assert_allclose(est.values[:ref.shape[0]] - c.corrupted.ld, ref, atol=1e-4, rtol=1e-4)


def test_attribution_of_recurrent_states_is_the_gradient_times_the_difference():
    loaded = load_model("builtin:lstm-lm")
    c, clean_ids, corrupt_ids = _tokens(loaded)
    w = loaded.adapter.weights
    from explorer.adapters.recurrent import unroll

    def ld(ids, grad):
        x = w.embedding[ids].detach().requires_grad_(grad)
        out, kept = unroll(w, x, (), ["rnn.0.fwd.h"])
        logits = out[:, -1] @ w.output_weight.T + w.output_bias
        return logits[0, c.answer_id] - logits[0, c.wrong_id], kept["rnn.0.fwd.h"]

    with torch.no_grad():
        _, clean = ld(clean_ids, False)
    value, corr = ld(corrupt_ids, True)
    grads = torch.autograd.grad(value, corr)
    ref = np.array([float(((clean[t] - corr[t].detach()) * grads[t]).sum()) for t in range(len(corr))])
    est = I.attribution(loaded, CLEAN, CORRUPT, ANSWER, WRONG)["h"]
    np.testing.assert_allclose(est.values[0] - c.corrupted.ld, ref, atol=1e-5)


def test_attribution_is_exact_where_the_model_is_linear_in_the_site():
    """The built-in GPT with its final norm taken out: the logits are linear in the residual stream after the last
    block and in the last MLP's output (added to it last), so the first-order estimate is exact in those rows (the
    last attention output is read by the MLP after it: not linear)."""
    base = load_model("builtin:tiny-gpt")
    model = copy.deepcopy(base.model)
    model.ln_f = torch.nn.Identity()
    loaded = LoadedModel("linear-head", "decoder", model, "cpu", "float32", base.meta, vocabs=base.vocabs)
    assert isinstance(loaded.adapter, GPTAdapter)
    est = I.attribution(loaded, CLEAN, CORRUPT, ANSWER, WRONG)
    for kind in ("resid", "mlp"):
        exact = I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, kind)
        np.testing.assert_allclose(est[kind].values[-1], exact.values[-1], atol=1e-5)
    assert not np.allclose(est["resid"].values[0], I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG).values[0],
                           atol=1e-3)  # not linear in the first layer's input: the estimate differs there


def test_agreement_reads_the_two_grids():
    loaded = load_model("builtin:tiny-gpt")
    exact = I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG)
    est = I.attribution(loaded, CLEAN, CORRUPT, ANSWER, WRONG)["resid"]
    agree = I.agreement(exact, est)
    a, b = exact.restored.ravel(), est.restored.ravel()
    assert agree.r == pytest.approx(np.corrcoef(a, b)[0, 1])
    assert agree.gap == pytest.approx(np.abs(a - b).max())


# ------------------------------------------------------------------------ ablation
@pytest.mark.parametrize("model_id", ["builtin:tiny-gpt", "llama"])
def test_ablating_a_head_is_zeroing_its_output_in_a_hook(model_id, hf_zoo):
    loaded = load_model(hf_zoo.get(model_id, model_id))
    args = prompts(model_id)
    c, clean_ids, _ = _tokens(loaded, args)
    parts = _gpt_parts if model_id.startswith("builtin") else _hf_parts
    H = loaded.caps.patching.intervention_layout().n_heads
    result = I.ablation(loaded, args[0], ("L1H1",), "zero", *args[1:])
    model = copy.deepcopy(loaded.model)
    proj = parts(model)[3][1]

    def zero(module, args):
        x = args[0].clone()
        d = x.shape[-1] // H
        x[..., d:2 * d] = 0
        return (x, *args[1:])

    proj.register_forward_pre_hook(zero)
    with torch.no_grad():
        logits = _logits(model, clean_ids).double()
    probs = torch.softmax(logits, -1)
    top = torch.topk(probs, 10)
    np.testing.assert_allclose(result.after_probs, top.values.numpy(), atol=1e-6)
    assert result.after.ld == pytest.approx(float(logits[c.answer_id] - logits[c.wrong_id]), abs=1e-5)
    assert result.before.ld == pytest.approx(c.clean.ld, abs=1e-6)


def test_mean_and_resample_ablation_of_a_recurrent_unit():
    loaded = load_model("builtin:lstm-lm")
    c, clean_ids, corrupt_ids = _tokens(loaded)
    w = loaded.adapter.weights
    from explorer.adapters.recurrent import unroll
    with torch.no_grad():
        x = w.embedding[torch.cat([clean_ids, corrupt_ids])]
        _, kept = unroll(w, x, (), ["rnn.0.fwd.h"])
        h = torch.stack(kept["rnn.0.fwd.h"], dim=1)                       # (2, T, H)
    for how, value in (("mean", h[:, :, 5].mean()), ("resample", None)):
        result = I.ablation(loaded, CLEAN, ("L0U5",), how, CORRUPT, ANSWER, WRONG)
        T = clean_ids.shape[1]
        fill = torch.full((1, T, 1), float(value)) if value is not None else h[1:2, :, 5:6]
        mask = torch.zeros(1, T, h.shape[-1], dtype=torch.bool)
        mask[..., 5] = True
        patch = Patch("rnn.0.fwd.h", torch.tensor([0]), mask, fill.expand(1, T, h.shape[-1]))
        with torch.no_grad():
            out, _ = unroll(w, w.embedding[clean_ids], [patch])
            logits = (out[:, -1] @ w.output_weight.T + w.output_bias)[0]
        assert result.after.ld == pytest.approx(float(logits[c.answer_id] - logits[c.wrong_id]), abs=1e-5)


def test_bad_requests_are_messages():
    loaded = load_model("builtin:tiny-gpt")
    with pytest.raises(I.InterventionError, match="same number of tokens"):
        I.contrast(loaded, CLEAN, "the key to the old cabinet", ANSWER, WRONG)
    with pytest.raises(I.InterventionError, match="same token"):
        I.contrast(loaded, CLEAN, CORRUPT, "are", "are")
    with pytest.raises(I.InterventionError, match="not in builtin:tiny-gpt's vocabulary"):
        I.contrast(loaded, CLEAN, CORRUPT, "zzzqx", WRONG)
    with pytest.raises(I.InterventionError, match="no hidden state h"):
        I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, "h")
    with pytest.raises(I.InterventionError, match="heads per layer"):
        I.ablation(loaded, CLEAN, ("L0H99",))
    with pytest.raises(I.InterventionError, match="not a component"):
        I.ablation(loaded, CLEAN, ("drop table",))
    with pytest.raises(I.InterventionError, match="cannot be patched"):
        I.contrast(load_model("builtin:masked-lm"), CLEAN, CORRUPT, ANSWER, WRONG)
    long = " ".join(["the"] * (I.MAX_TOKENS + 5))
    c = I.contrast(loaded, long, long.replace("the", "a", 1), ANSWER, WRONG)
    assert len(c.ids) == I.MAX_TOKENS and any("are used (this view's limit)" in n for n in c.notes)


def test_the_hooks_act_only_inside_a_scope_of_the_calling_thread():
    """While one thread patches the shared model, another thread's plain run of the same model is untouched, and
    nothing stays on the model afterwards."""
    loaded = load_model("builtin:tiny-gpt")
    ids = torch.tensor([_ids(loaded, CLEAN)])
    with torch.no_grad():
        plain = loaded.model(ids)[0, -1].clone()
    hooks = {name: len(m._forward_hooks) + len(m._forward_pre_hooks) for name, m in loaded.model.named_modules()}
    results, go = [], threading.Event()

    def patcher():
        zero = Patch("blocks.0.resid_pre", torch.tensor([0]), torch.ones(1, ids.shape[1], 1, dtype=torch.bool),
                     torch.zeros(1, ids.shape[1], loaded.model.config.n_embd))
        from explorer.adapters.interventions import scope
        with scope([zero]), torch.no_grad():
            go.set()
            for _ in range(20):
                results.append(("patched", loaded.model(ids)[0, -1].clone()))

    t = threading.Thread(target=patcher)
    t.start()
    go.wait()
    with torch.no_grad():
        for _ in range(20):
            results.append(("plain", loaded.model(ids)[0, -1].clone()))
    t.join()
    for kind, logits in results:
        assert torch.equal(logits, plain) is (kind == "plain")
    assert hooks == {name: len(m._forward_hooks) + len(m._forward_pre_hooks)
                     for name, m in loaded.model.named_modules()}


def test_a_two_layer_lstm_patches_each_layer_as_the_modules_stepped():
    """A recurrent LM of two layers (a user's checkpoint shape): each layer's h and c grid equals the modules run one
    word at a time with that state replaced."""
    from explorer.models.rnn_lm import RNNLanguageModel

    base = load_model("builtin:lstm-lm")
    vocab = base.vocabs["vocab"]
    torch.manual_seed(0)
    net = RNNLanguageModel(len(vocab), 16, 24, num_layers=2, cell="lstm").eval()
    loaded = LoadedModel("two-layers", "rnn-lm", net, "cpu", "float32", vocabs={"vocab": vocab})
    assert loaded.adapter.intervention_layout().n_layers == 2
    c, clean_ids, corrupt_ids = _tokens(loaded)
    for state in ("h", "c"):
        grid = I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, state)
        ref = _recurrent_reference(net, clean_ids, corrupt_ids, state, c.answer_id, c.wrong_id)
        assert grid.values.shape == (2, clean_ids.shape[1])
        np.testing.assert_allclose(grid.values, ref, atol=TOL, rtol=0)


@pytest.mark.parametrize("kind", ["resid", "heads"])
def test_the_grid_so_far_fills_in_exact_rows_over_attribution_patchings_estimate(kind):
    """While exact patching runs, progress hands over the grid so far: its first r rows equal the final grid's,
    the others are not computed (NaN); fill_in shows the estimate there, and the exact rows where they are done."""
    loaded = load_model("builtin:tiny-gpt")
    seen = []
    exact = I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, kind,
                       progress=lambda fraction, what, grid=None: seen.append((fraction, grid)))
    estimate = I.attribution(loaded, CLEAN, CORRUPT, ANSWER, WRONG)[kind]
    R = len(exact.rows)
    grids = [(f, g) for f, g in seen if g is not None]
    assert [I.rows_done(g) for _, g in grids] == list(range(R)) and [f for f, _ in grids] == [r / R for r in range(R)]
    for r, (_, grid) in enumerate(grids):
        np.testing.assert_array_equal(grid.values[:r], exact.values[:r])
        assert np.isnan(grid.values[r:]).all() and grid.cols == exact.cols and grid.rows == exact.rows
        shown = I.fill_in(grid, estimate)
        np.testing.assert_array_equal(shown.restored[:r], exact.restored[:r])
        np.testing.assert_array_equal(shown.restored[r:], estimate.restored[r:])
        assert shown.method == "exact so far"


def test_a_grid_priced_over_the_budget_is_refused_with_the_setting_named(monkeypatch):
    """Exact patching is priced before any patched run (rows × cells of the prompt's tokens, resumed at each row's
    layer); over the budget for work refined in place it is refused with a message naming the grid, the limit and
    its setting, and what to do; the page shows it as a warning."""
    from explorer.runtime import budget

    loaded = load_model("builtin:tiny-gpt")
    shape = budget.shape_of(loaded.model)
    small, large = I.price(shape, 5, 3, 5, True), I.price(shape, 10, 3, 10, True)
    assert small.streamed and large.seconds > small.seconds and large.bytes > small.bytes  # cells × tokens
    assert I.price(shape, 5, 3, 5, False).seconds > small.seconds  # whole runs cost more than resumed ones
    monkeypatch.setenv("EXPLORER_STREAMED_SECONDS", "1e-6")
    with pytest.raises(budget.RequestOverBudget) as err:
        I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, "resid")
    said, T = str(err.value), len(I.contrast(loaded, CLEAN, CORRUPT, ANSWER, WRONG).tokens)
    assert said.startswith(f"Patching every cell of the residual stream (3 × {T} runs of {T} tokens) would take")
    assert "EXPLORER_STREAMED_SECONDS" in said and "attribution patching" in said
    from conftest import run_page
    from explorer.ui import cache

    cache.results().clear()  # the default grid may be kept from another test: this page must compute it
    at = run_page("app_pages/interventions.py", {"model": "builtin:tiny-gpt"})
    assert any("EXPLORER\\_STREAMED\\_SECONDS" in w.value for w in at.warning), [w.value for w in at.warning]
    monkeypatch.delenv("EXPLORER_STREAMED_SECONDS")
    assert I.patching(loaded, CLEAN, CORRUPT, ANSWER, WRONG, "resid").runs == 3 * T
