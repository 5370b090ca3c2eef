"""What one training run in the app may use on this server: time, vocabulary, parameters, memory.

Settings (environment variables, read when a job starts):
  EXPLORER_MAX_TRAIN_SECONDS (180)      a job's whole run: data, training and held-out evaluation; the form's
                                        time field cannot ask for more, and a longer request is refused;
  EXPLORER_MAX_TRAIN_VOCAB (20000)      vocabulary entries, the special tokens included: the most frequent words
                                        are kept, the others are read as <unk>;
  EXPLORER_MAX_TRAIN_PARAMS (10000000)  parameters of the model (the embedding and output layers grow with the
                                        vocabulary): a larger model is refused before it is built;
  EXPLORER_MAX_TRAIN_MB (512)           estimated memory of the weights, their gradients, Adam's two moments and
                                        its step's temporaries (32 bytes a parameter) plus one batch's activations:
                                        the batch size is lowered to fit, and a model that does not fit with one
                                        example is refused.

`apply(spec)` puts the limits into a TrainSpec (explorer.training.tasks checks the model against them once the
vocabulary is known, before building it: `fit_batch`). Every refusal is a TrainBudgetError (a ValueError) whose message
names the limit and its setting.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explorer.models.build import ModelConfig
    from explorer.training.spec import TrainSpec

SETTINGS = {"seconds": ("EXPLORER_MAX_TRAIN_SECONDS", 180.0), "vocab": ("EXPLORER_MAX_TRAIN_VOCAB", 20_000),
            "params": ("EXPLORER_MAX_TRAIN_PARAMS", 10_000_000), "memory_mb": ("EXPLORER_MAX_TRAIN_MB", 512.0)}
STATE_BYTES = 32  # per parameter: float32 weight, gradient, Adam's exp_avg, exp_avg_sq and its step's temporaries


class TrainBudgetError(ValueError):
    """A training request over one of this server's limits; the message names the limit and its setting."""


def _setting(key: str) -> float:
    name, default = SETTINGS[key]
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        value = float(default)
    return value if value > 0 else float(default)


@dataclass(frozen=True)
class TrainBudget:
    """This server's limits on one training run (see the module docstring)."""

    seconds: float
    vocab: int
    params: int
    memory_mb: float

    @classmethod
    def from_env(cls) -> "TrainBudget":
        return cls(_setting("seconds"), max(5, int(_setting("vocab"))), int(_setting("params")),
                   _setting("memory_mb"))


def apply(spec: TrainSpec, budget: TrainBudget | None = None) -> TrainSpec:
    """A copy of `spec` (an explorer.training.spec.TrainSpec) within `budget` (default: the environment's): no time
    limit becomes the server's, a longer one is refused; the vocabulary is capped; the parameter and memory limits are
    set for explorer.training.tasks to check once the vocabulary is known. Raises TrainBudgetError."""
    b = budget or TrainBudget.from_env()
    seconds = spec.max_seconds if spec.max_seconds is not None else b.seconds
    if not isinstance(seconds, (int, float)) or seconds > b.seconds:
        raise TrainBudgetError(
            f"A training run may take at most {b.seconds:g} s ({b.seconds / 60:g} min) on this server; "
            f"{seconds!r} s was asked (set EXPLORER_MAX_TRAIN_SECONDS to change it).")
    vocab = min(spec.max_vocab, b.vocab) if spec.max_vocab is not None else b.vocab
    params = min(spec.max_params, b.params) if spec.max_params is not None else b.params
    memory = min(spec.max_memory_mb, b.memory_mb) if spec.max_memory_mb is not None else b.memory_mb
    return replace(spec, max_seconds=float(seconds), max_vocab=vocab, max_params=params, max_memory_mb=memory)


