"""Tokens shown as text (explorer.text.token_text): the same marks for every tokenizer scheme, characters rather than
their bytes, parts of a character labelled; through the adapters, for tiny models of each scheme and SmolLM2."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer.data.vocab import Vocab
from explorer.text.token_text import EMPTY, SPACE, TokenText, byte_decoder, readable
from real_tokenizers import SCHEMES, save_tiny
from conftest import needs_smollm2

SENTENCE = "Le café coûte 3 € 😊 et 🦘!"
RAW_MARKS = ("Ġ", "Ċ", "▁", "Ã", "âĤ", "ðŁ", "<0x")
PART = re.compile(r"\((\d+)/(\d+)\)")


def _unmarked(texts: list[str]) -> str:
    """The text a row of shown tokens stands for: each character split over n tokens counted once, · a space."""
    out = []
    for t in texts:
        m = PART.search(t)
        if m and m.group(1) != "1":  # the character was already written by its first part
            t = t[:m.start() - 1] + t[m.end():]
        out.append(PART.sub("", t))
    return "".join(out).replace(SPACE, " ")


def test_readable_marks_whitespace_and_controls():
    assert readable(" is") == "·is" and readable("\n") == "↵" and readable("\t") == "⇥"
    assert readable("a\x07b") == "a␇b" and readable("\u200b") == "‹U+200B›" and readable("") == EMPTY
    assert readable("café 😊") == "café·😊"
    assert readable(readable(" x\n")) == readable(" x\n")  # shown text stays as it is
    assert readable("‹F0 9F› a") == "‹F0 9F›·a" and readable(readable(" \x07")) == "·␇"  # a byte list keeps its spaces


def test_byte_decoder_is_gpt2s_bijection():
    dec = byte_decoder()
    assert len(dec) == 256 and sorted(dec.values()) == list(range(256))
    assert dec["Ġ"] == 32 and dec["Ċ"] == 10 and dec["A"] == 65


@pytest.mark.parametrize("scheme", ["byte-level", "sentencepiece", "wordpiece"])
def test_each_scheme_reads_back_as_the_text(scheme):
    tok = SCHEMES[scheme]()
    shown = TokenText.of_tokenizer(tok)
    assert shown.scheme == scheme and shown.source == "decoder"
    ids = tok(SENTENCE, add_special_tokens=False)["input_ids"]
    texts = shown.texts(ids)
    assert not [t for t in texts if any(m in t for m in RAW_MARKS)], texts
    decoded = tok.decode(ids)
    if scheme == "wordpiece":  # lowercased, its words split on spaces and punctuation; ## glued to the piece before
        assert "".join(t[2:] if t.startswith("##") else " " + t for t in texts).split() == decoded.replace(
            " ##", "").split()
    else:
        assert _unmarked(texts).strip() == decoded.strip() == SENTENCE
    # a scheme read from the vocabulary alone (no decoder to ask) gives the same text
    assert TokenText(shown.pieces, shown.special).texts(ids) == texts


def test_a_character_over_several_tokens_is_labelled_in_each():
    tok = SCHEMES["sentencepiece"]()  # byte fallback: é is <0xC3> <0xA9>, 😊 four bytes
    shown = TokenText.of_tokenizer(tok)
    ids = tok("café 😊", add_special_tokens=False)["input_ids"]
    texts = shown.texts(ids)
    assert "é(1/2)" in texts and "é(2/2)" in texts and [t for t in texts if t.startswith("😊(")] == [
        "😊(1/4)", "😊(2/4)", "😊(3/4)", "😊(4/4)"]
    # on its own (a top-k alternative) a byte token shows its byte
    lone = [shown.text(i) for i in ids if shown.text(i).startswith("‹")]
    assert "‹C3›" in lone and "‹F0›" in lone


def test_byte_level_token_holding_part_of_a_character():
    tok = SCHEMES["byte-level"]()
    shown = TokenText.of_tokenizer(tok)
    alphabet = {b: c for c, b in byte_decoder().items()}
    # a token of the space and the first three bytes of 😊, and one of its last byte, as byte-level BPE splits it
    first, last = "".join(alphabet[b] for b in b" \xf0\x9f\x98"), alphabet[0x8A]
    pieces = list(shown.pieces) + [first, last]
    text = TokenText(pieces, shown.special, "byte-level")
    n = len(shown.pieces)
    assert text.texts([n, n + 1]) == ["·😊(1/2)", "😊(2/2)"]
    assert text.text(n) == "·‹F0 9F 98›" and text.text(n + 1) == "‹8A›"


@pytest.mark.parametrize("scheme", ["byte-level", "sentencepiece"])
def test_decoded_text_shows_a_cut_character_as_its_bytes(scheme):
    """A text whose ids end inside a character (な is E3 81 AA) ends in its bytes ‹E3 81›, as a token on its own
    shows them, never in "�"; a character cut in the middle the same; a "�" the text holds as a character stays."""
    tok = SCHEMES[scheme]()
    shown = TokenText.of_tokenizer(tok)
    ids = tok("Le thé なか", add_special_tokens=False)["input_ids"]
    cut = ids[:-1]  # か (E3 81 8B) without its last byte
    assert "\ufffd" in tok.decode(cut)
    assert shown.decoded(cut, tok.decode(cut)) == "Le thé な‹E3 81›"
    assert shown.decoded(ids[:-2], tok.decode(ids[:-2])) == "Le thé な‹E3›"
    assert shown.decoded(ids, tok.decode(ids)) == "Le thé なか"
    leaf = tok("🍃🍃 a", add_special_tokens=False)["input_ids"]
    inner = leaf[:1] + leaf[2:] if scheme == "byte-level" else leaf[:2] + leaf[3:]  # 8D / 9F of the first 🍃 left out
    assert tok.decode(inner).count("\ufffd") >= 1
    assert shown.decoded(inner, tok.decode(inner)) == ("‹F0 9F 83›🍃 a" if scheme == "byte-level" else "‹F0 8D 83›🍃 a")
    whole = tok("a \ufffd b", add_special_tokens=False)["input_ids"]
    assert shown.decoded(whole, tok.decode(whole)) == tok.decode(whole) == "a \ufffd b"


def test_special_tokens_and_unknown_ids_are_named():
    tok = SCHEMES["byte-level"]()
    shown = TokenText.of_tokenizer(tok)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    assert shown.text(eos) == "<|endoftext|>" and shown.text(10**6) == f"#{10**6}"


def test_builtin_vocabularies_show_words_and_a_space_character():
    words = TokenText.of_vocab(Vocab(["the", "dog", "sleeps"]))
    assert words.scheme == "plain" and words.texts([4, 5]) == ["the", "dog"] and words.text(2) == "<bos>"
    chars = TokenText.of_vocab(Vocab(list("abc ")))
    assert chars.text(chars.pieces.index(" ")) == SPACE


@pytest.fixture(scope="module")
def real_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-tokenizers")
    ids = {family: save_tiny(root, family) for family in ("gpt2", "llama", "t5", "bert")}
    return root, ids


@pytest.mark.parametrize("family", ["gpt2", "llama", "t5", "bert"])
def test_adapters_show_text_for_each_family(real_models, family, monkeypatch):
    from explorer.loading.loaders import load_model

    root, ids = real_models
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(root))
    loaded = load_model(ids[family])
    enc = loaded.adapter.encode(SENTENCE)
    assert enc.ids and not [t for t in enc.tokens if any(m in t for m in RAW_MARKS)], enc.tokens
    if family in ("gpt2", "llama"):  # every character readable, in order
        body = [t for t, s in zip(enc.tokens, enc.special) if not s]
        assert _unmarked(body).strip() == SENTENCE
    alone = loaded.adapter.token_strings(enc.ids)
    assert not [t for t in alone if any(m in t for m in RAW_MARKS)], alone




@needs_smollm2
def test_smollm2_tokens_are_text():
    from explorer.loading.loaders import load_model

    adapter = load_model("pretrained:smollm2").adapter
    assert adapter.display.scheme == "byte-level"
    enc = adapter.encode(SENTENCE)
    assert enc.tokens[:3] == ("Le", "·café", "·co") and "·€" in enc.tokens
    assert _unmarked(list(enc.tokens)) == SENTENCE
    assert adapter.token_strings([4197, 644]) == ["·king", "king"]
    assert adapter.piece_strings([4197]) == ["Ġking"]  # the tokenizer's own name, never shown
    assert adapter.sequence_strings(list(enc.ids)) == list(enc.tokens)


def test_shown_tokens_pass_through_chart_labels_unchanged():
    from explorer.viz.tokens import labels

    shown = ["·café", "😊(1/2)", "↵", "Ġ", "·‹F0 9F 98›"]  # a literal Ġ (Maltese) typed by a user stays a Ġ
    assert labels(shown) == shown


def test_no_module_shows_raw_markers_by_hand():
    """The display is decided in one place: no other module rewrites Ġ/▁/Ċ itself."""
    root = Path(__file__).resolve().parent.parent
    offenders = [p for p in (root / "explorer").rglob("*.py") if p.name != "token_text.py" and
                 re.search(r"replace\(\"(Ġ|▁|Ċ)\"", p.read_text(encoding="utf-8"))]
    assert not offenders, offenders


def test_a_combining_mark_without_its_base_is_drawn_on_a_dotted_circle():
    """A tokenizer that reads 'e' + U+0301 as typed gives the accent a token of its own: shown on ◌, not on the
    character drawn before it in a label; a mark after its base in the same token stays as it is."""
    assert readable("\u0301") == "◌\u0301" and readable(readable("\u0301")) == "◌\u0301"
    assert readable("e\u0301") == "e\u0301" and readable("\u20dd") == "◌\u20dd"
