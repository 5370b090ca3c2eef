"""Held-out metrics for the built-in models (pure functions: models + id sequences -> numbers).

Language models see each sentence as <bos> w_1 ... w_n <eos> and are scored on predicting w_1..w_n, <eos>;
perplexity = exp(total NLL / number of predicted tokens).

Bigram baseline: add-k smoothed P(w | v) = (c(v, w) + k) / (c(v) + k |V|) over the same vocabulary and the
same predicted tokens. k is FIT on the held-out set (the best of a log-spaced grid, 1e-4 .. 1), i.e. the
baseline gets the most favourable k, so "model beats bigram by X %" is a conservative claim.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

BOS, EOS, PAD = 2, 3, 0
K_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0)


# ---------------------------------------------------------------------------------------------- batching
def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = PAD) -> torch.Tensor:
    """List of id lists -> (B, T_max) long tensor right-padded with pad_id."""
    T = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(T, 1)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def lm_logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """(B, T) -> (B, T, V) for RNNLanguageModel (returns (logits, hidden)) and GPT (returns logits)."""
    out = model(ids)
    return out[0] if isinstance(out, tuple) else out


# ---------------------------------------------------------------------------------------------- LMs
@torch.no_grad()
def lm_nll(model: torch.nn.Module, sentences: Sequence[Sequence[int]], batch_size: int = 128,
           device: str | torch.device = "cpu") -> tuple[float, int]:
    """Sum of -log P over every predicted token of <bos> s <eos>, and the number of tokens."""
    model.eval()
    total, count = 0.0, 0
    seqs = [[BOS, *s, EOS] for s in sentences]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for start in range(0, len(order), batch_size):
        batch = pad_batch([seqs[i] for i in order[start:start + batch_size]]).to(device)
        x, y = batch[:, :-1], batch[:, 1:]
        logits = lm_logits(model, x).float()
        total += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=PAD,
                                       reduction="sum"))
        count += int((y != PAD).sum())
    return total, count


def perplexity(model: torch.nn.Module, sentences: Sequence[Sequence[int]], batch_size: int = 128,
               device: str | torch.device = "cpu") -> float:
    """exp(mean NLL) over held-out sentences (id lists without <bos>/<eos>)."""
    total, count = lm_nll(model, sentences, batch_size, device)
    return math.exp(total / max(count, 1))


class BigramLM:
    """Add-k smoothed bigram model over ids (vocabulary size V), with <bos>/<eos> boundaries."""

    def __init__(self, train: Sequence[Sequence[int]], vocab_size: int, k: float = 0.1) -> None:
        self.V, self.k = vocab_size, k
        self.pair: dict[int, Counter] = defaultdict(Counter)
        self.ctx: Counter = Counter()
        for s in train:
            seq = [BOS, *s, EOS]
            for a, b in zip(seq, seq[1:]):
                self.pair[a][b] += 1
                self.ctx[a] += 1

    def perplexity(self, sentences: Sequence[Sequence[int]], k: float | None = None) -> float:
        k = self.k if k is None else k
        total, count = 0.0, 0
        for s in sentences:
            seq = [BOS, *s, EOS]
            for a, b in zip(seq, seq[1:]):
                total -= math.log((self.pair[a][b] + k) / (self.ctx[a] + k * self.V))  # log P(b | a), add-k
                count += 1
        return math.exp(total / max(count, 1))


def bigram_perplexity(train: Sequence[Sequence[int]], heldout: Sequence[Sequence[int]], vocab_size: int,
                      k: float | None = None) -> tuple[float, float]:
    """(held-out perplexity, k) of the add-k bigram; k=None fits k on the held-out set (see module doc)."""
    lm = BigramLM(train, vocab_size, k if k is not None else 0.1)
    if k is None:  # the grid value with the lowest held-out perplexity
        lm.k = min(K_GRID, key=lambda grid_k: lm.perplexity(heldout, grid_k))
    return lm.perplexity(heldout), lm.k


def distance_bucket(d: int) -> str:
    """Bucket label for an agreement distance (tokens between subject head and verb)."""
    for lo, hi in ((0, 1), (2, 3), (4, 5), (6, 7), (8, 9)):
        if lo <= d <= hi:
            return f"{lo}-{hi}"
    return "10+"


@torch.no_grad()
def agreement_accuracy(model: torch.nn.Module, items: Sequence[tuple[Sequence[int], int, int, int]],
                       batch_size: int = 256, device: str | torch.device = "cpu") -> dict:
    """items: (prefix ids, correct verb id, wrong verb id, distance). The model is right when
    P(correct | <bos> prefix) > P(wrong | <bos> prefix). Returns {"accuracy", "n", "by_distance": {bucket:
    {"accuracy", "n"}}}."""
    model.eval()
    right: list[bool] = [False] * len(items)
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        seqs = [[BOS, *items[i][0]] for i in idx]
        lengths = torch.tensor([len(s) for s in seqs])
        logits = lm_logits(model, pad_batch(seqs).to(device)).float().cpu()
        last = logits[torch.arange(len(idx)), lengths - 1]                      # (b, V)
        for j, i in enumerate(idx):
            right[i] = bool(last[j, items[i][1]] > last[j, items[i][2]])
    by: dict[str, list[bool]] = defaultdict(list)
    for (_, _, _, d), r in zip(items, right):
        by[distance_bucket(d)].append(r)
    buckets = sorted(by.items(), key=lambda kv: int(kv[0].split("-")[0].rstrip("+")))  # "0-1", ..., "8-9", "10+"
    return {"accuracy": sum(right) / max(len(right), 1), "n": len(right),
            "by_distance": {b: {"accuracy": sum(v) / len(v), "n": len(v)} for b, v in buckets}}


# ---------------------------------------------------------------------------------------------- seq2seq
@torch.no_grad()
def seq2seq_predictions(model, sources: Sequence[Sequence[int]], max_len: int = 60, batch_size: int = 256,
                        device: str | torch.device = "cpu") -> list[list[int]]:
    """Greedy outputs (ids without <bos>/<eos>) for each source id list, through the one generation loop."""
    from explorer.adapters.seq2seq_rnn import Seq2SeqAdapter
    from explorer.adapters.generation import greedy_batch

    model.eval()
    with torch.inference_mode():
        return greedy_batch(Seq2SeqAdapter.of(model), [list(s) for s in sources], max_len, batch_size)


def exact_match(predictions: Sequence[Sequence[int]], references: Sequence[Sequence[int]]) -> float:
    return sum(list(p) == list(r) for p, r in zip(predictions, references)) / max(len(references), 1)


def accuracy_by_length(predictions: Sequence[Sequence[int]], references: Sequence[Sequence[int]],
                       sources: Sequence[Sequence[int]], width: int = 3) -> dict[str, dict]:
    """Exact match per source-length bucket ("1-3", "4-6", ...): {bucket: {"exact_match", "n"}}."""
    by: dict[int, list[bool]] = defaultdict(list)
    for p, r, s in zip(predictions, references, sources):
        by[(len(s) - 1) // width].append(list(p) == list(r))
    return {f"{b * width + 1}-{(b + 1) * width}": {"exact_match": sum(v) / len(v), "n": len(v)}
            for b, v in sorted(by.items())}


def token_accuracy(predictions: Sequence[Sequence[int]], references: Sequence[Sequence[int]]) -> float:
    """Fraction of reference positions predicted correctly (position by position, length mismatch = wrong)."""
    right = total = 0
    for p, r in zip(predictions, references):
        total += max(len(r), len(p))
        right += sum(a == b for a, b in zip(p, r))
    return right / max(total, 1)


# ---------------------------------------------------------------------------------------------- word2vec
@torch.no_grad()
def precision_at_k(vectors: torch.Tensor, itos: Sequence[str], word_class: Callable[[str], str | None],
                   k: int = 5, candidates: Sequence[int] | None = None) -> dict:
    """For each word with a class (among `candidates` ids, default all), the share of its k nearest
    neighbours by cosine (among words that have a class) that are in the same class.
    Returns {"precision_at_k", "k", "n_words", "by_class": {class: precision}}."""
    classes = {i: word_class(itos[i]) for i in (candidates if candidates is not None else range(len(itos)))}
    ids = [i for i, c in classes.items() if c]
    if len(ids) <= k:
        raise ValueError("not enough classified words for precision@k")
    W = F.normalize(vectors[ids].float(), dim=1)
    sims = W @ W.T
    sims.fill_diagonal_(-float("inf"))
    top = sims.topk(k, dim=1).indices
    by: dict[str | None, list[float]] = defaultdict(list)
    for row, i in enumerate(ids):
        same = sum(classes[ids[j]] == classes[i] for j in top[row].tolist())
        by[classes[i]].append(same / k)
    allp = [p for v in by.values() for p in v]
    return {"precision_at_k": sum(allp) / len(allp), "k": k, "n_words": len(ids),
            "by_class": {c: sum(v) / len(v) for c, v in sorted(by.items())}}
