"""Tiny random models of every Hugging Face family the explorer is checked with, made from configs (no download).

`FAMILIES`: name -> (label, model class name, config kwargs, explorer family). `tiny(name)` builds one (seeded) with
the small word-level tokenizer of tests/test_probe_seq2seq.py; `save(root, name)` writes it as a Hugging Face
folder (model + tokenizer) so that `load_model("local:<name>")` opens it as a user's model would be opened.
"""
from __future__ import annotations

from pathlib import Path

import torch

from test_probe_seq2seq import make_tokenizer

SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
IDS = dict(pad_token_id=0, eos_token_id=1, bos_token_id=1)
SEQ2SEQ = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
               encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
               bos_token_id=2, decoder_start_token_id=1, forced_eos_token_id=None)
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
    "t5": ("T5", "T5ForConditionalGeneration", dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                                    pad_token_id=0, eos_token_id=1, decoder_start_token_id=0),
           "encoder-decoder"),
    "bart": ("BART", "BartForConditionalGeneration", SEQ2SEQ, "encoder-decoder"),
    "mbart": ("mBART", "MBartForConditionalGeneration", SEQ2SEQ, "encoder-decoder"),
    "pegasus": ("Pegasus", "PegasusForConditionalGeneration", SEQ2SEQ, "encoder-decoder"),
    "marian": ("Marian", "MarianMTModel", dict(SEQ2SEQ, decoder_start_token_id=0), "encoder-decoder"),
}


def tiny(name: str, seed: int = 0):
    """(model in eval mode with eager attention, tokenizer, explorer family) for family `name`."""
    import transformers

    label, cls, kwargs, family = FAMILIES[name]
    tok = make_tokenizer()
    model_cls = getattr(transformers, cls)
    config = model_cls.config_class(vocab_size=len(tok), attn_implementation="eager", **kwargs)
    torch.manual_seed(seed)
    return model_cls(config).eval(), tok, family


def save(root: Path, name: str) -> str:
    """Write family `name` as a Hugging Face folder under root; returns its model id."""
    model, tok, _ = tiny(name)
    model.save_pretrained(root / f"tiny-{name}")
    tok.save_pretrained(root / f"tiny-{name}")
    return f"local:tiny-{name}"
