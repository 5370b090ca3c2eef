"""What defines a training run and what it reports: TrainSpec (all JSON-able) and its bounds, TrainProgress (every
few steps and at each epoch's end), TrainResult (the model and its checkpoint meta).

The budget fields (max_seconds, max_vocab, max_params, max_memory_mb) are set by the app from
explorer.training.budget (None for the CLI) and honoured by explorer.training.loop.train_model.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import torch.nn as nn

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSON, JSONDict
    from explorer.training.snapshots import Snapshots

ARCH_CORPORA = {"rnn_lm": ("english", "wordnet", "everyday", "user"),
                "tiny_gpt": ("english", "wordnet", "everyday", "user"),
                "word2vec": ("english", "wordnet", "everyday", "user"), "seq2seq": ("translation", "dates"),
                "masked_lm": ("english", "wordnet", "everyday", "user"), "rnn_classifier": ("sentiment", "pos", "user"),
                "minilm_finetune": ("sentiment", "pos", "user")}
LABELLED = ("rnn_classifier", "minilm_finetune")  # the architectures that learn labels (corpus.labelled_corpus)
LIMITS = dict(epochs=100, hidden_size=1024, emb_dim=1024, num_layers=4, n_head=16, batch_size=1024,
              n_train=200_000, n_heldout=20_000, max_seconds=6 * 3600, max_len=512, vocab=200_000)
ATTENTIONS = ("none", "bahdanau", "luong-dot", "luong-general", "luong-concat")


@dataclass
class TrainSpec:
    """Everything that defines a training run (all JSON-able). Unused fields are ignored per architecture."""
    architecture: str = "rnn_lm"           # rnn_lm | seq2seq | tiny_gpt | word2vec | masked_lm | rnn_classifier |
    #                                        minilm_finetune (explorer.training.minilm_task)
    corpus: str = "english"                # english (generated) | wordnet (real English) | translation | dates | user
    user_tokens: list[list[str]] | None = None   # corpus="user": token lists (explorer.data.user_text)
    # rnn_classifier, corpus="user": (words, ((position, label id), …)), the label names (data.labelled_text)
    user_examples: list[tuple[list[str], list[tuple[int, int]]]] | None = None
    labels: list[str] | None = None
    task: str = "classify"                 # rnn_classifier: classify (a label per sentence) | tag (a label per word)
    pooling: str = "last"                  # rnn_classifier, classify: how the states are read (models.rnn_classifier)
    glove: bool = False                    # rnn_classifier: start the word vectors from GloVe 6B 50-d (emb_dim 50)
    level: str = "word"                    # word | char (english: char splits the sentence into characters)
    n_train: int = 20_000
    n_heldout: int = 1_000
    # size
    cell: str = "lstm"                     # rnn_lm, rnn_classifier: rnn | gru | lstm
    attention: str = "bahdanau"            # seq2seq: none | bahdanau | luong-dot | luong-general | luong-concat
    bidirectional: bool = False            # seq2seq: bidirectional GRU encoder (H/2 units each way); rnn_classifier
    input_feeding: bool = False            # seq2seq, Luong attention: feed h~_{t-1} to the decoder
    num_layers: int = 1                    # rnn_lm/seq2seq layers, tiny_gpt n_layer
    hidden_size: int = 256                 # rnn hidden / tiny_gpt n_embd / word2vec dim
    emb_dim: int = 128
    tie_weights: bool = False              # rnn_lm: the output layer is the embedding matrix (needs emb_dim ==
    #                                        hidden_size; Press & Wolf 2017): one V x H matrix instead of two
    n_head: int = 4
    block_size: int = 64                   # tiny_gpt context; also max training sequence length for LMs
    dropout: float = 0.0
    # optimisation
    epochs: int = 5
    lr: float = 3e-3
    batch_size: int = 64
    weight_decay: float = 0.0
    warmup_steps: int = 50
    grad_clip: float = 1.0
    seed: int = 0
    max_seconds: float | None = None       # the whole run: data, training, held-out evaluation
    max_params: int | None = None          # refused above it (explorer.training.budget)
    max_memory_mb: float | None = None     # weights + Adam state + one batch: the batch size is lowered to fit
    # vocabulary / word2vec
    min_freq: int = 1
    max_vocab: int | None = None
    window: int = 2
    negatives: int = 5
    subsample: float | None = None         # word2vec subsampling threshold t (None = off)
    # evaluation
    full_metrics: bool = False             # bigram baseline, agreement, length buckets, precision@5
    stored: str = "float32"                # float32 | float16: the weights are rounded to it before the final
    #                                        evaluation and saved so (the shipped real-English models: half the bytes)
    name: str = "custom"
    description: str = ""

    def to_json(self) -> JSONDict:
        d: JSONDict = asdict(self)
        d.pop("user_tokens")
        d.pop("user_examples")
        return d


@dataclass
class TrainProgress:
    epoch: int                   # 1-based
    step: int                    # optimiser steps done so far
    total_steps: int
    train_loss: float            # running mean of the current epoch
    heldout_loss: float | None   # set at the end of each epoch
    elapsed: float               # seconds


@dataclass
class TrainResult:
    model: nn.Module
    meta: JSONDict               # the checkpoint's meta (explorer.loading.checkpoint)
    history: list[JSON] = field(default_factory=list)  # per epoch: epoch, train_loss, heldout_loss, elapsed
    stopped: bool = False        # ended by should_stop or max_seconds
    snapshots: Snapshots | None = None  # when asked for


# ============================================================================================== validation
def validate_spec(spec: TrainSpec) -> None:
    """Raise ValueError with a readable message when the spec is unusable or out of bounds."""
    _check_data(spec)
    _check_sizes(spec)
    _check_optimisation(spec)
    _check_budgets(spec)
    _check_architecture(spec)


def _check_int(name: str, v: object, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")


def _check_data(spec: TrainSpec) -> None:
    """The architecture, its corpus and level; the user's token lists or the generated corpus's size."""
    if spec.architecture not in ARCH_CORPORA:
        raise ValueError(f"architecture must be one of {sorted(ARCH_CORPORA)}, got {spec.architecture!r}")
    if spec.corpus not in ARCH_CORPORA[spec.architecture]:
        raise ValueError(f"{spec.architecture} trains on corpus {ARCH_CORPORA[spec.architecture]}, not {spec.corpus!r}")
    if spec.level not in ("word", "char"):
        raise ValueError(f"level must be 'word' or 'char', got {spec.level!r}")
    if spec.architecture in LABELLED:
        _check_labelled(spec)
    elif spec.corpus == "user":
        toks = spec.user_tokens
        if not toks or not isinstance(toks, list) or not all(isinstance(s, (list, tuple)) for s in toks):
            raise ValueError("corpus 'user' needs user_tokens: a non-empty list of token lists")
        if sum(1 for s in toks if len(s)) < 2:
            raise ValueError("the text is too short to train on: it needs at least 2 non-empty sentences")
    else:
        _check_int("n_train", spec.n_train, 10, LIMITS["n_train"])
        _check_int("n_heldout", spec.n_heldout, 1, LIMITS["n_heldout"])


def _check_labelled(spec: TrainSpec) -> None:
    """A classifier's or tagger's task, pooling and data: the user's labelled examples and label names, or the
    shipped corpus's size."""
    from explorer.models.rnn_classifier import POOLINGS

    if spec.task not in ("classify", "tag"):
        raise ValueError(f"task must be 'classify' or 'tag', got {spec.task!r}")
    if spec.pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {spec.pooling!r}")
    if spec.corpus != "user":
        want = {"sentiment": "classify", "pos": "tag"}[spec.corpus]
        if spec.task != want:
            raise ValueError(f"the {spec.corpus} corpus teaches task {want!r}, not {spec.task!r}")
        _check_int("n_train", spec.n_train, 10, LIMITS["n_train"])
        _check_int("n_heldout", spec.n_heldout, 1, LIMITS["n_heldout"])
        return
    labels, examples = spec.labels or [], spec.user_examples or []
    if not 2 <= len(labels) <= 64 or not all(isinstance(x, str) for x in labels):
        raise ValueError("corpus 'user' needs 2 to 64 label names")
    if len(examples) < 10:
        raise ValueError("corpus 'user' needs at least 10 labelled sentences")
    for words, targets in examples:
        if any(not 0 <= lab < len(labels) or not -1 <= at < len(words) for at, lab in targets):
            raise ValueError("a labelled example names a label or a position it does not have")


