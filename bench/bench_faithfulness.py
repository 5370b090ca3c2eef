"""Which attribution to trust, measured: deletion and insertion curves (explorer.metrics.faithfulness) of gradient ×
input, integrated gradients and LRP over held-out sentences, on SmolLM2, the masked LM, a recurrent LM and the
sentiment classifier. Writes assets/faithfulness.json (the views name its ranking) and prints the docs table.

    python bench/bench_faithfulness.py [--models pretrained:smollm2,...] [--sentences 50] [--threads 1]

Resumable: each sentence's result is kept in bench/results/faithfulness/<model>.json as it is measured (a session
that ends mid-way loses at most one sentence); a rerun measures only what is missing, then writes the table.

The output explained, per model (the sentences: explorer.data.everyday_english's held-out lines, and the sentiment
corpus's held-out examples for the classifier):
  a decoder / recurrent LM   the model's own next token after the sentence without its last word (log p);
  the masked LM              its own top word at a <mask> put in place of the middle word (log p);
  the classifier             its chosen label (log p).
The three methods as the views compute them: gradient × input and integrated gradients (adaptive Simpson, 256
gradient evaluations at most, 1 % completeness) of log p, LRP of the logit (of the token, or the label). Deletion
and insertion replace inputs with integrated gradients' baseline (zero embeddings, or the mean embedding for a
rotary model, whose first token is kept); special tokens and kept inputs are not perturbed.
"""
from __future__ import annotations

from _common import ROOT  # noqa: E402  (offline CPU environment first)

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Callable  # noqa: E402

import torch  # noqa: E402

from explorer.adapters.text import unknown_word_id, without_unknown  # noqa: E402
from explorer.data import everyday_english, sentiment_english  # noqa: E402
from explorer.loading.loaders import load_model  # noqa: E402
from explorer.metrics.faithfulness import TABLE, abpc, curves, order_of  # noqa: E402
from explorer.probes.token_attribution import (STEPS, _integrate, _Path, _Row, baseline_inputs,  # noqa: E402
                                               in_float32, relevance)

MODELS = ("pretrained:smollm2", "builtin:masked-lm-wordnet", "builtin:lstm-lm-wordnet", "builtin:sentiment-lstm")
METHODS = ("gradient × input", "integrated gradients", "LRP")
RESULTS = ROOT / "bench" / "results" / "faithfulness"
MIN_WORDS, MAX_WORDS = 6, 16


def sentences(model: str, n: int) -> list[str]:
    """n held-out sentences of MIN_WORDS to MAX_WORDS words, for `model`."""
    if model == "builtin:sentiment-lstm":
        pool = [s for s, _ in sentiment_english.examples("heldout")]
    else:
        pool = [" ".join(words) for words in everyday_english.heldout_sentences(20 * n)]
    return [s for s in pool if MIN_WORDS <= len(s.split()) <= MAX_WORDS][:n]


Case = tuple[Callable[..., torch.Tensor], torch.Tensor, torch.Tensor, _Row, list[int], bool]


