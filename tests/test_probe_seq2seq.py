"""explorer.probes.seq2seq: alignment traces equal the models' own numbers.

Built-in RNN encoder–decoders (small random Seq2Seq of every attention kind, plus the trained checkpoints when
present) and tiny random Marian / T5 models built from configs (eager attention) with a WordLevel tokenizer.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.data import translation
from explorer.data.vocab import Vocab
from explorer.models.seq2seq import ATTENTIONS, Seq2Seq
from explorer.loading.catalogue import builtin_names
from explorer.loading.loaders import LoadedModel, load_model
from explorer.probes.seq2seq import Seq2SeqError, alignment_trace, length_accuracy, presets_for
from explorer.viz import seq2seq as viz_seq2seq
from families import ENC_DEC_SMALL, T5_SMALL, make_tokenizer, tiny_model

SRC_WORDS = ["the", "red", "car", "is", "fast", ".", "european", "economic", "area", "agreement", "on", "was",
             "signed", "in", "august", "1992", "old", "wooden", "table", "kitchen"]
TGT_WORDS = ["la", "voiture", "rouge", "est", "rapide", ".", "zone", "économique", "européenne", "accord", "sur",
             "a", "été", "signé", "en", "août", "1992", "le", "table", "boisée", "vieille", "cuisine", "dans"]
SENT = "the red car is fast ."


def rnn_loaded(attention: str, seed: int = 0, hidden: int = 16, corpus: dict | None = None) -> LoadedModel:
    torch.manual_seed(seed)
    src_vocab, tgt_vocab = Vocab(SRC_WORDS), Vocab(TGT_WORDS)
    model = Seq2Seq(len(src_vocab), len(tgt_vocab), emb_dim=8, hidden_size=hidden, attention=attention).eval()
    meta = {"architecture": "seq2seq", "corpus": corpus or {"generator": "translation"}}
    return LoadedModel(f"test:s2s-{attention}-{seed}", "seq2seq-rnn", model, "cpu", "float32", meta,
                       vocabs={"src_vocab": src_vocab, "tgt_vocab": tgt_vocab})


def tiny_hf(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    tok = make_tokenizer()
    V = len(tok)
    if kind == "marian":
        model = tiny_model("MarianMTModel", V, **ENC_DEC_SMALL, pad_token_id=0, eos_token_id=1,
                           decoder_start_token_id=0, forced_eos_token_id=None, attn_implementation="eager")
    else:
        model = tiny_model("T5ForConditionalGeneration", V, **T5_SMALL, num_decoder_layers=2, pad_token_id=0,
                           eos_token_id=1, decoder_start_token_id=0, attn_implementation="eager")
    model.config._attn_implementation = "eager"
    model.eval()
    return model, tok


def hf_loaded(kind: str, seed: int = 0) -> LoadedModel:
    model, tok = tiny_hf(kind, seed)
    return LoadedModel(f"test:{kind}-{seed}", "encoder-decoder", model, "cpu", "float32", {}, tokenizer=tok)


# ------------------------------------------------------------------------------------------ built-in RNN
def _greedy_by_hand(model: Seq2Seq, src: torch.Tensor, max_len: int) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy decoding with the model's own encode / decode_step, written out here (independent of the probe)."""
    with torch.no_grad():
        enc, state = model.encode(src)
        y, ids, rows = torch.tensor([model.bos_id]), [], []
        for _ in range(max_len):
            out = model.decode_step(y, state, enc)
            state, y = out.state, out.logits.argmax(-1)
            ids.append(int(y))
            if out.attention is not None:
                rows.append(out.attention[0])
            if int(y) == model.eos_id:
                break
    return ids, rows


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_rnn_greedy_matches_model(attention: str) -> None:
    loaded = rnn_loaded(attention)
    tr = alignment_trace(loaded, SENT, max_len=12)
    assert tr.mode == "greedy"
    src = torch.tensor([loaded.vocabs["src_vocab"].encode(SENT.split())])
    ids, rows = _greedy_by_hand(loaded.model, src, 12)
    assert list(tr.out_ids) == ids
    if attention == "none":
        assert tr.weights is None and not rows
        assert tr.no_source_logprobs is not None and tr.no_source_logprobs.shape == tr.step_logprobs.shape
        assert tr.final_state is not None and np.allclose(tr.contexts, tr.final_state[None], atol=1e-6)
    else:
        assert tr.weights.shape == (1, 1, len(ids), src.shape[1])
        np.testing.assert_allclose(tr.weights[0, 0], torch.stack(rows).numpy(), atol=1e-6)
        np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("attention", [a for a in ATTENTIONS if a != "none"])
