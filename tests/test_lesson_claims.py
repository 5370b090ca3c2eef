"""Every number and claim in the shipped lessons' captions, recomputed with the probes the views show.

Each test names the lesson step, checks that the caption still says what is tested (so an edited caption is
re-checked here), and recomputes the claim from the model's own run, as the view shows it.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from explorer.data.english import VERB_NUMBER
from explorer.adapters.generation import Strategy
from explorer.lessons import load_dir, step_dict
from explorer.loading.loaders import load_model
from explorer.probes import decoding_strategies as D
from explorer.probes import word_embeddings as E
from explorer.probes import contextual_embeddings as CE
from explorer.probes import position_formulas as PF
from explorer.probes import positional_encodings as PO
from explorer.probes import lstm_gates as RG
from explorer.probes import self_attention as SA
from explorer.probes import seq2seq as S2
from conftest import needs_smollm2

LESSONS = {lesson.id: lesson for lesson in load_dir()[0]}


def step(lesson: str, number: int):
    """Step `number` (1-based) of a shipped lesson, with its parameters as a dict."""
    s = LESSONS[lesson].steps[number - 1]
    return s, step_dict(s).get("params", {})  # as typed in the lesson file (numbers, lists)


def says(caption: str, *fragments: str) -> None:
    text = " ".join(caption.split())
    for f in fragments:
        assert f in text, f"the caption no longer says {f!r}: {text}"


@functools.lru_cache(maxsize=None)
def model(name: str):
    return load_model(name)


def verb_mass(trace: RG.GateTrace, after: str) -> tuple[float, float]:
    """Probability of all singular and all plural verb forms after the token `after` (the model's own softmax)."""
    loaded = model(trace.model_id)
    vocab = loaded.vocabs["vocab"]
    p = np.exp(loaded.adapter.run(loaded.adapter.encode(" ".join(trace.tokens[1:])), names=("logits",))["logits"]
               .astype(np.float64))
    p /= p.sum(axis=1, keepdims=True)
    row = p[trace.tokens.index(after)]
    mass = {n: sum(row[vocab.stoi[w]] for w, k in VERB_NUMBER.items() if k == n and w in vocab.stoi)
            for n in ("sg", "pl")}
    return mass["sg"], mass["pl"]


def top(trace: RG.GateTrace, after: str, k: int = 2) -> list[tuple[str, float]]:
    t = trace.tokens.index(after)
    return [(w, round(float(p) * 100, 1)) for w, p in zip(trace.next_tokens[t][:k], trace.next_probs[t][:k])]


# --------------------------------------------------------------------------------------- 01 recurrent gates
def test_01_intro_agreement_accuracies() -> None:
    says(LESSONS["01-recurrent-gates"].intro, "66 % of the time, the LSTM 98 % and the GRU 99 %")
    got = {m: model(f"builtin:{m}").meta["metrics"]["agreement"]["accuracy"] for m in ("rnn-lm", "lstm-lm", "gru-lm")}
    assert [round(100 * got[m]) for m in ("rnn-lm", "lstm-lm", "gru-lm")] == [66, 98, 99]


def test_01_intro_the_real_english_siblings_follow_the_attractor() -> None:
    says(LESSONS["01-recurrent-gates"].intro, "only 4 %, 17 % and 23 % of the time")
    got = [model(f"builtin:{m}-wordnet").meta["metrics"]["natural_agreement"]["templated"]["attractor"]
           for m in ("rnn-lm", "lstm-lm", "gru-lm")]
    assert [round(100 * g) for g in got] == [4, 17, 23]


def test_01_intro_the_real_english_lstm_has_no_number_unit() -> None:
    """The intro's re-measurement: the unit whose cell state differs most between a singular and a plural subject,
    and whether its sign follows the number from the noun to the verb, on both LSTMs."""
    says(LESSONS["01-recurrent-gates"].intro, "the unit whose cell state differs most is 157, 101 and 32",
         "English LSTM's is unit 133 in all three")
    pairs = [("the key to the old doors is on the table .", "the keys to the old door are on the table ."),
             ("the teacher near the windows is happy .", "the teachers near the window are happy ."),
             ("the dog near the cars is sleeping .", "the dogs near the car are sleeping .")]
    for name, units, follows in (("lstm-lm-wordnet", [157, 101, 32], False), ("lstm-lm", [133, 133, 133], True)):
        for (singular, plural), unit in zip(pairs, units):
            a, b = RG.rnn_gates(model(f"builtin:{name}"), singular), RG.rnn_gates(model(f"builtin:{name}"), plural)
            assert int(RG.compare(a, b, "c", 0).order[0]) == unit
            verb = a.tokens.index("is")  # the noun is token 2
            ca, cb = a.gates["c"][0, 0, 2:verb + 1, unit], b.gates["c"][0, 0, 2:verb + 1, unit]
            assert bool((np.sign(ca) == -np.sign(cb)).all()) == follows, (name, unit)
            if name == "lstm-lm-wordnet":
                assert not any("<unk>" in t for t in a.tokens + b.tokens)


def test_01_steps_1_to_3_the_elman_rnn_follows_the_attractor_the_lstm_does_not() -> None:
    s1, p1 = step("01-recurrent-gates", 1)
    trace = RG.rnn_gates(model(p1["model"]), p1["text"])
    assert trace.tokens[0] == "<bos>" and trace.special[0]
    says(s1.caption, "The first row, <bos>, is the start symbol")
    s2, p2 = step("01-recurrent-gates", 2)
    rnn = RG.rnn_gates(model(p2["model"]), p2["text"])
    says(s2.caption, '"are" (17.5 %) and "were" (12.9 %)', "45 % to plural and 10 % to singular")
    assert top(rnn, "tables") == [("are", 17.5), ("were", 12.9)]
    sg, pl = verb_mass(rnn, "tables")
    assert (round(100 * pl), round(100 * sg)) == (45, 10)
    s3, p3 = step("01-recurrent-gates", 3)
    lstm = RG.rnn_gates(model(p3["model"]), p3["text"])
    says(s3.caption, '"is" (12.1 %) and "was" (9.3 %)', "36 % to singular and 11 % to plural")
    assert top(lstm, "tables") == [("is", 12.1), ("was", 9.3)]
    sg, pl = verb_mass(lstm, "tables")
    assert (round(100 * sg), round(100 * pl)) == (36, 11)


def test_01_step_4_forget_gate_saturation() -> None:
    s, p = step("01-recurrent-gates", 4)
    says(s.caption, "179 of the 256 forget gates are saturated", "16 stay above 0.9 on at least 80 %")
    f = RG.rnn_gates(model(p["model"]), p["text"]).gates["f"][0, 0]
    high, low = (f > 0.9).mean(0), (f < 0.1).mean(0)
    assert f.shape[1] == 256 and int(((high + low) >= 0.5).sum()) == 179 and int((high >= 0.8).sum()) == 16


def test_01_steps_5_to_7_number_unit_133() -> None:
    loaded = model("builtin:lstm-lm")
    s5, _ = step("01-recurrent-gates", 5)
    says(s5.caption, "Unit 133 heads the list", "positive after \"key\", negative after \"keys\"")
    a = RG.rnn_gates(loaded, "the key to the old cabinets is on the table .")
    b = RG.rnn_gates(loaded, "the keys to the old cabinets are on the table .")
    assert RG.compare(a, b, "c", 0).order[0] == 133
    verb = a.tokens.index("is")
    assert (a.gates["c"][0, 0, 2:verb + 1, 133] > 0).all() and (b.gates["c"][0, 0, 2:verb + 1, 133] < 0).all()
    s6, p6 = step("01-recurrent-gates", 6)
    says(s6.caption, "about 1.00 on \"old\", \"cabinet\" and \"are\"", "token 6", "from −1.92 to −1.86")
    tr = RG.rnn_gates(loaded, p6["text"])
    assert tr.tokens[p6["t"]] == "cabinet"
    f, c = tr.gates["f"][0, 0, :, 133], tr.gates["c"][0, 0, :, 133]
    assert all(round(float(f[tr.tokens.index(w)]), 2) == 1.0 for w in ("old", "cabinet", "are"))
    assert (c[tr.tokens.index("keys"):tr.tokens.index("are") + 1] < 0).all()
    assert (round(float(c[5]), 2), round(float(c[6]), 2)) == (-1.92, -1.86)
    s7, p7 = step("01-recurrent-gates", 7)
    says(s7.caption, "(unit 212 comes first)")
    a = RG.rnn_gates(loaded, "the dog that the farmers feed sleeps in the garden .")
    b = RG.rnn_gates(loaded, "the dogs that the farmers feed sleep in the garden .")
    assert list(RG.compare(a, b, "c", 0).order[:2]) == [212, 133]


def test_01_step_8_gru_update_gate() -> None:
    s, p = step("01-recurrent-gates", 8)
    says(s.caption, "jumps from −0.10 to 0.88 at \"to\"", "update gate is 0.06", "0.87–0.88 through \"are\"",
         "0.98–1.00 on \"the old cabinet are\"", "stays near 0.1")
    tr = RG.rnn_gates(model(p["model"]), p["text"])
    h, z = tr.gates["h"][0, 0, :, 219], tr.gates["z"][0, 0, :, 219]
    i = tr.tokens.index
    assert (round(float(h[i("keys")]), 2), round(float(h[i("to")]), 2),
            round(float(z[i("to")]), 2)) == (-0.1, 0.88, 0.06)
    assert all(0.87 <= round(float(x), 2) <= 0.88 for x in h[i("to"):i("are") + 1])
    assert all(0.98 <= round(float(x), 2) <= 1.0 for x in z[i("to") + 1:i("are") + 1])
    key = RG.rnn_gates(model(p["model"]), p["text"].replace("keys", "key").replace("are", "is"))
    assert np.abs(key.gates["h"][0, 0, 3:8, 219] - 0.1).max() < 0.1


# -------------------------------------------------------------------------------------- 02 seq2seq attention
def test_02_translations_and_accuracy_by_length() -> None:
    s1, p1 = step("02-seq2seq-attention", 1)
    says(s1.caption, "as \"la voiture rapide est rouge .\"")
    assert S2.alignment_trace(model(p1["model"]), p1["text"]).output_text == "la voiture rapide est rouge ."
    s2, p2 = step("02-seq2seq-attention", 2)
    says(s2.caption, "les professeurs avec les professeurs jeunes longs ouvrent les gâteaux",
         "88 % for 4–6 words, 7 % for 10–12, 0 % from 13 words on")
    assert S2.alignment_trace(model(p2["model"]), p2["text"]).output_text.startswith(
        "les professeurs avec les professeurs jeunes longs ouvrent les gâteaux")
    none = S2.length_accuracy(model(p2["model"]))
    curve = dict(zip(none.buckets, none.accuracy))
    assert (round(100 * curve["4-6"]), round(100 * curve["10-12"])) == (88, 7)
    assert all(v == 0 for k, v in curve.items() if int(k.split("-")[0]) >= 13)
    for name in ("seq2seq-bahdanau", "seq2seq-luong-dot", "seq2seq-luong-general", "seq2seq-luong-concat"):
        attn = S2.length_accuracy(model(f"builtin:{name}"))
        assert min(a for b, a in zip(attn.buckets, attn.accuracy) if int(b.split("-")[0]) <= 16) >= 0.95
    s3, p3 = step("02-seq2seq-attention", 3)
    assert S2.alignment_trace(model(p3["model"]), p3["text"]).output_text == \
        "les professeurs avec les livres rouges longs regardent les étudiants jeunes dans le jardin ."


def test_02_crossing_alignment_and_comparison() -> None:
    s4, p4 = step("02-seq2seq-attention", 4)
    says(s4.caption, '"zone" reads "area", "économique" reads "economic" and "européenne" reads "european"',
         'step t = 6 ("européenne")')
    tr = S2.alignment_trace(model(p4["model"]), p4["text"])
    looks = {o: tr.src_tokens[int(np.argmax(tr.matrix()[t]))] for t, o in enumerate(tr.out_tokens)}
    assert (looks["zone"], looks["économique"], looks["européenne"]) == ("area", "economic", "european")
    assert tr.out_tokens[p4["step"]] == "européenne"
    s5, p5 = step("02-seq2seq-attention", 5)
    says(s5.caption, '"la fille petite voit le chien blanc grand ."', '"le chien blanc voit le accord blanc grand ."')
    assert (S2.alignment_trace(model(p5["model"]), p5["text"]).output_text
            == "la fille petite voit le chien blanc grand .")
    assert (S2.alignment_trace(model(p5["model2"]), p5["text"]).output_text
            == "le chien blanc voit le accord blanc grand .")


def test_02_teacher_forcing_beam_and_dates() -> None:
    s6, p6 = step("02-seq2seq-attention", 6)
    says(s6.caption, "from about 0.004 for the right translation to about 3.8", 'would have said "rouge"')
    wrong = S2.alignment_trace(model(p6["model"]), p6["text"], target=p6["target"])
    right = S2.alignment_trace(model(p6["model"]), p6["text"], target="la voiture rouge est rapide .")
    assert round(wrong.loss, 1) == 3.8 and round(right.loss, 3) == 0.004
    assert wrong.topk_tokens[p6["step"]][0] == "rouge"
    s7, p7 = step("02-seq2seq-attention", 7)
    says(s7.caption, "Here beam and greedy agree")
    beam = S2.alignment_trace(model(p7["model"]), p7["text"], decoding="beam", beam=p7["beam"])
    assert beam.out_ids == S2.alignment_trace(model(p7["model"]), p7["text"]).out_ids
    s8, p8 = step("02-seq2seq-attention", 8)
    says(s8.caption, '"1969-07-20"', 'Step 6 writes the "7" of the month: it attends to a letter of "july"')
    d = S2.alignment_trace(model(p8["model"]), p8["text"])
    looks = [d.src_tokens[int(np.argmax(d.matrix()[t]))] for t in range(len(d.out_tokens))]
    assert d.output_text == "1969-07-20" and d.out_tokens[6] == "7" and looks[6] in "july"
    assert looks[:4] == ["1", "9", "6", "9"] and looks[8:10] == ["2", "0"]


# ------------------------------------------------------------------------------------------ 03 self-attention
@functools.lru_cache(maxsize=None)
def minilm_trace(text: str) -> SA.AttentionTrace:
    return SA.attention_trace(model("pretrained:minilm"), text)


def test_03_it_attends_to_animal_then_street() -> None:
    s1, p1 = step("03-self-attention", 1)
    says(s1.caption, "about two thirds of the attention of \"it\" to \"animal\" and only a few percent to \"street\"")
    tr = minilm_trace(p1["text"])
    row = tr.attentions[3, 1, p1["token"]]
    assert tr.tokens[p1["token"]] == "it" and 0.6 < row[tr.tokens.index("animal")] < 0.7
    assert row[tr.tokens.index("street")] < 0.06
    s2, p2 = step("03-self-attention", 2)
    says(s2.caption, "falls from about 0.68 to 0.28", "(about 0.05 → 0.12)")
    wide = minilm_trace(p2["text2"]).attentions[3, 1, p2["token"]]
    assert (round(float(row[tr.tokens.index("animal")]), 2) == 0.68
            and round(float(wide[tr.tokens.index("animal")]), 2) == 0.28)
    assert (round(float(row[tr.tokens.index("street")]), 2) == 0.05
            and round(float(wide[tr.tokens.index("street")]), 2) == 0.12)
    s3, p3 = step("03-self-attention", 3)
    says(s3.caption, "d = 32", "matches the model's attention to rounding error")
    steps = SA.step_by_step(tr, p3["layer"], p3["head"], p3["token"])
    assert steps.d == 32 and steps.max_error < 1e-5


def test_03_heads_that_look_at_neighbours_and_special_tokens() -> None:
    s4, p4 = step("03-self-attention", 4)
    tr = minilm_trace(p4["text"])
    T = len(tr.tokens)
    special = [i for i, s in enumerate(tr.special) if s]

    def prev(L: int, H: int) -> float:
        return float(np.mean([tr.attentions[L, H, i, i - 1] for i in range(1, T)]))

    def nxt(L: int, H: int) -> float:
        return float(np.mean([tr.attentions[L, H, i, i + 1] for i in range(T - 1)]))

    def on_special(L: int, H: int) -> float:
        return float(tr.attentions[L, H][:, special].sum(-1).mean())

    says(s4.caption, "Layer 0, head 2 (enlarged below) puts almost all its weight on the previous token",
         "Layer 1, head 8 mostly looks at the next token", "Many heads in the middle layers send most of their weight")
    assert prev(0, 2) > 0.99 and nxt(1, 8) > 0.5
    middle = [on_special(L, H) for L in (2, 3, 4) for H in range(12)]
    assert sum(v > 0.5 for v in middle) >= len(middle) // 2
    s5, _ = step("03-self-attention", 5)
    says(s5.caption, "heads 9 and 10 send most of their weight to [CLS] and [SEP] (head 9 also some to the previous")
    assert on_special(1, 9) > 0.5 and on_special(1, 10) > 0.5 and prev(1, 9) > 0.2
    s6, _ = step("03-self-attention", 6)
    says(s6.caption, "Layer 4, head 5 puts about 90 % of each row on [CLS] and [SEP]")
    assert round(on_special(4, 5), 1) == 0.9


def test_03_masks_and_positions() -> None:
    s7, p7 = step("03-self-attention", 7)
    says(s7.caption, "after the softmax those weights are exactly 0")
    gpt = SA.attention_trace(model(p7["model"]), p7["text"])
    assert (np.triu(gpt.attentions[0, 0], 1) == 0).all() and gpt.attentions[0, 0, 0, 0] == 1.0
    s9, p9 = step("03-self-attention", 9)
    says(s9.caption, "from 2π ≈ 6.3 positions", "≈ 54,400 positions for the last pair of d = 128")
    tr = PF.sinusoidal(p9["n_pos"], p9["d_model"], 10000.0)
    assert round(tr.wavelength[0], 1) == 6.3 and round(tr.wavelength[-1], -2) == 54_400
    s10, p10 = step("03-self-attention", 10)
    says(s10.caption, "the difference is at rounding level")
    pt = PO.permutation_experiment(model(p10["model"]), p10["text"], 0)
    assert pt.max_nopos < 1e-5 and pt.max_pos > 0.1
    s11, p11 = step("03-self-attention", 11)
    says(s11.caption, "the curves for different query positions lie on top of each other")
    assert PF.rope(p11["d_model"], p11["n_pos"], 10000.0, p11["pos"], p11["rope_qk"]).spread < 1e-9


# ------------------------------------------------------------------------------------ 04 embeddings, decoding
def test_04_word2vec_neighbours_and_analogies() -> None:
    table = E.embedding_table(model("builtin:word2vec"))
    s2, _ = step("04-embeddings-decoding", 2)
    says(s2.caption, "mouse, parrot, bird, chicken, duck, cow, … (cos ≈ 0.96)")
    nn = E.neighbours(table, table.index["dog"], 10)
    assert list(nn.words[:6]) == ["mouse", "parrot", "bird", "chicken", "duck", "cow"]
    assert all(abs(c - 0.96) < 0.015 for c in nn.cos[:6])
    s3, _ = step("04-embeddings-decoding", 3)
    says(s3.caption, '"was − is + are" gives "were" with cosine 0.97, far ahead of the next answer (about 0.67)')
    r = E.analogy(table, table.index["was"], table.index["is"], table.index["are"], 2)
    assert r.words[0] == "were" and round(r.cos[0], 2) == 0.97 and round(r.cos[1], 2) == 0.67
    s4, _ = step("04-embeddings-decoding", 4)
    says(s4.caption, 'the answers are "girl", "dancer", "baby", "boy"')
    r = E.analogy(table, table.index["king"], table.index["man"], table.index["woman"], 4)
    assert list(r.words) == ["girl", "dancer", "baby", "boy"]
    s5, p5 = step("04-embeddings-decoding", 5)
    says(s5.caption, "1.00 at the embedding layer", "about 0.88 after layer 0 and 0.78 after layer 5")
    minilm = model("pretrained:minilm")
    cos = CE.drift(CE.contextual(minilm, p5["s1"]), CE.contextual(minilm, p5["s2"]), p5["dw"]).cos
    assert round(float(cos[0]), 2) == 1.0 and round(float(cos[1]), 2) == 0.88 and round(float(cos[6]), 2) == 0.78


@functools.lru_cache(maxsize=None)
def decode(text: str, kinds: tuple[str, ...], n: int = 1, k: int = 40, p: float = 0.9) -> D.DecodingRun:
    strategies = tuple(Strategy(kind, top_k=k, top_p=p) for kind in kinds)
    return D.decode_all(model("builtin:tiny-gpt"), text, strategies, 0, 30, n)


def test_04_decoding_strategies() -> None:
    s6, p6 = step("04-embeddings-decoding", 6)
    says(s6.caption, 'with "is very big ."', "self-BLEU) does not apply")
    run = decode(p6["text"], tuple(p6["strategies"]))
    for gen in run.generations:
        assert gen.outputs[0].text == "is very big . <eos>" and len(gen.outputs) == 1
        assert gen.summary()["self-BLEU"] is None
    s7, p7 = step("04-embeddings-decoding", 7)
    says(s7.caption, "low self-BLEU", "far below greedy's")
    greedy, sample = decode(p7["text"], tuple(p7["strategies"]), p7["n"]).generations
    assert (sample.summary()["self-BLEU"] < 0.2
            and sample.summary()["mean log-prob"] < greedy.summary()["mean log-prob"] - 1)
    s8, p8 = step("04-embeddings-decoding", 8)
    says(s8.caption, '("is on a boat .", "was on my van .")', "about −2.2 against −3.3 for pure sampling")
    sample, topk, _ = decode(p8["text"], tuple(p8["strategies"]), p8["n"], p8["k"], p8["p"]).generations
    assert [o.text for o in topk.outputs[:2]] == ["is on a boat . <eos>", "was on my van . <eos>"]
    assert round(topk.summary()["mean log-prob"], 1) == -2.2 and round(sample.summary()["mean log-prob"], 1) == -3.3
    s10, p10 = step("04-embeddings-decoding", 10)
    says(s10.caption, "dotted line at −1.33", "(self-BLEU 0.11) and the least likely (−2.75)",
         "min-p is the closest to greedy (−2.05) and the least diverse (0.31)")
    rows = {g.strategy.kind: g.summary() for g in decode(p10["text"], tuple(p10["strategies"]), p10["n"]).generations}
    assert rows["greedy"]["self-BLEU"] is None and round(rows["greedy"]["mean log-prob"], 2) == -1.33
    samplers = {k: v for k, v in rows.items() if k != "greedy"}
    assert min(samplers, key=lambda k: samplers[k]["self-BLEU"]) == "sample"
    assert round(rows["sample"]["self-BLEU"], 2) == 0.11 and round(rows["sample"]["mean log-prob"], 2) == -2.75
    assert max(samplers, key=lambda k: samplers[k]["mean log-prob"]) == "min-p"
    assert round(rows["min-p"]["mean log-prob"], 2) == -2.05 and round(rows["min-p"]["self-BLEU"], 2) == 0.31
    assert max(v["self-BLEU"] for v in samplers.values()) == rows["min-p"]["self-BLEU"]
    assert all(rows["greedy"]["mean log-prob"] > v["mean log-prob"] for v in samplers.values())
    assert not math.isnan(rows["greedy"]["perplexity"])


def test_01_last_step_gradients_through_time() -> None:
    from explorer.probes.gradients_through_time import gradients_through_time

    s, p = step("01-recurrent-gates", len(LESSONS["01-recurrent-gates"].steps))
    traces = {m: gradients_through_time(model(m), p["text"]) for m in p["models"]}
    ratio = {m: t.input_grad[t.tokens.index("keys")] / t.input_grad[-1] for m, t in traces.items()}
    elman = traces["builtin:rnn-lm"]
    says(s.caption, f"{ratio['builtin:rnn-lm']:.2f}× its value at the last word for the Elman RNN",
         f"{ratio['builtin:gru-lm']:.2f}× for the GRU", f"{ratio['builtin:lstm-lm']:.2f}× for the LSTM",
         f"({elman.step_norms.min():.2f} to {elman.step_norms.max():.2f} for the Elman RNN)",
         f"grows to {elman.products[0] / 10 ** 4:.1f}·10⁴", f"a probability of {elman.prob:.3f}",
         f"the GRU {traces['builtin:gru-lm'].prob:.3f} and the LSTM {traces['builtin:lstm-lm'].prob:.3f}")
    assert all(t.step_norms.min() > 1 for t in traces.values())
    says(s.caption, f"At \"keys\", {elman.distance[elman.tokens.index('keys')]} steps before the prediction")


def test_03_logit_lens_and_attribution() -> None:
    from explorer.probes.token_attribution import attribution
    from explorer.probes.logit_lens import logit_lens

    steps = LESSONS["03-self-attention"].steps
    s, p = step("03-self-attention", len(steps) - 1)
    t = logit_lens(model(p["model"]), p["text"])
    cab, the1 = t.tokens.index("cabinet"), p["pos"]
    assert t.top_tokens[0][cab] == t.top_tokens[1][cab] == t.final_tokens[cab] == "are"
    says(s.caption, f"p = {t.top_probs[0, cab]:.3f} after layer 0, {t.top_probs[1, cab]:.3f} after layer 1",
         f"layer 0's top word is \"{t.top_tokens[0][the1]}\"", f"\"{t.final_tokens[the1]}\" ranks "
         f"{int(t.final_rank[0, the1]) + 1}nd")
    assert t.final_rank[1, the1] == 0 and the1 == t.tokens.index("the")
    s, p = step("03-self-attention", len(steps))
    a = attribution(model(p["model"]), p["text"], "", p["steps"])
    row = p["out"]
    ig = dict(zip(a.inputs[:a.reach[row]], a.integrated[row]))
    assert a.outputs[row] == "are"
    assert a.of == "log-probability"
    values = f"({a.value[row]:.2f}, against {a.baseline_value[row]:.2f}".replace("-", "−")
    says(s.caption, f"log-probability of \"are\" {values}",
         f"completeness error of {a.completeness[row]:.3f}", f"\"keys\" gets {ig['keys']:.2f}",
         f"\"cabinet\" {ig['cabinet']:.2f}", f"the second \"the\" {a.integrated[row, 4]:.2f}")


def test_04_last_step_masked_words_agree_with_the_head_noun() -> None:
    from explorer.probes.masked_words import masked_fill

    s, p = step("04-embeddings-decoding", len(LESSONS["04-embeddings-decoding"].steps))
    assert s.page == "masked-words" and p["model"] == "builtin:masked-lm"
    loaded = model(p["model"])
    a, b = (masked_fill(loaded, text, p["k"], p["words"]) for text in (p["text"], p["b"]))
    assert a.words == b.words == ("is", "are") and len(a) == len(b) == 1
    (a_is, a_are), (b_is, b_are) = a.word_probs[0], b.word_probs[0]
    says(s.caption, "a 2-layer masked language model", f'with "are" (p = {a_are:.2f}) and gives "is" only {a_is:.3f}',
         f'it puts "is" first (p = {b_is:.2f}) and gives "are" {b_are:.3f}')
    assert loaded.model.config.n_layer == 2
    assert a.top_tokens[0][0] == "are" and b.top_tokens[0][0] == "is"
    assert a.word_probs[0, 1] == pytest.approx(a.probs[0, 0]) and b.word_probs[0, 0] == pytest.approx(b.probs[0, 0])


# --------------------------------------------------------------------------------- 05 a real language model
REAL = "05-real-language-model"


def signed(x: float, digits: int = 2) -> str:
    """A number as the captions write it: two decimals (or `digits`), a real minus sign."""
    return f"{x:.{digits}f}".replace("-", "−")


def decode_step(p: dict) -> D.DecodingRun:
    """The decoding view's run for a step: the view's declared settings, the step's own where it gives them."""
    from explorer.views import BY_PATH

    d = {k: v.default for k, v in BY_PATH["decoding-strategies"].params.items()}
    strategies = tuple(Strategy(kind, temperature=d["temperature"], top_k=d["k"], top_p=d["p"], typical_p=d["typical"],
                                min_p=d["minp"], num_beams=d["beam"], length_penalty=d["lp"],
                                repetition_penalty=d["rep"], no_repeat_ngram_size=d["ngram"],
                                min_new_tokens=d["min_new"]) for kind in p["strategies"])
    return D.decode_all(model(p["model"]), p["text"], strategies, p["seed"], p["max_new"], p.get("n", 3), True,
                        p["chat"], "")


@needs_smollm2
def test_05_logit_lens_paris_appears_in_the_last_layers() -> None:
    from explorer.probes.logit_lens import logit_lens

    s, p = step(REAL, 1)
    t = logit_lens(model(p["model"]), p["text"])
    last = p["pos"]
    assert last == len(t.tokens) - 1 and t.tokens[last] == "·is" and len(t.layers) == 30
    assert t.layers[0] == "layer 0" and t.layers[-1] == "layer 29" and p["layer"] == 28
    says(s.caption, f"predicts “{t.final_tokens[last]}” with p = {t.final_prob[-1, last]:.2f} (layer 29, its output)")
    assert t.final_tokens[last] == "·Paris" and t.final_rank[-1, last] == 0
    says(s.caption, "From layer 1 to layer 22 the top guess is “.” or a bare space “·”")
    assert {t.top_tokens[i][last] for i in range(1, 23)} == {".", "·"} and t.top_tokens[0][last] not in (".", "·")
    rank = {i: int(t.final_rank[i, last]) + 1 for i in (23, 27, 28)}
    says(s.caption, f"ranks {rank[23]}th after layer 23, {rank[27]}th after layer 27 and {rank[28]}rd after layer 28 "
         f"(p = {t.final_prob[28, last]:.2f}), where “{t.top_tokens[28][last]}” is on top")
    assert all(t.final_rank[i, last] > 0 for i in range(29))  # first only at the output


@needs_smollm2
def test_05_logit_lens_agreement_across_the_attractor() -> None:
    from explorer.probes.logit_lens import logit_lens

    s, p = step(REAL, 2)
    t = logit_lens(model(p["model"]), p["text"])
    last = p["pos"]
    assert t.tokens[last] == "·cabinet" and p["layer"] == 27
    says(s.caption, f"the plural verb “{t.final_tokens[last]}” (p = {t.final_prob[-1, last]:.2f})")
    assert t.final_tokens[last] == "·are"
    ranks = [int(r) for r in t.final_rank[:, last]]
    assert ranks.index(0) == 27  # first after layer 27, not before
    says(s.caption, f"first after layer 27 already, with p = {t.final_prob[27, last]:.2f}",
         f"layer 28 puts “{t.top_tokens[28][last]}” on top ({t.top_probs[28, last]:.2f}) and “·are” second",
         "the last layer brings “·are” back to the top")
    assert ranks[28] == 1 and ranks[29] == 0
    probs = dict(zip(t.topk_tokens[-1][last], t.topk_probs[-1, last]))  # the singular "·is" is far below "·are"
    assert "·is" not in probs or probs["·is"] < probs["·are"] / 2


@needs_smollm2
def test_05_greedy_beam_and_sampling_on_a_story() -> None:
    s, p = step(REAL, 3)
    assert p["chat"] is False and p["max_new"] == 20
    run = decode_step(p)
    g = {gen.strategy.kind: gen for gen in run.generations}
    greedy, beam = g["greedy"].outputs[0].text, g["beam"].outputs[0].text
    assert greedy.startswith(" there was a wise old wizard named Elwes")
    assert beam.startswith(" there lived a wise old wizard named Elwes")
    assert greedy.replace(" was ", " lived ", 1) == beam  # one word apart
    rows = {k: v.summary() for k, v in g.items()}
    says(s.caption, "20 new tokens", "“there was a wise old wizard named Elwes”",
         "“there lived a wise old wizard named Elwes”",
         f"mean log-probability {signed(rows['beam']['mean log-prob'])} per token against "
         f"{signed(rows['greedy']['mean log-prob'])}",
         f"(self-BLEU {rows['top-k']['self-BLEU']:.2f} and {rows['top-p']['self-BLEU']:.2f})",
         f"at a mean log-probability of {signed(rows['top-k']['mean log-prob'])} and "
         f"{signed(rows['top-p']['mean log-prob'])}")
    assert rows["beam"]["mean log-prob"] > rows["greedy"]["mean log-prob"]
    for kind in ("top-k", "top-p"):
        texts = [o.text for o in g[kind].outputs]
        assert len(texts) == 3 == len(set(texts)), kind
    assert all(len(gen.outputs[0].ids) == 20 for gen in run.generations)


@needs_smollm2
def test_05_an_instruct_model_reads_a_chat() -> None:
    s, p = step(REAL, 4)
    assert p["chat"] is True
    lm = model(p["model"])
    run = decode_step(p)
    template = D.chat_template(lm)
    says(s.caption, f"the model reads {len(run.prompt_ids)} tokens",
         f"the template's own system prompt “{template.default_system}”",
         "the turn markers <|im_start|> and <|im_end|>")
    assert run.system == template.default_system and run.chat
    expected = lm.tokenizer.apply_chat_template([{"role": "user", "content": p["text"]}], tokenize=True,
                                                add_generation_prompt=True, return_dict=True)["input_ids"]
    assert list(run.prompt_ids) == list(expected)
    assert {"<|im_start|>", "<|im_end|>"} <= set(run.prompt_tokens) and run.prompt_tokens[-3:] == ("ass", "istant", "↵")
    end = lm.adapter.token_strings(list(lm.adapter.eos_ids))
    says(s.caption, "both reply “The capital of France is Paris.” and stop at <|im_end|>, "
                    "the model's end-of-turn token")
    assert end == ["<|im_end|>"]
    for gen in run.generations:
        out = gen.outputs[0]
        assert out.text == "The capital of France is Paris.<|im_end|>" and out.ids[-1] in lm.adapter.eos_ids


@needs_smollm2
def test_05_sampling_a_factual_answer() -> None:
    s, p = step(REAL, 5)
    run = decode_step(p)
    greedy, top_p = run.generations
    texts = [o.text for o in top_p.outputs]
    assert texts[0].startswith("The capital of France is Paris, also known as La Belle Étoile")
    assert texts[1].startswith("Ze alttart fin de lille") and texts[2].startswith("Un prix de la Galerie")
    says(s.caption, "(p = 0.9) samples three replies with seed 0", "“…Paris, also known as La Belle Étoile”",
         "(“Ze alttart fin de lille…”, “Un prix de la Galerie…”)",
         f"mean log-probability is {signed(top_p.summary()['mean log-prob'])} per token",
         f"against {signed(greedy.summary()['mean log-prob'])} for greedy's answer",
         f"({len(greedy.outputs[0].ids)} tokens, <|im_end|> included)")
    assert top_p.strategy.top_p == 0.9 and len(top_p.outputs) == 3 and p["seed"] == 0


@needs_smollm2
def test_05_an_empty_prompt_opens_a_turn() -> None:
    s, p = step(REAL, 6)
    assert p["text"] == "" and p["chat"] is False
    lm = model(p["model"])
    run = decode_step(p)
    assert run.prompt_ids == (lm.adapter.bos_id,) and run.prompt_tokens == ("<|im_start|>",)
    assert run.start_note in run.notes and "<|im_start|>" in run.start_note and "open a turn" in run.start_note
    template = D.chat_template(lm)
    assert template.opener == "<|im_start|>"
    says(s.caption, "starts from the beginning-of-sequence token alone, <|im_start|>, which this chat model's "
         "template writes before every message",
         f"greedy writes “{run.generations[0].outputs[0].text}”")
    assert run.generations[0].outputs[0].text == "-the-world-is-a-world-to-be-made-101"
    rendered = lm.tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                add_generation_prompt=True)
    assert rendered.count("<|im_start|>") == 3  # before every message: system, user, and the assistant's turn
    roles = ("system", "user", "assistant")
    assert not any(gen.outputs[0].text.startswith(r) for gen in run.generations for r in roles)


