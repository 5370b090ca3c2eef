"""Masked-word probe: the probabilities are the model's own softmax at the mask (built-in masked LM, tiny Hugging Face
BertForMaskedLM and RobertaForMaskedLM), masks typed or picked, and bad input gives a note, never an exception."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.loading.loaders import load_model
from explorer.loading.model_cache import ModelCache
from explorer.probes.masked_words import (MAX_MASKS, MaskedWordsError, cannot_fill, mask_word, masked_fill, word_spans,
                                          words_of)

KEYS = "the keys to the cabinet [MASK] on the table ."
MLM_WORDS = "the keys key to cabinet cabinets is are on table dog dogs sleeps sleep in garden a".split()


@functools.lru_cache(maxsize=None)
def builtin():
    return load_model("builtin:masked-lm")


def softmax_at(logits: torch.Tensor, t: int) -> np.ndarray:
    return torch.softmax(logits[0, t].double(), dim=-1).numpy()


# ----------------------------------------------------------------------------------------------- built-in
def test_builtin_probabilities_are_the_models_own_softmax() -> None:
    loaded = builtin()
    trace = masked_fill(loaded, KEYS, k=10, words="is, are")
    vocab = loaded.vocabs["vocab"]
    ids = [vocab.bos_id] + [vocab.stoi["<mask>"] if w == "[MASK]" else vocab.stoi[w] for w in KEYS.split()] + \
        [vocab.eos_id]
    assert trace.tokens == ("<bos>", *KEYS.split(), "<eos>") and trace.positions == (6,)
    assert trace.special[0] and trace.special[6] and trace.special[-1] and not trace.special[1]
    with torch.no_grad():
        z = loaded.model(torch.tensor([ids]))[0, 6].double()
    p = torch.softmax(z, dim=-1).numpy()
    order = np.argsort(-p, kind="stable")[:10]
    assert list(trace.top_ids[0]) == list(order)
    np.testing.assert_allclose(trace.probs[0], p[order], atol=1e-6)
    np.testing.assert_allclose(trace.logits[0], z.numpy()[order], atol=1e-5)
    assert trace.lse[0] == pytest.approx(torch.logsumexp(z, 0).item(), abs=1e-5)
    assert list(trace.top_tokens[0]) == [vocab.itos[i] for i in order]
    for j, w in enumerate(("is", "are")):
        assert trace.pieces[j] == w
        np.testing.assert_allclose(trace.word_probs[0, j], p[vocab.stoi[w]], atol=1e-6)
        assert trace.word_ranks[0, j] == 1 + int((p > p[vocab.stoi[w]]).sum())
    assert trace.entropy[0] == pytest.approx(float(-(p * np.log(p)).sum()), abs=1e-6)


def test_mask_spellings_and_picked_words_are_the_same_mask() -> None:
    loaded = builtin()
    base = masked_fill(loaded, KEYS, k=5)
    for spelling in ("[mask]", "<mask>", "[ MASK ]", "<MASK>"):
        other = masked_fill(loaded, KEYS.replace("[MASK]", spelling), k=5)
        assert other.positions == base.positions
        np.testing.assert_array_equal(other.probs, base.probs)
    picked = masked_fill(loaded, KEYS.replace("[MASK]", "are"), k=5, words="is", mask_index=5)
    assert picked.text == KEYS and picked.masked == "are" and picked.words == ("are", "is")
    np.testing.assert_array_equal(picked.probs, base.probs)
    assert not picked.notes


def test_two_masks_and_the_limit_on_masks() -> None:
    loaded = builtin()
    two = masked_fill(loaded, "the [MASK] to the cabinet [MASK] on the table .", k=3, words="are")
    assert two.positions == (2, 6) and two.probs.shape == (2, 3) and two.word_probs.shape == (2, 1)
    many = masked_fill(loaded, " ".join(["[MASK]"] * 12), k=3)
    assert len(many) == MAX_MASKS and any("first 8 are shown" in n for n in many.notes)


def test_no_mask_masks_the_last_word_with_a_note() -> None:
    trace = masked_fill(builtin(), "the dog that the farmers feed sleeps in the garden .")
    assert trace.masked == "garden" and trace.words[0] == "garden" and trace.tokens[-3] == "[MASK]"
    assert any("has no [MASK], so its word “garden” is masked" in n for n in trace.notes)


@pytest.mark.parametrize("text,note,fills", [
    ("", "Type a sentence", False),
    ("\x00\x07\u200b", "Type a sentence", False),
    ("\u0301\u0300 \ufe0f", "no characters the model can read", False),
    ("🐕 " * 50 + "[MASK]", "are shown as <unk>", True),
    (" ".join(["the dog"] * 1500), "only the first 62 are used", True),
    ("the dog " * 40 + "[MASK]", "No [MASK] is left in the part of the text the model reads", False),
])
def test_bad_input_is_a_note(text: str, note: str, fills: bool) -> None:
    trace = masked_fill(builtin(), text, k=5, words="are, xyzzy")  # no MaskedWordsError: bad text is a note
    assert any(note in n for n in trace.notes), trace.notes
    assert len(trace) == int(fills)
    if fills:
        assert trace.probs.shape == (1, 5) and 0 < trace.probs.sum() <= 1 + 1e-9
        assert any("“xyzzy” is not one token" in n for n in trace.notes)


def test_huge_k_and_words_are_bounded() -> None:
    trace = masked_fill(builtin(), KEYS, k=10_000, words=" ".join(f"w{i}" for i in range(30)))
    assert trace.probs.shape == (1, 30) and len(trace.words) == 8


@pytest.mark.parametrize("model_id,reason", [
    ("builtin:tiny-gpt", "is a causal language model"),
    ("builtin:lstm-lm", "not a transformer"),
    ("builtin:seq2seq-bahdanau", "not a transformer"),
])
def test_models_that_cannot_fill_masks_say_why(model_id: str, reason: str) -> None:
    with pytest.raises(MaskedWordsError, match=reason):
        masked_fill(load_model(model_id), KEYS)


def test_word_spans() -> None:
    assert words_of("the keys' [MASK] <mask> are.") == ("the", "keys", "'", "[MASK]", "<mask>", "are", ".")
    assert word_spans("a  bc") == [(0, 1, "a"), (3, 5, "bc")]
    assert mask_word("the keys  are here", 2) == ("the keys  [MASK] here", "are")
    assert mask_word("the keys", 5) == ("the keys", "")


# ---------------------------------------------------------------------------------------------- Hugging Face
def wordlevel_tokenizer(kind: str):
    """A tiny word-level tokenizer with the special tokens of BERT ([CLS] … [SEP], [MASK]) or RoBERTa
    (<s> … </s>, <mask>)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    pad, unk, cls, sep, mask = (("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if kind == "bert"
                                else ("<pad>", "<unk>", "<s>", "</s>", "<mask>"))
    vocab = {t: i for i, t in enumerate([pad, unk, cls, sep, mask, *MLM_WORDS, "."])}
    tk = Tokenizer(WordLevel(vocab, unk_token=unk))
    tk.pre_tokenizer = WhitespaceSplit()
    tk.post_processor = TemplateProcessing(single=f"{cls} $A {sep}", special_tokens=[(cls, 2), (sep, 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token=unk, pad_token=pad, cls_token=cls, sep_token=sep,
                                   mask_token=mask, bos_token=cls, eos_token=sep)


def save_tiny_mlm(root: Path, kind: str, head: bool = True, name: str = "") -> str:
    """A random BertForMaskedLM / RobertaForMaskedLM (or the bare encoder, head=False) with its tokenizer, saved
    with save_pretrained into root/<name> (default tiny-<kind>-mlm or tiny-<kind>-encoder); returns its local: id."""
    import transformers

    tok = wordlevel_tokenizer(kind)
    arch = "Bert" if kind == "bert" else "Roberta"
    config = getattr(transformers, f"{arch}Config")(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=70, pad_token_id=0, attn_implementation="eager")
    torch.manual_seed(0)
    model = getattr(transformers, f"{arch}ForMaskedLM" if head else f"{arch}Model")(config).eval()
    folder = root / (name or f"tiny-{kind}-{'mlm' if head else 'encoder'}")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return f"local:{folder.name}"


@pytest.fixture(scope="module")
def hf_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mlm")
    for kind in ("bert", "roberta"):
        save_tiny_mlm(root, kind)
    save_tiny_mlm(root, "bert", head=False)
    return root


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_hf_masked_lm_probabilities_are_the_models_own(hf_root: Path, monkeypatch, kind: str) -> None:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(hf_root))
    loaded = load_model(f"local:tiny-{kind}-mlm", task="masked-lm")
    assert loaded.meta["task"] == "masked-lm" and not cannot_fill(loaded)
    tok = loaded.tokenizer
    trace = masked_fill(loaded, "the keys to the cabinet [MASK] on the table .", k=7, words="is, are, zebra")
    text = f"the keys to the cabinet {tok.mask_token} on the table ."
    batch = tok(text, return_tensors="pt")
    t = batch["input_ids"][0].tolist().index(tok.mask_token_id)
    assert trace.positions == (t,) and trace.tokens[t] == "[MASK]" and trace.tokens[0] == tok.cls_token
    with torch.no_grad():
        p = softmax_at(loaded.model(**batch).logits, t)
    order = np.argsort(-p, kind="stable")[:7]
    assert list(trace.top_ids[0]) == list(order)
    np.testing.assert_allclose(trace.probs[0], p[order], atol=1e-6)
    for j, w in enumerate(("is", "are")):
        np.testing.assert_allclose(trace.word_probs[0, j], p[tok.convert_tokens_to_ids(w)], atol=1e-6)
    assert trace.pieces[2] == "" and any("“zebra” is not one token" in n for n in trace.notes)


def test_hf_encoder_without_a_head_is_loaded_without_one_and_says_so(hf_root: Path, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(hf_root))
    loaded = load_model("local:tiny-bert-encoder", task="masked-lm")
    assert loaded.meta["task"] == "base" and type(loaded.model).__name__ == "BertModel"
    assert any("has no masked-LM head saved with it" in n and "cls.predictions" in n for n in loaded.notes)
    with pytest.raises(MaskedWordsError, match="has no masked-LM head"):
        masked_fill(loaded, KEYS)


def test_the_cache_keeps_a_task_apart_only_for_hugging_face_models(hf_root: Path, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(hf_root))
    cache = ModelCache(max_models=4)
    assert cache.get("builtin:masked-lm", task="masked-lm") is cache.get("builtin:masked-lm")
    with_head = cache.get("local:tiny-bert-mlm", task="masked-lm")
    assert with_head is not cache.get("local:tiny-bert-mlm") and cache.loads == 3
    assert type(with_head.model).__name__ == "BertForMaskedLM"
