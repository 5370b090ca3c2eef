"""The one place that decides a model's family: `adapter_for(loaded)` attaches an adapter to a model once, when it is
loaded (explorer.loading.loaders); every view then reads the model through `loaded.adapter`."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explorer.adapters.base import Adapter
    from explorer.adapters.protocols import Loaded


def adapter_for(loaded: Loaded) -> Adapter:
    """The adapter of a LoadedModel (never raises: a model no adapter reads gets one that says why)."""
    from explorer.adapters.base import Unsupported
    from explorer.adapters.gpt import GPTAdapter
    from explorer.adapters.hf import HFAdapter, HFSeq2SeqAdapter
    from explorer.adapters.masked_lm import MaskedLMAdapter
    from explorer.adapters.recurrent import RecurrentAdapter
    from explorer.adapters.seq2seq_rnn import Seq2SeqAdapter
    from explorer.adapters.tables import StateDictAdapter, VectorsAdapter, Word2VecAdapter
    from explorer.models.masked_lm import MaskedLM
    from explorer.models.rnn_classifier import RNNClassifier
    from explorer.models.rnn_lm import RNNLanguageModel
    from explorer.models.seq2seq import Seq2Seq
    from explorer.models.tiny_gpt import GPT
    from explorer.models.vectors import WordVectors
    from explorer.models.word2vec import SkipGram

    model = loaded.model
    try:
        if model is None or isinstance(model, (RNNLanguageModel, RNNClassifier)):
            return RecurrentAdapter(loaded)
        if isinstance(model, GPT):
            return GPTAdapter(loaded)
        if isinstance(model, MaskedLM):
            return MaskedLMAdapter(loaded)
        if isinstance(model, Seq2Seq):
            return Seq2SeqAdapter(loaded)
        if isinstance(model, SkipGram):
            return Word2VecAdapter(loaded)
        if isinstance(model, WordVectors):
            return VectorsAdapter(loaded)
        if not hasattr(model, "config") or not hasattr(model, "get_input_embeddings"):
            return StateDictAdapter(loaded, f"{loaded.id} is a {type(model).__name__} module, which no adapter of "
                                    "this explorer reads.")
        if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
            return HFSeq2SeqAdapter(loaded)
        return HFAdapter(loaded)
    except Unsupported as exc:
        return StateDictAdapter(loaded, str(exc))


__all__ = ["adapter_for"]