# --------------------------------------------------------------------------------- 06, 07 interventions
FACT, NUMBER = "06-where-a-fact-is-recalled", "07-where-number-is-carried"


def _grid(p: dict):
    from explorer.probes import interventions as I

    return I.patching(model(p["model"]), p["text"], p["corrupt"], p["answer"], p["wrong"], p["site"],
                      p.get("direction", "denoise"), p.get("pos", -1))


@needs_smollm2
def test_06_the_subject_then_the_last_position() -> None:
    from explorer.probes import interventions as I

    s, p = step(FACT, 1)
    m = model(p["model"])
    c = I.contrast(m, p["text"], p["corrupt"], p["answer"], p["wrong"])
    assert c.tokens[2] == "iffel" and c.tokens[-1] == "·of" and (p["layer"], p["col"]) == (23, 2)
    says(LESSONS[FACT].intro, "continues the clean one with “·Paris” and the corrupted one with “·Rome”")
    for prompt, word in ((p["text"], "·Paris"), (p["corrupt"], "·Rome")):
        assert I.ablation(m, prompt, ()).before_tokens[0] == word
    says(s.caption, f"Clean: LD = {signed(c.clean.ld)} (p(·Paris) = {c.clean.p_answer:.2f}); corrupted: LD = "
         f"{signed(c.corrupted.ld)} (p(·Rome) = {c.corrupted.p_wrong:.2f})")
    g = _grid(p).restored
    says(s.caption, f"restores {g[0, 2]:.2f} before layer 0 and still {g[23, 2]:.2f} before layer 23",
         f"the last position, “·of”, restores {g[24, 8]:.2f} instead")
    assert np.abs(g[24, 1:4]).max() < 0.005 and g[24, 8] > 0.7  # "before layer 24 it (the subject) restores nothing"
    assert all(g[layer, 2] > 0.75 for layer in range(24))


