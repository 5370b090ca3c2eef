"""The typed model contract (explorer/adapters/protocols.py) holds for the models the explorer loads: a LoadedModel
has every member of `Loaded`, every adapter every member of the protocols the Adapter base implements (mypy checks
the base; this checks the objects the families build) and HasTables, the adapters that have them those of
Generates, Differentiates, Unembeds, HasAttention, KnowsPositions and Aligns, and `is_recurrent` tells the
recurrent adapters, whose `weights` and `net` are those of their own cell."""
from __future__ import annotations

import pytest
import torch

from explorer.adapters import protocols as P
from explorer.adapters.recurrent import RecurrentWeights
from explorer.loading.loaders import load_model

CAPABILITIES = (P.Reads, P.Records, P.HasTables)  # every adapter has these (the base: Reads and Records)


def members(protocol: type) -> set[str]:
    """The names a protocol declares, its bases' included."""
    return {name for cls in protocol.__mro__ if cls.__module__ == P.__name__
            for name in (*vars(cls), *getattr(cls, "__annotations__", {})) if not name.startswith("_")}


def test_members_are_read_from_the_protocols() -> None:
    assert {"encode", "token_strings", "device", "can_generate"} <= members(P.Reads)
    assert members(P.Generates) >= members(P.Reads) | {"start", "step", "reorder", "eos_ids", "context_len"}
    assert members(P.Recurrent) - members(P.Records) == {"weights", "net"}
    assert members(P.Loaded) == {"id", "family", "model", "device", "dtype", "meta", "tokenizer", "vocabs",
                                 "state_dict", "adapter", "caps"}


@pytest.mark.parametrize("model_id, recurrent", [
    ("builtin:tiny-gpt", False), ("builtin:masked-lm", False), ("builtin:word2vec", False),
    ("builtin:seq2seq-bahdanau", False), ("builtin:lstm-lm", True), ("builtin:gru-lm", True),
])
def test_loaded_models_have_what_the_protocols_name(model_id: str, recurrent: bool) -> None:
    loaded = load_model(model_id)
    assert sorted(m for m in members(P.Loaded) if not hasattr(loaded, m)) == []
    for capability in CAPABILITIES:
        assert sorted(m for m in members(capability) if not hasattr(loaded.adapter, m)) == [], capability.__name__
    aligned = loaded.caps.alignment  # implemented by the encoder-decoders' adapters only, not by the base
    assert (aligned is not None) == hasattr(loaded.adapter, "cross_form") == loaded.adapter.is_encoder_decoder
    if aligned is not None:
        assert sorted(m for m in members(P.Aligns) if not hasattr(aligned, m)) == []
    if P.unembeds(loaded.adapter):  # the lens's methods: on the adapters that read through an output layer only
        assert sorted(m for m in members(P.Unembeds) if not hasattr(loaded.adapter, m)) == []
    assert P.unembeds(loaded.adapter) == (model_id != "builtin:word2vec" and "seq2seq" not in model_id)
    transformer = model_id in ("builtin:tiny-gpt", "builtin:masked-lm")
    assert P.knows_positions(loaded.adapter) == transformer == (loaded.caps.positions is not None)
    assert P.has_attention(loaded.adapter) == transformer == (loaded.caps.attention is not None)
    assert P.differentiates(loaded.adapter) == (model_id not in ("builtin:masked-lm", "builtin:word2vec"))
    assert P.generates(loaded.adapter) == P.differentiates(loaded.adapter) == (loaded.caps.stepper is not None)
    if P.generates(loaded.adapter):
        assert sorted(m for m in members(P.Generates) if not hasattr(loaded.adapter, m)) == []
    if P.differentiates(loaded.adapter):
        assert sorted(m for m in members(P.Differentiates) if not hasattr(loaded.adapter, m)) == []
    if transformer:
        assert sorted(m for m in members(P.KnowsPositions) if not hasattr(loaded.adapter, m)) == []
    assert P.is_recurrent(loaded.adapter) is recurrent
    if recurrent:
        weights, net = loaded.adapter.weights, loaded.adapter.net
        assert isinstance(weights, RecurrentWeights) and isinstance(net.rnn, torch.nn.RNNBase)
        assert torch.equal(net.embedding.weight.float(), weights.embedding)
        assert net.decoder is not None and torch.equal(net.decoder.weight.float(), weights.output_weight)
