"""The texts SmolLM2-135M-Instruct writes for the sentiment corpus (explorer.data.sentiment_english: its requests,
batches, seeds and settings; the labelled corpus is cut from these texts there).

    python -m explorer.training.sentiment_texts [--part 0 --parts 2]   # one process per core; resumable

Each request is a chat with one user message (the prompt) whose assistant turn is begun with the request's start;
the model writes on from there. Each batch's texts (start + what the model wrote) go to one JSON file in
explorer.data.sentiment_english.GENERATED (written once, atomically), so an interrupted run resumes where it stopped:
run the same command again. `python -m explorer.data.sentiment_english collect` then packs them.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from explorer.data.sentiment_english import GENERATED, MODEL, SAMPLING, SEED, batches
from explorer.loading.loaders import load_model


@runtime_checkable
class _Generates(Protocol):
    """A Hugging Face causal LM (transformers' GenerationMixin)."""

    def generate(self, **kwargs: object) -> torch.Tensor: ...


def generate(part: int = 0, parts: int = 1, folder: Path = GENERATED, limit: int | None = None) -> None:
    """Write the texts of every batch b ≡ part (mod parts) not written yet (the first `limit` batches when given),
    one JSON file each (1 torch thread)."""
    torch.set_num_threads(1)
    loaded = load_model(MODEL)
    model = loaded.model
    assert isinstance(model, _Generates)  # MODEL is one
    model, tok = model.to(torch.bfloat16), loaded.tokenizer
    tok.padding_side = "left"
    folder.mkdir(parents=True, exist_ok=True)
    for b, batch in enumerate(batches()[:limit]):
        out = folder / f"batch-{b:04d}.json"
        if b % parts != part or out.exists():
            continue
        t = time.perf_counter()
        prompts, starts, labels = (list(x) for x in zip(*batch, strict=True))
        chats = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
                 + s for p, s in zip(prompts, starts, strict=True)]
        enc = tok(chats, return_tensors="pt", padding=True)
        torch.manual_seed(SEED + b)
        with torch.no_grad():
            ids = model.generate(**enc, **SAMPLING, pad_token_id=tok.pad_token_id)
        written = tok.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        texts = [s + w for s, w in zip(starts, written, strict=True)]
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"batch": b, "seed": SEED + b, "prompts": prompts, "starts": starts,
                                   "labels": labels, "texts": texts}), "utf-8")
        tmp.replace(out)
        print(f"batch {b}: {sum(len(x) for x in texts):,} characters in {time.perf_counter() - t:.0f} s", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.training.sentiment_texts")
    parser.add_argument("--part", type=int, default=0, help="this process writes the batches b with b %% parts == part")
    parser.add_argument("--parts", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT batches")
    args = parser.parse_args(argv)
    generate(args.part, args.parts, limit=args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