@needs_smollm2
def test_06_layer_23_attention_and_its_heads() -> None:
    s, p = step(FACT, 2)
    attn = _grid(p).restored
    says(s.caption, f"layer 23 at the last position restores {attn[23, 8]:.2f} on its own")
    others = np.delete(attn[:, 8], 23)
    says(s.caption, f"no other attention output at “·of” restores more than {others.max():.2f}")
    s3, p3 = step(FACT, 3)
    heads = _grid(p3).restored
    assert p3["pos"] == 8
    says(s3.caption, f"heads 4 and 5 of layer 23 restore {heads[23, 4]:.2f} and {heads[23, 5]:.2f} "
         f"({heads[23, 4] + heads[23, 5]:.2f} of the {attn[23, 8]:.2f}")
    rest = heads.copy()
    rest[23, 4] = rest[23, 5] = -np.inf
    says(s3.caption, f"no other head of the 30 layers restores more than {rest.max():.2f}",
         f"(layer 29, head 0: {signed(heads[29, 0])})")


@needs_smollm2
def test_06_the_first_mlp_and_the_estimate() -> None:
    from explorer.probes import interventions as I

    s, p = step(FACT, 4)
    mlp = _grid(p).restored
    resid = _grid({**p, "site": "resid"}).restored
    says(s.caption, f"The MLP of layer 0 at “iffel” restores {mlp[0, 2]:.2f} alone")
    assert mlp[0, 2] < resid[1, 2] and resid[1, 2] - mlp[0, 2] < 0.05  # "nearly as much as the stream there"
    s5, p5 = step(FACT, 5)
    m = model(p5["model"])
    exact = _grid(p5)
    est = I.attribution(m, p5["text"], p5["corrupt"], p5["answer"], p5["wrong"])["resid"]
    agree = I.agreement(exact, est)
    says(s5.caption, f"instead of {exact.runs} patched runs", f"Over the {exact.restored.size} cells it correlates "
         f"r = {agree.r:.2f}", f"exact {agree.exact:.2f}, estimate {signed(agree.estimate)}")
    assert (agree.worst_row, agree.worst_col) == ("before layer 0", "iffel")


