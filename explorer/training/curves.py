"""What was learned, when: held-out measures of every snapshot of a training series (explorer.training.snapshots).

For a series of S snapshots of a language model trained on the generated English corpus (explorer.data.english):
- held-out and training loss: as the training run recorded them (meta["snapshots"]: the held-out loss of the stored
  weights, the training loss since the snapshot before);
- agreement: the share of held-out agreement items (Linzen et al. 2016; `agreement_pairs`, heldout seed) where the
  model gives the verb in the head noun's number more probability than the other number;
- number unit (recurrent models): each unit's cell state (LSTM; the hidden state of a GRU or Elman RNN) of the last
  layer after reading an item's prefix, as a classifier of the head noun's number by its sign: the unit and its
  orientation are chosen on the first half of the items, its accuracy is measured on the second half (Lakretz et al.
  2019 found such units by ablation);
- neighbour precision@5: the share of each classified word's 5 nearest input embeddings (cosine) in its word class
  (`english.word_class`);
- heads (transformers), per layer and head: previous-token score, the mean attention weight from each position to the
  one before it on held-out sentences; induction score, the mean attention weight from each token of a repeated random
  sequence to the token after its first occurrence (Olsson et al. 2022).

For a classifier or tagger trained (or fine-tuned) with snapshots: the held-out loss and accuracy the run recorded at
each snapshot (its held-out labelled examples), and the decision forming over training: the probability each
snapshot gives the trained model's label for one example sentence (a tagger: the mean over its words of each word's
final label), each snapshot run on it.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn as nn

from explorer.data.vocab import Vocab
from explorer.loading.catalogue import ModelId, series_meta, series_steps
from explorer.loading.loaders import LoadedModel, load_model
from explorer.runtime.lru import LoadOnceLRU
from explorer.runtime.result_cache import nbytes
from explorer.metrics import held_out as M
from explorer.training.corpus import BOS, UNK, data_module

ITEMS = 600        # held-out agreement items
SENTENCES = 200    # held-out sentences for the previous-token score
REPEATS, HALF = 40, 20  # induction: REPEATS random sequences of HALF tokens, each read twice after <bos>
K = 5              # neighbours for the embedding precision

LOSS, TRAIN_LOSS, AGREEMENT, NUMBER_UNIT, NEIGHBOURS = ("held-out loss", "training loss", "agreement",
                                                        "number unit", "neighbour precision@5")
ACCURACY, DECISION = "held-out accuracy", "p(final decision)"  # a classifier's or tagger's
PREVIOUS, INDUCTION = "previous-token", "induction"


class _Sizes(Protocol):
    @property
    def n_layer(self) -> int: ...
    @property
    def block_size(self) -> int: ...


@runtime_checkable
class _Transformer(Protocol):
    """A built-in transformer (explorer.models.tiny_gpt.GPT): a module with a `config` (isinstance: it has one)."""

    @property
    def config(self) -> _Sizes: ...

    def __call__(self, idx: torch.Tensor, record: dict[str, torch.Tensor]) -> torch.Tensor: ...


@dataclass(frozen=True)
class SeriesCurves:
    """Held-out measures of the S snapshots of `model`'s series.

    steps, epochs (S,); curves: name -> (S,) float (NaN where a snapshot has none), losses in nats, the rest shares in
    [0, 1]; unit (S,) int: the number unit chosen at each snapshot (−1: not a recurrent model); heads: PREVIOUS and
    INDUCTION -> (S, L, H) scores of each layer's heads; notes: what was not computed and why."""

    model: str
    steps: np.ndarray
    epochs: np.ndarray
    curves: dict[str, np.ndarray]
    unit: np.ndarray
    heads: dict[str, np.ndarray] = field(default_factory=dict)
    n_items: int = 0
    notes: tuple[str, ...] = ()
    sentence: str = ""  # a task model's: the sentence whose decision DECISION follows ("" for a language model)