def test_rnn_score_recomputed_from_weights(attention: str) -> None:
    text = "the european economic area agreement was signed ."
    loaded = rnn_loaded(attention, seed=1)
    tr = alignment_trace(loaded, text, max_len=10)
    w = tr.matrix()
    assert len(tr.math) == len(tr.out_ids) and all(m is not None for m in tr.math)
    for t, m in enumerate(tr.math):
        assert m.j == int(np.argmax(w[t]))
        assert abs(m.score_recomputed - m.score_model) < 1e-5
        assert abs(m.score_model - tr.scores[t, m.j]) < 1e-6
        assert abs(np.exp(m.score_model - m.max_score) / m.denominator - m.weight) < 1e-5
        # softmax of the returned scores is the attention row
        e = np.exp(tr.scores[t] - tr.scores[t].max())
        np.testing.assert_allclose(e / e.sum(), w[t], atol=1e-5)
    # c_t = sum_j a_tj h_j
    with torch.no_grad():
        enc, _ = loaded.model.encode(torch.tensor([loaded.vocabs["src_vocab"].encode(text.split())]))
    np.testing.assert_allclose(tr.contexts, w @ enc[0].numpy(), atol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_rnn_forced_reproduces_teacher_forced_loss(attention: str) -> None:
    loaded = rnn_loaded(attention, seed=2)
    target = "la voiture rouge est rapide ."
    tr = alignment_trace(loaded, SENT, target=target)
    assert tr.mode == "forced"
    tgt = loaded.vocabs["tgt_vocab"].encode(target.split())
    src = torch.tensor([loaded.vocabs["src_vocab"].encode(SENT.split())])
    with torch.no_grad():
        logits, atts = loaded.model(src, torch.tensor([[2, *tgt]]))
        loss = F.cross_entropy(logits[0], torch.tensor([*tgt, 3]))
    assert list(tr.out_ids) == [*tgt, 3]
    assert abs(tr.loss - float(loss)) < 1e-5
    if attention != "none":
        np.testing.assert_allclose(tr.weights[0, 0], atts[0].numpy(), atol=1e-5)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "none"])
def test_rnn_beam_greedy_and_forced_agree(attention: str) -> None:
    """Beam 1 is greedy; the beam's tree is the one beam search's (2K candidates per step); and greedy, beam and
    forced decoding of the same output give the same log-probabilities (the model's own, T = 1)."""
    loaded = rnn_loaded(attention, seed=3)
    g = alignment_trace(loaded, SENT, decoding="greedy", max_len=15)
    b = alignment_trace(loaded, SENT, decoding="beam", beam=1, max_len=15)
    assert b.mode == "beam" and b.out_ids == g.out_ids
    np.testing.assert_allclose(b.step_logprobs, g.step_logprobs, atol=1e-6)
    if g.weights is not None:
        np.testing.assert_allclose(b.weights, g.weights, atol=1e-6)
    b4 = alignment_trace(loaded, SENT, decoding="beam", beam=4, max_len=15)
    assert b4.beam.token.shape[1] == 8 and b4.beam.running.shape[1] == 4
    # the returned score is sum log p / generated_length ** 1 of the output, in the model's own log-probabilities
    assert b4.beam.final_score == pytest.approx(b4.step_logprobs.sum() / len(b4.out_ids), abs=1e-5)
    for tr in (g, b4):
        _assert_own_logprobs(loaded, SENT, tr)


def _assert_own_logprobs(loaded: LoadedModel, text: str, tr) -> None:
    """The trace's log p of each output token equals the model's own teacher-forced log-softmax on that output."""
    from explorer.adapters.text import Encoded

    adapter = loaded.adapter
    out = Encoded(tr.out_ids, tr.out_tokens, (), False, 0, (False,) * len(tr.out_ids))
    logits = torch.from_numpy(adapter.run(adapter.encode(text), names=("logits",), target=out)["logits"])
    own = torch.log_softmax(logits.double(), -1)[torch.arange(len(tr.out_ids)), torch.tensor(tr.out_ids)]
    np.testing.assert_allclose(tr.step_logprobs, own.numpy(), atol=1e-5)