def _check_sizes(spec: TrainSpec) -> None:
    """The integer fields, each within its bounds."""
    for name, lo, hi in (("epochs", 1, LIMITS["epochs"]), ("hidden_size", 2, LIMITS["hidden_size"]),
                         ("emb_dim", 2, LIMITS["emb_dim"]), ("num_layers", 1, LIMITS["num_layers"]),
                         ("batch_size", 1, LIMITS["batch_size"]), ("block_size", 4, LIMITS["max_len"]),
                         ("seed", 0, 2**31 - 1), ("min_freq", 1, 1000), ("window", 1, 10), ("negatives", 1, 50),
                         ("warmup_steps", 0, 100_000)):
        _check_int(name, getattr(spec, name), lo, hi)
    if spec.max_vocab is not None:
        _check_int("max_vocab", spec.max_vocab, 5, LIMITS["vocab"])


def _check_optimisation(spec: TrainSpec) -> None:
    """The learning rate, dropout and weight decay."""
    if not isinstance(spec.lr, (int, float)) or not 0 < spec.lr <= 1:
        raise ValueError(f"lr must be in (0, 1], got {spec.lr!r}")
    if not 0 <= spec.dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {spec.dropout!r}")
    if not 0 <= spec.weight_decay <= 1:
        raise ValueError(f"weight_decay must be in [0, 1], got {spec.weight_decay!r}")