def case(loaded: object, model: str, text: str) -> Case:
    """(logits, E, B, the row explained, the perturbable inputs, whether logits takes keep=) for one sentence."""
    if model == "builtin:sentiment-lstm":
        d = loaded.caps.decision  # type: ignore[attr-defined]
        enc = d.encode(text)
        ids = torch.tensor([list(enc.ids)])
        with torch.no_grad():
            E = d.embed_ids(ids)[0].float()
            label = int(d.decision_logits(E[None], None)[0].argmax())

        def decision(x: torch.Tensor) -> torch.Tensor:
            return d.decision_logits(x, None)[:, None, :]

        special = [bool(s) for s in enc.special] or [False] * len(enc.ids)
        B = torch.zeros_like(E)
        for i, s in enumerate(special):
            if s:
                B[i] = E[i]
        return decision, E, B, _Row(0, label, len(E)), [i for i, s in enumerate(special) if not s], False
    if model == "builtin:masked-lm-wordnet":
        a = loaded.adapter  # type: ignore[attr-defined]
        words = text.split()
        words[len(words) // 2] = "[MASK]"
        enc = a.encode(" ".join(words))
        at = list(enc.ids).index(a.mask_id)
        ids = torch.tensor(list(enc.ids))
        with torch.no_grad():
            E = a.embed_ids(ids).float()
            top = int(without_unknown(a.logits_from_embeddings(E[None])[0, at], unknown_word_id(a)).argmax())
        special = list(enc.special) or [i in (0, len(ids) - 1) for i in range(len(ids))]
        perturbable = [i for i in range(len(ids)) if not special[i] and i != at]
        return a.logits_from_embeddings, E, torch.zeros_like(E), _Row(at, top, len(E)), perturbable, False
    a = loaded.caps.gradient  # type: ignore[attr-defined]
    words = text.split()
    enc = a.encode(" ".join(words[:-1]))
    ids = torch.tensor(list(enc.ids))
    raw = a.embed_ids(ids).detach()
    E, logits = raw.float(), in_float32(a.logits_from_embeddings, raw.dtype)
    with torch.no_grad():
        top = int(without_unknown(logits(E[None], keep=[len(ids) - 1])[0, 0], unknown_word_id(a)).argmax())
    B, _, kept = baseline_inputs(a, E)
    special = list(enc.special) or [False] * len(ids)
    perturbable = [i for i in range(len(ids)) if not special[i] and i not in kept]
    return logits, E, B, _Row(len(ids) - 1, top, len(ids)), perturbable, True


def measure(loaded: object, model: str, text: str) -> dict:
    """One sentence: each method's attribution, seconds, curves and ABPC."""
    logits, E, B, row, perturbable, positions = case(loaded, model, text)
    t = time.perf_counter()
    (gxi_only,) = _integrate(_Path(logits, E, B, [row], positions=positions), STEPS, integrate=False)
    t_gxi = time.perf_counter() - t
    t = time.perf_counter()
    (full,) = _integrate(_Path(logits, E, B, [row], positions=positions), STEPS)
    t_ig = time.perf_counter() - t
    t = time.perf_counter()
    rel = relevance(logits, E, [row], positions=positions)
    t_lrp = time.perf_counter() - t
    values = {"gradient × input": gxi_only.gxi, "integrated gradients": full.ig, "LRP": rel.relevance[0]}
    seconds = {"gradient × input": t_gxi, "integrated gradients": t_ig, "LRP": t_lrp}
    out: dict = {"text": text, "inputs": len(E), "perturbed": len(perturbable), "methods": {}}
    for m in METHODS:
        d, i = curves(logits, E, B, row.position, row.target, order_of(values[m], perturbable), positions)
        out["methods"][m] = {"abpc": abpc(d, i), "seconds": seconds[m], "deletion": d.round(4).tolist(),
                             "insertion": i.round(4).tolist()}
    return out


def run(model: str, n: int) -> list[dict]:
    """Every sentence's result for `model`, measuring the missing ones (kept as they come)."""
    path = RESULTS / (model.replace(":", "_") + ".json")
    done: list[dict] = json.loads(path.read_text()) if path.exists() else []
    texts = sentences(model, n)
    if len(done) >= len(texts):
        return done[:len(texts)]
    loaded = load_model(model)
    for text in texts[len(done):]:
        done.append(measure(loaded, model, text))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(done, ensure_ascii=False))
        print(f"{model}: {len(done)}/{len(texts)}", flush=True)
    return done


def summary(rows: list[dict]) -> dict:
    """Mean ABPC, its standard error and the median seconds of each method over the sentences."""
    out = {}
    for m in METHODS:
        a = [r["methods"][m]["abpc"] for r in rows]
        out[m] = {"abpc": round(statistics.fmean(a), 4), "stderr": round(statistics.stdev(a) / len(a) ** 0.5, 4),
                  "seconds": round(statistics.median(r["methods"][m]["seconds"] for r in rows), 4),
                  "best": sum(1 for r in rows if max(r["methods"], key=lambda k: r["methods"][k]["abpc"]) == m)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--sentences", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    table = json.loads(TABLE.read_text()) if TABLE.exists() else {"models": {}}
    for model in args.models.split(","):
        rows = run(model, args.sentences)
        table["models"][model] = {"sentences": len(rows), "methods": summary(rows)}
    table["how"] = ("bench/bench_faithfulness.py: ABPC = mean over k of insertion_k − deletion_k (nats of log p of "
                    "the explained output), inputs ranked by each method's attribution")
    TABLE.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    print("| model | sentences | " + " | ".join(f"{m}: ABPC (nats) · best on · median s" for m in METHODS) + " |")
    print("|---|---|" + "---|" * len(METHODS))
    for model, row in table["models"].items():
        cells = [f"{row['methods'][m]['abpc']:+.3f} ± {row['methods'][m]['stderr']:.3f} · "
                 f"{row['methods'][m]['best']} · {row['methods'][m]['seconds']:.3f}" for m in METHODS]
        print(f"| {model} | {row['sentences']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
