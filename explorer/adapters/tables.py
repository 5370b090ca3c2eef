"""Models that are (for this explorer) one table of vectors: word2vec, pretrained word vectors (GloVe), and user
state dicts without recurrent weights.

word2vec (explorer.models.word2vec.SkipGram): the word vectors are `in_embed` (v); `run` records `embed` (T, D),
the vector of each word of the text (no special tokens: word2vec has no context).
Pretrained vectors (explorer.models.vectors.WordVectors, pretrained:glove): the table, its words in the file's order
(most frequent first); `run` records `embed` (T, D) like word2vec.
A state dict: the 2-D tensor named like an embedding table (in_embed, wte, word_embeddings, embedding, ...), with
the vocab.json uploaded beside it when there is one.
"""
from __future__ import annotations

import torch

from explorer.adapters.base import Acts, Adapter, Names, Record, Table, Unsupported
from explorer.adapters.protocols import Loaded
from explorer.adapters.text import Encoded, VocabText
from explorer.data.vocab import Vocab

_STATE_HINTS = ("in_embed", "wte", "word_embeddings", "embedding", "embed", "emb", "encoder.weight")


def _vocab_table(label: str, weight: torch.Tensor, vocab: Vocab | None, describe: bool = False,
                 ranked: bool = False) -> Table:
    """The rows of `weight` named by the vocabulary's tokens (its special tokens flagged; rows past its end by id).
    describe: add a note saying what the vocabulary is (a user's file)."""
    itos = list(vocab.itos) if vocab is not None else []
    n = weight.shape[0]
    words = tuple(itos[i] if i < len(itos) else f"<id {i}>" for i in range(n))
    special_ids = vocab.special_ids if vocab is not None else frozenset()
    special = tuple(i in special_ids or i >= len(itos) for i in range(n))
    freq = dict(getattr(vocab, "freq", {}) or {}) if vocab is not None else {}
    if vocab is None:
        notes: tuple[str, ...] = ("No vocabulary came with this model: rows are named by their id.",)
    else:
        notes = (f"Vocabulary: {vocab.summary()}.",) if describe else ()
    return Table(label, weight, words, special, freq or None, subword=getattr(vocab, "level", "") == "subword",
                 notes=notes, ranked=ranked)


class Word2VecAdapter(VocabText, Adapter):
    name = "built-in word2vec (skip-gram)"
    feeds_bos = False

    def __init__(self, loaded: Loaded) -> None:
        super().__init__(loaded)
        self.vocab = loaded.vocabs.get("vocab")

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: object) -> Record:
        acts = Acts(names)
        with torch.inference_mode():
            acts.put("embed", self.model.in_embed(torch.tensor(list(enc.ids), device=self.device)))
        return Record(enc, acts.out)

    def tables(self) -> dict[str, Table]:
        return {"input": _vocab_table("in_embed (v: the word vectors)", self.model.in_embed.weight, self.vocab)}


class VectorsAdapter(Word2VecAdapter):
    """Pretrained word vectors (GloVe): words in, their vectors out; rows most frequent first."""

    name = "pretrained word vectors (GloVe)"

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: object) -> Record:
        acts = Acts(names)
        with torch.inference_mode():
            acts.put("embed", self.model(torch.tensor(list(enc.ids), dtype=torch.long, device=self.device)))
        return Record(enc, acts.out)

    def tables(self) -> dict[str, Table]:
        return {"input": _vocab_table("GloVe vectors (w + w̃)", self.model.weight, self.vocab, ranked=True)}

    def describe(self) -> tuple[tuple[str, str], ...]:
        assert self.vocab is not None  # pretrained vectors come with their words
        return (("vectors", f"{self.model.weight.shape[0]:,} × {self.model.weight.shape[1]}"),
                ("vocabulary", self.vocab.summary()))


class StateDictAdapter(Adapter):
    """A bare state dict whose architecture is not recognised: its embedding table only."""

    name = "state dict (embedding table)"

    def __init__(self, loaded: Loaded, reason: str = "") -> None:
        super().__init__(loaded)
        self.reason = reason

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: object) -> Record:
        raise Unsupported(self.reason or f"{self.id} is a bare state dict whose architecture is not recognised.")

    def tables(self) -> dict[str, Table]:
        state = self.loaded.state_dict or {}
        candidates = [(k, v) for k, v in state.items()
                      if isinstance(v, torch.Tensor) and v.ndim == 2 and v.is_floating_point()]
        for hint in _STATE_HINTS:
            named = [(k, v) for k, v in candidates if hint in k.lower() and "pos" not in k.lower()]
            if named:
                key, weight = max(named, key=lambda kv: kv[1].shape[0])
                return {"input": _vocab_table(key, weight, self.loaded.vocabs.get("vocab"), describe=True)}
        raise Unsupported(f"{self.id} has no tensor named like an embedding table (one of {', '.join(_STATE_HINTS)}).")

    def describe(self) -> tuple[tuple[str, str], ...]:
        """Where the weights and the vocabulary were read (user files)."""
        vocab = self.loaded.vocabs.get("vocab")
        found = tuple((str(a), str(b)) for a, b in (self.loaded.meta or {}).get("found", ()))
        return found + ((("vocabulary", vocab.summary()),) if vocab is not None else ())
