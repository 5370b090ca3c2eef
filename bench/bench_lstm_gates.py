"""Timing of the recurrent-cell view (app_pages/lstm_gates.py) on the CPU; prints a table (medians of N runs).

    python bench/bench_lstm_gates.py [--runs 7]

Rows: bare probe (rnn_gates on a 30-token sentence, no cache), bare page rerun (AppTest of app_pages/overview.py),
page rerun after changing the sentence (probe cache miss), page rerun with nothing changed (cache hit), and the
ratio page-after-change / (bare probe + bare page). Target: ratio <= 1.5.
Uses builtin:lstm-lm; when that checkpoint is absent, a random model of the same size saved as local:<folder>.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from _common import median_ms, median_script_ms, open_page, print_rerun_table, runs_and_threads  # noqa: E402  (sets the environment first)

import torch  # noqa: E402

from explorer.data.vocab import tokenize_words  # noqa: E402
from explorer.probes.lstm_gates import rnn_gates  # noqa: E402
from explorer.loading.catalogue import builtin_names  # noqa: E402
from explorer.loading.loaders import load_model  # noqa: E402

NOUNS = ["computer", "dog", "car", "table", "key", "cabinet", "train", "boat", "bus", "truck", "van", "plane",
         "ship", "sofa", "shelf", "tractor", "bicycle", "taxi", "motorbike", "cupboard"]
TEMPLATE = ("the {} which i had just put into the machine room on the fifth floor crashed , and the keys to "
            "the old cabinet are on the old table .")


def sentence(i: int) -> str:
    s = TEMPLATE.format(NOUNS[i % len(NOUNS)])
    assert len(tokenize_words(s)) == 30, len(tokenize_words(s))
    return s


def model_id() -> tuple[str, str]:
    if "lstm-lm" in builtin_names():
        return "builtin:lstm-lm", "builtin:lstm-lm (trained checkpoint)"
    from safetensors.torch import save_file

    from explorer.data.english import vocabulary
    from explorer.models.rnn_lm import RNNLanguageModel

    words = vocabulary()
    torch.manual_seed(0)
    config = {"vocab_size": 776, "emb_dim": 128, "hidden_size": 256, "num_layers": 1, "cell": "lstm"}
    itos = ["<pad>", "<unk>", "<bos>", "<eos>"] + [w for w in dict.fromkeys(words) if not w.startswith("<")]
    itos = (itos + [f"w{i}" for i in range(776)])[:776]
    folder = Path(tempfile.mkdtemp()) / "bench-lstm"
    folder.mkdir()
    save_file(RNNLanguageModel(**config).state_dict(), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"architecture": "rnn_lm", "config": config}))
    (folder / "vocab.json").write_text(json.dumps(itos))
    os.environ["EXPLORER_MODEL_PATH"] = str(folder.parent)
    return "local:bench-lstm", "RANDOM LSTM of the same size (776 × 128 → 256); builtin:lstm-lm is absent"




def main() -> None:
    runs = runs_and_threads(__doc__, 7)
    mid, described = model_id()
    loaded = load_model(mid, "cpu", "float32")
    rnn_gates(loaded, sentence(0))  # warm up
    probe_ms = median_ms(lambda i: rnn_gates(loaded, sentence(i + 1)), runs)

    home = open_page()
    bare_ms, bare_script = median_script_ms(lambda i: home.run(), runs)

    at = open_page("app_pages/lstm_gates.py", {"model": mid, "text": sentence(0)})
    at.run()  # everything cached from here on

    def change(i: int) -> None:
        at.text_input(key="text").set_value(sentence(100 + i)).run()

    change_ms, change_script = median_script_ms(change, runs)
    assert not at.exception, [e.value for e in at.exception]
    same_ms, same_script = median_script_ms(lambda i: at.run(), runs)

    ratio = change_ms / (probe_ms + bare_ms)
    ratio_script = change_script / (probe_ms + bare_script)
    print(f"Recurrent-cell view, CPU ({torch.get_num_threads()} torch threads), 30-token sentence, model: {described}")
    print(f"median of {runs} runs each; page bytecode cached as on the real server\n")
    print_rerun_table([("bare probe (rnn_gates, no cache)", probe_ms)],
                      [("bare page rerun (app_pages/overview.py)", bare_ms, bare_script),
                       ("page rerun after changing the sentence", change_ms, change_script),
                       ("page rerun, nothing changed (cached probe)", same_ms, same_script)],
                      "ratio change / (probe + bare page)", ratio, ratio_script)

if __name__ == "__main__":
    main()
