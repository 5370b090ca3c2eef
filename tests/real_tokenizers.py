"""Tokenizers of the three real schemes, built here with the `tokenizers` library (no download), and tiny random
Hugging Face models that read with them.

- `byte_level_bpe()`: GPT-2 / Llama 3 / SmolLM2 style (ByteLevel pre-tokenizer and decoder, `Ġ` for a space);
- `sentencepiece_bytes()`: Llama 2 style (Metaspace `▁`, a unigram model with byte fallback `<0xE2>`);
- `sentencepiece_unigram()`: T5 style (Metaspace, no byte fallback: unknown characters are `<unk>`);
- `wordpiece()`: BERT style (`##` continuation pieces, `[UNK]`).
`save_tiny(root, family, tokenizer)` writes a tiny random model of a tests/families.py family with that tokenizer
as a Hugging Face folder, to open as `local:<name>`.
"""
from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "Le café coûte 3 € 😊 et le thé 2 €.",
    "The capital of France is Paris. The king and the queen saw the river bank.",
    "the dog sleeps in the garden and the cat sat on the mat",
    "über naïve façade — “quoted” words, numbers 1 2 3 and emoji 🦘 🚀",
] * 20


def byte_level_bpe():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=400, min_frequency=2, special_tokens=["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>", pad_token="<|endoftext|>")


def _metaspace(byte_fallback: bool):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    pieces = [(s, 0.0) for s in specials]
    if byte_fallback:
        pieces += [(f"<0x{b:02X}>", 0.0) for b in range(256)]
    words = sorted({w for line in CORPUS for w in line.split()})
    pieces += [("▁" + w, -2.0) for w in words if w.isascii()] + [("▁", -3.0)]
    pieces += [(c, -5.0) for c in sorted({c for line in CORPUS for c in line if c.isascii() and not c.isspace()})]
    model = models.Unigram(pieces, unk_id=0, byte_fallback=byte_fallback)
    tok = Tokenizer(model)
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="always"),
                                     *([decoders.ByteFallback(), decoders.Fuse()] if byte_fallback else [])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")


def sentencepiece_bytes():
    return _metaspace(byte_fallback=True)


def sentencepiece_unigram():
    return _metaspace(byte_fallback=False)


def wordpiece():
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wp = BertWordPieceTokenizer(lowercase=True, strip_accents=False)
    wp.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1,
                           special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return BertTokenizerFast(tokenizer_object=wp._tokenizer, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                             pad_token="[PAD]", mask_token="[MASK]")


SCHEMES = {"byte-level": byte_level_bpe, "sentencepiece": sentencepiece_bytes, "sentencepiece-unigram":
           sentencepiece_unigram, "wordpiece": wordpiece}
# family (tests/families.py) -> the scheme its real checkpoints use
FAMILY_SCHEME = {"gpt2": "byte-level", "llama": "sentencepiece", "t5": "sentencepiece-unigram", "bert": "wordpiece"}


def save_tiny(root: Path, family: str, tokenizer=None, head: str = "", name: str = "") -> str:
    """Write a tiny random model of `family` (tests/families.py) reading with `tokenizer` (default: the family's
    real scheme) under root; returns its id `local:real-<family>`. head: a model class to use instead (e.g.
    "BertForMaskedLM"); name: the folder and id to use instead (a model loaded in the same process under the
    default id with another tokenizer stays in the model cache under that id)."""
    import transformers

    from families import FAMILIES

    tok = tokenizer if tokenizer is not None else SCHEMES[FAMILY_SCHEME[family]]()
    _, cls, kwargs, _ = FAMILIES[family]
    ids = {k: v for k, v in (("pad_token_id", tok.pad_token_id), ("eos_token_id", tok.eos_token_id),
                             ("bos_token_id", tok.bos_token_id)) if v is not None and k in kwargs}
    model_cls = getattr(transformers, head or cls)
    config = model_cls.config_class(vocab_size=len(tok), **{**kwargs, **ids})
    torch.manual_seed(0)
    model = model_cls(config).eval()
    folder = root / (name or f"real-{family}")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return f"local:{folder.name}"