def vocab_note(token_lists: Sequence[Sequence[str]], max_vocab: int, specials: int = 4) -> str | None:
    """What the vocabulary cap does to a user's corpus, in one sentence (numbers only), or None when all fit."""
    distinct = len({t for tokens in token_lists for t in tokens})
    kept = max_vocab - specials
    if distinct <= kept:
        return None
    return (f"The text has {distinct:,} distinct tokens; this server keeps a vocabulary of {max_vocab:,} entries "
            f"(EXPLORER_MAX_TRAIN_VOCAB): the {kept:,} most frequent and {specials} special tokens. The other "
            f"{distinct - kept:,} are read as `<unk>`.")


def count_parameters(architecture: str, config: Mapping[str, object]) -> int:
    """Parameters of explorer.models.build.build_model(architecture, config), counted without allocating them (the
    model is built on PyTorch's meta device); shared (tied) tensors once."""
    import torch

    from explorer.models.build import build_model

    with torch.device("meta"):
        model = build_model(architecture, config)
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def activation_bytes(architecture: str, config: ModelConfig, length: int, negatives: int = 5) -> int:
    """Estimated bytes one training example of `length` tokens keeps for the backward pass (float32): the output
    layer's logits, their log-softmax and both gradients (4 V a token), about 24 values per unit of width per layer
    and token, the transformers' attention weights (3 per head, layer and pair of tokens) and an encoder-decoder's
    attention energies (3 per unit of width and pair of source and target tokens; `length` is source + target).
    With STATE_BYTES, measured from 17 % under to 40 % over the peak resident memory of training each built-in
    architecture (1–14 M parameters, up to 60 tokens)."""
    if architecture == "word2vec":
        return 4 * 4 * (2 + negatives) * int(config["dim"])
    vocab = int(config.get("tgt_vocab_size", config.get("vocab_size", 0)))
    if architecture == "rnn_classifier":  # its output layer is over the labels, not the vocabulary
        vocab = int(config.get("num_labels", 2))
    width = max(int(config.get(k, 0)) for k in ("hidden_size", "emb_dim", "n_embd"))
    layers = int(config.get("num_layers", config.get("n_layer", 1)))
    floats = length * (4 * vocab + 24 * width * layers)
    if architecture in ("tiny_gpt", "masked_lm"):
        floats += 3 * int(config["n_head"]) * length * length * layers
    if architecture == "seq2seq":
        floats += 3 * width * (length // 2) ** 2
    return 4 * floats


def fit_batch(architecture: str, config: ModelConfig, length: int, batch_size: int, max_params: int | None,
              max_memory_mb: float | None, negatives: int = 5) -> tuple[int, str | None]:
    """(the batch size to train with, a note when it was lowered) so that the model's parameters stay within
    `max_params` and its weights, optimiser state and one batch of `length`-token examples within `max_memory_mb`.
    Raises TrainBudgetError when the model alone is over a limit. No limits: (batch_size, None)."""
    if max_params is None and max_memory_mb is None:
        return batch_size, None
    n = count_parameters(architecture, config)
    if max_params is not None and n > max_params:
        raise TrainBudgetError(
            f"This model would have {n:,} parameters; this server trains at most {max_params:,} (set "
            "EXPLORER_MAX_TRAIN_PARAMS to change it). Choose a smaller hidden size, fewer layers or a smaller "
            "vocabulary.")
    if max_memory_mb is None:
        return batch_size, None
    budget, fixed = max_memory_mb * 2**20, n * STATE_BYTES
    per = max(1, activation_bytes(architecture, config, length, negatives))
    if fixed + per > budget:
        raise TrainBudgetError(
            f"This model needs about {(fixed + per) / 2**20:,.0f} MB to train even one example at a time "
            f"({n:,} parameters, examples of up to {length} tokens); this server allows {max_memory_mb:g} MB per "
            "training run (set EXPLORER_MAX_TRAIN_MB to change it). Choose a smaller model or vocabulary.")
    fits = int((budget - fixed) // per)
    if fits >= batch_size:
        return batch_size, None
    return fits, (f"Batch size lowered from {batch_size} to {fits} so that training fits in {max_memory_mb:g} MB "
                  "(EXPLORER_MAX_TRAIN_MB).")