def _check_budgets(spec: TrainSpec) -> None:
    """max_seconds, max_params and max_memory_mb, when set."""
    if spec.max_seconds is not None and not 0 < spec.max_seconds <= LIMITS["max_seconds"]:
        raise ValueError(f"max_seconds must be in (0, {LIMITS['max_seconds']}], got {spec.max_seconds!r}")
    if spec.max_params is not None:
        _check_int("max_params", spec.max_params, 1, 10**12)
    if spec.max_memory_mb is not None and not (isinstance(spec.max_memory_mb, (int, float)) and spec.max_memory_mb > 0):
        raise ValueError(f"max_memory_mb must be a positive number, got {spec.max_memory_mb!r}")


def _check_architecture(spec: TrainSpec) -> None:
    """The fields one architecture reads: the RNN cell, the seq2seq attention, the transformers' heads."""
    if spec.architecture in ("rnn_lm", "rnn_classifier") and spec.cell not in ("rnn", "gru", "lstm"):
        raise ValueError(f"cell must be 'rnn', 'gru' or 'lstm', got {spec.cell!r}")
    if not isinstance(spec.tie_weights, bool):
        raise ValueError(f"tie_weights must be true or false, got {spec.tie_weights!r}")
    if spec.tie_weights and (spec.architecture != "rnn_lm" or spec.emb_dim != spec.hidden_size):
        raise ValueError("tie_weights needs architecture rnn_lm and emb_dim == hidden_size, got "
                         f"{spec.architecture} with emb_dim {spec.emb_dim} and hidden_size {spec.hidden_size}")
    if spec.architecture == "seq2seq" and spec.attention not in ATTENTIONS:
        raise ValueError(f"unknown attention {spec.attention!r}")
    if spec.architecture in ("tiny_gpt", "masked_lm"):
        _check_int("n_head", spec.n_head, 1, LIMITS["n_head"])
        if spec.hidden_size % spec.n_head:
            raise ValueError(f"hidden_size (n_embd = {spec.hidden_size}) must be divisible by n_head = {spec.n_head}")
