"""LRP's price: one forward and one backward pass under the rules (explorer.adapters.lrp) against one plain forward and
backward pass of the same output (gradient × input's), on one thread, for a 20-token sentence.

    python bench/bench_lrp.py [--runs 9] [--threads 1] [--models pretrained:smollm2,builtin:tiny-gpt,builtin:lstm-lm]

Target (issue 59): on SmolLM2, LRP's answer within 1.5× one forward + backward. Medians of `runs` after one warm-up.
"""
from __future__ import annotations

from _common import median_ms  # noqa: E402  (offline CPU environment first)

import argparse  # noqa: E402

import torch  # noqa: E402

from explorer.loading.loaders import load_model  # noqa: E402
from explorer.probes.token_attribution import _Row, in_float32, relevance  # noqa: E402

TEXT = ("The students who read the long report about the old stone bridge near the river said that it was very "
        "old and")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="pretrained:smollm2,builtin:tiny-gpt,builtin:lstm-lm")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("| model | tokens | forward + backward | LRP | LRP / (forward + backward) |\n|---|---|---|---|---|")
    for mid in args.models.split(","):
        a = load_model(mid).caps.gradient
        ids = list(a.encode(TEXT).ids)[:20]
        raw = a.embed_ids(torch.tensor(ids)).detach()
        E, logits = raw.float(), in_float32(a.logits_from_embeddings, raw.dtype)
        last, target = len(ids) - 1, 42

        def plain(_: int) -> None:
            x = E[None].clone().requires_grad_(True)
            f = logits(x, keep=[last])[0, 0, target]
            (g,) = torch.autograd.grad(f, x)
            (g * x).sum(-1)

        def rules(_: int) -> None:
            relevance(logits, E, [_Row(last, target, len(ids))], positions=True)

        fb, lrp = median_ms(plain, args.runs), median_ms(rules, args.runs)
        print(f"| {mid} | {len(ids)} | {fb:.1f} ms | {lrp:.1f} ms | {lrp / fb:.2f}× |")


if __name__ == "__main__":
    main()
