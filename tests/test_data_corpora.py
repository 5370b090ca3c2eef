"""Tests of explorer.data: generators, vocabularies, tokenizers, user text (fast, no torch)."""

from __future__ import annotations

import datetime
import json
import re
import sys

import pytest

from explorer.data import dates, english, translation
from explorer.data.user_text import CorpusError, corpus_from_text, read_uploaded_text
from explorer.data.vocab import SPECIALS, Vocab, tokenize_chars, tokenize_words


@pytest.fixture(scope="module")
def sentences():
    return english.generate_sentences(20000, english.TRAIN_SEED)


# --------------------------------------------------------------------------- english
def test_english_deterministic_and_seed_dependent():
    a = english.generate_sentences(300, 7)
    assert a == english.generate_sentences(300, 7)
    assert a != english.generate_sentences(300, 8)


def test_english_does_not_touch_global_random():
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    english.generate_sentences(50, 3)
    english.agreement_pairs(20, 3)
    translation.generate_pairs(20, 3)
    dates.generate_pairs(20, 3)
    assert random.random() == expected


def test_english_vocabulary_and_shape(sentences):
    types = {w for s in sentences for w in s}
    assert len(types) >= 400
    assert all(s[-1] in (".", "?") for s in sentences)
    assert all(w == w.lower() for w in types)
    assert all(english.word_class(w) is not None for w in types)
    lengths = sorted(len(s) for s in sentences)
    median = lengths[len(lengths) // 2]
    assert 6 <= median <= 20
    assert sum(5 <= n <= 30 for n in lengths) / len(lengths) > 0.85
    # bracket-like structure: quotes and parentheses appear and are balanced
    assert any('"' in s for s in sentences) and any("(" in s for s in sentences)
    for s in sentences:
        assert s.count('"') % 2 == 0
        assert s.count("(") == s.count(")")


def test_teaching_sentence_words_in_vocab(sentences):
    types = {w for s in sentences for w in s}
    for text in english.PRESETS:
        missing = [w for w in text.split() if w not in types]
        assert not missing, (text, missing)


def test_heldout_mostly_distinct(sentences):
    train = {tuple(s) for s in sentences[:5000]}
    held = english.heldout_sentences(2000)
    assert sum(tuple(s) in train for s in held) / len(held) < 0.1


def test_word_classes():
    assert english.word_class("dog") == "animals"
    assert english.word_class("dogs") == "animals"
    assert english.word_class("red") == "colours"
    assert english.word_class("teacher") == "professions"
    assert english.word_class("zzzz") is None


def test_noun_and_verb_tables_are_unambiguous():
    noun_forms = set(english.NOUN_NUMBER)
    verb_forms = {f for v in english.VERBS for f in v.forms()} | {"is", "are", "was", "were", "has", "have"}
    assert not noun_forms & verb_forms
    for pairs in english.NOUNS.values():
        for sg, pl in pairs:
            assert sg != pl


def _head_number(word: str) -> str:
    return english.NOUN_NUMBER[word]


def _verb_number(word: str) -> str:
    # independent of the generator: from the lexical tables
    if word in ("is", "was", "has"):
        return "sg"
    if word in ("are", "were", "have"):
        return "pl"
    for verb in english.VERBS:
        if word == verb.third:
            return "sg"
        if word == verb.base:
            return "pl"
    raise AssertionError(f"{word!r} is not a present-tense verb form")


def test_agreement_pairs():
    pairs = english.agreement_pairs(500, english.HELDOUT_SEED, min_distance=4)
    assert pairs == english.agreement_pairs(500, english.HELDOUT_SEED, min_distance=4)
    assert len(pairs) == 500
    with_attractor = 0
    for p in pairs:
        assert isinstance(p, english.AgreementPair)
        assert p.correct != p.wrong
        assert p.distance >= 4
        head = p.prefix[len(p.prefix) - 1 - p.distance]
        number = _head_number(head)
        assert _verb_number(p.correct) == number
        assert _verb_number(p.wrong) != number
        between = p.prefix[len(p.prefix) - p.distance:]
        if any(w in english.NOUN_NUMBER and english.NOUN_NUMBER[w] != number for w in between):
            with_attractor += 1
    assert with_attractor / len(pairs) > 0.6
    assert max(p.distance for p in pairs) >= 10
    far = english.agreement_pairs(50, 5, min_distance=8)
    assert all(p.distance >= 8 for p in far)


# --------------------------------------------------------------------------- translation
def test_translation_pairs():
    pairs = translation.generate_pairs(3000, translation.TRAIN_SEED)
    assert pairs == translation.generate_pairs(3000, translation.TRAIN_SEED)
    assert pairs != translation.generate_pairs(3000, translation.HELDOUT_SEED)
    src_vocab = {w for s, _ in pairs for w in s}
    assert 150 <= len(src_vocab) <= 400
    src_lengths = [len(s) for s, _ in pairs]
    assert min(src_lengths) <= 4 and max(src_lengths) >= 16
    assert all(3 <= n <= 25 for n in src_lengths)
    short = translation.generate_pairs(200, 3, max_len=8)
    assert all(len(s) <= 8 and len(t) <= 8 for s, t in short)


def test_translation_adjective_inversion():
    adjectives = {a.en: a for a in translation.ADJECTIVES}
    nouns = {n.en: n for n in translation.NOUNS}
    found = 0
    for src, tgt in translation.generate_pairs(500, 1):
        for i in range(len(src) - 2):
            if src[i] == "the" and src[i + 1] in adjectives and src[i + 2] in nouns:
                noun, adj = nouns[src[i + 2]], adjectives[src[i + 1]]
                if noun.fr in tgt and adj.forms[(noun.gender, "sg")] in tgt:
                    j = tgt.index(noun.fr)
                    if j + 1 < len(tgt) and tgt[j + 1] == adj.forms[(noun.gender, "sg")]:
                        found += 1
    assert found >= 5


def test_translation_presets_and_alignment():
    src = "the agreement on the european economic area was signed in august 1992 .".split()
    tgt = translation.translate(src)
    assert " ".join(tgt) == "le accord sur la zone économique européenne a été signé en août 1992 ."
    links = translation.alignment(src, tgt)
    assert (src.index("european"), tgt.index("européenne")) in links
    assert (src.index("economic"), tgt.index("économique")) in links
    assert " ".join(translation.translate("the old wooden table is red .".split())) == \
        "la table boisée vieille est rouge ."
    assert " ".join(translation.translate("the black cats do not eat the green apples .".split())) == \
        "les chats noirs ne mangent pas les pommes vertes ."
    for text in translation.PRESETS:
        translation.translate(translation.tokenize(text))
    with pytest.raises(ValueError):
        translation.translate("the spaceship flies .".split())
    with pytest.raises(ValueError):
        translation.alignment(src, tgt[:-1])
    for s, t in translation.generate_pairs(100, 4):
        links = translation.alignment(s, t)
        assert {j for _, j in links} == set(range(len(t)))


# --------------------------------------------------------------------------- dates
def test_dates():
    pairs = dates.generate_pairs(2000, dates.TRAIN_SEED)
    assert pairs == dates.generate_pairs(2000, dates.TRAIN_SEED)
    assert pairs != dates.generate_pairs(2000, dates.HELDOUT_SEED)
    for src, tgt in pairs:
        iso = "".join(tgt)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", iso)
        assert datetime.date.fromisoformat(iso).isoformat() == iso
        assert src == dates.tokenize("".join(src))
    assert dates.to_iso(datetime.date(1997, 3, 3)) == "1997-03-03"
    assert dates.format_date(datetime.date(1997, 3, 3), "the_nth_of_month") == "the 3rd of march 1997"
    assert dates.format_date(datetime.date(1997, 3, 3), "weekday_d_month") == "monday 3 march 1997"
    assert dates.tokenize("March  3, 1997") == list("march 3, 1997")
    assert dates.PRESETS


# --------------------------------------------------------------------------- vocab
def test_vocab_build_and_roundtrip():
    v = Vocab.build([["b", "a", "b"], ["c", "a", "b"]])
    assert v.itos[:4] == SPECIALS
    assert v.itos[4:] == ["b", "a", "c"]  # frequency desc, then alphabetical
    assert v.freq == {"b": 3, "a": 2, "c": 1}
    assert (v.pad_id, v.unk_id, v.bos_id, v.eos_id) == (0, 1, 2, 3)
    assert v.encode(["a", "zzz"]) == [5, v.unk_id]
    assert v.decode([5, 4]) == ["a", "b"]
    assert len(Vocab.build([["x"], ["y", "y"]], min_freq=2)) == 5
    assert len(Vocab.build([list("abcdef")], max_size=6)) == 6
    # json round trip, all forms
    assert Vocab.from_json(json.loads(json.dumps(v.to_json()))) == v
    assert Vocab.from_json(list(v.itos)) == v
    assert Vocab.from_json({t: i for i, t in enumerate(v.itos)}) == v
    # ids in a file are kept; special tokens are found wherever they sit, or are absent (issue 18)
    assert Vocab.from_json({t: i for i, t in reversed(list(enumerate(v.itos)))}).stoi == v.stoi
    plain = Vocab.from_json(["hello", "world"])
    assert plain.itos == ["hello", "world"] and (plain.pad_id, plain.unk_id, plain.bos_id, plain.eos_id) == (None,) * 4
    moved = Vocab.from_json(["a", "<pad>", "<unk>", "<bos>", "<eos>"])
    assert (moved.pad_id, moved.unk_id, moved.bos_id, moved.eos_id) == (1, 2, 3, 4) and not moved.builtin_layout
    assert Vocab.from_json(["hello", "world"], add_specials=True).itos == SPECIALS + ["hello", "world"]
    assert Vocab.from_json({"world": 1, "hello": 0}, add_specials=True).itos == SPECIALS + ["hello", "world"]


@pytest.mark.parametrize("bad", [
    [], {}, "tokens", 42, None,
    ["a", "a"], ["a", 3],
    {"a": 0, "b": 2}, {"a": 0, "b": 0}, {"a": "0"}, {"a": 1.0}, {"a": True},
    ["<pad>", "<unk>", "<bos>", "<eos>", "a", 7],
])
def test_vocab_validation(bad):
    with pytest.raises(ValueError):
        Vocab.from_json(bad)


def test_vocab_rejects_non_string_tokens():
    with pytest.raises(ValueError):
        Vocab(["a", 1])


# --------------------------------------------------------------------------- tokenizers
def test_tokenize_words():
    assert tokenize_words('The Keys, (to "the" cabinet) - are!') == \
        ["the", "keys", ",", "(", "to", '"', "the", '"', "cabinet", ")", "-", "are", "!"]
    assert tokenize_words("it's") == ["it", "'", "s"]
    assert tokenize_words("a\x00b c\u200bd \x07e\u200f") == ["ab", "cd", "e"]
    assert tokenize_words("I love 😀🎉 NLP") == ["i", "love", "😀", "🎉", "nlp"]
    assert tokenize_words("مرحبا بالعالم") == ["مرحبا", "بالعالم"]
    assert tokenize_words("你好 世界") == ["你好", "世界"]
    assert tokenize_words("नमस्ते") == ["नमस्ते"]  # combining marks stay inside the word
    assert tokenize_words("") == [] and tokenize_words("\x00\u200b  \n") == []
    assert tokenize_words("👍🏽") == ["👍🏽"]
    v = Vocab.build([["i", "love", "nlp"]])
    assert v.encode(tokenize_words("I love 😀 مرحبا")) == [v.stoi["i"], v.stoi["love"], v.unk_id, v.unk_id]


def test_tokenize_chars():
    assert tokenize_chars("Ab\x00c\u200b  d\n") == ["a", "b", "c", " ", "d"]
    assert tokenize_chars("Ab", lower=False) == ["A", "b"]
    assert tokenize_chars("日本") == ["日", "本"]


# --------------------------------------------------------------------------- user text
GOOD_TEXT = (
    "The quick brown fox jumps over the lazy dog. It was a sunny day! Did the dog care? "
    "No, it slept under the old oak tree.\n\n"
    "Later that evening the fox returned to the forest, where its family waited. "
    "They ate berries and talked about the dog. The moon rose slowly over the hills, "
    "and the whole forest became quiet and dark.\n"
)


def test_corpus_from_text_word_and_char():
    corpus = corpus_from_text(GOOD_TEXT)
    assert corpus[0] == tokenize_words("The quick brown fox jumps over the lazy dog.")
    assert corpus[1][-1] == "!"
    assert all(isinstance(t, str) for s in corpus for t in s)
    chars = corpus_from_text(GOOD_TEXT, level="char")
    assert len(chars) == 2 and chars[0][:3] == ["t", "h", "e"]


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("   \n\t  ", "empty"),
    ("short text.", "too short"),
    ("word " * 30 + "x" * 150, "too short"),  # enough chars, too few tokens
    ("... !!! ??? " * 40, "no usable tokens"),
    ("😀" * 300, "no usable tokens"),
    ("\x01\x02\x03abc" * 100, "binary"),
])
def test_corpus_errors(text, fragment):
    with pytest.raises(CorpusError, match=fragment):
        corpus_from_text(text)


