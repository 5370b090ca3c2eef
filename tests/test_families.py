"""Every Hugging Face family, loaded from a folder as a user's model is, in every view that applies to it: each ✓
is checked here against the model's own outputs (attentions, hidden states, embeddings, generate), each — is a
view saying why it does not apply. The compatibility table of docs/models.md is this test's output (it fails when
they differ, and writes artifacts/compatibility.md to paste)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.loading.catalogue import ROOT
from explorer.adapters.generation import DecodingError, Strategy
from explorer.text.escape import md_unescape
from explorer.loading.loaders import load_model
from explorer.probes import decoding_strategies as D
from explorer.probes import word_embeddings as E
from explorer.probes import contextual_embeddings as CE
from explorer.probes.positional_encodings import model_positions
from explorer.probes.self_attention import attention_trace, step_by_step
from explorer.probes.seq2seq import Seq2SeqError, alignment_trace
from families import FAMILIES, save, tiny

TEXT = "the red car is fast ."
TARGET = "la voiture rouge est rapide ."
COLUMNS = ("Self-attention", "Q·K arithmetic", "Cross-attention", "Positions", "Word embeddings", "Contextual",
           "Decoding", "Interventions")
TOL = 1e-5


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    for name in FAMILIES:
        save(root, name)
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: the monkeypatch fixture is per test
        mp.setenv("EXPLORER_MODEL_PATH", str(root))
        yield root


def _run(model, ids, target=None, **flags):
    kw = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    if target is not None:
        kw["decoder_input_ids"] = torch.tensor([target])
    with torch.inference_mode():
        return model(**kw, **flags, return_dict=True)


def _cells(name: str) -> dict[str, str]:
    """One row of the table, each ✓ asserted against the model's own numbers."""
    lm = load_model(f"local:tiny-{name}")
    model, _, _ = tiny(name)  # the same weights, never switched from "eager": the independent reference
    adapter, two = lm.adapter, lm.family == "encoder-decoder"
    assert model.config._attn_implementation == "eager" and torch.equal(
        model.get_input_embeddings().weight, lm.model.get_input_embeddings().weight)
    ids = list(adapter.encode(TEXT).ids)
    target = [*adapter.decoder_start, *adapter.encode(TARGET, side="target").ids[:-1]] if two else None
    row: dict[str, str] = {}

    tr = attention_trace(lm, TEXT, TARGET if two else "", "encoder" if two else "")
    own = _run(model, ids, target, output_attentions=True)
    ref = own.encoder_attentions if two else own.attentions
    np.testing.assert_allclose(tr.attentions, torch.stack([a[0] for a in ref]).numpy(), atol=TOL)
    row["Self-attention"] = "✓"
    if tr.has_arithmetic:
        L, H = tr.attentions.shape[:2]
        steps = step_by_step(tr, L - 1, H - 1, len(tr.tokens) - 1)
        assert tr.check_error < 1e-4 and steps.max_error < 1e-4
        row["Q·K arithmetic"] = "✓" + (" GQA" if steps.kv_groups > 1 else "") + (" RoPE" if steps.angles is not None
                                                                                  else "") + \
            (" + bias" if steps.bias is not None else "")
    else:
        assert tr.arithmetic_note
        row["Q·K arithmetic"] = "— probabilities only"

    if two:
        al = alignment_trace(lm, TEXT, TARGET)
        cross = _run(model, ids, [*adapter.decoder_start, *al.out_ids[:-1]], output_attentions=True).cross_attentions
        np.testing.assert_allclose(al.weights, torch.stack([a[0] for a in cross]).numpy(), atol=TOL)
        row["Cross-attention"] = "✓"
    else:
        with pytest.raises(Seq2SeqError, match="not an encoder"):
            alignment_trace(lm, TEXT, TARGET)
        row["Cross-attention"] = "— not an encoder–decoder"

    mp = model_positions(lm, TEXT)
    if mp.kind == "rotary":  # θ_i read from the model's cos/sin equal base^(−2i/r), the config's θ
        r = 2 * len(mp.inv_freq)
        theta = float(dict(mp.rows)["θ (rope_theta)"])
        np.testing.assert_allclose(mp.inv_freq, theta ** (-np.arange(0, r, 2) / r), rtol=1e-5)
        if adapter.recorded:  # the demonstration on the model's own q and k
            assert mp.spread < 1e-4 * max(1.0, float(np.abs(mp.scores).max()))
        else:
            assert mp.scores is None and mp.notes == (adapter.arithmetic_note,)
    elif mp.kind == "alibi":
        H = len(mp.slopes)
        np.testing.assert_allclose(mp.slopes, [2 ** (-8 * (h + 1) / H) for h in range(H)], rtol=1e-6)
    elif mp.kind == "relative":
        module = next(m for m in model.modules() if getattr(m, "has_relative_attention_bias", False))
        n = (len(mp.offsets) + 1) // 2
        np.testing.assert_allclose(mp.bias[:, n - 1], module.compute_bias(n, n)[0, :, 0, 0].detach().numpy(), atol=TOL)
    elif mp.kind in ("learned", "sinusoidal"):  # the row of position 0, as each family's code counts
        offset = {"opt": 2, "bart": 2, "mbart": 2, "roberta": 1}.get(name, 0)
        assert lm.caps.positions.position_table().offset == offset
    row["Positions"] = "✓ " + mp.kind if mp.kind != "none" else "—"

    table = E.embedding_table(lm)
    np.testing.assert_allclose(table.vectors, model.get_input_embeddings().weight.detach().numpy(), atol=0)
    row["Word embeddings"] = "✓"

    ctx = CE.contextual(lm, TEXT)
    hidden = _run(model, ids, target, output_hidden_states=True)
    last = (hidden.encoder_last_hidden_state if two else hidden.hidden_states[-1])[0]
    np.testing.assert_allclose(ctx.states[-1], last.numpy(), atol=TOL)
    row["Contextual"] = "✓"

    try:
        run = D.decode_all(lm, TEXT, (Strategy("greedy"),), 0, 5, stop_at_eos=False)
    except DecodingError as exc:
        assert "head" in str(exc) or "generate" in str(exc)
        row["Decoding"] = "— no language-model head"
    else:
        with torch.inference_mode():
            out = model.generate(torch.tensor([list(run.prompt_ids)]), max_new_tokens=5, min_new_tokens=5,
                                 do_sample=False, eos_token_id=None, pad_token_id=0,
                                 attention_mask=torch.ones(1, len(run.prompt_ids), dtype=torch.long))[0].tolist()
        generated = out[len(adapter.decoder_start):] if two else out[len(run.prompt_ids):]
        assert list(run.generations[0].outputs[0].ids) == generated, (name, generated)
        row["Decoding"] = "✓"
    row["Interventions"] = _interventions(lm, model)
    return row