def test_rnn_bad_inputs() -> None:
    loaded = rnn_loaded("bahdanau")
    assert alignment_trace(loaded, "").notes and not alignment_trace(loaded, "").out_ids
    assert alignment_trace(loaded, "   \x00\x07 ").out_ids == ()
    emo = alignment_trace(loaded, "the 🚗 car\x07 is ✨ fast", max_len=8)
    assert any("<unk>" in n or "vocabulary" in n for n in emo.notes)
    unk = alignment_trace(loaded, "zzz qqq", max_len=8)
    assert unk.warnings and unk.out_ids
    long = alignment_trace(loaded, " ".join(["the red car"] * 300))  # 900 words
    assert long.notes and len(long.src_tokens) <= 400 and len(long.out_ids) <= 200
    np.testing.assert_allclose(long.weights.sum(-1), 1.0, atol=1e-4)
    forced_unk = alignment_trace(loaded, SENT, target="xyz voiture")
    assert forced_unk.mode == "forced" and any("target" in n for n in forced_unk.notes)


def test_long_source_warns_with_training_lengths() -> None:
    loaded = rnn_loaded("luong-dot", corpus={"generator": "translation", "n_train": 200, "seed": 1})
    tr = alignment_trace(loaded, " ".join(["the old wooden table"] * 12))
    assert any("longest source seen in training" in w for w in tr.warnings)
    assert 0 < len(tr.out_ids) <= tr.max_len <= 200


def test_dates_target_tokenization_and_presets() -> None:
    loaded = rnn_loaded("bahdanau", corpus={"generator": "dates"})
    assert loaded.adapter.encode("1997 - 03-03", side="target").tokens[-1] == "<eos>"
    assert len(loaded.adapter.encode("1997 - 03-03", side="target").tokens) == len("1997-03-03") + 1  # characters
    tokens = loaded.adapter.encode("March 3", side="input").tokens  # characters, spaces kept (shown ·), as unknown
    assert tokens == tuple(f"{ch}→<unk>" for ch in "march·3")
    assert "03.03.1997" in presets_for(loaded)
    assert any("european economic area" in p for p in presets_for(rnn_loaded("none")))


def test_length_accuracy_computed_when_no_metrics() -> None:
    loaded = rnn_loaded("bahdanau")
    curve = length_accuracy(loaded, n_pairs=40)
    assert curve.buckets and sum(curve.n) == 40 and "computed" in curve.source
    loaded.meta["metrics"] = {"exact_match_by_source_length": {"4-6": {"exact_match": 0.9, "n": 10},
                                                                "1-3": {"exact_match": 1.0, "n": 5}}}
    stored = length_accuracy(loaded)
    assert stored.buckets == ("1-3", "4-6") and stored.accuracy == (1.0, 0.9) and "stored" in stored.source


# ------------------------------------------------------------------------------------------ Hugging Face
@pytest.mark.parametrize("kind", ["marian", "t5"])
def test_hf_greedy_cross_attention_equals_model(kind: str) -> None:
    loaded = hf_loaded(kind)
    model, tok = loaded.model, loaded.tokenizer
    tr = alignment_trace(loaded, "the red car is fast .", max_len=8)
    enc = tok("the red car is fast .", return_tensors="pt")
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=8, do_sample=False, num_beams=1, min_length=0)
    gen_ids = gen[0, 1:].tolist()
    assert list(tr.out_ids) == gen_ids[:len(tr.out_ids)] and len(tr.out_ids) == len(gen_ids)
    with torch.no_grad():
        out = model(**enc, decoder_input_ids=gen[:, :-1], output_attentions=True)
    ref = torch.stack([a[0] for a in out.cross_attentions]).numpy()        # (L, H, T, S)
    assert tr.weights.shape == ref.shape
    np.testing.assert_allclose(tr.weights, ref, atol=1e-5)
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(tr.matrix(1, "mean"), ref[1].mean(0), atol=1e-5)
    np.testing.assert_allclose(tr.matrix(0, 2), ref[0, 2], atol=1e-5)
    assert tr.src_tokens == tuple(tok.convert_ids_to_tokens(enc["input_ids"][0].tolist()))