def test_07_the_cell_state_carries_the_number() -> None:
    from explorer.probes import interventions as I

    s, p = step(NUMBER, 1)
    m = model(p["model"])
    c = I.contrast(m, p["text"], p["corrupt"], p["answer"], p["wrong"])
    says(s.caption, f"Clean: LD = {signed(c.clean.ld)}; corrupted: LD = {signed(c.corrupted.ld)}")
    g = _grid(p).restored[0]
    first, last = c.tokens.index("to"), c.tokens.index("big")
    says(s.caption, f"restores between {g[first:last + 1].min():.2f} and {g[first:last + 1].max():.2f}")
    assert abs(g[-1]) < 1e-6  # "Why does the cell state at the last word restore nothing?"
    s2, p2 = step(NUMBER, 2)
    h = _grid(p2).restored[0]
    says(s2.caption, f"restores at most {h[:-1].max():.2f} before the last word ({h[first]:.2f} at “to”), and "
         f"exactly 1 at “windows”")
    assert h[-1] == pytest.approx(1.0, abs=1e-5)
    noised = _grid({**p, "direction": "noise"}).restored[0]
    keys = c.tokens.index("keys")
    np.testing.assert_allclose(noised[keys:], h[keys:], atol=1e-5)  # "from “keys” on, the two rows are the same"
    assert np.allclose(noised[:keys], 1.0) and np.allclose(h[:keys], 0.0, atol=1e-5)  # before it nothing differs