def _interventions(lm, model) -> str:
    """The residual-stream grid of the interventions view against forward hooks on the family's own model (each
    block's input replaced at one position, a whole forward per cell), and the sites the view found."""
    from explorer.probes import interventions as I

    try:
        layout = I.layout(lm)
    except I.InterventionError:
        assert lm.family != "decoder" or not lm.adapter.can_generate
        return "— not a decoder"
    ids = list(lm.tokenizer.convert_tokens_to_ids(TEXT.split()))  # the words' ids (whatever the pre-tokenizer)
    corrupt, (answer, wrong) = [ids[0], ids[1] + 1, *ids[2:]], ids[-2:]  # one token changed; two continuations
    c = I.contrast_of_ids(lm, ids, corrupt, answer, wrong)
    grid = I.patch_grid(lm, c, "resid")
    n = model.config.num_hidden_layers
    blocks = next(m for _, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n)
    clean = torch.tensor([list(c.ids)])
    seen: dict[int, torch.Tensor] = {}
    hooks = [b.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(i, a[0].detach().clone()) if a else None)
             for i, b in enumerate(blocks)]
    _run(model, list(c.ids))
    for h in hooks:
        h.remove()
    for layer in range(n):
        for t in range(clean.shape[1]):
            def patch(m, args, kwargs, layer=layer, t=t):
                if not args:
                    return None
                x = args[0].clone()
                x[:, t] = seen[layer][:, t]
                return (x, *args[1:]), kwargs
            h = blocks[layer].register_forward_pre_hook(patch, with_kwargs=True)
            logits = _run(model, list(c.corrupt_ids)).logits[0, -1]
            h.remove()
            assert float(logits[c.answer_id] - logits[c.wrong_id]) == pytest.approx(grid.values[layer, t], abs=TOL)
    return "✓ " + " ".join(k for k in layout.kinds)


def table(rows: dict[str, dict[str, str]]) -> str:
    head = "| family | " + " | ".join(COLUMNS) + " |\n|---|" + "---|" * len(COLUMNS) + "\n"
    return head + "".join(f"| {FAMILIES[n][0]} | " + " | ".join(r[c] for c in COLUMNS) + " |\n"
                          for n, r in rows.items())


def test_every_family_in_every_view_and_the_docs_table(zoo):
    rows = {name: _cells(name) for name in FAMILIES}
    text = table(rows)
    out = Path(ROOT) / "artifacts" / "compatibility.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text, encoding="utf-8")
    assert text in (Path(ROOT) / "docs" / "models.md").read_text(encoding="utf-8"), \
        f"docs/models.md's compatibility table differs from this run's: paste {out}"


