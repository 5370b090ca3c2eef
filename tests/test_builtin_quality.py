"""Quality bars of the shipped built-in checkpoints, re-checked on REGENERATED held-out data.

Each test loads assets/builtin/<name>.{safetensors,json} as the app does (explorer.models.build.from_checkpoint) and
evaluates on a few hundred held-out examples generated with the data module's HELDOUT_SEED (kept small so
the whole file runs in well under a minute on 2 CPU cores).
"""
from __future__ import annotations

import functools

import pytest
import torch

from explorer.loading import checkpoint as ck
from explorer.loading.catalogue import BUILTIN_DIR, builtin_names
from explorer.metrics import held_out as M
from explorer.models.build import from_checkpoint
from explorer.files.safe_load import read_state_dict_file

torch.set_num_threads(1)  # tiny models: 1 thread is fastest, above all on a shared CPU

LMS = ("rnn-lm", "gru-lm", "lstm-lm", "tiny-gpt")
SEQ2SEQ_ATTN = ("seq2seq-bahdanau", "seq2seq-luong-dot", "seq2seq-luong-general", "seq2seq-luong-concat")
ALL = LMS + SEQ2SEQ_ATTN + ("seq2seq-none", "seq2seq-dates", "word2vec", "masked-lm")


@functools.lru_cache(maxsize=None)
def load(name: str):
    w, m = BUILTIN_DIR / f"{name}.safetensors", BUILTIN_DIR / f"{name}.json"
    if not (w.is_file() and m.is_file()):
        pytest.fail(f"built-in checkpoint {name!r} is missing: run `python -m explorer.training.train {name}`")
    meta = ck.read_meta(m)
    return from_checkpoint(meta, read_state_dict_file(w), w.name), meta


def vocab_of(tokens):
    from explorer.data.vocab import Vocab
    return Vocab.from_json(tokens)


@functools.lru_cache(maxsize=None)
def english_heldout(n: int = 500):
    from explorer.data import english
    return english.generate_sentences(n, english.HELDOUT_SEED)


@functools.lru_cache(maxsize=None)
def english_train(n: int):
    from explorer.data import english
    return english.generate_sentences(n, english.TRAIN_SEED)


def test_all_builtins_present_and_small():
    names = builtin_names()
    assert set(ALL) <= set(names)
    files = [p for p in BUILTIN_DIR.iterdir() if p.is_file()]
    total = sum(p.stat().st_size for p in files if not p.name.endswith(".snapshots.safetensors"))
    # 19 MB of generated-English checkpoints, then the real-English ones (at most 60 MB with their corpus:
    # tests/test_real_english.py)
    assert total <= 80 * 2**20, f"assets/builtin is {total / 2**20:.1f} MB (limit 80 MB)"
    # the training series (16 float16 snapshots of builtin:lstm-lm and of builtin:tiny-gpt): at most 45 MB
    series = sum(p.stat().st_size for p in files if p.name.endswith(".snapshots.safetensors"))
    assert series <= 45 * 2**20, f"the snapshot series are {series / 2**20:.1f} MB (limit 45 MB)"


@pytest.mark.parametrize("name", ALL)
def test_meta_schema(name):
    _, meta = load(name)
    for key in ("name", "architecture", "config", "corpus", "metrics", "train", "description"):
        assert key in meta, key
    for key in ("generator", "seed", "n_train", "n_heldout", "level"):
        assert key in meta["corpus"], key
    for key in ("epochs", "seconds", "device", "torch"):
        assert key in meta["train"], key
    assert meta["name"] == name and meta["metrics"]


def test_lstm_lm_beats_bigram_and_agrees():
    model, meta = load("lstm-lm")
    vocab = vocab_of(meta["vocab"])
    held = [vocab.encode(s) for s in english_heldout()]
    ppl = M.perplexity(model, held)
    train = [vocab.encode(s) for s in english_train(meta["corpus"]["n_train"])]
    bigram, _ = M.bigram_perplexity(train, held, len(vocab))
    assert ppl <= 0.7 * bigram, f"LSTM perplexity {ppl:.2f} vs add-k bigram {bigram:.2f}"
    # shipped metrics are consistent with what we recompute
    assert abs(ppl - meta["metrics"]["heldout_perplexity"]) / ppl < 0.1
    from explorer.training.evaluation import agreement_items
    items = agreement_items(vocab, 400, min_distance=4)
    acc = M.agreement_accuracy(model, items)["accuracy"]
    assert acc >= 0.9, f"long-range agreement accuracy {acc:.3f}"
    assert meta["metrics"]["agreement"]["long_range_accuracy"] >= 0.9


