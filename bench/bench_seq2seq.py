"""Timing of the seq2seq alignment view (app_pages/seq2seq.py) on the CPU; prints a table (medians of N runs).

    python bench/bench_seq2seq.py [--runs 7] [--threads 1]

Rows: bare greedy decode (the one generation loop, explorer.adapters.generation.sample, on a 15-token source), the
view's probe (alignment_trace: greedy decode + one teacher-forced record of the output, no cache), bare page rerun
(AppTest of app_pages/overview.py), page rerun after changing the sentence (probe cache miss), page rerun with nothing
changed, and the ratio page-after-change / (bare decode + bare page). Target: ratio <= 1.5. Uses
builtin:seq2seq-bahdanau; when that checkpoint is absent, a RANDOM Seq2Seq of the same config (emb 64, hidden 128,
Bahdanau, vocabularies of the translation corpus) saved as local:<folder>.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from _common import median_ms, median_script_ms, open_page, print_rerun_table, runs_and_threads  # noqa: E402  (sets the environment first)

import torch  # noqa: E402

from explorer.adapters import generation as G  # noqa: E402
from explorer.data import translation  # noqa: E402
from explorer.adapters.generation import Strategy  # noqa: E402
from explorer.probes.seq2seq import alignment_trace  # noqa: E402
from explorer.loading.catalogue import builtin_names  # noqa: E402
from explorer.loading.loaders import load_model  # noqa: E402

NOUNS = ["dog", "cat", "horse", "bird", "boy", "girl", "man", "woman", "teacher", "doctor", "farmer", "student",
         "friend", "king", "queen", "singer", "neighbour", "nurse", "cow", "child"]
TEMPLATE = "the small {} near the old wooden table watched the students in the garden ."


def sentence(i: int) -> str:
    s = TEMPLATE.format(NOUNS[i % len(NOUNS)])
    assert len(translation.tokenize(s)) == 15, len(translation.tokenize(s))
    return s


def model_id() -> tuple[str, str]:
    if "seq2seq-bahdanau" in builtin_names():
        return "builtin:seq2seq-bahdanau", "builtin:seq2seq-bahdanau (trained checkpoint)"
    from safetensors.torch import save_file

    from explorer.data.vocab import Vocab
    from explorer.models.seq2seq import Seq2Seq

    pairs = translation.generate_pairs(20_000, translation.TRAIN_SEED)
    src_vocab = Vocab.build([s for s, _ in pairs])
    tgt_vocab = Vocab.build([t for _, t in pairs])
    config = {"src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab), "emb_dim": 64, "hidden_size": 128,
              "attention": "bahdanau"}
    torch.manual_seed(0)
    folder = Path(tempfile.mkdtemp()) / "bench-seq2seq"
    folder.mkdir()
    save_file(Seq2Seq(**config).state_dict(), str(folder / "model.safetensors"))
    meta = {"name": "bench-seq2seq", "architecture": "seq2seq", "config": config, "src_vocab": src_vocab.itos,
            "tgt_vocab": tgt_vocab.itos, "corpus": {"generator": "translation", "n_train": 20_000, "seed": 1}}
    (folder / "config.json").write_text(json.dumps(meta))
    os.environ["EXPLORER_MODEL_PATH"] = str(folder.parent)
    return "local:bench-seq2seq", (f"RANDOM Seq2Seq of the same config ({len(src_vocab)}→{len(tgt_vocab)} words, "
                                   "emb 64, hidden 128, Bahdanau); builtin:seq2seq-bahdanau is absent")


def main() -> None:
    runs = runs_and_threads(__doc__, 7, threads=1, threads_help=(
        "torch intra-op threads (default 1: on a busy 2-core machine more threads make each small GRU step wait for "
        "a second core, and the bare decode time becomes noise)"))
    mid, described = model_id()
    loaded = load_model(mid, "cpu", "float32")
    src_vocab = loaded.vocabs["src_vocab"]

    def bare(i: int) -> None:
        src = torch.tensor([src_vocab.encode(translation.tokenize(sentence(i)))])
        G.sample(loaded.adapter, src, torch.tensor([[loaded.model.bos_id]]), Strategy("greedy"), 40)

    bare(0)
    alignment_trace(loaded, sentence(0))  # warm up (and the cached training lengths)
    decode_ms = median_ms(bare, runs)
    probe_ms = median_ms(lambda i: alignment_trace(loaded, sentence(i + 1)), runs)

    home = open_page()
    bare_ms, bare_script = median_script_ms(lambda i: home.run(), runs)

    at = open_page("app_pages/seq2seq.py", {"model": mid, "text": sentence(0), "allcurves": "0"})
    at.run()  # model loaded, length curve cached

    def change(i: int) -> None:
        try:
            box = at.text_input(key="text")
        except KeyError:  # the previous rerun did not finish drawing the page: say what is on it
            raise SystemExit(f"page incomplete: exceptions {[e.value for e in at.exception]}, errors "
                             f"{[e.value for e in at.error]}, markdown {[m.value[:80] for m in at.markdown][:5]}")
        box.set_value(sentence(100 + i)).run()

    change_ms, change_script = median_script_ms(change, runs)
    assert not at.exception, [e.value for e in at.exception]
    same_ms, same_script = median_script_ms(lambda i: at.run(), runs)

    ratio = change_ms / (decode_ms + bare_ms)
    ratio_script = change_script / (decode_ms + bare_script)
    print(f"Seq2seq alignment view, CPU ({torch.get_num_threads()} torch threads), 15-token source, greedy, "
          f"model: {described}")
    print(f"median of {runs} runs each\n")
    print_rerun_table([("bare greedy decode (generation.sample)", decode_ms),
                       ("view probe (alignment_trace, no cache)", probe_ms)],
                      [("bare page rerun (app_pages/overview.py)", bare_ms, bare_script),
                       ("page rerun after changing the sentence", change_ms, change_script),
                       ("page rerun, nothing changed (cached probe)", same_ms, same_script)],
                      "ratio change / (bare decode + bare page)", ratio, ratio_script)

if __name__ == "__main__":
    main()