def _agreement(vocab: Vocab) -> tuple[list[list[int]], np.ndarray, np.ndarray, np.ndarray]:
    """The held-out agreement items with every word known: (<bos> prefix ids, correct id, wrong id, plural (bool))."""
    english = data_module("english")
    items = []
    for p in english.agreement_pairs(ITEMS, english.HELDOUT_SEED, min_distance=1):
        ids = vocab.encode([*p.prefix, p.correct, p.wrong])
        if UNK not in ids:
            items.append(([BOS, *ids[:-2]], ids[-2], ids[-1], p.number == "pl"))
    prefixes, correct, wrong, plural = zip(*items)
    return list(prefixes), np.array(correct), np.array(wrong), np.array(plural)


@torch.no_grad()
def _last_states(model: nn.Module, prefixes: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A recurrent LM on each prefix: (logits (N, V) after its last token, the last layer's state there (N, H): the
    cell state of an LSTM, else the hidden state)."""
    lengths = torch.tensor([len(p) for p in prefixes])
    ids = M.pad_batch(prefixes)
    packed = torch.nn.utils.rnn.pack_padded_sequence(model.get_submodule("embedding")(ids), lengths, batch_first=True,
                                                     enforce_sorted=False)
    out, hidden = model.get_submodule("rnn")(packed)
    out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    last = out[torch.arange(len(prefixes)), lengths - 1]                          # (N, H)
    state = hidden[1][-1] if isinstance(hidden, tuple) else hidden[-1]            # (N, H)
    return model.get_submodule("decoder")(last).numpy(), state.numpy()


def number_unit(states: np.ndarray, plural: np.ndarray) -> tuple[int, float]:
    """The unit whose sign best tells plural from singular on the first half of the items (orientation chosen there
    too), and its accuracy on the second half. states (N, H), plural (N,) bool."""
    half = len(plural) // 2
    positive = states > 0                                                         # (N, H)
    fit = (positive[:half] == plural[:half, None]).mean(axis=0)                   # (H,)
    unit = int(np.argmax(np.maximum(fit, 1 - fit)))
    flip = fit[unit] < 0.5
    test = (positive[half:, unit] != flip) == plural[half:]
    return unit, float(test.mean())


@torch.no_grad()
def head_scores(model: _Transformer, sentences: list[list[int]], vocab_size: int, seed: int = 0
                ) -> dict[str, np.ndarray]:
    """PREVIOUS and INDUCTION -> (L, H) of the built-in GPT `model` (its recorded attention patterns). The sentences
    are read in one batch, padded on the right: a causal model's weights at a real position do not see the padding."""
    L = model.config.n_layer
    rec: dict[str, torch.Tensor] = {}
    model(M.pad_batch(sentences), record=rec)
    pats = torch.stack([rec[f"blocks.{i}.attn.pattern"] for i in range(L)])     # (L, B, H, T, T)
    T = pats.shape[-1]
    diag = pats[..., torch.arange(1, T), torch.arange(0, T - 1)]                 # (L, B, H, T−1): t reads t − 1
    real = (torch.arange(1, T)[None, :] < torch.tensor([len(s) for s in sentences])[:, None]).float()  # (B, T−1)
    previous = (diag * real[None, :, None, :]).sum(dim=(1, 3)) / real.sum()      # (L, H)
    rng = random.Random(seed)
    seqs = [[rng.randrange(4, vocab_size) for _ in range(HALF)] for _ in range(REPEATS)]
    rec = {}
    model(torch.tensor([[BOS, *s, *s] for s in seqs]), record=rec)
    pats = torch.stack([rec[f"blocks.{i}.attn.pattern"] for i in range(L)])     # (L, B, H, T, T)
    second = torch.arange(HALF + 1, 2 * HALF + 1)  # the repeat's positions; the token after the first: t − HALF + 1
    induction = pats[..., second, second - HALF + 1].mean(dim=(1, 3))            # (L, H)
    return {PREVIOUS: previous.numpy(), INDUCTION: induction.numpy()}


@torch.no_grad()
def _last_logits(model: nn.Module, prefixes: list[list[int]]) -> np.ndarray:
    """A causal transformer's logits (N, V) after the last token of each prefix (one batch, padded on the right)."""
    lengths = torch.tensor([len(p) for p in prefixes])
    logits = M.lm_logits(model, M.pad_batch(prefixes))
    return logits[torch.arange(len(prefixes)), lengths - 1].float().numpy()


def _snapshot_measures(loaded: LoadedModel, vocab: Vocab, items: tuple[list[list[int]], np.ndarray, np.ndarray,
                                                                       np.ndarray], sentences: list[list[int]]
                       ) -> dict[str, object]:
    model = loaded.model
    assert model is not None  # a built-in recurrent LM or transformer
    prefixes, correct, wrong, plural = items
    out: dict[str, object] = {}
    english = data_module("english")
    if hasattr(model, "rnn"):
        logits, states = _last_states(model, prefixes)
        out["unit"], out[NUMBER_UNIT] = number_unit(states, plural)
        embedding = model.get_parameter("embedding.weight")
    else:
        assert isinstance(model, _Transformer)  # the built-in GPT (it has a config)
        logits = _last_logits(model, prefixes)
        out["heads"] = head_scores(model, sentences, len(vocab.itos))
        embedding = model.get_parameter("wte.weight")
    rows = np.arange(len(correct))
    out[AGREEMENT] = float((logits[rows, correct] > logits[rows, wrong]).mean())
    out[NEIGHBOURS] = float(M.precision_at_k(embedding.detach(), vocab.itos, english.word_class, k=K)["precision_at_k"])
    return out


# (base id, steps) -> curves, per process: a series' curves are ~10 kB, the bound is the shipped series and then some
_MEASURED: LoadOnceLRU[SeriesCurves] = LoadOnceLRU(32, 32 * 2**20, nbytes)
_LOCK = threading.Lock()  # one measurement at a time: the others wait for it


def measured(model_id: str) -> SeriesCurves | None:
    """The curves of `model_id`'s series if this process has measured them already (series_curves), else None."""
    base = ModelId.parse(model_id).base
    return _MEASURED.peek((base, series_steps(base)))


def recorded(model_id: str) -> SeriesCurves:
    """The curves the training run recorded (held-out and training loss of each snapshot), read from the checkpoint's
    meta without running anything: what a view can show at once while series_curves measures the rest."""
    base = ModelId.parse(model_id).base
    steps = series_steps(base)
    if not steps:
        raise ValueError(f"{base} was not trained with snapshots.")
    infos = (series_meta(base) or {})["snapshots"]
    curves = {name: np.array([np.nan if i.get(key) is None else i[key] for i in infos])
              for name, key in ((LOSS, "heldout_loss"), (TRAIN_LOSS, "train_loss"), (ACCURACY, "heldout_accuracy"))
              if name != ACCURACY or any(i.get(key) is not None for i in infos)}
    return SeriesCurves(base, np.array(steps), np.array([i.get("epoch", 0) for i in infos]), curves,
                        np.full(len(steps), -1))


def series_curves(model_id: str) -> SeriesCurves:
    """The curves of the series of `model_id` (a built-in trained with snapshots, its base id or any of its steps),
    measured once per process. Raises ValueError for a model without snapshots."""
    base = ModelId.parse(model_id).base
    def measure() -> SeriesCurves:
        with _LOCK:
            return _measure(base)

    return _MEASURED.get((base, series_steps(base)), measure)


def _measure(base: str) -> SeriesCurves:
    first = recorded(base)
    steps, S = tuple(int(s) for s in first.steps), len(first.steps)
    trained = load_model(base)
    infos = trained.meta["snapshots"]
    curves = dict(first.curves)
    notes: list[str] = []
    unit = np.full(S, -1)
    heads: dict[str, np.ndarray] = {}
    vocab = trained.vocabs.get("vocab")
    n_items = 0
    if trained.caps.decision is not None:  # a classifier or tagger: its decision forming over training
        sentence = trained.adapter.examples("decide").default
        curves[DECISION], said = _decisions(trained, [load_model(f"{base}@{s}") for s in steps], sentence)
        return SeriesCurves(base, np.array(steps), np.array([i.get("epoch", 0) for i in infos]), curves, unit,
                            notes=(said,), sentence=sentence)
    if trained.caps.lens is None:  # word vectors, a translation model: no next-word predictions to read agreement in
        notes.append(f"{base} is not a language model: only its losses are shown.")
    elif (trained.meta.get("corpus") or {}).get("generator") != "english" or vocab is None:
        notes.append(f"{base} was not trained on the generated English corpus: only its losses are shown.")
    else:
        items = _agreement(vocab)
        n_items = len(items[0])
        english = data_module("english")
        sentences = [[BOS, *vocab.encode(s)] for s in english.generate_sentences(SENTENCES, english.HELDOUT_SEED)]
        net = trained.model
        sentences = [s[:net.config.block_size] for s in sentences] if isinstance(net, _Transformer) else sentences
        rows = [_snapshot_measures(load_model(f"{base}@{s}"), vocab, items, sentences) for s in steps]
        for name in (AGREEMENT, NEIGHBOURS, NUMBER_UNIT):
            if name in rows[0]:
                curves[name] = np.array([r[name] for r in rows], dtype=float)
        if "unit" in rows[0]:
            unit = np.array([r["unit"] for r in rows])
        if "heads" in rows[0]:
            heads = {k: np.stack([r["heads"][k] for r in rows]) for k in (PREVIOUS, INDUCTION)}  # type: ignore[index]
    return SeriesCurves(base, np.array(steps), np.array([i.get("epoch", 0) for i in infos]), curves, unit, heads,
                        n_items, tuple(notes))


def _decisions(trained: LoadedModel, snapshots: list[LoadedModel], sentence: str) -> tuple[np.ndarray, str]:
    """(S,) the probability each snapshot gives the trained model's decision on `sentence` (a tagger: the mean over
    its tokens of each token's final label; special tokens left out), and a sentence that says so."""
    from explorer.probes.decision import decide

    final = decide(trained, sentence)
    chosen = final.chosen
    if final.per_token:
        rows = np.flatnonzero(~np.array(final.special))
        values = [float(decide(s, sentence).probs[rows, np.asarray(chosen)[rows]].mean()) for s in snapshots]
        said = (f"{DECISION}: the mean over the words of “{sentence}” of the probability each snapshot gives the "
                "trained model's label of each word.")
    else:
        values = [float(decide(s, sentence).probs[int(chosen)]) for s in snapshots]
        said = (f"{DECISION}: the probability each snapshot gives “{final.labels[int(chosen)]}”, the trained "
                f"model's label for “{sentence}”.")
    return np.array(values), said


SENTENCE = "the keys to the old cabinet are on the table ."  # an agreement item the generated English knows


def induction_text(vocab: Vocab, seed: int = 0) -> str:
    """The first repeated random sequence the induction score reads, as text (its HALF words twice)."""
    rng = random.Random(seed)
    words = [vocab.itos[rng.randrange(4, len(vocab.itos))] for _ in range(HALF)]
    return " ".join(words + words)


def view_at(c: SeriesCurves, curve: str, step: int, layer: int | None = None, head: int | None = None,
            vocab: Vocab | None = None) -> tuple[str, dict[str, str]]:
    """The view (url path) and query parameters that show what `curve` measures, on the snapshot at `step`: the
    losses in decoding; agreement in the recurrent cell (LSTM) or the logit lens (GPT); the number unit in the
    recurrent cell at that step's unit; neighbour precision in word embeddings; a head's score in self-attention at
    that head, on the input the score reads; every curve of a classifier or tagger in the Decision view, on the
    sentence its decision curve follows."""
    at = {"model": c.model, "train_step": str(step)}
    if c.sentence:  # a classifier or tagger: its decision at that step
        return "decision", {**at, "text": c.sentence}
    recurrent = bool((c.unit >= 0).any())
    if curve in (LOSS, TRAIN_LOSS):
        return "decoding-strategies", at
    if curve == AGREEMENT:
        return ("lstm-gates", {**at, "text": SENTENCE, "gate": "c"}) if recurrent else \
            ("logit-lens", {**at, "text": SENTENCE})
    if curve == NUMBER_UNIT:
        index = int(np.flatnonzero(c.steps == step)[0]) if (c.steps == step).any() else -1
        return "lstm-gates", {**at, "text": SENTENCE, "gate": "c", "unit": str(int(c.unit[index])),
                              "section": "One unit + equations"}
    if curve == NEIGHBOURS:
        return "word-embeddings", {**at, "src": "model"}
    if curve in (PREVIOUS, INDUCTION):
        text = induction_text(vocab) if curve == INDUCTION and vocab is not None else SENTENCE
        return "self-attention", {**at, "text": text, "mode": "head", "layer": str(layer or 0), "head": str(head or 0)}
    raise ValueError(f"no view for the curve {curve!r}")
