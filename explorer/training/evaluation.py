"""Held-out evaluations the tasks report: on the generated English corpus, subject-verb agreement of a language model
(Linzen et al. 2016) and masked-word accuracy of a masked LM, per word class; on real English (the WordNet corpus),
agreement across an attractor in templated sentences and in the corpus's own (explorer.data.wordnet_english)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn as nn

from explorer.data.vocab import Vocab
from explorer.metrics import held_out as M
from explorer.training.corpus import BOS, EOS, MASK, UNK, data_module

if TYPE_CHECKING:
    from explorer.data.wordnet_english import AgreementCase
    from explorer.runtime.json_value import JSONDict

MASKED_CLASSES = ("noun", "verb", "auxiliary")


def agreement_items(vocab: Vocab, n: int = 1000, seed: int | None = None,
                    min_distance: int = 1) -> list[tuple[list[int], int, int, int]]:
    """Encode explorer.data.english.agreement_pairs(n, HELDOUT_SEED) as (prefix ids, correct, wrong, distance)."""
    english = data_module("english")
    pairs = english.agreement_pairs(n, english.HELDOUT_SEED if seed is None else seed, min_distance=min_distance)
    items = []
    for p in pairs:
        correct, wrong = vocab.encode([p.correct])[0], vocab.encode([p.wrong])[0]
        if UNK in (correct, wrong):
            continue
        items.append((vocab.encode(list(p.prefix)), correct, wrong, int(p.distance)))
    return items


def agreement_eval(model: nn.Module, vocab: Vocab, n: int = 1000, device: str = "cpu") -> JSONDict:
    """Agreement accuracy on all distances (min_distance=1) and on long-range pairs (min_distance=4)."""
    res = M.agreement_accuracy(model, agreement_items(vocab, n, min_distance=1), device=device)
    long = M.agreement_accuracy(model, agreement_items(vocab, n, min_distance=4), device=device)
    res.update(long_range_accuracy=long["accuracy"], long_range_by_distance=long["by_distance"], long_range_n=long["n"])
    return res


def masked_class(word: str) -> str | None:
    """"noun", "verb" (a form of a lexical verb), "auxiliary" (is, are, was, has, do, …) or None, from the word
    classes of explorer.data.english (a word in several classes counts in the first listed, e.g. "clean" is an
    adjective)."""
    cls = data_module("english").word_class(word)
    if cls is None:
        return None
    if cls in data_module("english").NOUNS:
        return "noun"
    return "auxiliary" if cls == "verbs_auxiliary" else "verb" if cls.startswith("verbs_") else None


@torch.no_grad()
def masked_word_accuracy(model: nn.Module, vocab: Vocab, sentences: Sequence[Sequence[str]], device: str = "cpu",
                         train_freq: dict[str, int] | None = None,
                         stop: Callable[[], bool] | None = None) -> JSONDict:
    """Every noun, lexical verb and auxiliary of each sentence replaced by <mask> in turn (one at a time, the rest of
    <bos> s <eos> visible): top-1 and top-5 accuracy of the model's logits at the mask, per class (`n` masked
    words). With train_freq (training counts): `baseline`, the top-1 accuracy of always answering the class's most
    frequent training word. `verb_number` (under "verb" and "auxiliary"): the share of masked present-tense /
    was-were forms where the model's probability mass on forms of the right number (VERB_NUMBER) exceeds the
    wrong number's. stop(): asked before each sentence; True ends the count there (a run out of time)."""
    english = data_module("english")
    model.eval()
    hits = {c: [0, 0, 0] for c in MASKED_CLASSES}  # top-1, top-5, n
    number = {c: [0, 0] for c in MASKED_CLASSES}   # right, n
    forms = {n: torch.tensor([vocab.stoi[w] for w, k in english.VERB_NUMBER.items() if k == n and w in vocab.stoi],
                             dtype=torch.long) for n in ("sg", "pl")}
    targets: dict[str, list[str]] = {c: [] for c in MASKED_CLASSES}
    for s in sentences:
        if stop is not None and stop():
            break
        ids = [BOS, *vocab.encode(s), EOS][: getattr(model.config, "block_size", 10**6)]
        where = [(t, c) for t, w in enumerate(s, start=1) if t < len(ids) - 1 and ids[t] != UNK
                 and (c := masked_class(w)) is not None]
        if not where:
            continue
        batch = torch.tensor([ids] * len(where), dtype=torch.long)
        rows = torch.arange(len(where))
        cols = torch.tensor([t for t, _ in where])
        batch[rows, cols] = MASK
        logits = model(batch.to(device))[rows, cols].float().cpu()           # (n, V)
        top = logits.topk(5, dim=-1).indices
        probs = logits.softmax(-1)
        for i, (t, c) in enumerate(where):
            hits[c][0] += int(top[i, 0] == ids[t])
            hits[c][1] += int((top[i] == ids[t]).any())
            hits[c][2] += 1
            targets[c].append(s[t - 1])
            n = english.VERB_NUMBER.get(s[t - 1])
            if n is not None and c != "noun":
                other = "pl" if n == "sg" else "sg"
                number[c][0] += int(probs[i, forms[n]].sum() > probs[i, forms[other]].sum())
                number[c][1] += 1
    out: JSONDict = {}
    for c in MASKED_CLASSES:
        h1, h5, n = hits[c]
        counts: JSONDict = {"top1": h1 / max(n, 1), "top5": h5 / max(n, 1), "n": n}
        out[c] = counts
        if train_freq:
            members = [w for w in train_freq if masked_class(w) == c]
            best = max(members, key=lambda w: train_freq[w]) if members else None
            counts["baseline"] = sum(w == best for w in targets[c]) / max(n, 1)
            counts["baseline_word"] = best
        if c != "noun":
            counts["verb_number"] = number[c][0] / max(number[c][1], 1)
            counts["verb_number_n"] = number[c][1]
    return out