def test_07_a_gru_has_one_state_and_the_estimate_on_h_and_c() -> None:
    from explorer.probes import interventions as I

    s, p = step(NUMBER, 3)
    g = _grid(p).restored[0]
    keys = I.contrast(model(p["model"]), p["text"], p["corrupt"], p["answer"], p["wrong"]).tokens.index("keys")
    says(s.caption, "at any one word from “keys” on restores exactly 1")
    assert "Before “keys” the patch restores 0" in LESSONS[NUMBER].steps[2].question
    np.testing.assert_allclose(g[keys:], 1.0, atol=1e-5)
    np.testing.assert_allclose(g[:keys], 0.0, atol=1e-6)
    s4, p4 = step(NUMBER, 4)
    m = model(p4["model"])
    args = (p4["text"], p4["corrupt"], p4["answer"], p4["wrong"])
    est = I.attribution(m, *args)
    h, c = (I.agreement(_grid({**p4, "site": k}), est[k]) for k in ("h", "c"))
    says(s4.caption, f"(r = {h.r:.2f} over the row)", f"(r = {c.r:.2f})",
         f"at “to” exact patching restores {c.exact:.2f} and the estimate {c.estimate:.2f}")
    assert c.worst_col == "to"


def test_07_the_real_english_lstm_same_prompts() -> None:
    from explorer.probes import interventions as I

    s, p = step(NUMBER, 6)
    assert p["model"] == "builtin:lstm-lm-wordnet"
    c = I.contrast(model(p["model"]), p["text"], p["corrupt"], p["answer"], p["wrong"])
    says(s.caption, f"(LD = {signed(c.clean.ld)} clean, {signed(c.corrupted.ld)} corrupted)",
         f"moves the verb by {c.clean.ld - c.corrupted.ld:.2f} logits here")
    generated = I.contrast(model("builtin:lstm-lm"), p["text"], p["corrupt"], p["answer"], p["wrong"])
    says(s.caption, f"not {generated.clean.ld - generated.corrupted.ld:.1f}")
    assert abs(c.clean.ld) < 0.25 and abs(c.corrupted.ld) < 0.25  # "barely tells the two prompts apart"
    templated = model(p["model"]).meta["metrics"]["natural_agreement"]["templated"]
    says(s.question, f"{round(100 * templated['attractor'])} % of the time, and "
         f"{round(100 * templated['no_attractor'])} % without one")
    first, last = c.tokens.index("to"), c.tokens.index("big")
    g, h = _grid(p).restored[0], _grid({**p, "site": "h"}).restored[0]
    says(s.caption, f"restores between {g[first:last + 1].min():.2f} and {g[first:last + 1].max():.2f}",
         f"at most {h[first:last + 1].max():.2f}")


