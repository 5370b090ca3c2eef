"""The recipes of the shipped checkpoints in assets/builtin/ (BUILTINS: name -> TrainSpec) and `train_builtin`,
which reproduces one (`python -m explorer.training.train <name>`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import torch

from explorer.training.corpus import REAL_ENGLISH
from explorer.training.loop import train_model
from explorer.training.spec import TrainProgress, TrainResult, TrainSpec

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSONDict


class _Data(TypedDict):
    """The TrainSpec fields a group of recipes shares (each group lists exactly its own, so that a recipe's keyword
    arguments never repeat one)."""
    corpus: str
    n_train: int
    n_heldout: int
    full_metrics: bool


class _LMRecipe(_Data):
    architecture: str


class _S2SRecipe(_LMRecipe):
    emb_dim: int
    hidden_size: int
    epochs: int
    lr: float
    batch_size: int


class _LuongRecipe(_S2SRecipe):
    input_feeding: bool
    bidirectional: bool


class _WordnetText(_Data):
    max_vocab: int
    stored: str


class _WordnetRNN(_WordnetText):
    architecture: str
    tie_weights: bool
    emb_dim: int
    hidden_size: int
    epochs: int
    lr: float


class _WordnetTransformer(_WordnetText):
    num_layers: int
    n_head: int
    hidden_size: int
    block_size: int
    lr: float
    batch_size: int


_LM: _LMRecipe = {"architecture": "rnn_lm", "corpus": "english", "n_train": 20_000, "n_heldout": 1_000,
                  "full_metrics": True}
_S2S: _S2SRecipe = {"architecture": "seq2seq", "corpus": "translation", "n_train": 20_000, "n_heldout": 1_000,
                    "full_metrics": True, "emb_dim": 64, "hidden_size": 128, "epochs": 5, "lr": 3e-3, "batch_size": 64}
_DATES: _S2SRecipe = {**_S2S, "corpus": "dates", "epochs": 6}

# Luong attention learns this task more slowly than Bahdanau's (same recipe, after 3 epochs: held-out loss 0.16
# vs 0.017), so the Luong models use input feeding (Luong et al. 3.3), a bidirectional encoder and 10 epochs.
_LUONG: _LuongRecipe = {**_S2S, "epochs": 10, "input_feeding": True, "bidirectional": True}

# Real English (explorer.data.wordnet_english: WordNet 3.0's example sentences and definitions, 1.46M training tokens):
# the 12,000 most frequent words (98.8 % of the words of tests/data/everyday_sentences.txt), two epochs, the weights
# stored in float16 (assets/builtin holds ~10 MB per model).
_WORDNET_TEXT: _WordnetText = {"corpus": "wordnet", "n_train": 200_000, "n_heldout": 20_000, "full_metrics": True,
                               "max_vocab": 12_000, "stored": "float16"}
# The recurrent models read everyday English too (explorer.data.everyday_english: SmolLM2's everyday sentences, then
# WordNet's lines; 1.81M training tokens) with the 20,000 most frequent words (99.7 % of the everyday sentences'
# words; 12,000 left 7 % of the training tokens <unk>, 20,000 leave 3.3 %), and the output layer tied to the embeddings
# (E = H = 192), so that a model still holds ~9 MB.
_WORDNET: _WordnetRNN = {**_WORDNET_TEXT, "corpus": "everyday", "max_vocab": 20_000, "architecture": "rnn_lm",
                         "emb_dim": 192, "hidden_size": 192, "epochs": 2, "lr": 3e-3,
                         "tie_weights": True}
_WORDNET_TRANSFORMER: _WordnetTransformer = {**_WORDNET_TEXT, "num_layers": 2, "n_head": 4, "hidden_size": 128,
                                             "block_size": 64, "lr": 2e-3, "batch_size": 64}
_ON_WORDNET = "on real English (WordNet 3.0's example sentences and definitions)."
_ON_EVERYDAY = ("on real English (everyday sentences written by SmolLM2-135M-Instruct, then WordNet 3.0's example "
                "sentences and definitions), output tied to the embeddings.")

BUILTINS: dict[str, TrainSpec] = {
    "rnn-lm": TrainSpec(**_LM, cell="rnn", emb_dim=128, hidden_size=256, epochs=6, lr=2e-3,
                        description="Elman RNN word-level language model on the generated English corpus."),
    "gru-lm": TrainSpec(**_LM, cell="gru", emb_dim=128, hidden_size=256, epochs=6, lr=3e-3,
                        description="GRU word-level language model on the generated English corpus."),
    "lstm-lm": TrainSpec(**_LM, cell="lstm", emb_dim=128, hidden_size=256, epochs=6, lr=3e-3,
                         description="LSTM word-level language model on the generated English corpus."),
    "lstm-lm-wordnet": TrainSpec(**_WORDNET, cell="lstm", description=f"LSTM word-level language model {_ON_EVERYDAY}"),
    "gru-lm-wordnet": TrainSpec(**_WORDNET, cell="gru", description=f"GRU word-level language model {_ON_EVERYDAY}"),
    "rnn-lm-wordnet": TrainSpec(**_WORDNET, cell="rnn",
                                description=f"Elman RNN word-level language model {_ON_EVERYDAY}"),
    "tiny-gpt-wordnet": TrainSpec(**_WORDNET_TRANSFORMER, architecture="tiny_gpt", epochs=2, warmup_steps=100,
                                  description="2-layer, 4-head decoder-only transformer (learned positions) "
                                              + _ON_WORDNET),
    "masked-lm-wordnet": TrainSpec(**_WORDNET_TRANSFORMER, architecture="masked_lm", epochs=8, warmup_steps=200,
                                   description=f"2-layer, 4-head BERT-style masked language model {_ON_WORDNET}"),
    "tiny-gpt": TrainSpec(architecture="tiny_gpt", corpus="english", n_train=20_000, n_heldout=1_000,
                          full_metrics=True, num_layers=2, n_head=4, hidden_size=128, block_size=64, epochs=4,
                          lr=2e-3, batch_size=64, warmup_steps=100,
                          description="2-layer, 4-head decoder-only transformer (learned positions) on the English "
                                      "corpus."),
    "word2vec": TrainSpec(architecture="word2vec", corpus="english", n_train=20_000, n_heldout=1_000,
                          hidden_size=64, window=2, negatives=5, epochs=3, lr=5e-3, batch_size=1024,
                          warmup_steps=0, grad_clip=0.0, full_metrics=True,
                          description="Skip-gram with negative sampling word vectors from the English corpus."),
    "seq2seq-none": TrainSpec(**_S2S, attention="none",
                              description="GRU encoder-decoder without attention: one context vector carries the "
                                          "whole source."),
    "seq2seq-bahdanau": TrainSpec(**_S2S, attention="bahdanau",
                                  description="GRU encoder-decoder with Bahdanau (additive) attention on the toy "
                                              "translation task."),
    "seq2seq-luong-dot": TrainSpec(**_LUONG, attention="luong-dot",
                                   description="GRU encoder-decoder with Luong dot attention (bidirectional encoder, "
                                               "input feeding) on the toy translation task."),
    "seq2seq-luong-general": TrainSpec(**_LUONG, attention="luong-general",
                                       description="GRU encoder-decoder with Luong general attention (bidirectional "
                                                   "encoder, input feeding) on the toy translation task."),
    "seq2seq-luong-concat": TrainSpec(**_LUONG, attention="luong-concat",
                                      description="GRU encoder-decoder with Luong concat attention (bidirectional "
                                                  "encoder, input feeding) on the toy translation task."),
    "seq2seq-dates": TrainSpec(**_DATES, attention="luong-general",
                               bidirectional=True,
                               description="Character-level encoder-decoder with Luong (general) attention that "
                                           "rewrites written dates as ISO dates."),
    # Two layers learn agreement sooner than four: after 10 epochs of 30,000 sentences, four layers put the right
    # number on a masked verb 75 % of the time; two layers reached 90 % after 8 epochs of 20,000.
    "masked-lm": TrainSpec(architecture="masked_lm", corpus="english", n_train=30_000, n_heldout=1_000,
                           full_metrics=True, num_layers=2, n_head=4, hidden_size=128, block_size=64, epochs=20,
                           lr=2e-3, batch_size=64, warmup_steps=200,
                           description="2-layer, 4-head BERT-style masked language model (bidirectional encoder, "
                                       "output tied to the embeddings) on the English corpus."),
}
for _name, _spec in BUILTINS.items():
    _spec.name = _name


def train_builtin(name: str, folder: str | Path | None = None,
                  progress: Callable[[TrainProgress], None] | None = None, save: bool = True,
                  threads: int | None = 1, snapshots: int = 0, snapshot_dtype: str | None = None) -> TrainResult:
    """Train the built-in `name` from scratch with its recipe and (by default) save it to assets/builtin.

    snapshots: keep that many snapshots over training (explorer.training.snapshots; 0: none), saved beside the
    checkpoint as <name>.snapshots.safetensors in snapshot_dtype (default: the recipe's stored dtype) and listed in
    its meta.

    threads: torch CPU threads (1 by default: on an oversubscribed 2-core machine two OpenMP threads wait on
    each other and run up to 10x slower). Results agree across thread counts up to float rounding."""
    from explorer.loading.catalogue import BUILTIN_DIR
    from explorer.loading.checkpoint import save_checkpoint
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in {name!r}; expected one of {sorted(BUILTINS)}")
    if threads:
        torch.set_num_threads(threads)
    result = train_model(replace(BUILTINS[name]), progress=progress, snapshots=snapshots,
                         snapshot_dtype=snapshot_dtype)
    if save:
        stored = getattr(torch, BUILTINS[name].stored)
        save_checkpoint(result.model, result.meta, Path(folder or BUILTIN_DIR), name,
                        None if stored == torch.float32 else stored)
        if result.snapshots is not None:
            result.snapshots.save(Path(folder or BUILTIN_DIR) / f"{name}.snapshots.safetensors")
    return result


def evaluate_builtin(name: str, folder: str | Path | None = None) -> JSONDict:
    """Compute the real-English evaluations of a trained real-English checkpoint from its saved weights (agreement
    across an attractor; a language model's greedy samples, by the app's generation loop: explorer.training.evaluation)
    and write them into its JSON's metrics. Training computes the agreement; the shipped checkpoints get both from
    here (`python -m explorer.training.train --evaluate <name>`). Returns the metrics added."""
    import json

    from explorer.data.vocab import Vocab
    from explorer.files.safe_load import read_state_dict_file
    from explorer.loading.catalogue import BUILTIN_DIR
    from explorer.loading.checkpoint import read_meta
    from explorer.models.build import from_checkpoint
    from explorer.runtime.json_value import get
    from explorer.training.evaluation import continuations, natural_agreement_eval, natural_masked_agreement

    base = Path(folder or BUILTIN_DIR)
    meta_path, weights = base / f"{name}.json", base / f"{name}.safetensors"
    meta: JSONDict = read_meta(meta_path)
    if get(meta, "corpus", "generator") not in REAL_ENGLISH:
        raise ValueError(f"{name} was not trained on the real-English corpus")
    model = from_checkpoint(meta, read_state_dict_file(weights), weights.name)
    vocab = Vocab.from_json(meta["vocab"])
    added: JSONDict = {}
    if meta["architecture"] == "masked_lm":
        added["natural_agreement"] = natural_masked_agreement(model, vocab)
    else:
        added["natural_agreement"] = natural_agreement_eval(model, vocab)
        added["samples"] = continuations(model, meta)
    metrics = meta["metrics"]
    assert isinstance(metrics, dict)  # the metrics training wrote
    metrics.update(added)
    meta_path.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return added
