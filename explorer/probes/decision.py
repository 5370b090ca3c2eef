"""What a task model decides (a classifier or a tagger: explorer.adapters.decision), and where a label comes from.

`decide(loaded, text, pair="")` -> DecisionTrace: the model's own label probabilities, softmax of its head's logits,
for the sentence (or the sentence pair), or for each token (a tagger); for a sentence classifier also the
probabilities after each word: row t is the model run on the prefix that ends at token t (with the closing
special tokens it adds to every input, e.g. BERT's [SEP]), one forward pass per prefix.

`attribute(loaded, text, label, foil=-1, token=-1, pair="", steps=STEPS)` -> LabelAttribution: how much each
input token's embedding moves f = log p(label) (a tagger: at `token`), or, with a foil, the contrastive
f = log p(label) − log p(foil) (why this label rather than that one): gradient × input a_i = Σ_c ∂f/∂E_ic · E_ic
and integrated gradients from the baseline B, by explorer.probes.token_attribution's adaptive rule, with its
completeness error |Σ_i a_i − (f(E) − f(B))|. B is the zero embedding at each word and the input itself at the
special tokens (kept: [CLS] and [SEP] stay where the model expects them, and are not attributed).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.adapters.protocols import Decides, Loaded
from explorer.adapters.task_head import not_a_language_model
from explorer.adapters.text import Encoded
from explorer.adapters.lrp import Relevance
from explorer.probes.token_attribution import (MAX_STEPS, MIN_STEPS, STEPS, _integrate, _Path, _Row, relevance,
                                               within_budget)
from explorer.runtime import budget
from explorer.runtime.errors import ViewError

MAX_PREFIXES = 128  # the decision after each word is computed for at most this many words (and as many as fit in the
# request's budget: explorer.runtime.budget)


class DecisionError(ViewError, ValueError):
    """The model decides nothing, or the text gives it nothing to read; str() is for the user."""

    alert = "info"


def decider(loaded: Loaded) -> Decides:
    """The model's decision capability, or DecisionError saying what the model is instead."""
    d = loaded.caps.decision
    if d is None:
        mid = str(getattr(loaded, "id", "model"))
        what = "a language model" if loaded.caps.stepper is not None or loaded.caps.fill_in is not None else \
            "not a classifier or tagger"
        raise DecisionError(loaded.adapter.reason or f"{mid} is {what}: it has no task head that decides a label "
                            "(a Hugging Face *ForSequenceClassification or *ForTokenClassification, or a recurrent "
                            "network with a Linear(H or 2H → labels) head).")
    return d


@dataclass(frozen=True)
class DecisionTrace:
    """tokens, special (T,): as fed, shown as text; labels (C,); per_token: a tagger (one label per token);
    logits, probs: (C,) the input's, or (T, C) each token's; prefix_probs (T, C): row t the probabilities of the
    model run on the prefix ending at token t (NaN rows at special tokens and beyond MAX_PREFIXES), or None (a
    tagger, a sentence pair); segments (T,): 0, 1 for a pair's second sentence."""

    model_id: str
    what: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    segments: tuple[int, ...]
    labels: tuple[str, ...]
    per_token: bool
    logits: np.ndarray
    probs: np.ndarray
    prefix_probs: np.ndarray | None = None
    pooling: str = ""
    notes: tuple[str, ...] = ()

    @property
    def chosen(self) -> int | np.ndarray:
        """The label chosen: an index (a sentence), or (T,) indices (a tagger)."""
        return int(self.probs.argmax()) if not self.per_token else self.probs.argmax(-1)


def _encode(d: Decides, text: str, pair: str) -> Encoded:
    if pair and not d.head.pairs:
        raise DecisionError(f"{d.id} reads one sentence, not a pair: leave the second sentence empty.")
    enc = d.encode(text, pair=pair) if pair else d.encode(text)
    if not enc.ids:
        raise DecisionError(" ".join(enc.notes) or "Type a sentence for the model to read.")
    return enc


def _tensors(d: Decides, enc: Encoded) -> tuple[torch.Tensor, torch.Tensor | None]:
    ids = torch.tensor([list(enc.ids)], dtype=torch.long, device=d.device)
    segments = getattr(enc, "segments", ()) or ()
    seg = torch.tensor([list(segments)], dtype=torch.long, device=d.device) if any(segments) else None
    return ids, seg


def _logits(d: Decides, ids: torch.Tensor, seg: torch.Tensor | None) -> torch.Tensor:
    with torch.inference_mode():
        return d.decision_logits(d.embed_ids(ids), seg)[0].double().cpu()


def decide(loaded: Loaded, text: str, pair: str = "") -> DecisionTrace:
    """See the module docstring. Raises DecisionError."""
    d = decider(loaded)
    enc = _encode(d, text, pair)
    ids, seg = _tensors(d, enc)
    logits = _logits(d, ids, seg)
    special = tuple(bool(s) for s in enc.special)
    notes = list(enc.notes)
    prefix = None
    if not d.head.per_token and not pair:
        prefix, more = _prefixes(d, list(enc.ids), special, _shape(loaded))
        notes += more
    tokens = tuple(enc.tokens)  # as the model reads them, a word it reads as <unk> marked "owl→<unk>"
    segments = tuple(getattr(enc, "segments", ()) or (0,) * len(special))
    return DecisionTrace(d.id, d.head.what(), tokens, special, segments, d.head.labels, d.head.per_token,
                         logits.numpy(), torch.softmax(logits, -1).numpy(), prefix,
                         d.head.pooling, tuple(dict.fromkeys(notes)))