@pytest.mark.parametrize("name", ["rnn-lm", "gru-lm", "tiny-gpt"])
def test_other_lms_recorded(name):
    model, meta = load(name)
    met = meta["metrics"]
    assert met["heldout_perplexity"] > 1 and met["bigram_perplexity"] > 1
    if name != "tiny-gpt":
        assert "long_range_by_distance" in met["agreement"]
    vocab = vocab_of(meta["vocab"])
    held = [vocab.encode(s) for s in english_heldout(200)]
    assert M.perplexity(model, held) < met["bigram_perplexity"]  # every neural LM beats the bigram


def _seq2seq_eval(name: str, module: str, n: int):
    import importlib
    mod = importlib.import_module(f"explorer.data.{module}")
    model, meta = load(name)
    sv, tv = vocab_of(meta["src_vocab"]), vocab_of(meta["tgt_vocab"])
    pairs = mod.generate_pairs(n, mod.HELDOUT_SEED)
    srcs = [sv.encode(s) for s, _ in pairs]
    refs = [tv.encode(t) for _, t in pairs]
    preds = M.seq2seq_predictions(model, srcs, max_len=max(map(len, refs)) + 5)
    return M.exact_match(preds, refs), meta, (preds, refs, srcs)


@pytest.mark.parametrize("name", SEQ2SEQ_ATTN)
def test_seq2seq_attention_translation(name):
    em, meta, _ = _seq2seq_eval(name, "translation", 300)
    assert em >= 0.95, f"{name}: exact match {em:.3f}"
    assert meta["metrics"]["exact_match"] >= 0.95


def test_seq2seq_dates():
    em, meta, _ = _seq2seq_eval("seq2seq-dates", "dates", 500)
    assert em >= 0.99, f"dates exact match {em:.3f}"
    assert meta["config"]["attention"] != "none"


def test_seq2seq_none_drops_on_long_sentences():
    em, meta, (preds, refs, srcs) = _seq2seq_eval("seq2seq-none", "translation", 300)
    by_len = meta["metrics"]["exact_match_by_source_length"]
    buckets = list(by_len.values())
    assert len(buckets) >= 3
    assert buckets[0]["exact_match"] > buckets[-1]["exact_match"]
    short = [p == r for p, r, s in zip(preds, refs, srcs) if len(s) <= 6]
    long = [p == r for p, r, s in zip(preds, refs, srcs) if len(s) >= 12]
    assert sum(short) / len(short) > sum(long) / len(long)


def test_word2vec_neighbours_stay_in_class():
    from explorer.data import english
    model, meta = load("word2vec")
    res = M.precision_at_k(model.in_embed.weight, meta["vocab"], english.word_class, k=5)
    assert res["precision_at_k"] >= 0.5, res["precision_at_k"]
    assert abs(res["precision_at_k"] - meta["metrics"]["precision_at_5"]["precision_at_k"]) < 1e-4


def test_masked_lm_fills_masked_nouns_and_verbs():
    """One noun, verb or auxiliary of each regenerated held-out sentence masked at a time: top-1 accuracy as the
    checkpoint reports it, above always answering the class's most frequent training word; at masked verbs and
    auxiliaries the forms of the right number get more probability than the wrong number's."""
    from collections import Counter

    from explorer.training.evaluation import masked_word_accuracy

    model, meta = load("masked-lm")
    vocab = vocab_of(meta["vocab"])
    assert vocab.itos[4] == "<mask>" and vocab.specials["mask"] == 4
    freq = Counter(w for s in english_train(meta["corpus"]["n_train"]) for w in s)
    got = masked_word_accuracy(model, vocab, english_heldout(500), train_freq=freq)
    shipped = meta["metrics"]["masked_accuracy"]
    for cls, floor in (("noun", 0.015), ("verb", 0.09), ("auxiliary", 0.55)):
        assert got[cls]["top1"] >= floor, (cls, got[cls])
        assert got[cls]["top1"] > 1.5 * got[cls]["baseline"], (cls, got[cls])
        assert got[cls]["baseline_word"] == shipped[cls]["baseline_word"]
        assert abs(got[cls]["top1"] - shipped[cls]["top1"]) < 0.04, (cls, got[cls]["top1"], shipped[cls]["top1"])
        assert got[cls]["n"] > 200
    assert got["verb"]["verb_number"] >= 0.93 and got["auxiliary"]["verb_number"] >= 0.95
    assert shipped["verb"]["verb_number"] >= 0.93 and shipped["auxiliary"]["verb_number"] >= 0.95