@pytest.mark.parametrize("kind", ["marian", "t5"])
def test_hf_forced_loss_and_beam(kind: str) -> None:
    loaded = hf_loaded(kind, seed=1)
    model, tok = loaded.model, loaded.tokenizer
    tr = alignment_trace(loaded, "the old table", target="la voiture rouge est rapide")
    enc = tok("the old table", return_tensors="pt")
    labels = tok(text_target="la voiture rouge est rapide", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model(**enc, labels=labels, output_attentions=True)
    assert list(tr.out_ids) == labels[0].tolist()
    assert abs(tr.loss - float(out.loss)) < 1e-5
    np.testing.assert_allclose(tr.weights, torch.stack([a[0] for a in out.cross_attentions]).numpy(), atol=1e-5)
    g = alignment_trace(loaded, "the red car", max_len=6)
    b1 = alignment_trace(loaded, "the red car", decoding="beam", beam=1, max_len=6)
    assert b1.out_ids == g.out_ids
    np.testing.assert_allclose(b1.weights, g.weights, atol=1e-5)
    np.testing.assert_allclose(b1.step_logprobs, g.step_logprobs, atol=1e-6)
    b3 = alignment_trace(loaded, "the red car", decoding="beam", beam=3, max_len=6)
    enc = tok("the red car", return_tensors="pt")
    with torch.no_grad():
        ref = model.generate(**enc, max_new_tokens=6, num_beams=3, do_sample=False, length_penalty=1.0,
                             early_stopping=False, min_length=0, output_scores=True, return_dict_in_generate=True)
    ref_ids = [t for t in ref.sequences[0, 1:].tolist()]
    ref_ids = ref_ids[:ref_ids.index(1) + 1] if 1 in ref_ids else ref_ids
    assert list(b3.out_ids) == ref_ids  # the one beam search equals generate(num_beams=3)
    assert b3.beam.final_score == pytest.approx(float(ref.sequences_scores[0]), abs=1e-5)
    for tr in (g, b3):
        _assert_own_logprobs(loaded, "the red car", tr)


def test_hf_bad_inputs_and_non_seq2seq() -> None:
    loaded = hf_loaded("marian")
    assert not alignment_trace(loaded, "").out_ids and alignment_trace(loaded, "").notes
    emo = alignment_trace(loaded, "🚗\x07 zzz", max_len=5)
    assert emo.notes  # unknown pieces
    no_tok = LoadedModel("test:no-tok", "encoder-decoder", loaded.model, "cpu", "float32", {})
    with pytest.raises(Seq2SeqError, match="cannot read text"):
        alignment_trace(no_tok, SENT)
    bert = tiny_model("BertModel", 30, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64).eval()
    enc_only = LoadedModel("test:bert", "encoder", bert, "cpu", "float32", {}, tokenizer=make_tokenizer())
    with pytest.raises(Seq2SeqError, match="not an encoder–decoder"):
        alignment_trace(enc_only, SENT)
    with pytest.raises(Seq2SeqError, match="curve needs a built-in"):
        length_accuracy(loaded)


# ------------------------------------------------------------------------------------------ checkpoints
@pytest.mark.skipif("seq2seq-bahdanau" not in builtin_names(), reason="builtin:seq2seq-bahdanau not trained yet")
def test_builtin_bahdanau_preset() -> None:
    loaded = load_model("builtin:seq2seq-bahdanau")
    tr = alignment_trace(loaded, translation.PRESETS[1])
    assert tr.finished
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)
    assert all(abs(m.score_recomputed - m.score_model) < 1e-4 for m in tr.math)
    ref = translation.translate(translation.tokenize(translation.PRESETS[1]))
    assert tr.output_text == " ".join(ref)  # the preset is translated exactly (98 % held-out exact match)
    beam = alignment_trace(loaded, translation.PRESETS[1], decoding="beam", beam=4)
    assert beam.output_text == " ".join(ref)
    np.testing.assert_allclose(beam.step_logprobs, tr.step_logprobs, atol=1e-5)  # same output, same log p


# ------------------------------------------------------------------------------------ the formula shown
def _step_by_formula(model: Seq2Seq, form, y_prev: int, fed: torch.Tensor, s_prev: torch.Tensor) -> torch.Tensor:
    """s_t = GRU(x, s_{t−1}) with x assembled from the form's inputs: [y_{t−1}] or [y_{t−1}; fed]."""
    emb = model.tgt_embedding(torch.tensor([y_prev]))[0]
    x = emb if len(form.inputs) == 1 else torch.cat([emb, fed])
    _, s = model.decoder(x[None, None], s_prev[None, None])
    return s[0, 0]


