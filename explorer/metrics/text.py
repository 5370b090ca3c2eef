"""Metrics of generated text: distinct-n, repetition rate, BLEU / self-BLEU, perplexity.

Pure Python + numpy, on sequences of tokens (ids or strings: anything hashable).

Definitions (stated so that tests can check them by hand):

- distinct-n (Li et al. 2016): number of distinct n-grams / total number of n-grams. Over several outputs
  ("corpus" distinct-n), the n-grams of all outputs are pooled. A sequence shorter than n has no n-grams: 0.
- repetition rate: fraction of positions t >= 1 whose token already occurs among the previous `window` tokens
  of the same output (Welleck et al. 2019, "rep/l"); 0 for sequences of length <= 1.
- BLEU (Papineni et al. 2002), sentence level: BP * exp(mean_n log p_n) for n = 1..4, with p_n the modified
  (clipped) n-gram precision against the references and BP = 1 if c > r else exp(1 - r / c), c the candidate
  length and r the reference length closest to c (the shorter one on a tie). Smoothing: Chen & Cherry (2014)
  method 1 — a precision whose clipped count is 0 is replaced by EPSILON / (number of candidate n-grams), with
  EPSILON = 0.1 (NLTK's default for method1). A candidate shorter than 4 tokens uses the orders
  1..len(candidate) with equal weights (NLTK's auto_reweigh), so identical short outputs score 1.
  A candidate with no unigram in any reference scores 0 (NLTK's sentence_bleu: smoothing applies only once
  something matches); an empty candidate scores 0. tests/test_decoding.py checks equality with NLTK's
  `sentence_bleu(references, candidate, smoothing_function=SmoothingFunction(epsilon=0.1).method1,
  auto_reweigh=True)`.
- self-BLEU (Zhu et al. 2018, Texygen): the mean over outputs i of BLEU(output i, references = the others).
- perplexity: exp(-mean log-probability) of the generated tokens (natural log).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, Sequence

import numpy as np

EPSILON = 0.1
MAX_N = 4
REPETITION_WINDOW = 16

Seq = Sequence[Hashable]


def ngrams(seq: Seq, n: int) -> list[tuple]:
    """All n-grams of `seq` in order (empty when len(seq) < n)."""
    seq = list(seq)
    return [tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)]


def distinct_n(seq: Seq, n: int) -> float:
    """Distinct n-grams / n-grams of one sequence (0 when it has none)."""
    grams = ngrams(seq, n)
    return len(set(grams)) / len(grams) if grams else 0.0


def corpus_distinct_n(seqs: Sequence[Seq], n: int) -> float:
    """Distinct n-grams / n-grams, pooled over all sequences (0 when there are none)."""
    grams = [g for s in seqs for g in ngrams(s, n)]
    return len(set(grams)) / len(grams) if grams else 0.0


def repetition_rate(seq: Seq, window: int = REPETITION_WINDOW) -> float:
    """Fraction of positions t >= 1 whose token occurs in seq[max(0, t - window):t]."""
    seq = list(seq)
    if len(seq) <= 1:
        return 0.0
    hits = sum(1 for t in range(1, len(seq)) if seq[t] in seq[max(0, t - window):t])
    return hits / (len(seq) - 1)


def modified_precision(candidate: Seq, references: Sequence[Seq], n: int) -> tuple[int, int]:
    """(clipped matches, candidate n-grams): each candidate n-gram counts at most as often as in one reference."""
    cand = Counter(ngrams(candidate, n))
    if not cand:
        return 0, 0
    max_ref: Counter = Counter()
    for ref in references:
        for gram, count in Counter(ngrams(ref, n)).items():
            max_ref[gram] = max(max_ref[gram], count)
    clipped = sum(min(count, max_ref[gram]) for gram, count in cand.items())
    return clipped, sum(cand.values())


def brevity_penalty(c: int, ref_lengths: Sequence[int]) -> float:
    """1 if c > r else exp(1 - r/c); r = the reference length closest to c (shorter on a tie)."""
    if c == 0:
        return 0.0
    if not ref_lengths:
        return 1.0
    r = min(ref_lengths, key=lambda L: (abs(L - c), L))
    return 1.0 if c > r else math.exp(1.0 - r / c)


def bleu(candidate: Seq, references: Sequence[Seq], max_n: int = MAX_N, epsilon: float = EPSILON) -> float:
    """Sentence BLEU with uniform weights 1/min(max_n, len(candidate)), brevity penalty and Chen & Cherry method-1
    smoothing."""
    candidate = list(candidate)
    if not candidate or not references:
        return 0.0
    log_sum = 0.0
    order = min(max_n, len(candidate))
    if modified_precision(candidate, references, 1)[0] == 0:
        return 0.0  # nothing matches: no smoothing (NLTK)
    for n in range(1, order + 1):
        matches, total = modified_precision(candidate, references, n)
        p = (matches if matches > 0 else epsilon) / total
        log_sum += math.log(p) / order
    return brevity_penalty(len(candidate), [len(r) for r in references]) * math.exp(log_sum)


def self_bleu(samples: Sequence[Seq], max_n: int = MAX_N) -> float | None:
    """Mean BLEU of each sample against all the others; None with fewer than 2 samples."""
    samples = [list(s) for s in samples]
    if len(samples) < 2:
        return None
    scores = [bleu(s, samples[:i] + samples[i + 1:], max_n) for i, s in enumerate(samples)]
    return float(np.mean(scores))


def perplexity(logprobs: Sequence[float] | np.ndarray) -> float | None:
    """exp(-mean log-probability); None for an empty sequence."""
    arr = np.asarray(logprobs, dtype=np.float64)
    if arr.size == 0:
        return None
    return float(np.exp(-arr.mean()))


def mean_logprob(logprobs: Sequence[float] | np.ndarray) -> float | None:
    arr = np.asarray(logprobs, dtype=np.float64)
    return float(arr.mean()) if arr.size else None
