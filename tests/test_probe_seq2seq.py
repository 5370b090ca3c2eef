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
from explorer.probes.seq2seq import alignment_trace, length_accuracy, presets_for, target_tokens
from explorer.registry import LoadedModel, builtin_names, load_model

SRC_WORDS = ["the", "red", "car", "is", "fast", ".", "european", "economic", "area", "agreement", "on", "was",
             "signed", "in", "august", "1992", "old", "wooden", "table", "kitchen"]
TGT_WORDS = ["la", "voiture", "rouge", "est", "rapide", ".", "zone", "économique", "européenne", "accord", "sur",
             "a", "été", "signé", "en", "août", "1992", "le", "table", "boisée", "vieille", "cuisine", "dans"]
SENT = "the red car is fast ."
HF_WORDS = ["the", "red", "car", "is", "fast", ".", "la", "voiture", "rouge", "est", "rapide", "old", "table"]


def rnn_loaded(attention: str, seed: int = 0, hidden: int = 16) -> LoadedModel:
    torch.manual_seed(seed)
    src_vocab, tgt_vocab = Vocab(SRC_WORDS), Vocab(TGT_WORDS)
    model = Seq2Seq(len(src_vocab), len(tgt_vocab), emb_dim=8, hidden_size=hidden, attention=attention).eval()
    meta = {"architecture": "seq2seq", "corpus": {"generator": "translation"}}
    return LoadedModel(f"test:s2s-{attention}-{seed}", "seq2seq-rnn", model, "cpu", "float32", meta,
                       vocabs={"src_vocab": src_vocab, "tgt_vocab": tgt_vocab})


def make_tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for w in HF_WORDS:
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = WhitespaceSplit()
    tk.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", eos_token="</s>")


def tiny_hf(kind: str, seed: int = 0):
    from transformers import MarianConfig, MarianMTModel, T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    tok = make_tokenizer()
    V = len(tok)
    if kind == "marian":
        cfg = MarianConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                           max_position_embeddings=64, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                           forced_eos_token_id=None, attn_implementation="eager")
        model = MarianMTModel(cfg)
    else:
        cfg = T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                       pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, attn_implementation="eager")
        model = T5ForConditionalGeneration(cfg)
    model.config._attn_implementation = "eager"
    model.eval()
    return model, tok


def hf_loaded(kind: str, seed: int = 0) -> LoadedModel:
    model, tok = tiny_hf(kind, seed)
    return LoadedModel(f"test:{kind}-{seed}", "encoder-decoder", model, "cpu", "float32", {}, tokenizer=tok)


# ------------------------------------------------------------------------------------------ built-in RNN
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_rnn_greedy_matches_model(attention: str) -> None:
    loaded = rnn_loaded(attention)
    tr = alignment_trace(loaded, SENT, max_len=12)
    assert not tr.error and tr.mode == "greedy"
    src = torch.tensor([loaded.vocabs["src_vocab"].encode(SENT.split())])
    ref = loaded.model.greedy_decode(src, max_len=12)
    ids = list(tr.out_ids[:-1] if tr.finished else tr.out_ids)
    assert ids == ref.tokens[0]
    if attention == "none":
        assert tr.weights is None and ref.attentions[0] is None
        assert tr.no_source_logprobs is not None and tr.no_source_logprobs.shape == tr.step_logprobs.shape
        assert tr.final_state is not None and np.allclose(tr.contexts, tr.final_state[None], atol=1e-6)
    else:
        np.testing.assert_allclose(tr.weights, ref.attentions[0].numpy(), atol=1e-6)
        np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("attention", [a for a in ATTENTIONS if a != "none"])
def test_rnn_score_recomputed_from_weights(attention: str) -> None:
    tr = alignment_trace(rnn_loaded(attention, seed=1), "the european economic area agreement was signed .",
                         max_len=10)
    assert len(tr.math) == len(tr.out_ids) and all(m is not None for m in tr.math)
    for t, m in enumerate(tr.math):
        assert m.j == int(np.argmax(tr.weights[t]))
        assert abs(m.score_recomputed - m.score_model) < 1e-5
        assert abs(m.score_model - tr.scores[t, m.j]) < 1e-6
        assert abs(np.exp(m.score_model - m.max_score) / m.denominator - m.weight) < 1e-5
        # softmax of the returned scores is the attention row
        np.testing.assert_allclose(np.exp(tr.scores[t] - tr.scores[t].max()) / np.exp(tr.scores[t] - tr.scores[t].max()).sum(),
                                   tr.weights[t], atol=1e-5)
        # c_t = sum_j a_tj h_j
    enc, _ = rnn_loaded(attention, seed=1).model.encode(
        torch.tensor([rnn_loaded(attention).vocabs["src_vocab"].encode(
            "the european economic area agreement was signed .".split())]))
    np.testing.assert_allclose(tr.contexts, tr.weights @ enc[0].detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_rnn_forced_reproduces_teacher_forced_loss(attention: str) -> None:
    loaded = rnn_loaded(attention, seed=2)
    target = "la voiture rouge est rapide ."
    tr = alignment_trace(loaded, SENT, target=target)
    assert tr.mode == "forced" and not tr.error
    tgt = loaded.vocabs["tgt_vocab"].encode(target.split())
    src = torch.tensor([loaded.vocabs["src_vocab"].encode(SENT.split())])
    with torch.no_grad():
        logits, atts = loaded.model(src, torch.tensor([[2, *tgt]]))
        loss = F.cross_entropy(logits[0], torch.tensor([*tgt, 3]))
    assert list(tr.out_ids) == [*tgt, 3]
    assert abs(tr.loss - float(loss)) < 1e-5
    if attention != "none":
        np.testing.assert_allclose(tr.weights, atts[0].numpy(), atol=1e-5)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "none"])