def _accuracy(right: Sequence[bool]) -> float | None:
    return sum(right) / len(right) if right else None


def _summary(cases: Sequence[AgreementCase], right: Sequence[bool]) -> JSONDict:
    """Accuracy with and without an attractor, and their counts."""
    split = {a: [r for c, r in zip(cases, right) if c.attractor == a] for a in (True, False)}
    return {"attractor": _accuracy(split[True]), "attractor_n": len(split[True]),
            "no_attractor": _accuracy(split[False]), "no_attractor_n": len(split[False])}


def natural_agreement_eval(model: nn.Module, vocab: Vocab, device: str = "cpu") -> JSONDict:
    """A left-to-right LM on real English: the share of cases where P(correct verb | <bos> prefix) > P(wrong verb),
    on templated_agreement() (1,000: "the keys near the door" -> are/is) and on the corpus's own sentences
    (corpus_agreement: the training lines, "corpus", and the held-out ones, "corpus_held_out")."""
    W = data_module("wordnet")
    out: JSONDict = {}
    for name, cases in (("templated", W.templated_agreement()), ("corpus", W.corpus_agreement("train")),
                        ("corpus_held_out", W.corpus_agreement("heldout"))):
        items = [(vocab.encode(list(c.prefix)), vocab.stoi[c.correct], vocab.stoi[c.wrong], 0) for c in cases]
        out[name] = _summary(cases, _right(model, items, device))
    return out


@torch.no_grad()
def _right(model: nn.Module, items: Sequence[tuple[list[int], int, int, int]], device: str) -> list[bool]:
    """Per item (prefix ids, correct, wrong, _): whether the LM's logit of correct exceeds wrong's after <bos>."""
    model.eval()
    right = []
    for prefix, correct, wrong, _ in items:
        logits = M.lm_logits(model, torch.tensor([[BOS, *prefix]], device=device))[0, -1].float()
        right.append(bool(logits[correct] > logits[wrong]))
    return right


@torch.no_grad()
def natural_masked_agreement(model: nn.Module, vocab: Vocab, device: str = "cpu") -> JSONDict:
    """A masked LM on real English: templated_agreement() as "<bos> the keys near the door <mask> here . <eos>", the
    share where the logit of the agreeing verb at the mask exceeds the other form's."""
    W = data_module("wordnet")
    cases = W.templated_agreement()
    model.eval()
    right = []
    for c in cases:
        ids = [BOS, *vocab.encode(list(c.prefix)), MASK, *vocab.encode(["here", "."]), EOS]
        logits = model(torch.tensor([ids], device=device))[0, len(c.prefix) + 1].float()
        right.append(bool(logits[vocab.stoi[c.correct]] > logits[vocab.stoi[c.wrong]]))
    return {"templated": _summary(cases, right)}


SAMPLE_PROMPTS = ("the old man", "i went to the bank to", "a person who")


def continuations(model: nn.Module, meta: JSONDict, prompts: Sequence[str] = SAMPLE_PROMPTS,
                   new: int = 12) -> JSONDict:
    """Each prompt continued greedily (at most `new` tokens, to <eos>) by the app's own generation loop
    (explorer.adapters.generation: what the decoding view's greedy column shows for this checkpoint with its
    unknown-word token shown: the raw model's), as text; `meta` is the checkpoint's (architecture, config, vocab)."""
    from explorer.adapters.generation import Strategy, sample
    from explorer.loading.loaders import LoadedModel
    from explorer.models.build import FAMILY_OF_ARCHITECTURE, vocabs_from_meta

    family = FAMILY_OF_ARCHITECTURE[str(meta["architecture"])]
    loaded = LoadedModel("builtin:" + str(meta.get("name", "model")), family, model.eval(), "cpu", "float32", meta,
                         vocabs=vocabs_from_meta(meta))
    adapter = loaded.caps.stepper
    if adapter is None:  # a checkpoint that predicts no next token (a masked LM): nothing to continue
        return {}
    out: JSONDict = {}
    for prompt in prompts:
        ids = torch.tensor([list(adapter.encode(prompt).ids)])
        rows = sample(adapter, ids, ids, Strategy("greedy", show_unknown=True), new)[0]  # the raw model's, <unk> too
        words = [w for w in adapter.token_strings(rows[0]) if w != "<eos>"]
        out[prompt] = " ".join([prompt, *words])
    return out