@pytest.mark.parametrize("attention,feeding", [("bahdanau", False), ("luong-general", True),
                                               ("luong-general", False), ("luong-dot", True), ("none", False)])
def test_formula_is_what_the_checkpoint_computes(attention, feeding):
    """The page's formula is read from the model, and the decoder state it describes is the model's own: s_t
    recomputed from the formula's inputs (the context c_t for Bahdanau, h̃_{t−1} with Luong input feeding, y_{t−1}
    alone without it) equals the state in the model's record."""
    torch.manual_seed(1)
    src_vocab, tgt_vocab = Vocab(SRC_WORDS), Vocab(TGT_WORDS)
    model = Seq2Seq(len(src_vocab), len(tgt_vocab), emb_dim=8, hidden_size=12, attention=attention,
                    input_feeding=feeding).eval()
    loaded = LoadedModel("test:form", "seq2seq-rnn", model, "cpu", "float32", {"corpus": {"generator": "translation"}},
                         vocabs={"src_vocab": src_vocab, "tgt_vocab": tgt_vocab})
    form = loaded.adapter.cross_form()
    assert sum(n for _, n in form.inputs) == model.decoder.weight_ih_l0.shape[1]
    assert [s for s, _ in form.inputs] == ["y_{t-1}"] + {"bahdanau": ["c_t"], "none": ["c"]}.get(
        attention, [r"\tilde h_{t-1}"] if feeding else [])
    formula, where = viz_seq2seq.equation(form)
    x = "[" + ";".join(s for s, _ in form.inputs) + "]" if len(form.inputs) > 1 else "y_{t-1}"
    assert rf"\mathrm{{GRU}}({x},s_{{t-1}})" in formula and str(tuple(model.decoder.weight_ih_l0.shape)) in where
    src = loaded.adapter.encode("the red car is fast .")
    tgt = loaded.adapter.encode("la voiture rouge est rapide .", side="target")
    rec = loaded.adapter.run(src, target=tgt)
    s, ctx, y = (torch.from_numpy(rec["decoder.s"]), torch.from_numpy(rec.get("cross.0.context", np.zeros(0))),
                 tgt.ids)
    with torch.no_grad():
        for t in range(1, 4):
            if attention == "bahdanau":  # decoder.s[t] = s_{t−1}, the state the score reads
                got, want = _step_by_formula(model, form, y[t - 1], ctx[t], s[t]), s[t + 1]
            elif attention == "none":
                enc, _ = model.encode(torch.tensor([src.ids]))
                got = _step_by_formula(model, form, y[t - 1], enc[0, -1], s[t - 1])
                want = s[t]
            else:  # decoder.s[t] = s_t; h̃_{t−1} = tanh(W_c [c_{t−1}; s_{t−1}])
                h_prev = torch.tanh(model.W_c(torch.cat([ctx[t - 1], s[t - 1]])))
                got, want = _step_by_formula(model, form, y[t - 1], h_prev, s[t - 1]), s[t]
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", [n for n in builtin_names() if n.startswith("seq2seq-luong")])
def test_shipped_luong_models_show_input_feeding(name):
    from explorer.loading.loaders import load_model

    form = load_model(f"builtin:{name}").adapter.cross_form()
    assert form.inputs[1][0] == r"\tilde h_{t-1}" and r"[y_{t-1};\tilde h_{t-1}]" in viz_seq2seq.equation(form)[0]


def test_cross_attention_formula_shows_the_models_own_scaling():
    """T5 does not scale q·k (its attention modules multiply by 1); Marian scales by 1/√d: the formula says so."""
    t5, marian = hf_loaded("t5"), hf_loaded("marian")
    f5, fm = t5.caps.alignment.cross_form(), marian.caps.alignment.cross_form()
    assert f5.scaling == (1.0, 1.0) and all(s == pytest.approx(8 ** -0.5) for s in fm.scaling) and fm.head_dim == 8
    tex5, words5 = viz_seq2seq.equation(f5)
    texm, _ = viz_seq2seq.equation(fm)
    assert r"\sqrt" not in tex5 and "does not scale" in words5 and r"\frac{Q" in texm and r"\sqrt{d}" in texm