def test_07_one_unit_holds_the_number() -> None:
    from explorer.probes import interventions as I

    s, p = step(NUMBER, 5)
    m = model(p["model"])
    args = (p["corrupt"], p["answer"], p["wrong"])
    resampled = I.ablation(m, p["text"], (p["ablate"],), p["how"], *args)
    says(s.caption, f"LD falls from {resampled.before.ld:.2f} to {resampled.after.ld:.2f}")
    after = {u: I.ablation(m, p["text"], (f"L0U{u}",), "resample", *args).after.ld for u in range(256)}
    ranked = sorted(after, key=after.get)
    assert ranked[0] == 133
    says(s.caption, f"the next, unit {ranked[1]}, leaves LD at {after[ranked[1]]:.2f}")
    zero = I.ablation(m, p["text"], (p["ablate"],), "zero", *args)
    says(s.caption, f"Set to zero instead of resampled, unit 133 leaves LD at {zero.after.ld:.2f}")


# ------------------------------------------------------------------------- 08 an LSTM learns agreement (snapshots)
LEARNS = "08-an-lstm-learns-agreement"


def test_08_the_curves_of_the_lstms_training() -> None:
    from explorer.training import curves as TC

    s, p = step(LEARNS, 1)
    c = TC.series_curves(p["model"])
    at = {int(st): i for i, st in enumerate(c.steps)}
    loss, agreement, unit = c.curves[TC.LOSS], c.curves[TC.AGREEMENT], c.curves[TC.NUMBER_UNIT]
    says(s.caption, f"from {loss[0]:.3f} nats at initialisation to {loss[-1]:.3f}", f"{c.n_items} held-out items",
         f"{agreement[at[373]]:.3f} at step 373", f"to {agreement[at[640]]:.3f} at step 640 and "
         f"{agreement[at[1096]]:.3f} at step 1,096", f"it is unit 133 ({unit[at[640]]:.3f}, then {unit[at[1096]]:.3f})")
    assert (np.abs(agreement[:at[373] + 1] - 0.5) < 0.03).all()
    assert all(c.unit[i] == 133 for i in range(at[640], len(c.steps))) and c.unit[at[373]] != 133
    says(s.question, f"is already {loss[at[373]]:.3f}")


def test_08_greedy_decoding_at_steps_0_and_373() -> None:
    for number, expected in ((2, "clean clocks clocks clocks clocks clean clocks"),
                             (3, "which the women hates ( that the king loves ) .")):
        s, p = step(LEARNS, number)
        loaded = model(f"{p['model']}@{p['train_step']}")
        run = D.decode_all(loaded, p["text"], tuple(Strategy(k) for k in p["strategies"]), 0, p["max_new"], 1)
        text = run.generations[0].outputs[0].text
        assert text.startswith(expected), text
        says(s.caption, expected)


