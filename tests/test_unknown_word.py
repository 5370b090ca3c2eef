"""A word-level vocabulary's unknown-word token (<unk>: every word outside the vocabulary) is not a word: the default
outputs of every shipped word-level model leave it out (generation, next-token lists, fillers, the lens, the
prediction explained, ablation bars) and say its probability, unchanged; the user can ask to generate it. Each
number is checked against the model's own forward."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import assert_no_exception, run_page
from explorer.adapters.generation import Strategy
from explorer.adapters.text import unknown_word_id
from explorer.loading.loaders import load_model
from explorer.probes import decoding_strategies as D
from explorer.views import BY_PATH

REAL = ("builtin:rnn-lm-wordnet", "builtin:lstm-lm-wordnet", "builtin:gru-lm-wordnet")
DEFAULT_KINDS = BY_PATH["decoding-strategies"].params["strategies"].default
PROMPTS = ("The old man", "I went to the bank to deposit", "She opened the door and")


def _unk(model_id: str) -> tuple[object, int, str]:
    loaded = load_model(model_id)
    unknown = unknown_word_id(loaded.adapter)
    assert unknown is not None
    return loaded, unknown, loaded.adapter.token_strings([unknown])[0]


@pytest.mark.parametrize("model_id", REAL + ("builtin:tiny-gpt-wordnet",))
def test_the_default_strategies_never_generate_unk_and_say_how_likely_it_was(model_id: str) -> None:
    loaded, unknown, token = _unk(model_id)
    for prompt in PROMPTS:
        run = D.decode_all(loaded, prompt, tuple(Strategy(k) for k in DEFAULT_KINDS), seed=0, max_new=20)
        for g in run.generations:
            assert all(unknown not in o.ids for o in g.outputs), (prompt, g.strategy.kind, g.outputs[0].text)
            assert g.unknown_max is not None and 0 <= g.unknown_max <= 1
        assert f"{token} (any word outside the model's vocabulary) is left out" in D.unknown_note(loaded,
                                                                                                    run.generations)


def test_greedy_without_unk_is_the_model_stepped_with_unk_removed_and_its_probability_is_the_models() -> None:
    """An independent greedy loop over the network's own forward: at each step the most probable token other than
    <unk>; the largest p(<unk>) on the way is the one the page says. Asked for, <unk> is generated as the model
    ranks it."""
    loaded, unknown, token = _unk("builtin:rnn-lm-wordnet")
    net, adapter = loaded.model, loaded.adapter
    enc = adapter.encode("The old man")
    ids, seen, out = list(enc.ids), 0.0, []
    eos = set(adapter.eos_ids)
    with torch.no_grad():
        for _ in range(20):
            logits, _ = net(torch.tensor([ids]))
            p = torch.softmax(logits[0, -1].double(), -1)
            seen = max(seen, float(p[unknown]))
            p[unknown] = -1
            nxt = int(p.argmax())
            out.append(nxt)
            ids.append(nxt)
            if nxt in eos:
                break
    run = D.decode_all(loaded, "The old man", (Strategy("greedy"),), seed=0, max_new=20)
    assert list(run.generations[0].outputs[0].ids) == out
    assert run.generations[0].unknown_max == pytest.approx(seen, abs=1e-6)
    asked = D.decode_all(loaded, "The old man", (Strategy("greedy", show_unknown=True),), seed=0, max_new=20)
    assert unknown in asked.generations[0].outputs[0].ids  # "was <unk> <eos>": the model's own argmax
    assert asked.generations[0].unknown_max is None


@pytest.mark.parametrize("model_id", REAL)
def test_the_recurrent_cells_next_words_leave_unk_out_and_give_its_probability(model_id: str) -> None:
    from explorer.probes.lstm_gates import rnn_gates
    from explorer.viz.lstm_gates import next_token_rows

    loaded, unknown, token = _unk(model_id)
    text = loaded.adapter.examples("agreement").default
    trace = rnn_gates(loaded, text)
    with torch.no_grad():
        logits, _ = loaded.model(torch.tensor([list(trace.ids)]))
    p = torch.softmax(logits[0].double(), -1).numpy()
    assert unknown not in trace.next_ids
    np.testing.assert_allclose(trace.unknown_probs, p[:, unknown], atol=1e-6)
    ranked = np.where(np.arange(p.shape[1]) == unknown, -1, p)
    np.testing.assert_array_equal(trace.next_ids, np.argsort(-ranked, axis=1, kind="stable")[:, :5])
    np.testing.assert_allclose(trace.next_probs, np.take_along_axis(p, trace.next_ids, 1), atol=1e-6)
    rows = next_token_rows(trace)
    assert rows[1][f"unknown word ({token})"] == f"{p[1, unknown]:.1%}"
    assert not any(token in v for r in rows for k, v in r.items() if k.startswith("#"))


@pytest.mark.parametrize("model_id", REAL + ("builtin:tiny-gpt-wordnet",))
def test_the_lens_the_attributed_prediction_and_the_ablation_bars_are_words(model_id: str) -> None:
    from explorer.probes import interventions as I
    from explorer.probes.logit_lens import logit_lens
    from explorer.probes.token_attribution import attribution

    loaded, unknown, token = _unk(model_id)
    for prompt in PROMPTS:
        lens = logit_lens(loaded, prompt)
        assert token not in lens.final_tokens and all(token not in row for layer in lens.topk_tokens for row in layer)
        assert attribution(loaded, prompt, steps=2, outputs="prediction").outputs[-1] != token
        assert token not in I.ablation(loaded, prompt, ()).before_tokens


def test_masked_words_leave_unk_out_of_the_fillers() -> None:
    from explorer.probes.masked_words import masked_fill

    loaded, unknown, token = _unk("builtin:masked-lm-wordnet")
    for text in ("The old [MASK] went to the bank.", "I paid the [MASK] with my card.", "The [MASK] was delicious."):
        trace = masked_fill(loaded, text)
        assert unknown not in trace.top_ids
        said = [n for n in trace.notes if "is left out of the fillers" in n]
        with torch.no_grad():  # said exactly when <unk> would have had a place among the fillers shown
            z = loaded.adapter.run(loaded.adapter.encode(trace.text), names=("logits",))["logits"][trace.positions[0]]
        p = torch.softmax(torch.tensor(z, dtype=torch.float64), -1)
        assert bool(said) == bool(p[unknown] >= p[int(trace.top_ids[0, -1])])


def test_the_decoding_page_says_what_it_left_out_and_generates_unk_when_asked() -> None:
    at = run_page("app_pages/decoding_strategies.py", {"model": "builtin:rnn-lm-wordnet", "text": "The old man"})
    assert_no_exception(at)
    loaded = load_model("builtin:rnn-lm-wordnet")
    run = D.decode_all(loaded, "The old man", tuple(Strategy(k) for k in DEFAULT_KINDS), seed=0, max_new=30)
    info = " ".join(i.value for i in at.info).replace("\\", "")
    assert f"Greedy {run.generations[0].unknown_max:.2f}" in info and "is left out of the generated text" in info
    assert "&lt;unk&gt;" not in " ".join(h.proto.body for h in at.get("html"))
    at.toggle(key="unk").set_value(True).run()
    assert_no_exception(at)
    assert "&lt;unk&gt;" in " ".join(h.proto.body for h in at.get("html"))  # "of the <unk> <eos>", as asked
    assert at.query_params["unk"] in ("1", ["1"])
