"""Tiny random models of every Hugging Face family the explorer is checked with, made from configs (no download).

`FAMILIES`: name -> (label, model class name, config kwargs, explorer family). `tiny(name)` builds one (seeded) with
the small word-level tokenizer `make_tokenizer()`; `save(root, name)` writes it as a Hugging Face folder (model +
tokenizer) so that `load_model("local:<name>")` opens it as a user's model would be opened.

`tiny_model(class name, vocab_size, seed=..., **config)` / `tiny_config(...)` are what every test uses to build a tiny
random Hugging Face model (or only its config); the size constants below are the ones several tests share.
"""
from __future__ import annotations

from pathlib import Path

import torch

HF_WORDS = ["the", "red", "car", "is", "fast", ".", "la", "voiture", "rouge", "est", "rapide", "old", "table"]

SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
IDS = dict(pad_token_id=0, eos_token_id=1, bos_token_id=1)
ENC_DEC_SMALL = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
SEQ2SEQ = dict(ENC_DEC_SMALL, pad_token_id=0, eos_token_id=1, bos_token_id=2, decoder_start_token_id=1,
               forced_eos_token_id=None)
T5_SMALL = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
GPT2_SMALL = dict(n_embd=32, n_layer=2)  # n_head and n_positions differ between tests: each names its own
BERT_ONE_LAYER = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
FAMILIES: dict[str, tuple[str, str, dict, str]] = {
    "llama": ("Llama", "LlamaForCausalLM", dict(SMALL, num_key_value_heads=2, **IDS), "decoder"),
    "qwen2": ("Qwen2", "Qwen2ForCausalLM", dict(SMALL, num_key_value_heads=2, **IDS), "decoder"),
    "mistral": ("Mistral", "MistralForCausalLM", dict(SMALL, num_key_value_heads=2, sliding_window=4, **IDS),
                "decoder"),
    "gemma": ("Gemma", "GemmaForCausalLM", dict(SMALL, num_key_value_heads=1, head_dim=8, **IDS), "decoder"),
    "phi3": ("Phi-3", "Phi3ForCausalLM", dict(SMALL, num_key_value_heads=2, partial_rotary_factor=0.5, **IDS),
             "decoder"),
    "gpt_neox": ("GPT-NeoX", "GPTNeoXForCausalLM", dict(SMALL, rotary_pct=0.25, **IDS), "decoder"),
    "opt": ("OPT", "OPTForCausalLM", dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                                          word_embed_proj_dim=32, max_position_embeddings=64, **IDS), "decoder"),
    "bloom": ("BLOOM (ALiBi)", "BloomForCausalLM", dict(hidden_size=32, n_layer=2, n_head=4, **IDS), "decoder"),
    "falcon": ("Falcon", "FalconForCausalLM", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, **IDS),
               "decoder"),
    "gpt2": ("GPT-2", "GPT2LMHeadModel", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, **IDS), "decoder"),
    "bert": ("BERT", "BertModel", dict(SMALL, max_position_embeddings=64, pad_token_id=0), "encoder"),
    "distilbert": ("DistilBERT", "DistilBertModel", dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                          max_position_embeddings=64, pad_token_id=0), "encoder"),
    "roberta": ("RoBERTa", "RobertaModel", dict(SMALL, max_position_embeddings=70, pad_token_id=0), "encoder"),
    "albert": ("ALBERT", "AlbertModel", dict(SMALL, embedding_size=16, max_position_embeddings=64, pad_token_id=0),
               "encoder"),
    "electra": ("ELECTRA", "ElectraModel", dict(SMALL, embedding_size=16, max_position_embeddings=64, pad_token_id=0),
                "encoder"),
    "t5": ("T5", "T5ForConditionalGeneration", dict(T5_SMALL, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0),
           "encoder-decoder"),
    "bart": ("BART", "BartForConditionalGeneration", SEQ2SEQ, "encoder-decoder"),
    "mbart": ("mBART", "MBartForConditionalGeneration", SEQ2SEQ, "encoder-decoder"),
    "pegasus": ("Pegasus", "PegasusForConditionalGeneration", SEQ2SEQ, "encoder-decoder"),
    "marian": ("Marian", "MarianMTModel", dict(SEQ2SEQ, decoder_start_token_id=0), "encoder-decoder"),
}


def make_tokenizer():
    """A word-level tokenizer of HF_WORDS (ids: <pad> 0, </s> 1, <unk> 2, then the words) appending </s>."""
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


def tiny_config(cls_name: str, vocab_size: int, **config):
    """The config of transformers' model class `cls_name` (its config_class) with vocab_size and `config`; nothing
    else is set (pass attn_implementation="eager" for eager attention)."""
    import transformers

    return getattr(transformers, cls_name).config_class(vocab_size=vocab_size, **config)


def tiny_model(cls_name: str, vocab_size: int, seed: int | None = None, **config):
    """A random transformers `cls_name` (e.g. "GPT2LMHeadModel") built from tiny_config(cls_name, vocab_size,
    **config), after torch.manual_seed(seed) unless seed is None (then the global generator goes on as it is). In
    training mode, as its constructor leaves it: call .eval() where wanted."""
    import transformers

    cfg = tiny_config(cls_name, vocab_size, **config)
    if seed is not None:
        torch.manual_seed(seed)
    return getattr(transformers, cls_name)(cfg)


def tiny(name: str, seed: int = 0):
    """(model in eval mode with eager attention, tokenizer, explorer family) for family `name`."""
    label, cls, kwargs, family = FAMILIES[name]
    tok = make_tokenizer()
    model = tiny_model(cls, len(tok), seed=seed, attn_implementation="eager", **kwargs).eval()
    return model, tok, family


def save(root: Path, name: str) -> str:
    """Write family `name` as a Hugging Face folder under root; returns its model id."""
    model, tok, _ = tiny(name)
    model.save_pretrained(root / f"tiny-{name}")
    tok.save_pretrained(root / f"tiny-{name}")
    return f"local:tiny-{name}"