def _shape(loaded: Loaded) -> budget.Shape:
    """The model's shape for pricing (a state dict's: the network its adapter assembled)."""
    return budget.shape_of(loaded.model if loaded.model is not None else getattr(loaded.adapter, "net", None))


def _prefixes(d: Decides, ids: list[int], special: tuple[bool, ...],
              shape: budget.Shape) -> tuple[np.ndarray, list[str]]:
    """(T, C): row t the model's probabilities on ids[:t + 1] followed by the special tokens that close every input
    (the trailing run of special tokens), for every ordinary token t (NaN elsewhere): the first MAX_PREFIXES words,
    or as many as fit in the request's budget."""
    T, C = len(ids), len(d.head.labels)
    tail = len(special) - next((i for i in range(len(special) - 1, -1, -1) if not special[i]), -1) - 1
    closing = ids[T - tail:] if tail else []
    out = np.full((T, C), np.nan)
    words = [t for t in range(T - tail) if not special[t]]

    def cost(n: float) -> budget.Price:
        return budget.Price(sum(budget.forward(shape, t + 1 + tail).seconds for t in words[:int(n)]), 0)

    most = min(MAX_PREFIXES, int(budget.fit_tokens(cost, len(words))))
    for t in words[:most]:
        run = torch.tensor([ids[:t + 1] + closing], dtype=torch.long, device=d.device)
        out[t] = torch.softmax(_logits(d, run, None), -1).numpy()
    notes = [] if len(words) <= most else \
        [f"The decision after each word is shown for the first {most} words (the model is run once per prefix; "
         "this server's budget per request allows that many)."]
    return out, notes


@dataclass(frozen=True)
class LabelAttribution:
    """N input tokens attributed from one label: f = log p(label) [− log p(foil)] (at `token` for a tagger).
    gradient_x_input, integrated (N,); value f(E), baseline_value f(B); completeness |Σ_i integrated_i − (f(E) −
    f(B))| and relative (that over |f(E) − f(B)|); evaluations: gradient evaluations spent; kept: the inputs the
    baseline keeps (special tokens: 0 attribution); lrp: LRP's relevance of the label's logit [− the foil's] (one
    row: relevance (1, N)), which equals log p(label) − log p(foil) with a foil."""

    model_id: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    label: str
    foil: str
    token: int
    of: str
    gradient_x_input: np.ndarray
    integrated: np.ndarray
    value: float
    baseline_value: float
    completeness: float
    relative: float
    evaluations: int
    steps: int
    baseline: str
    kept: tuple[int, ...]
    lrp: Relevance | None = None


def attribute(loaded: Loaded, text: str, label: int, foil: int = -1, token: int = -1, pair: str = "",
              steps: int = STEPS) -> LabelAttribution:
    """See the module docstring. label, foil: label indices (foil −1: none); token: the tagger's token whose label
    is attributed (−1: the last ordinary token). Raises DecisionError."""
    d = decider(loaded)
    C = len(d.head.labels)
    if not 0 <= label < C or foil >= C or foil == label:
        raise DecisionError(f"Pick a label among the model's {C} ({', '.join(d.head.labels[:6])}) and a different "
                            "one to contrast it with.")
    enc = _encode(d, text, pair)
    ids, seg = _tensors(d, enc)
    special = tuple(bool(s) for s in enc.special)
    N = len(special)
    position = 0
    if d.head.per_token:
        ordinary = [i for i in range(N) if not special[i]]
        if not ordinary:
            raise DecisionError("The sentence has no word to tag.")
        position = token if 0 <= token < N and not special[token] else ordinary[-1]
    with torch.no_grad():
        E = d.embed_ids(ids)[0].float().detach()
    B = torch.zeros_like(E)
    kept = tuple(i for i in range(N) if special[i])
    for i in kept:
        B[i] = E[i]

    def logits(x: torch.Tensor) -> torch.Tensor:
        s = None if seg is None else seg.expand(x.shape[0], -1)
        out = d.decision_logits(x, s)
        return out if d.head.per_token else out[:, None, :]

    steps, _ = within_budget(_shape(loaded), [N], int(min(max(int(steps), MIN_STEPS), MAX_STEPS)))
    row = _Row(position, int(label), N, int(foil))
    path = _Path(logits, E, B, [row])
    (r,) = _integrate(path, steps)
    rel = relevance(logits, E, [row])
    change = r.value - r.base
    error = abs(float(r.ig.sum()) - change)
    names = d.head.labels
    of = f"log p({names[label]})" + (f" − log p({names[foil]})" if foil >= 0 else "")
    return LabelAttribution(d.id, tuple(enc.tokens), special, names[label],
                            names[foil] if foil >= 0 else "", position if d.head.per_token else -1, of,
                            r.gxi, r.ig, float(r.value), float(r.base), error, error / max(abs(change), 1e-30),
                            int(r.evaluations), steps, "the zero embedding at each word (special tokens kept)", kept,
                            rel)


__all__ = ["DecisionError", "DecisionTrace", "LabelAttribution", "decide", "attribute", "decider",
           "not_a_language_model"]