def test_08_the_cell_over_training() -> None:
    s, p = step(LEARNS, 4)
    start = RG.rnn_gates(model(f"{p['model']}@{p['train_step']}"), p["text"])
    trained = RG.rnn_gates(model(p["model"]), p["text"])
    says(s.caption, f"is {np.abs(start.gates['c']).max():.3f}, against {np.abs(trained.gates['c']).max():.3f}")
    s, p = step(LEARNS, 5)
    a_text, b_text = "the key to the old cabinets is on the table .", "the keys to the old cabinets are on the table ."
    orders = {}
    for at_step in (373, 640):
        loaded = model(f"{p['model']}@{at_step}")
        orders[at_step] = list(RG.compare(RG.rnn_gates(loaded, a_text), RG.rnn_gates(loaded, b_text), "c", 0).order[:3])
    assert orders[640][0] == 133 and 133 not in orders[373]
    says(s.caption, "(those were {}, {} and {})".format(*orders[373]))
    s, p = step(LEARNS, 6)
    assert p["train_step"] == 1878 and p["unit"] == 133
    c_end = trained.gates["c"][0, 0, :, 133]
    c_640 = RG.rnn_gates(model(f"{p['model']}@640"), p["text"]).gates["c"][0, 0, :, 133]
    keys, to, cab = (trained.tokens.index(w) for w in ("keys", "to", "cabinet"))
    span = c_end[to:cab + 1]
    says(s.caption, f"after \"keys\" its cell state is {c_end[keys]:.2f}".replace("-", "−"),
         f"between {span.min():.2f} and {span.max():.2f}".replace("-", "−"),
         f"at {c_640[keys]:.2f} after \"keys\" and {c_640[cab]:.2f} at \"cabinet\"".replace("-", "−"))


# ------------------------------------------------------------------ 09 a small GPT learns words before grammar
WORDS_FIRST = "09-a-small-gpt-learns-words-first"


def test_09_classes_before_agreement() -> None:
    from explorer.training import curves as TC

    s, p = step(WORDS_FIRST, 1)
    c = TC.series_curves(p["model"])
    at = {int(st): i for i, st in enumerate(c.steps)}
    prec, agree = c.curves[TC.NEIGHBOURS], c.curves[TC.AGREEMENT]
    says(s.caption, f"from {prec[0]:.3f} at initialisation to {prec[at[98]]:.3f} at step 98 and {prec[at[163]]:.3f} "
         f"at step 163", f"still at chance ({agree[at[98]]:.3f} and {agree[at[163]]:.3f})",
         f"{agree[at[452]]:.3f} at step 452, {agree[-1]:.3f} at the end")
    assert (np.abs(agree[:at[272] + 1] - 0.5) < 0.05).all() and prec[at[163]] > 8 * prec[0]


def test_09_the_neighbours_of_red_over_training() -> None:
    from explorer.data import english

    colours = []
    for number in (2, 3, 4):
        s, p = step(WORDS_FIRST, number)
        loaded = model(f"{p['model']}@{p['train_step']}")
        table = E.embedding_table(loaded, "input")
        ranked = E.neighbours(table, E.locate(table, p["nn"], loaded).row, p["k"])
        words = [table.words[i] for i in ranked.rows]
        says(s.caption, ", ".join(f'"{w}"' for w in words[:-1]).replace('", "', '", "'))
        assert all(f'"{w}"' in s.caption or w in s.caption for w in words)
        colours.append(sum(english.word_class(w) == "colours" for w in words))
    assert colours == [1, 2, 5]
    vocab = model("builtin:tiny-gpt").vocabs["vocab"].itos
    says(step(WORDS_FIRST, 2)[0].question, f"with {sum(english.word_class(w) == 'colours' for w in vocab)} colours "
         f"in {len(vocab)} words")


def test_09_the_lens_after_cabinet_over_training() -> None:
    from explorer.probes.logit_lens import logit_lens

    s, p = step(WORDS_FIRST, 5)
    said = []
    for at_step in (163, 452, None):
        t = logit_lens(model(p["model"] + ("" if at_step is None else f"@{at_step}")), p["text"])
        cab = t.tokens.index("cabinet")
        said.append(t.final_tokens[cab])
        if at_step is None:
            says(s.caption, f"(p = {t.final_prob[-1, cab]:.3f})")
    assert said == [")", "that", "are"]
    says(s.caption, f'is "{said[0]}" at step 163, "{said[1]}" at step 452 and "are"')


# ------------------------------------------------------------------------- 11: a word decided by its context
def _tag(text: str, word: str):
    from explorer.probes import decision as DE

    trace = DE.decide(model("builtin:pos-bilstm"), text)
    i = trace.tokens.index(word)
    return trace, i, dict(zip(trace.labels, trace.probs[i]))


def test_11_run_light_and_never_in_their_sentences() -> None:
    s1, p1 = step("11-a-word-decided-by-its-context", 1)
    trace, i, p = _tag(p1["text"], "run")
    says(s1.caption, f"p = {p['noun']:.3f}")
    assert max(p, key=p.get) == "noun"
    assert [trace.labels[int(trace.probs[trace.tokens.index(w)].argmax())] for w in ("they", "for", "a", ".")] == \
        ["other"] * 4
    s2, p2 = step("11-a-word-decided-by-its-context", 2)
    _, _, p = _tag(p2["text"], "run")
    says(s2.caption, f"verb with p = {p['verb']:.3f}", f"a noun with p = {p['noun']:.3f}")
    s4, p4 = step("11-a-word-decided-by-its-context", 4)
    _, _, adj = _tag(p4["text"], "light")
    _, _, noun = _tag("Please turn on the light.", "light")
    says(s4.caption, f"adjective (p = {adj['adjective']:.3f})", f"noun (p = {noun['noun']:.3f})")
    from explorer.data import pos_english as PE

    counts = {lab: sum(1 for r in PE.rows() if r.lemma == "light" and r.label == lab) for lab in PE.LABELS}
    says(s4.caption, f"{counts['adjective']} times as an adjective and {counts['noun']} times as a noun")
    s6, p6 = step("11-a-word-decided-by-its-context", 6)
    _, _, p = _tag(p6["text"], "never")
    says(s6.caption, f"verb (p = {p['verb']:.3f}; adverb {p['adverb']:.3f})")
    metrics = model("builtin:pos-bilstm").meta["metrics"]
    wrong = round((1 - metrics["everyday_accuracy"]) * metrics["everyday_n"])
    says(s6.caption, f"gets {wrong} wrong")
    says(LESSONS["11-a-word-decided-by-its-context"].intro, f"{metrics['heldout_accuracy']:.1%}",
         f"{metrics['everyday_accuracy']:.1%}")


def test_11_what_makes_run_a_noun_rather_than_a_verb() -> None:
    from explorer.probes import decision as DE

    s3, p3 = step("11-a-word-decided-by-its-context", 3)
    a = DE.attribute(model("builtin:pos-bilstm"), p3["text"], p3["label"], p3["foil"], p3["token"])
    assert a.tokens[p3["token"]] == "run" and a.of == "log p(noun) − log p(verb)"
    shares = dict(zip(a.tokens, a.integrated))
    says(s3.caption, f"({a.value:.2f} at the sentence, {a.baseline_value:.2f} at the zero embedding)".replace("-", "−"),
         f"\"they\" contributes {shares['they']:.2f}", f"\"a\" {shares['a']:.2f}",
         f"\"run\" itself {shares['run']:.2f}", f"\"went\" {shares['went']:.2f}".replace("-", "−"))
    says(s3.caption, f"within {a.relative:.1%}".replace("%", " %"))
    assert sorted(shares, key=shares.get, reverse=True)[:2] == ["they", "a"]


