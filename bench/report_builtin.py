"""Print the held-out quality of every shipped checkpoint (assets/builtin/*.json) as a Markdown table."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pct(x: object) -> str:
    return f"{100 * x:.1f} %" if isinstance(x, (int, float)) else "—"


def _num(x: object) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else "—"


def row(name: str, meta: dict) -> str:
    m = meta.get("metrics", {})
    arch = meta.get("architecture")
    t = meta.get("train", {})
    natural = m.get("natural_agreement")
    if isinstance(natural, dict):  # a real-English model (explorer.data.wordnet_english)
        t_ = natural.get("templated", {})
        quality = (f"perplexity {_num(m.get('heldout_perplexity'))} (add-k bigram {_num(m.get('bigram_perplexity'))}, "
                   f"−{_pct(m.get('perplexity_reduction_vs_bigram'))}); " if arch != "masked_lm" else
                   f"held-out masked-token loss {_num(m.get('heldout_loss'))} nats; ")
        quality += (f"agreement across an attractor, templated (“the keys near the door” → are/is): "
                    f"{_pct(t_.get('attractor'))} of {t_.get('attractor_n')} "
                    f"(without one {_pct(t_.get('no_attractor'))})")
        c, h = natural.get("corpus"), natural.get("corpus_held_out")
        if isinstance(c, dict) and isinstance(h, dict):
            quality += (f"; in the corpus's own sentences {_pct(c.get('attractor'))} of {c.get('attractor_n')} "
                        f"(training lines), {_pct(h.get('attractor'))} of {h.get('attractor_n')} (held out)")
        samples = m.get("samples")
        if isinstance(samples, dict) and samples:
            quality += "; greedy: " + "; ".join(f"“{v}”" for v in samples.values())
    elif arch in ("rnn_lm", "tiny_gpt"):
        agree = m.get("agreement", {})
        quality = (f"perplexity {_num(m.get('heldout_perplexity'))} (add-k bigram {_num(m.get('bigram_perplexity'))}, "
                   f"−{_pct(m.get('perplexity_reduction_vs_bigram'))}); agreement {_pct(agree.get('accuracy'))}, "
                   f"long-range (≥ 4 tokens) {_pct(agree.get('long_range_accuracy'))}")
        by_d = agree.get("long_range_by_distance")
        if isinstance(by_d, dict):
            quality += " (by distance: " + ", ".join(f"{k}: {_pct(v.get('accuracy'))}" for k, v in by_d.items()) + ")"
    elif arch == "seq2seq":
        quality = f"exact match {_pct(m.get('exact_match'))}, token accuracy {_pct(m.get('token_accuracy'))}"
        by_len = m.get("exact_match_by_source_length")
        if isinstance(by_len, dict) and by_len:
            quality += "; exact match by source length: " + ", ".join(
                f"{k}: {_pct(v.get('exact_match'))}" for k, v in by_len.items() if v.get("n", 0) >= 20)
    elif arch == "word2vec":
        p5 = m.get("precision_at_5")
        p5 = p5.get("precision_at_k") if isinstance(p5, dict) else p5
        quality = f"precision@5 of cosine neighbours in the same word class {_pct(p5)}"
    elif arch == "masked_lm":
        acc = m.get("masked_accuracy", {})
        parts = []
        for cls, words in (("noun", "nouns"), ("verb", "verbs"), ("auxiliary", "auxiliaries (is, are, has, …)")):
            a = acc.get(cls, {})
            parts.append(f"{words} {_pct(a.get('top1'))} (top-5 {_pct(a.get('top5'))}; always "
                         f"“{a.get('baseline_word')}” {_pct(a.get('baseline'))})")
        quality = (f"masked-word top-1 accuracy, one word masked at a time: {'; '.join(parts)}; at masked verbs and "
                   f"auxiliaries the right number gets more probability {_pct(acc.get('verb', {}).get('verb_number'))}"
                   f" / {_pct(acc.get('auxiliary', {}).get('verb_number'))} of the time")
    else:
        quality = json.dumps(m)[:120]
    size = (ROOT / "assets" / "builtin" / f"{name}.safetensors").stat().st_size / 2**20
    return f"| builtin:{name} | {quality} | {t.get('seconds', '—')} s, {t.get('epochs', '—')} epochs | {size:.1f} MB |"


def main() -> None:
    folder = ROOT / "assets" / "builtin"
    print("| model | held-out quality | training (2-core CPU) | weights |")
    print("|---|---|---|---|")
    for path in sorted(folder.glob("*.json")):
        print(row(path.stem, json.loads(path.read_text())))
    total = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    print(f"\nAll assets together: {total:.1f} MB.")


if __name__ == "__main__":
    main()
