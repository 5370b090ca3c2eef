"""Hostile inputs shared by the hostile-text, hostile-probe and hostile-file tests (no streamlit here)."""
from __future__ import annotations

import io
import re
from pathlib import Path

import torch

from families import GPT2_SMALL, tiny_model

# ------------------------------------------------------------------------------------------- text
# 80 distinct words of the built-in English grammar (more than the 64 words the embeddings view highlights)
LONG_WORDS = ("the that which a in are is our her their had his my your some on behind near there were was every "
              "under many these those this just who he we you they i beside disappeared fall fell disappear she very "
              "short little big long large huge heavy tiny small break broke disappears falls burned inside burn onto "
              "into breaks school grew of burns from morning without with italian clean grow french european local "
              "kitchen do foreign german grows train").split()
# 3,000 words (about 14,000 characters: under the 20,000-character input limit)
THREE_THOUSAND_WORDS = " ".join(LONG_WORDS[i % len(LONG_WORDS)] for i in range(3000))

HOSTILE_TEXTS: dict[str, str] = {
    "empty": "",
    "whitespace": " \t\n\u3000\u00a0  \r\n ",
    "control-only": "\x00\x01\x07\x1b\x7f\u200b\ufeff",
    "control-mixed": "the\x00 dog\x07 sleeps\x1b[31m in\u200b the\x00 garden",
    "combining-only": "\u0301\u0300 \u20dd\ufe0f \U0001f3fd",  # marks, a variation selector, a skin tone: no base
    "3000-words": THREE_THOUSAND_WORDS,
    "emoji": "🐕" * 120 + " 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 " + "🔑🦘" * 40,
    "rtl": "القطة تجلس على الحصيرة والكلب ينام החתול יושב על השטיח",
    "cjk": "我爱自然语言处理。猫坐在垫子上。日本語のテキスト、한국어 문장",
    "script": "<script>alert(1)</script> the dog",
    "img": '<img src=x onerror="alert(1)"> the dog',
}
UNUSABLE = ("empty", "whitespace", "control-only")  # nothing left to read once cleaned
HTML_CASES = ("script", "img")
RAW_HTML = re.compile(r"<\s*(script|img)\b", re.IGNORECASE)


def raw_html_in(markup: str) -> list[str]:
    """The raw `<script` / `<img` tags in a piece of HTML (empty when every user character was escaped)."""
    return [m.group(0) for m in RAW_HTML.finditer(markup)]


# ------------------------------------------------------------------------------------------ files
class WritesAFile:
    """A pickle payload: unpickling it calls open(marker, 'w'), which creates the marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def pickle_payload_pt(marker: Path) -> bytes:
    """A torch.save file whose unpickling (without weights_only) would create `marker`."""
    buf = io.BytesIO()
    torch.save({"weight": torch.zeros(2), "payload": WritesAFile(str(marker))}, buf)
    return buf.getvalue()


def lstm_state_dict(vocab_size: int = 10, emb: int = 6, hidden: int = 8, layers: int = 1) -> dict[str, torch.Tensor]:
    """A plain LSTM language model's state dict (emb.weight, lstm.*, fc.*), as a user would save it."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
    state = {"emb.weight": torch.randn(vocab_size, emb)}
    state.update({f"lstm.{k}": v.detach().clone() for k, v in lstm.state_dict().items()})
    state.update({"fc.weight": torch.randn(vocab_size, hidden), "fc.bias": torch.zeros(vocab_size)})
    return state


def conv_state_dict() -> dict[str, torch.Tensor]:
    """A small conv net's state dict: the wrong architecture for every view."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16, 2))
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def vocab_json(n: int) -> bytes:
    """A vocab.json list of n tokens (the four specials, then w4, w5, ...)."""
    import json

    tokens = ["<pad>", "<unk>", "<bos>", "<eos>"] + [f"w{i}" for i in range(4, n)]
    return json.dumps(tokens[:n]).encode()


def bytelevel_gpt2(folder: Path) -> None:
    """Save a tiny GPT-2 with a byte-level BPE tokenizer (trained here, offline) into `folder`: its tokens
    reproduce any text exactly, so typed HTML reaches the page's HTML builders character for character."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the dog sleeps in the garden", "<script>alert(1)</script>"] * 10, vocab_size=300,
                            min_frequency=1, special_tokens=["<|endoftext|>"])
    tok = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                            unk_token="<|endoftext|>")
    model = tiny_model("GPT2LMHeadModel", len(tok), seed=0, n_positions=64, **GPT2_SMALL, n_head=2,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