def test_modern_attention_arithmetic_from_the_weights(zoo):
    """Independent of the attention interface: Llama's q recomputed from its weights (input RMSNorm, q_proj, our own
    rotate_half RoPE with θ = rope_theta) equals the recorded q; BLOOM's bias is slope_h · j with the ALiBi slopes
    2^(−8(h+1)/H); T5's bias is its relative_attention_bias through its bucketing; GQA maps query head h to key/value
    head h // (H / H_kv)."""
    llama = load_model("local:tiny-llama")
    tr = attention_trace(llama, TEXT)
    m = llama.model.model
    ids = torch.tensor([list(llama.adapter.encode(TEXT).ids)])
    H, d, T = 4, 8, ids.shape[1]
    with torch.inference_mode():
        x = m.layers[0].input_layernorm(m.embed_tokens(ids))
        q = m.layers[0].self_attn.q_proj(x).view(1, T, H, d).transpose(1, 2)[0].double()
    theta = torch.tensor(10000.0, dtype=torch.float64) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * torch.cat([theta, theta])[None]
    rotated = q * angle.cos() + torch.cat([-q[..., d // 2:], q[..., :d // 2]], -1) * angle.sin()
    np.testing.assert_allclose(tr.q[0], rotated.numpy(), atol=1e-5)
    assert tr.kv_head[0].tolist() == [0, 0, 1, 1] and np.array_equal(tr.k[0, 0], tr.k[0, 1])
    steps = step_by_step(tr, 0, 3, T - 1)
    assert steps.kv_head == 1 and steps.kv_groups == 2 and steps.rope_error < 1e-5 and steps.max_error < 1e-4

    bloom = attention_trace(load_model("local:tiny-bloom"), TEXT)
    T = len(bloom.tokens)
    slopes = np.array([2 ** (-8 * (h + 1) / 4) for h in range(4)])
    np.testing.assert_allclose(bloom.bias[1], np.broadcast_to(slopes[:, None, None] * np.arange(T), (4, T, T)),
                               rtol=1e-6)
    assert step_by_step(bloom, 1, 2, T - 1).max_error < 1e-4

    t5 = load_model("local:tiny-t5")
    enc = attention_trace(t5, TEXT, TARGET, "encoder")
    S = len(enc.tokens)
    module = t5.model.encoder.block[0].layer[0].SelfAttention
    with torch.inference_mode():
        np.testing.assert_allclose(enc.bias[0], module.compute_bias(S, S)[0].numpy(), atol=1e-6)
    assert enc.scales == (1.0, 1.0) and step_by_step(enc, 1, 0, 2).max_error < 1e-4


@pytest.mark.parametrize("name", ["llama", "t5", "bloom"])
def test_the_step_by_step_view_shows_the_modern_terms(zoo, name):
    """The page's step view: the recomputed softmax equals the model's (printed), GQA and RoPE explained with the
    rotation table for Llama, T5's and BLOOM's bias as its own column."""
    from conftest import assert_no_exception, run_page

    params = {"model": f"local:tiny-{name}", "mode": "steps", "text": TEXT}
    if name == "t5":
        params.update(stream="encoder", pair=TARGET)
    at = run_page("app_pages/self_attention.py", params)
    assert_no_exception(at)
    text = " ".join(md_unescape(m.value) for m in at.markdown)
    assert "equals the model's attention to" in text
    columns = [list(df.value.columns) for df in at.dataframe]
    if name == "llama":
        assert "Grouped-query attention" in text and "Rotary positions" in text
        assert any("q before" in c for c in columns)
    else:
        assert any("+ bias" in c for c in columns) and "b_ij is the model's" in text


@pytest.mark.parametrize("name,kind", [("llama", "rotary"), ("bloom", "alibi"), ("t5", "relative"),
                                       ("bart", "learned")])
def test_the_positional_view_shows_the_models_own_scheme(zoo, name, kind):
    """“The model's positions” reads the scheme from the model: its table, or its rotary θ and pairing with a
    demonstration on its own q and k, its ALiBi slopes or its relative bias, each under a Model badge."""
    from conftest import assert_no_exception, run_page

    at = run_page("app_pages/positional_encodings.py",
                  {"panel": "learned", "model": f"local:tiny-{name}", "text": TEXT})
    assert_no_exception(at)
    assert any(kind.split()[0] in str(m.value).lower() or {"rotary": "rope", "alibi": "alibi",
               "relative": "relative", "learned": "learned"}[kind] in str(m.value).lower() for m in at.markdown)
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    want = {"rotary": "depends only on the offset", "alibi": "ALiBi", "relative": "Relative position bias",
            "learned": "position × dimension"}[kind]
    assert any(want in t for t in titles), titles
    if kind == "rotary":
        assert any("the lines differ by at most" in str(c.value) for c in at.caption)