def test_rnn_beam1_equals_greedy_and_tree(attention: str) -> None:
    loaded = rnn_loaded(attention, seed=3)
    g = alignment_trace(loaded, SENT, decoding="greedy", max_len=15)
    b = alignment_trace(loaded, SENT, decoding="beam", beam=1, max_len=15)
    assert b.mode == "beam" and b.out_ids == g.out_ids
    if g.weights is not None:
        np.testing.assert_allclose(b.weights, g.weights, atol=1e-6)
    b4 = alignment_trace(loaded, SENT, decoding="beam", beam=4, max_len=15)
    assert b4.beam and all(len(step) <= 8 for step in b4.beam)
    assert all(n.status in ("kept", "pruned", "finished") for step in b4.beam for n in step)
    assert sum(n.status != "pruned" for n in b4.beam[0]) <= 4
    # the replayed best hypothesis has the beam's score
    best = [n for step in b4.beam for n in step if n.status == "finished" and n.tokens == b4.out_tokens]
    if best:
        assert abs(best[0].score - b4.step_logprobs.sum()) < 1e-4


def test_rnn_bad_inputs() -> None:
    loaded = rnn_loaded("bahdanau")
    assert alignment_trace(loaded, "").notes and not alignment_trace(loaded, "").out_ids
    assert alignment_trace(loaded, "   \x00\x07 ").out_ids == ()
    emo = alignment_trace(loaded, "the 🚗 car\x07 is ✨ fast", max_len=8)
    assert not emo.error and any("<unk>" in n or "vocabulary" in n for n in emo.notes)
    unk = alignment_trace(loaded, "zzz qqq", max_len=8)
    assert unk.warnings and unk.out_ids
    long = alignment_trace(loaded, " ".join(["the red car"] * 300))  # 900 words
    assert long.notes and len(long.src_tokens) <= 400 and len(long.out_ids) <= 200
    np.testing.assert_allclose(long.weights.sum(-1), 1.0, atol=1e-4)
    forced_unk = alignment_trace(loaded, SENT, target="xyz voiture")
    assert forced_unk.mode == "forced" and any("target" in n for n in forced_unk.notes)


def test_long_source_warns_with_training_lengths() -> None:
    loaded = rnn_loaded("luong-dot")
    loaded.meta["corpus"] = {"generator": "translation", "n_train": 200, "seed": 1}
    tr = alignment_trace(loaded, " ".join(["the old wooden table"] * 12))
    assert any("longest source seen in training" in w for w in tr.warnings)
    assert 0 < len(tr.out_ids) <= tr.max_len <= 200


def test_dates_target_tokenization_and_presets() -> None:
    loaded = rnn_loaded("bahdanau")
    loaded.meta["corpus"] = {"generator": "dates"}
    assert target_tokens(loaded, "1997-03-03") == list("1997-03-03")
    assert "03.03.1997" in presets_for(loaded)
    assert any("european economic area" in p for p in presets_for(rnn_loaded("none")))


def test_length_accuracy_computed_when_no_metrics() -> None:
    loaded = rnn_loaded("bahdanau")
    curve = length_accuracy(loaded, n_pairs=40)
    assert not curve.error and curve.buckets and sum(curve.n) == 40 and "computed" in curve.source
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
    assert not tr.error, tr.error
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
    b3 = alignment_trace(loaded, "the red car", decoding="beam", beam=3, max_len=6)
    assert b3.beam and not b3.error


def test_hf_bad_inputs_and_non_seq2seq() -> None:
    from transformers import BertConfig, BertModel

    loaded = hf_loaded("marian")
    assert not alignment_trace(loaded, "").error and not alignment_trace(loaded, "").out_ids
    emo = alignment_trace(loaded, "🚗\x07 zzz", max_len=5)
    assert not emo.error and emo.notes  # unknown pieces
    no_tok = LoadedModel("test:no-tok", "encoder-decoder", loaded.model, "cpu", "float32", {})
    assert "cannot read text" in alignment_trace(no_tok, SENT).error
    bert = BertModel(BertConfig(vocab_size=30, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=64)).eval()
    enc_only = LoadedModel("test:bert", "encoder", bert, "cpu", "float32", {}, tokenizer=make_tokenizer())
    assert "not an encoder–decoder" in alignment_trace(enc_only, SENT).error
    assert "curve needs a built-in" in length_accuracy(loaded).error


# ------------------------------------------------------------------------------------------ checkpoints
@pytest.mark.skipif("seq2seq-bahdanau" not in builtin_names(), reason="builtin:seq2seq-bahdanau not trained yet")
def test_builtin_bahdanau_preset() -> None:
    loaded = load_model("builtin:seq2seq-bahdanau")
    tr = alignment_trace(loaded, translation.PRESETS[1])
    assert not tr.error and tr.finished
    np.testing.assert_allclose(tr.weights.sum(-1), 1.0, atol=1e-5)
    assert all(abs(m.score_recomputed - m.score_model) < 1e-4 for m in tr.math)
    ref = translation.translate(translation.tokenize(translation.PRESETS[1]))
    print("bahdanau:", tr.output_text, "| reference:", " ".join(ref))