def test_11_minilm_fine_tuned_decides_and_its_cls_row_changed() -> None:
    from explorer.probes import decision as DE
    from explorer.probes import self_attention as SA

    s7, p7 = step("11-a-word-decided-by-its-context", 7)
    a, b = (DE.decide(model(p7["model"]), t) for t in (p7["text"], p7["b"]))
    says(s7.caption, f"negative with p = {a.probs[0]:.3f}", f"positive with p = {b.probs[1]:.3f}")
    says(s7.caption, f"p(positive) = {a.prefix_probs[a.tokens.index('not')][1]:.3f} after \"not\"",
         f"{a.prefix_probs[a.tokens.index('good')][1]:.3f} after \"good\"")
    s8, p8 = step("11-a-word-decided-by-its-context", 8)
    after = np.asarray(SA.attention_trace(model(p8["model"]), p8["text"]).attentions)  # (L, H, T, T)
    trace = SA.attention_trace(model(p8["compare"]), p8["text"])
    before, toks = np.asarray(trace.attentions), list(trace.tokens)
    L, h, q, nt, gd = p8["layer"], p8["head"], p8["token"], toks.index("not"), toks.index("good")
    assert (L, toks[q]) == (after.shape[0] - 1, "[CLS]")
    says(s8.caption, f"gives {before[L, h, q, q]:.3f} of it to [CLS] itself and {before[L, h, q, nt]:.3f} to",
         f"{after[L, h, q, q]:.3f} to itself, {after[L, h, q, nt]:.3f} to \"not\" and {after[L, h, q, gd]:.3f} to",
         f"gets {before[L, :, q, nt].mean():.3f} before and {after[L, :, q, nt].mean():.3f} after")
    np.testing.assert_array_equal(after[:L], before[:L])  # layers 0 to 4: the package's, untouched
    assert np.abs(after[L] - before[L]).max() > 0.3


def test_11_the_fine_tuned_tagger_and_run() -> None:
    from explorer.probes import decision as DE

    s9, p9 = step("11-a-word-decided-by-its-context", 9)
    tagger = model(p9["model"])
    here, there = (DE.decide(tagger, t) for t in (p9["text"], "They run every morning."))
    says(s9.caption, f"noun here with p = {here.probs[here.tokens.index('run')][0]:.3f}",
         f"verb in \"They run every morning.\" with p = {there.probs[there.tokens.index('run')][1]:.3f}")
    a = DE.attribute(tagger, p9["text"], p9["label"], p9["foil"], p9["token"])
    assert a.tokens[p9["token"]] == "run" and a.of == "log p(noun) − log p(verb)"
    shares = dict(zip(a.tokens, a.integrated))
    says(s9.caption, f"\"run\" itself {shares['run']:.2f}", f"\"a\" {shares['a']:.2f}",
         f"\"for\" {shares['for']:.2f}", f"\"long\" {shares['long']:.2f}", f"\"they\" {shares['they']:.2f}")
    assert max(shares, key=shares.get) == "run" and shares["they"] < min(shares[w] for w in ("a", "for", "long"))


# ---------------------------------------------------------------------------- 10: an LSTM decides sentiment
def test_10_a_sentence_its_negation_and_the_decision_word_by_word() -> None:
    from explorer.probes import decision as DE

    loaded = model("builtin:sentiment-lstm")
    s1, p1 = step("10-an-lstm-decides-sentiment", 1)
    a, b = DE.decide(loaded, p1["text"]), DE.decide(loaded, p1["b"])
    says(s1.caption, f"positive with p = {a.probs[1]:.3f}", f"it is positive with p = {b.probs[1]:.3f}")
    s2, p2 = step("10-an-lstm-decides-sentiment", 2)
    t = DE.decide(loaded, p2["text"])
    after = {w: float(t.prefix_probs[t.tokens.index(w), 1]) for w in ("was", "not", "bad", "at")}
    says(s2.caption, f"(p(positive) = {after['was']:.3f})", f"after \"not\", {after['not']:.3f}",
         f"after \"bad\", {after['bad']:.3f}", f"after \"at\", {after['at']:.3f}")
    metrics = loaded.meta["metrics"]
    says(LESSONS["10-an-lstm-decides-sentiment"].intro, f"{metrics['heldout_accuracy']:.1%}",
         f"{metrics['everyday_accuracy']:.1%}", f"{loaded.meta['corpus']['n_train']:,} short reviews",
         f"On {metrics['heldout_n']:,} held-out")


def test_10_integrated_gradients_add_up_where_gradient_x_input_says_nothing() -> None:
    from explorer.probes import decision as DE

    loaded = model("builtin:sentiment-lstm")
    s3, p3 = step("10-an-lstm-decides-sentiment", 3)
    a = DE.attribute(loaded, p3["text"], p3["label"])
    share = dict(zip(a.tokens, a.integrated))
    says(s3.caption, f"({a.value:.3f} at the sentence, {a.baseline_value:.3f} at the zero embedding)".replace("-", "−"),
         f"\"not\" {share['not']:+.2f}", f"\"bad\" {share['bad']:+.2f}".replace("-", "−"),
         f"\"was\" {share['was']:+.2f}".replace("-", "−"), f"\"at\" {share['at']:+.2f}",
         f"up to {a.relative:.2%}".replace("%", " %"))
    s4, _ = step("10-an-lstm-decides-sentiment", 4)
    says(s4.caption, "every bar is below 0.0005 in size", "p(positive) = 0.999")
    assert np.abs(a.gradient_x_input).max() < 0.0005 and abs(float(a.integrated.sum())) > 0.5
    assert f"{np.exp(a.value):.3f}" == "0.999"


def test_10_negative_rather_than_positive() -> None:
    from explorer.probes import decision as DE

    loaded = model("builtin:sentiment-lstm")
    s5, p5 = step("10-an-lstm-decides-sentiment", 5)
    t = DE.decide(loaded, p5["text"])
    a = DE.attribute(loaded, p5["text"], p5["label"], p5["foil"])
    assert a.of == "log p(negative) − log p(positive)"
    at = {w: [float(v) for tok, v in zip(a.tokens, a.integrated) if tok == w] for w in ("good", "but", "not", "was")}
    says(s5.caption, f"(p(negative) = {t.probs[0]:.3f})",
         f"({a.value:.2f}, against {a.baseline_value:.2f} at the zero embedding)".replace("-", "−"),
         f"with {at['good'][0]:.2f}".replace("-", "−"), f"\"but\" ({at['but'][0]:+.2f})",
         f"\"not\" ({at['not'][0]:+.2f})", f"the second \"was\" ({at['was'][1]:+.2f})")
    after_not = float(t.prefix_probs[t.tokens.index("not"), 1])
    says(s5.question, f"still positive ({after_not:.3f})", f"brings it to {t.probs[1]:.3f}")
    s6, p6 = step("10-an-lstm-decides-sentiment", 6)
    assert loaded.model.rnn.num_layers == 2 and loaded.model.rnn.hidden_size == 64 and p6["layer"] == 1


def test_10_which_state_carries_not() -> None:
    from explorer.probes import interventions as I

    s, p = step("10-an-lstm-decides-sentiment", 7)
    m = model(p["model"])
    c = I.contrast(m, p["text"], p["corrupt"], p["answer"], p["wrong"])
    assert c.tokens[4] == "not" and c.tokens[-1] == "." and (p["layer"], p["col"]) == (0, 4)
    says(s.caption, f"(LD = logit(negative) − logit(positive) = {signed(c.corrupted.ld)})",
         f"({c.clean.ld:+.2f})")
    g = _grid(p).restored
    says(s.caption, f"The first layer's h at \"not\" alone restores {g[0, 4]:.3f}",
         f"the second layer's h at \"not\" restores {signed(g[1, 4], 3)}", f"at \".\" restores {g[1, -1]:.3f}")
    assert np.abs(g[:, :4]).max() < 1e-6  # "no state before 'not' restores anything"
