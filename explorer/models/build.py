"""`build_model(architecture, config)` and `from_checkpoint`: a built-in architecture by its name.

`config` is the JSON-able kwargs dict stored in a checkpoint's meta ("config"); build_model validates it
with clear ValueErrors and hard bounds so that a bad checkpoint or a bad Models-page request cannot
allocate something absurd.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, overload

import torch
import torch.nn as nn

from explorer.files.safe_load import CorruptFileError

from explorer.models.masked_lm import MaskedLM, MaskedLMConfig
from explorer.models.rnn_classifier import POOLINGS, TASKS as CLASSIFIER_TASKS, RNNClassifier
from explorer.models.rnn_lm import CELLS, RNNLanguageModel
from explorer.models.seq2seq import ATTENTIONS, Seq2Seq
from explorer.models.tiny_gpt import GPT, GPTConfig
from explorer.models.word2vec import SkipGram

if TYPE_CHECKING:
    from explorer.data.vocab import Vocab
    from explorer.runtime.json_value import JSON

MAX_LAYERS = 6
MAX_HIDDEN = 1024
MAX_EMB = 1024
MAX_VOCAB = 200_000
MAX_BLOCK = 4096
MAX_HEADS = 32

#: build_model's keyword arguments as the explorer writes them (a checkpoint's meta "config"); read from a file, a
#: config is checked key by key
ModelConfig = dict[str, int | float | str | bool]


@overload
def _int(config: Mapping[str, object], key: str, lo: int, hi: int) -> int: ...


@overload
def _int(config: Mapping[str, object], key: str, lo: int, hi: int, default: int, required: bool = True) -> int: ...


def _int(config: Mapping[str, object], key: str, lo: int, hi: int, default: int | None = None,
         required: bool = True) -> int | None:
    if key not in config:
        if required and default is None:
            raise ValueError(f"config is missing required key {key!r}")
        return default
    v = config[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"config[{key!r}] must be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"config[{key!r}] = {v} is out of range [{lo}, {hi}]")
    return v


def _float(config: Mapping[str, object], key: str, lo: float, hi: float, default: float) -> float:
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"config[{key!r}] must be a number, got {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"config[{key!r}] = {v} is out of range [{lo}, {hi}]")
    return float(v)


def _choice(config: Mapping[str, object], key: str, choices: tuple[str, ...], default: str) -> str:
    v = config.get(key, default)
    if not isinstance(v, str) or v not in choices:  # the choices are strings: nothing else is one of them
        raise ValueError(f"config[{key!r}] must be one of {list(choices)}, got {v!r}")
    return v


def _bool(config: Mapping[str, object], key: str, default: bool) -> bool:
    v = config.get(key, default)
    if not isinstance(v, bool):
        raise ValueError(f"config[{key!r}] must be true or false, got {v!r}")
    return v


def _check_keys(config: Mapping[str, object], allowed: set[str], architecture: str) -> None:
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict, got {type(config).__name__}")
    unknown = set(config) - allowed
    if unknown:
        raise ValueError(f"unknown config keys for {architecture}: {sorted(unknown)} (allowed: {sorted(allowed)})")


def _build_rnn_lm(c: Mapping[str, object]) -> RNNLanguageModel:
    _check_keys(c, {"vocab_size", "emb_dim", "hidden_size", "num_layers", "cell", "dropout", "tie_weights"}, "rnn_lm")
    vocab_size = _int(c, "vocab_size", 5, MAX_VOCAB)
    emb_dim = _int(c, "emb_dim", 1, MAX_EMB)
    hidden_size = _int(c, "hidden_size", 1, MAX_HIDDEN)
    num_layers = _int(c, "num_layers", 1, MAX_LAYERS, default=1, required=False)
    cell = _choice(c, "cell", CELLS, "lstm")
    dropout = _float(c, "dropout", 0.0, 0.9, 0.0)
    tie_weights = _bool(c, "tie_weights", False)
    if tie_weights and emb_dim != hidden_size:
        raise ValueError("tie_weights needs emb_dim == hidden_size")
    return RNNLanguageModel(vocab_size=vocab_size, emb_dim=emb_dim, hidden_size=hidden_size, num_layers=num_layers,
                            cell=cell, dropout=dropout, tie_weights=tie_weights)


def _build_rnn_classifier(c: Mapping[str, object]) -> RNNClassifier:
    _check_keys(c, {"vocab_size", "emb_dim", "hidden_size", "num_labels", "num_layers", "cell", "bidirectional",
                    "task", "pooling", "dropout"}, "rnn_classifier")
    return RNNClassifier(vocab_size=_int(c, "vocab_size", 5, MAX_VOCAB), emb_dim=_int(c, "emb_dim", 1, MAX_EMB),
                         hidden_size=_int(c, "hidden_size", 1, MAX_HIDDEN), num_labels=_int(c, "num_labels", 2, 4096),
                         num_layers=_int(c, "num_layers", 1, MAX_LAYERS, default=1, required=False),
                         cell=_choice(c, "cell", CELLS, "lstm"), bidirectional=_bool(c, "bidirectional", False),
                         task=_choice(c, "task", CLASSIFIER_TASKS, "classify"),
                         pooling=_choice(c, "pooling", POOLINGS, "last"), dropout=_float(c, "dropout", 0.0, 0.9, 0.0))


def _build_seq2seq(c: Mapping[str, object]) -> Seq2Seq:
    _check_keys(c, {"src_vocab_size", "tgt_vocab_size", "emb_dim", "hidden_size", "attention", "num_layers",
                    "dropout", "bidirectional", "input_feeding", "pad_id", "bos_id", "eos_id"}, "seq2seq")
    src_vocab_size = _int(c, "src_vocab_size", 5, MAX_VOCAB)
    tgt_vocab_size = _int(c, "tgt_vocab_size", 5, MAX_VOCAB)
    emb_dim = _int(c, "emb_dim", 1, MAX_EMB)
    hidden_size = _int(c, "hidden_size", 1, MAX_HIDDEN)
    attention = _choice(c, "attention", ATTENTIONS, "bahdanau")
    num_layers = _int(c, "num_layers", 1, MAX_LAYERS, default=1, required=False)
    dropout = _float(c, "dropout", 0.0, 0.9, 0.0)
    bidirectional = _bool(c, "bidirectional", False)
    input_feeding = _bool(c, "input_feeding", False)
    if input_feeding and not attention.startswith("luong"):
        raise ValueError("input_feeding applies to Luong attention only")
    if bidirectional and hidden_size % 2:
        raise ValueError("a bidirectional encoder needs an even hidden_size")
    top = min(src_vocab_size, tgt_vocab_size) - 1
    pad_id = _int(c, "pad_id", 0, top, default=0, required=False)
    bos_id = _int(c, "bos_id", 0, top, default=2, required=False)
    eos_id = _int(c, "eos_id", 0, top, default=3, required=False)
    return Seq2Seq(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, emb_dim=emb_dim,
                   hidden_size=hidden_size, attention=attention, num_layers=num_layers, dropout=dropout,
                   bidirectional=bidirectional, input_feeding=input_feeding, pad_id=pad_id, bos_id=bos_id,
                   eos_id=eos_id)


class _TransformerKw(TypedDict):
    """The fields of GPTConfig and MaskedLMConfig (the same blocks)."""
    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float
    bias: bool
    norm: str
    positions: str


def _transformer_kw(c: Mapping[str, object], name: str, positions: tuple[str, ...]) -> _TransformerKw:
    """The checked config of a built-in transformer (tiny_gpt, masked_lm: the same blocks)."""
    _check_keys(c, {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout", "bias", "norm",
                    "positions"}, name)
    kw: _TransformerKw = {
        "vocab_size": _int(c, "vocab_size", 5, MAX_VOCAB),
        "block_size": _int(c, "block_size", 1, MAX_BLOCK),
        "n_layer": _int(c, "n_layer", 1, MAX_LAYERS),
        "n_head": _int(c, "n_head", 1, MAX_HEADS),
        "n_embd": _int(c, "n_embd", 1, MAX_HIDDEN),
        "dropout": _float(c, "dropout", 0.0, 0.9, 0.0),
        "bias": _bool(c, "bias", True),
        "norm": _choice(c, "norm", ("pre", "post"), "pre"),
        "positions": _choice(c, "positions", positions, "learned"),
    }
    if kw["n_embd"] % kw["n_head"]:
        raise ValueError(f"n_embd ({kw['n_embd']}) must be divisible by n_head ({kw['n_head']})")
    return kw


def _build_tiny_gpt(c: Mapping[str, object]) -> GPT:
    kw = _transformer_kw(c, "tiny_gpt", ("learned", "sinusoidal"))
    if kw["positions"] == "sinusoidal" and kw["n_embd"] % 2:
        raise ValueError("sinusoidal positions need an even n_embd")
    return GPT(GPTConfig(**kw))


def _build_masked_lm(c: Mapping[str, object]) -> MaskedLM:
    return MaskedLM(MaskedLMConfig(**_transformer_kw(c, "masked_lm", ("learned",))))


def _build_word2vec(c: Mapping[str, object]) -> SkipGram:
    _check_keys(c, {"vocab_size", "dim"}, "word2vec")
    return SkipGram(vocab_size=_int(c, "vocab_size", 5, MAX_VOCAB), dim=_int(c, "dim", 1, MAX_EMB))


ARCHITECTURES: dict[str, type[nn.Module]] = {
    "rnn_lm": RNNLanguageModel,
    "seq2seq": Seq2Seq,
    "tiny_gpt": GPT,
    "word2vec": SkipGram,
    "masked_lm": MaskedLM,
    "rnn_classifier": RNNClassifier,
}

_BUILDERS: dict[str, Callable[[Mapping[str, object]], nn.Module]] = {
    "rnn_lm": _build_rnn_lm,
    "seq2seq": _build_seq2seq,
    "tiny_gpt": _build_tiny_gpt,
    "word2vec": _build_word2vec,
    "masked_lm": _build_masked_lm,
    "rnn_classifier": _build_rnn_classifier,
}


def build_model(architecture: str, config: Mapping[str, object]) -> nn.Module:
    """Validated construction: architecture is a key of ARCHITECTURES, config its constructor kwargs
    (for tiny_gpt, the GPTConfig fields). Raises ValueError with a readable message on bad input."""
    if architecture not in _BUILDERS:
        raise ValueError(f"unknown architecture {architecture!r}; expected one of {sorted(_BUILDERS)}")
    return _BUILDERS[architecture](config)


# A checkpoint of MiniLM's fine-tuned layers and head only (explorer.training.minilm_task), not built here: its meta's
# "config" says the head ({"task": "sequence-classification" | "token-classification"}), "task_settings" the label
# names; the loader puts its tensors over the packaged MiniLM (pretrained:minilm; explorer.loading.loaders)
FINE_TUNE = "minilm_finetune"

#: the catalogue family (explorer.loading.catalogue.FAMILIES) of each architecture a checkpoint's meta may name
FAMILY_OF_ARCHITECTURE = {"rnn_lm": "rnn-lm", "seq2seq": "seq2seq-rnn", "tiny_gpt": "decoder", "word2vec": "word2vec",
                          "masked_lm": "masked-lm", "rnn_classifier": "rnn-classifier", FINE_TUNE: "encoder"}


def from_checkpoint(meta: Mapping[str, JSON], state: dict[str, torch.Tensor], label: str) -> torch.nn.Module:
    """Build an explorer architecture from its JSON meta ({"architecture", "config"}) and load `state` into it
    (strict, except that a tied weight saved once, e.g. tie_weights=True, is not missing). Raises CorruptFileError
    naming what does not fit. The model is in eval mode."""
    try:
        # dict() takes the file's config as it is (an object, or a list of pairs): its errors are the message
        raw: Any = meta.get("config", {})
        architecture, config = str(meta["architecture"]), dict(raw)
        with torch.device("meta"):  # shapes only: a config claiming a huge model allocates nothing
            skeleton = build_model(architecture, config)
    except KeyError as exc:
        raise CorruptFileError(f"{label}: the config JSON lacks the key {exc}.") from None
    except (TypeError, ValueError) as exc:
        raise CorruptFileError(f"{label}: the config JSON does not describe a valid model ({exc}).") from None
    _check_shapes(skeleton, state, label)
    model = build_model(architecture, config)  # now no larger than the weights in hand
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0:3]
        raise CorruptFileError(f"{label}: the weights do not match the config ({' '.join(first)[:300]}).") from None
    return model.eval()


def _check_shapes(skeleton: torch.nn.Module, state: dict[str, torch.Tensor], label: str) -> None:
    """CorruptFileError naming the missing, unexpected and mis-shaped tensors when `state` does not fit the
    model the config describes (checked before the model is allocated)."""
    tensors = skeleton.state_dict(keep_vars=True)
    expected = {k: tuple(v.shape) for k, v in tensors.items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    problems = []
    saved = {id(tensors[k]) for k in expected if k in got}
    missing = [k for k in expected if k not in got and id(tensors[k]) not in saved]  # tied weights are saved once
    unexpected = sorted(k for k in got if k not in expected)
    wrong = [f"'{k}' has shape {got[k]}, the config needs {expected[k]}"
             for k in expected if k in got and got[k] != expected[k]]
    for what, items in (("missing", missing), ("unexpected", unexpected)):
        if items:
            problems.append(f"{len(items)} {what} tensor(s): {', '.join(items[:4])}{' …' if len(items) > 4 else ''}")
    problems += wrong[:3] + ([f"{len(wrong) - 3} more shape mismatch(es)"] if len(wrong) > 3 else [])
    if problems:
        raise CorruptFileError(f"{label}: the weights do not match the config ({'; '.join(problems)}).")


def vocabs_from_meta(meta: Mapping[str, object]) -> dict[str, Vocab]:
    """The vocabularies stored in a checkpoint's JSON: "vocab", "src_vocab", "tgt_vocab" -> Vocab.

    The built-in architectures are trained with the SPECIALS at ids 0..3 (explorer.data.vocab), so these must be."""
    from explorer.data.vocab import SPECIALS, Vocab

    out: dict[str, Vocab] = {}
    for key in ("vocab", "src_vocab", "tgt_vocab"):
        if key in meta:
            try:
                out[key] = Vocab.from_json(meta[key])
            except ValueError as exc:
                raise CorruptFileError(f"The {key} in the model's JSON is invalid: {exc}") from None
            if not out[key].builtin_layout:
                raise CorruptFileError(f"The {key} in the model's JSON is invalid: the special tokens must have ids "
                                       f"0..3 in the order {SPECIALS} (found {out[key].itos[:4]}).")
    return out


__all__ = ["ARCHITECTURES", "build_model", "from_checkpoint", "vocabs_from_meta", "FAMILY_OF_ARCHITECTURE",
           "FINE_TUNE"]