def test_corpus_size_limit_and_level():
    with pytest.raises(CorpusError, match="limit"):
        corpus_from_text(GOOD_TEXT * 10, max_chars=1000)
    with pytest.raises(CorpusError):
        corpus_from_text(GOOD_TEXT, level="bytes")  # type: ignore[arg-type]
    assert issubclass(CorpusError, ValueError)


def test_read_uploaded_text():
    assert read_uploaded_text("héllo wörld".encode()) == "héllo wörld"
    assert read_uploaded_text(b"\xef\xbb\xbfbom text") == "bom text"
    assert read_uploaded_text("utf16 text".encode("utf-16")) == "utf16 text"
    with pytest.raises(CorpusError, match="empty"):
        read_uploaded_text(b"")
    with pytest.raises(CorpusError, match="binary"):
        read_uploaded_text(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(CorpusError, match="UTF-8"):
        read_uploaded_text("caf\u00e9 cr\u00e8me".encode("latin-1"))
    with pytest.raises(CorpusError, match="limit"):
        read_uploaded_text(b"a" * 101, max_bytes=100)


def test_data_package_does_not_import_torch():
    import importlib
    import subprocess

    code = "import sys, explorer.data; assert 'torch' not in sys.modules, 'torch imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert importlib.import_module("explorer.data.vocab").Vocab is Vocab
