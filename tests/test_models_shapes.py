"""Shape and invariant tests of the built-in architectures (tiny random models, fast)."""
from __future__ import annotations

import math

import pytest
import torch

from explorer.adapters import generation as G
from explorer.adapters.seq2seq_rnn import Seq2SeqAdapter
from explorer.adapters.generation import Strategy
from explorer.models.build import ARCHITECTURES, build_model
from explorer.models.seq2seq import ATTENTIONS, BahdanauAttention, LuongAttention, masked_softmax
from explorer.models.tiny_gpt import sinusoidal_positions
from explorer.models.word2vec import keep_probability, noise_distribution, skipgram_pairs

torch.set_num_threads(1)  # tiny models: 1 thread is fastest, above all on a shared CPU


def _seq2seq(attention: str, seed: int = 0):
    torch.manual_seed(seed)
    return build_model("seq2seq", dict(src_vocab_size=20, tgt_vocab_size=25, emb_dim=8, hidden_size=16,
                                       attention=attention)).eval()


def _src():
    src = torch.randint(4, 20, (3, 7), generator=torch.Generator().manual_seed(1))
    src[1, 5:] = 0
    src[2, 3:] = 0
    return src


# ------------------------------------------------------------------ rnn_lm
@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_rnn_lm_shapes(cell):
    m = build_model("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=12, num_layers=2, cell=cell))
    logits, hidden = m(torch.randint(0, 30, (4, 6)))
    assert logits.shape == (4, 6, 30)
    h = hidden[0] if cell == "lstm" else hidden
    assert h.shape == (2, 4, 12)
    assert type(m.rnn).__name__ == {"rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}[cell]
    assert m.rnn.batch_first and hasattr(m.rnn, "weight_ih_l0") and hasattr(m.rnn, "weight_hh_l1")


def test_rnn_lm_state_carries_over():
    torch.manual_seed(0)
    m = build_model("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=12, cell="lstm")).eval()
    ids = torch.randint(0, 30, (2, 8))
    full, _ = m(ids)
    a, h = m(ids[:, :5])
    b, _ = m(ids[:, 5:], h)
    assert torch.allclose(full, torch.cat([a, b], 1), atol=1e-6)


def test_rnn_lm_tied_weights():
    m = build_model("rnn_lm", dict(vocab_size=30, emb_dim=12, hidden_size=12, cell="gru", tie_weights=True))
    assert m.decoder.weight is m.embedding.weight


# ------------------------------------------------------------------ tiny_gpt
@pytest.mark.parametrize("norm,positions", [("pre", "learned"), ("post", "sinusoidal")])
def test_gpt_shapes_and_attention(norm, positions):
    torch.manual_seed(0)
    m = build_model("tiny_gpt", dict(vocab_size=40, block_size=16, n_layer=2, n_head=4, n_embd=32, norm=norm,
                                     positions=positions)).eval()
    idx = torch.randint(0, 40, (2, 10))
    rec: dict = {}
    logits = m(idx, record=rec)
    atts = [rec[f"blocks.{layer}.attn.pattern"] for layer in range(2)]
    assert logits.shape == (2, 10, 40)
    assert torch.allclose(m.lm_head(rec["ln_final"]), logits) and rec["embed"].shape == (2, 10, 32)
    for a in atts:
        assert a.shape == (2, 4, 10, 10)
        assert torch.allclose(a.sum(-1), torch.ones(2, 4, 10), atol=1e-5)
        assert torch.equal(torch.triu(a, diagonal=1), torch.zeros_like(a))  # exactly 0 above the diagonal
    assert torch.equal(m(idx), logits)
    # causal: changing a later token leaves earlier logits unchanged
    idx2 = idx.clone()
    idx2[:, -1] = (idx2[:, -1] + 1) % 40
    assert torch.allclose(m(idx2)[:, :-1], logits[:, :-1], atol=1e-6)


def test_gpt_module_names_follow_nanogpt():
    m = build_model("tiny_gpt", dict(vocab_size=40, block_size=8, n_layer=1, n_head=2, n_embd=16))
    names = dict(m.named_parameters())
    for key in ["wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                "h.0.ln_2.weight", "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight", "ln_f.weight", "lm_head.weight"]:
        assert key in names, key
    assert names["h.0.attn.c_attn.weight"].shape == (48, 16)


def test_gpt_rejects_too_long_input():
    m = build_model("tiny_gpt", dict(vocab_size=10, block_size=4, n_layer=1, n_head=1, n_embd=8))
    with pytest.raises(ValueError):
        m(torch.zeros(1, 5, dtype=torch.long))


def test_sinusoidal_positions_formula():
    pe = sinusoidal_positions(50, 16)
    assert pe.shape == (50, 16)
    for pos in (0, 3, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)
    assert sinusoidal_positions(3, 5).shape == (3, 5)  # odd d_model works
    m = build_model("tiny_gpt", dict(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=16,
                                     positions="sinusoidal"))
    assert "wpe" not in dict(m.named_parameters())
    assert torch.allclose(m.position_embeddings(8), sinusoidal_positions(8, 16))


# ------------------------------------------------------------------ seq2seq
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_seq2seq_forward_shapes_and_attention_rows(attention):
    m = _seq2seq(attention)
    src = _src()
    tgt_in = torch.randint(4, 25, (3, 5))
    logits, atts = m(src, tgt_in)
    assert logits.shape == (3, 5, 25) and atts.shape == (3, 5, 7)
    if attention == "none":
        assert torch.count_nonzero(atts) == 0
    else:
        assert torch.allclose(atts.sum(-1), torch.ones(3, 5), atol=1e-5)
        assert torch.count_nonzero(atts[1, :, 5:]) == 0 and torch.count_nonzero(atts[2, :, 3:]) == 0


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_seq2seq_forward_equals_decode_steps(attention):
    m = _seq2seq(attention)
    src, tgt_in = _src(), torch.randint(4, 25, (3, 5))
    logits, atts = m(src, tgt_in)
    mask = m.make_src_mask(src)
    enc, state = m.encode(src, mask)
    assert enc.shape == (3, 7, 16) and state.shape == (1, 3, 16)
    for t in range(5):
        step = m.decode_step(tgt_in[:, t], state, enc, mask)
        state = step.state
        assert step.logits.shape == (3, 25)
        assert torch.allclose(step.logits, logits[:, t], atol=1e-5)
        if attention == "none":
            assert step.attention is None and step.scores is None and step.context.shape == (3, 16)
        else:
            assert torch.allclose(step.attention, atts[:, t], atol=1e-6)
            assert step.scores.shape == (3, 7) and step.context.shape == (3, 16)
            assert torch.allclose(masked_softmax(step.scores, mask), step.attention, atol=1e-6)


def test_encoder_state_ignores_padding():
    m = _seq2seq("none")
    src = torch.tensor([[5, 6, 7]])
    padded = torch.tensor([[5, 6, 7, 0, 0]])
    _, s1 = m.encode(src)
    _, s2 = m.encode(padded)
    assert torch.allclose(s1, s2, atol=1e-6)


def _greedy_and_beam1(m, row: torch.Tensor, max_len: int = 12) -> tuple[list[int], list[int]]:
    """Greedy and 1-beam outputs of the one generation loop (explorer.adapters.generation) for one source row."""
    adapter = Seq2SeqAdapter.of(m)
    src, start = row[row != 0][None], torch.tensor([[m.bos_id]])
    g = G.sample(adapter, src, start, Strategy("greedy"), max_len)[0][0]
    b = G.beam_search(adapter, src, start, Strategy("beam", num_beams=1), max_len)[0]
    return g, b


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_beam_size_one_equals_greedy(attention):
    m = _seq2seq(attention, seed=3)
    rows = _src()
    for row in rows:
        g, b = _greedy_and_beam1(m, row)
        assert b == g
    # a padded batch of sources decodes each row as it decodes alone (the training evaluation's greedy)
    batch = G.greedy_batch(Seq2SeqAdapter.of(m), [r[r != 0].tolist() for r in rows], 12)
    assert batch == [[t for t in _greedy_and_beam1(m, r)[0] if t != m.eos_id] for r in rows]


def test_beam_search_records_steps():
    m = _seq2seq("bahdanau", seed=4)
    adapter = Seq2SeqAdapter.of(m)
    ids, logps, tree = G.beam_search(adapter, torch.tensor([[5, 6, 7, 8]]), torch.tensor([[m.bos_id]]),
                                     Strategy("beam", num_beams=3), 8)
    S = tree.token.shape[0]
    assert 1 <= S <= 8 and tree.token.shape == tree.parent.shape == tree.score.shape == (S, 6)
    assert tree.running.shape == (S, 3) and len(tree.token_str) == S
    for s in range(S):  # candidates ranked by accumulated log-probability; running beams are among them
        assert list(tree.score[s]) == sorted(tree.score[s], reverse=True)
        assert set(tree.running[s].tolist()) <= set(range(6))
    assert (tree.parent[0] == 0).all()  # the first step extends the single start hypothesis
    assert len(logps) == len(ids) and all(lp <= 0 for lp in logps)


def test_attention_modules_param_names():
    b = BahdanauAttention(8)
    assert {n.split(".")[0] for n, _ in b.named_parameters()} == {"W_a", "U_a", "v_a"}
    assert {n.split(".")[0] for n, _ in LuongAttention("general", 8).named_parameters()} == {"W_a"}
    assert {n.split(".")[0] for n, _ in LuongAttention("concat", 8).named_parameters()} == {"W_a", "v_a"}
    assert list(LuongAttention("dot", 8).parameters()) == []
    s, h = torch.randn(2, 8), torch.randn(2, 5, 8)
    alpha, ctx, scores = LuongAttention("dot", 8)(s, h, None)
    assert torch.allclose(scores, torch.einsum("bh,bsh->bs", s, h), atol=1e-5)
    assert torch.allclose(ctx, torch.einsum("bs,bsh->bh", alpha, h), atol=1e-5)


# ------------------------------------------------------------------ word2vec
def test_skipgram_loss_and_helpers():
    torch.manual_seed(0)
    m = build_model("word2vec", dict(vocab_size=30, dim=8))
    loss = m(torch.tensor([4, 5]), torch.tensor([6, 7]), torch.randint(4, 30, (2, 5)))
    assert loss.dim() == 0
    assert math.isclose(loss.item(), 6 * math.log(2), rel_tol=1e-5)  # out_embed starts at 0: sigma(0) = 1/2
    p = noise_distribution([0, 0, 0, 0, 16, 1])
    assert p[:4].sum() == 0 and math.isclose(p.sum().item(), 1, rel_tol=1e-6)
    assert math.isclose((p[4] / p[5]).item(), 16 ** 0.75, rel_tol=1e-5)
    keep = keep_probability([0, 1000, 1], t=1e-3)
    assert keep[1] < 1 and keep[2] == 1
    pairs = skipgram_pairs([[4, 5, 6]], window=1, dynamic_window=False)
    assert sorted(map(tuple, pairs.tolist())) == [(4, 5), (5, 4), (5, 6), (6, 5)]
    assert [n for n, _ in m.nearest(4, k=3)] != [4]


# ------------------------------------------------------------------ build_model validation
@pytest.mark.parametrize("arch,config,match", [
    ("nope", {}, "unknown architecture"),
    ("rnn_lm", dict(vocab_size=30, emb_dim=8), "hidden_size"),
    ("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=10_000), "hidden_size"),
    ("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=8, num_layers=7), "num_layers"),
    ("rnn_lm", dict(vocab_size=10**7, emb_dim=8, hidden_size=8), "vocab_size"),
    ("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=8, cell="transformer"), "cell"),
    ("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=8, bogus=1), "unknown config keys"),
    ("rnn_lm", dict(vocab_size="30", emb_dim=8, hidden_size=8), "integer"),
    ("rnn_lm", dict(vocab_size=30, emb_dim=8, hidden_size=16, tie_weights=True), "tie_weights"),
    ("tiny_gpt", dict(vocab_size=30, block_size=8, n_layer=1, n_head=3, n_embd=16), "divisible"),
    ("tiny_gpt", dict(vocab_size=30, block_size=8, n_layer=1, n_head=2, n_embd=16, norm="middle"), "norm"),
    ("tiny_gpt", dict(vocab_size=30, block_size=10**6, n_layer=1, n_head=2, n_embd=16), "block_size"),
    ("seq2seq", dict(src_vocab_size=30, tgt_vocab_size=30, emb_dim=8, hidden_size=8, attention="magic"), "attention"),
    ("word2vec", dict(vocab_size=30, dim=-1), "dim"),
    ("word2vec", [1, 2], "dict"),
])
def test_build_model_rejects_bad_configs(arch, config, match):
    with pytest.raises(ValueError, match=match):
        build_model(arch, config)


def test_architectures_registry():
    assert set(ARCHITECTURES) == {"masked_lm", "rnn_lm", "seq2seq", "tiny_gpt", "word2vec", "rnn_classifier"}


@pytest.mark.parametrize("attention", ["none", "bahdanau", "luong-general"])
def test_bidirectional_encoder(attention):
    torch.manual_seed(0)
    m = build_model("seq2seq", dict(src_vocab_size=20, tgt_vocab_size=25, emb_dim=8, hidden_size=16,
                                    attention=attention, bidirectional=True)).eval()
    src, tgt_in = _src(), torch.randint(4, 25, (3, 5))
    mask = m.make_src_mask(src)
    enc, state = m.encode(src, mask)
    assert enc.shape == (3, 7, 16) and state.shape == (1, 3, 16)
    assert torch.allclose(m._fixed_context(enc, mask), state[-1], atol=1e-6)  # [fwd final; bwd final]
    logits, atts = m(src, tgt_in)
    for t in range(5):
        step = m.decode_step(tgt_in[:, t], state, enc, mask)
        state = step.state
        assert torch.allclose(step.logits, logits[:, t], atol=1e-5)
    g, b = _greedy_and_beam1(m, src[2, :3], 8)
    assert b == g
    with pytest.raises(ValueError, match="even"):
        build_model("seq2seq", dict(src_vocab_size=20, tgt_vocab_size=25, emb_dim=8, hidden_size=15,
                                    attention=attention, bidirectional=True))


@pytest.mark.parametrize("kind", ["luong-dot", "luong-general", "luong-concat"])
def test_luong_input_feeding(kind):
    torch.manual_seed(0)
    m = build_model("seq2seq", dict(src_vocab_size=20, tgt_vocab_size=25, emb_dim=8, hidden_size=16,
                                    attention=kind, input_feeding=True)).eval()
    assert m.decoder.input_size == 8 + 16
    src, tgt_in = _src(), torch.randint(4, 25, (3, 5))
    logits, atts = m(src, tgt_in)
    assert torch.allclose(atts.sum(-1), torch.ones(3, 5), atol=1e-5)
    mask = m.make_src_mask(src)
    enc, state = m.encode(src, mask)
    assert isinstance(state, tuple) and state[1].shape == (3, 16) and not state[1].any()
    for t in range(5):
        step = m.decode_step(tgt_in[:, t], state, enc, mask)
        state = step.state
        assert torch.allclose(step.logits, logits[:, t], atol=1e-5)
        assert torch.allclose(step.attention, atts[:, t], atol=1e-6)
    for row in src:
        g, b = _greedy_and_beam1(m, row, 8)
        assert b == g
    with pytest.raises(ValueError, match="Luong"):
        build_model("seq2seq", dict(src_vocab_size=20, tgt_vocab_size=25, emb_dim=8, hidden_size=16,
                                    attention="bahdanau", input_feeding=True))


def test_the_masked_lm_reads_the_chosen_positions_only_with_the_same_logits() -> None:
    """Training computes the output layer at the masked positions only (`at`): the same logits as at every position,
    read there, and the same loss."""
    import torch.nn.functional as F

    from explorer.models.masked_lm import MaskedLM, MaskedLMConfig
    from explorer.training.corpus import PAD
    from explorer.training.tasks import mask_tokens

    torch.manual_seed(0)
    model = MaskedLM(MaskedLMConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=16)).eval()
    ids = torch.randint(5, 50, (3, 12))
    ids[2, 8:] = PAD
    inputs, labels = mask_tokens(ids, torch.Generator().manual_seed(1), 50)
    chosen, keep = labels != PAD, (ids != PAD)
    every = model(inputs, attention_mask=keep)  # (B, T, V)
    some = model(inputs, attention_mask=keep, at=chosen)  # (K, V)
    assert some.shape == (int(chosen.sum()), 50)
    torch.testing.assert_close(some, every[chosen], rtol=0, atol=1e-6)
    full = F.cross_entropy(every.reshape(-1, 50), labels.reshape(-1), ignore_index=PAD)
    torch.testing.assert_close(F.cross_entropy(some, labels[chosen]), full, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["masked-lm", "masked-lm-wordnet"])
def test_the_masked_lm_runs_the_gpts_blocks_and_its_shipped_weights_fit_them(name: str) -> None:
    """The masked LM's blocks are tiny_gpt's (run with causal=False and a padding mask): the shipped checkpoints hold
    exactly their tensors (the tied output weight stored once, as wte.weight), padding keys get no weight, and every
    position reads the whole sentence (with causal=True, none reads what follows it)."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    from explorer.models import tiny_gpt
    from explorer.models.build import from_checkpoint

    builtin = Path(__file__).resolve().parents[1] / "assets" / "builtin"
    meta, state = json.loads((builtin / f"{name}.json").read_text()), load_file(builtin / f"{name}.safetensors")
    model = from_checkpoint(meta, state, name)
    assert all(type(block) is tiny_gpt.Block for block in model.h)
    assert set(model.state_dict()) == set(state) | {"lm_head.weight"}
    ids = torch.randint(5, meta["config"]["vocab_size"], (1, 7), generator=torch.Generator().manual_seed(0))
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        alone = model(ids)
        torch.testing.assert_close(model(padded, attention_mask=padded != 0)[:, :7], alone, rtol=0, atol=1e-5)
        changed = ids.clone()
        changed[0, -1] = 4
        assert not torch.allclose(model(changed)[0, 0], alone[0, 0])  # the first word reads the last
        causal = model(ids, causal=True)
        torch.testing.assert_close(model(changed, causal=True)[0, :-1], causal[0, :-1], rtol=0, atol=0)
