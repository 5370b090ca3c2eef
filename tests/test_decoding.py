"""Decoding strategies: HF definitions, equality with model.generate, metrics against hand values, bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.adapters import generation as G
from explorer.metrics import text as MT
from explorer.loading.catalogue import builtin_names
from explorer.adapters.generation import DecodingError, Strategy
from explorer.loading.loaders import LoadedModel, load_model
from explorer.probes import decoding_strategies as D
from explorer.runtime import model_state
from explorer.views import BY_PATH
from families import ENC_DEC_SMALL, GPT2_SMALL, SMALL, T5_SMALL, tiny_model
from testkit.hf_reference import generation_config, reference_generate
from conftest import needs_smollm2

SEED = 3
MAX_NEW = 20


def tiny_gpt2() -> LoadedModel:
    model = tiny_model("GPT2LMHeadModel", 50, seed=0, n_positions=64, **GPT2_SMALL, n_head=2, bos_token_id=0,
                       eos_token_id=1, pad_token_id=1, initializer_range=0.2, attn_implementation="eager").eval()
    return LoadedModel("local:tiny-gpt2", "decoder", model, "cpu", "float32")


@pytest.fixture(scope="module")
def gpt2() -> LoadedModel:
    return tiny_gpt2()


def prompt_for(ids, max_new=MAX_NEW):
    return D.Prompt(tuple(ids), tuple(ids), (), (), max_new)


STRATEGIES = [
    Strategy("greedy"),
    Strategy("sample", temperature=0.7),
    Strategy("top-k", top_k=5),
    Strategy("top-p", top_p=0.8, temperature=1.3),
    Strategy("typical", typical_p=0.8),
    Strategy("min-p", min_p=0.1),
    Strategy("beam", num_beams=3),
    Strategy("beam", num_beams=4, length_penalty=0.5),
    Strategy("top-k", top_k=5, repetition_penalty=1.5, no_repeat_ngram_size=2),
    Strategy("beam", num_beams=3, repetition_penalty=1.3, no_repeat_ngram_size=2),
]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.label)
def test_same_tokens_as_model_generate(gpt2, strategy):
    ns = (1,) if not strategy.do_sample else (1, 3)
    for n in ns:
        for ids in ((5, 6, 7),) if n > 1 else ((5, 6, 7), (9,)):
            gen = D.generate(gpt2.caps.stepper, prompt_for(ids), strategy, SEED, n=n)
            ref = reference_generate(gpt2.caps.stepper, ids, strategy, SEED, MAX_NEW, n)
            assert [list(o.ids) for o in gen.outputs] == ref, (strategy.label, n, ids)


def test_global_rng_untouched(gpt2):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    D.generate(gpt2.caps.stepper, prompt_for((5,)), Strategy("sample"), SEED, n=2)
    assert torch.equal(torch.rand(3), expected)


def _hf_seq2seq(kind: str) -> LoadedModel:
    """A tiny random Hugging Face encoder-decoder whose generation_config has what its family's checkpoints have:
    T5 (start = pad), Marian (bad_words_ids = [[pad]], forced EOS at max length), BART (forced BOS, forced EOS)."""
    torch.manual_seed(0)
    small = dict(ENC_DEC_SMALL, init_std=0.2)
    if kind == "t5":
        model = tiny_model("T5ForConditionalGeneration", 40, **T5_SMALL, decoder_start_token_id=0, pad_token_id=0,
                           eos_token_id=1, initializer_factor=3.0)
    elif kind == "marian":
        model = tiny_model("MarianMTModel", 40, pad_token_id=39, eos_token_id=0, decoder_start_token_id=39, **small)
        model.generation_config.bad_words_ids = [[39]]
        model.generation_config.forced_eos_token_id = 0
    else:
        model = tiny_model("BartForConditionalGeneration", 40, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                           decoder_start_token_id=2, **small)
        model.generation_config.forced_bos_token_id = 0  # as in facebook/bart-*'s generation_config.json
        model.generation_config.forced_eos_token_id = 2
    model.config._attn_implementation = "eager"
    return LoadedModel(f"local:tiny-{kind}", "encoder-decoder", model.eval(), "cpu", "float32")


@pytest.mark.parametrize("kind", ["t5", "marian", "bart"])
def test_seq2seq_same_as_generate(kind):
    """Greedy, sampling and beam search on Hugging Face encoder-decoders equal model.generate with the same seed,
    with the model's own generation settings (Marian's bad words and forced EOS, BART's forced BOS) honoured."""
    loaded = _hf_seq2seq(kind)
    adapter = loaded.caps.stepper
    assert adapter.is_encoder_decoder and adapter.decoder_start == (loaded.model.config.decoder_start_token_id,)
    src = (5, 6, 7, 8, adapter.eos_ids[0])
    prompt = D.Prompt(src, adapter.decoder_start, (), (), 12)
    settings = adapter.generation_settings()
    if kind == "marian":
        assert settings["bad_words_ids"] == [[39]] and settings["forced_eos_token_id"] == 0
    if kind == "bart":
        assert settings["forced_bos_token_id"] == 0
    for s in (Strategy("greedy"), Strategy("top-p", top_p=0.9), Strategy("sample", temperature=1.5),
              Strategy("beam", num_beams=3), Strategy("beam", num_beams=4, length_penalty=2.0)):
        gen = D.generate(adapter, prompt, s, SEED)
        ids = list(gen.outputs[0].ids)
        assert ids == reference_generate(adapter, src, s, SEED, 12)[0], (kind, s.label)
        if kind == "bart":
            assert ids[0] == 0  # forced BOS
        if kind == "marian":
            assert 39 not in ids  # the pad token is a bad word


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_seq2seq_beam_score_equals_generate_sequences_score(kind):
    """The returned hypothesis's score (sum log p / generated_length ** length_penalty) is generate's own
    sequences_scores, and its per-token log-probabilities are the model's own (temperature 1) on that output."""
    loaded = _hf_seq2seq(kind)
    adapter = loaded.caps.stepper
    src = (5, 6, 7, 8, adapter.eos_ids[0])
    for lp in (1.0, 0.0, 2.0):
        s = Strategy("beam", num_beams=4, length_penalty=lp)
        gen = D.generate(adapter, D.Prompt(src, adapter.decoder_start, (), (), 10), s, SEED)
        cfg = generation_config(adapter, s, 10)
        with torch.inference_mode():
            out = loaded.model.generate(input_ids=torch.tensor([src]), generation_config=cfg, output_scores=True,
                                        return_dict_in_generate=True)
        assert gen.beam.final_score == pytest.approx(float(out.sequences_scores[0]), abs=1e-5)
        ids = list(gen.outputs[0].ids)
        with torch.inference_mode():
            logits = loaded.model(input_ids=torch.tensor([src]),
                                  decoder_input_ids=torch.tensor([[*adapter.decoder_start, *ids[:-1]]])).logits[0]
        own = torch.log_softmax(logits, -1)[torch.arange(len(ids)), torch.tensor(ids)]
        # the steps read the KV cache, this is one full forward: float32 sums in another order (seen: 1.6e-5)
        np.testing.assert_allclose(gen.outputs[0].logprobs, own.numpy(), atol=5e-5)


def test_builtin_seq2seq_beam_equals_exhaustive_search():
    """On outputs of at most 2 tokens with K = 10 >= V beams nothing can be pruned, so beam search must return the
    best of ALL sequences by sum log p / length ** length_penalty (HF's definition), found here by enumeration."""
    from explorer.adapters.seq2seq_rnn import Seq2SeqAdapter
    from explorer.models.seq2seq import Seq2Seq

    for seed, attention in ((0, "bahdanau"), (1, "luong-general"), (2, "luong-concat")):
        torch.manual_seed(seed)
        model = Seq2Seq(8, 5, emb_dim=6, hidden_size=8, attention=attention).eval()
        with torch.no_grad():
            model.out.weight.mul_(4.0)  # peaked distributions: the orders differ from greedy
        adapter = Seq2SeqAdapter.of(model)
        src = torch.tensor([[4, 5, 6, 7]])

        def logp(prefix: list[int]) -> torch.Tensor:
            with torch.inference_mode():
                logits, state, _ = adapter.start(src)
                for t in prefix:
                    logits, state, _ = adapter.step(state, torch.tensor([t]))
            return torch.log_softmax(logits[0].double(), -1)

        for lp in (1.0, 0.0, -0.5):
            candidates = []
            first = logp([])
            for a in range(5):
                if a == model.eos_id:
                    candidates.append((float(first[a]) / 1 ** lp, [a]))
                    continue
                second = logp([a])
                for b in range(5):
                    candidates.append(((float(first[a]) + float(second[b])) / 2 ** lp, [a, b]))
            best = max(candidates)
            ids, _, trace = G.beam_search(adapter, src, torch.tensor([[model.bos_id]]),
                                          Strategy("beam", num_beams=10, length_penalty=lp), 2)
            assert ids == best[1], (seed, attention, lp)
            assert trace.final_score == pytest.approx(best[0], abs=1e-5)


def test_greedy_is_argmax_at_every_step(gpt2):
    gen = D.generate(gpt2.caps.stepper, prompt_for((5, 6)), Strategy("greedy"), SEED)
    ids = [5, 6]
    for t in gen.outputs[0].ids:
        logits = gpt2.model(torch.tensor([ids])).logits[0, -1]
        assert t == int(torch.argmax(logits))
        ids.append(t)


def test_beam_one_equals_greedy(gpt2):
    for ids in ((5, 6), (12,), (3, 4, 30)):
        g = D.generate(gpt2.caps.stepper, prompt_for(ids), Strategy("greedy"), SEED).outputs[0]
        b = D.generate(gpt2.caps.stepper, prompt_for(ids), Strategy("beam", num_beams=1), SEED).outputs[0]
        assert g.ids == b.ids
        np.testing.assert_allclose(g.logprobs, b.logprobs, atol=1e-6)  # the model's own log p, whatever the loop


def test_top_k_keeps_exactly_k():
    torch.manual_seed(1)
    logits = torch.randn(1, 100)
    for k in (1, 5, 40, 99):
        s = Strategy("top-k", top_k=k).warpers()(None, logits.clone())
        assert int(torch.isfinite(s).sum()) == k
        assert set(torch.topk(logits, k).indices[0].tolist()) == set(torch.isfinite(s[0]).nonzero().flatten().tolist())
    # ties: every token equal to the k-th largest logit is kept (HF's TopKLogitsWarper: scores < kth value removed)
    tied = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0]])
    s = Strategy("top-k", top_k=2).warpers()(None, tied.clone())
    assert torch.isfinite(s).sum() == 4


def test_top_p_smallest_prefix():
    rng = np.random.default_rng(0)
    for _ in range(50):
        logits = torch.tensor(rng.normal(size=(1, 30)) * 2, dtype=torch.float32)
        p = float(rng.uniform(0.05, 0.99))
        s = Strategy("top-p", top_p=p).warpers()(None, logits.clone())
        probs = torch.softmax(logits[0].double(), -1).numpy()
        order = np.argsort(-probs)
        cum = np.cumsum(probs[order])
        m = int(np.searchsorted(cum, p) + 1)  # smallest prefix with mass >= p
        if abs(cum[m - 1] - p) < 1e-6 or (m > 1 and abs(cum[m - 2] - p) < 1e-6):
            continue  # too close to call in float32
        assert set(order[:m].tolist()) == set(torch.isfinite(s[0]).nonzero().flatten().tolist())
    # hand example: probabilities 0.5, 0.3, 0.15, 0.05
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    for p, kept in ((0.45, 1), (0.75, 2), (0.85, 3), (0.97, 4), (1.0, 4)):
        s = Strategy("top-p", top_p=p).warpers()(None, logits.clone())
        assert int(torch.isfinite(s).sum()) == kept, p


def test_distinct_and_repetition_by_hand():
    seq = "a b a b".split()
    assert MT.distinct_n(seq, 1) == 0.5
    assert MT.distinct_n(seq, 2) == pytest.approx(2 / 3)
    assert MT.distinct_n(seq, 3) == pytest.approx(2 / 2 / 1)  # aba, bab: 2 distinct of 2
    assert MT.distinct_n(["a"], 2) == 0.0
    assert MT.corpus_distinct_n([["a", "b"], ["a", "c"]], 1) == pytest.approx(3 / 4)
    assert MT.repetition_rate(seq) == pytest.approx(2 / 3)  # b new, a seen, b seen
    assert MT.repetition_rate(list("abcab"), window=2) == pytest.approx(0.0)  # a is 3 back: outside the window
    assert MT.perplexity([math.log(0.5), math.log(0.125)]) == pytest.approx(4.0)


def test_bleu_equals_nltk_sentence_bleu():
    """BLEU is NLTK's sentence_bleu with the stated smoothing (method 1, ε = 0.1, auto_reweigh), on 2,000 random
    candidates and references, including candidates with no matching unigram (0, not a smoothed 0.03)."""
    import random

    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth = SmoothingFunction(epsilon=MT.EPSILON).method1
    rng = random.Random(0)
    for _ in range(2000):
        V = rng.randint(2, 8)
        cand = [rng.randrange(V) for _ in range(rng.randint(1, 9))]
        refs = [[rng.randrange(V) for _ in range(rng.randint(1, 9))] for _ in range(rng.randint(1, 3))]
        want = sentence_bleu(refs, cand, smoothing_function=smooth, auto_reweigh=True)
        assert MT.bleu(cand, refs) == pytest.approx(want, abs=1e-12), (cand, refs)
    assert MT.bleu("a b c d e".split(), ["f g h i j".split()]) == 0.0
    assert MT.self_bleu(["a b c d e".split(), "f g h i j".split()]) == 0.0


def test_bleu_and_self_bleu_by_hand():
    cand, ref = "a b c d".split(), "a b c e".split()
    # p1 = 3/4, p2 = 2/3, p3 = 1/2, p4 = 0 -> 0.1 / 1 (smoothing), BP = 1 (same length)
    expected = (0.75 * (2 / 3) * 0.5 * 0.1) ** 0.25
    assert MT.bleu(cand, [ref]) == pytest.approx(expected)
    assert expected == pytest.approx(0.397635, abs=1e-6)
    # brevity: c = 3, r = 5 -> BP = exp(1 - 5/3); a 3-token candidate uses orders 1..3, all precisions 1
    assert MT.bleu("a b c".split(), ["a b c d e".split()]) == pytest.approx(math.exp(1 - 5 / 3))
    # short candidate with a miss: "a x" vs "a b": orders 1, 2: p1 = 1/2, p2 = 0 -> 0.1/1
    assert MT.bleu("a x".split(), ["a b".split()]) == pytest.approx((0.5 * 0.1) ** 0.5)
    # clipping: "the the the" vs "the cat": p1 = 1/3
    assert MT.modified_precision("the the the".split(), ["the cat".split()], 1) == (1, 3)
    # closest reference length, shorter on ties
    assert MT.brevity_penalty(4, [6, 7]) == pytest.approx(math.exp(1 - 6 / 4))
    assert MT.brevity_penalty(4, [3, 5]) == 1.0  # r = 3 (tie -> shorter), c > r
    assert MT.self_bleu([cand, ref]) == pytest.approx(expected)
    assert MT.self_bleu([cand, cand, cand]) == pytest.approx(1.0)
    assert MT.self_bleu([cand]) is None


def test_checked_messages():
    V = 50
    for s, word in ((Strategy("sample", temperature=0), "temperature"),
                    (Strategy("top-k", temperature=-1), "temperature"),
                    (Strategy("top-p", top_p=1.5), "limited to 1"),
                    (Strategy("top-p", top_p=0.0), "at least 0.05"),
                    (Strategy("top-k", top_k=100_000), "vocabulary"),
                    (Strategy("beam", num_beams=50), "beams")):
        fixed, notes = D.checked(s, V)
        assert notes and word in notes[0].lower(), (s, notes)
        fixed.warpers()  # valid now: HF's constructors accept it
    assert (D.checked(Strategy("top-k", top_k=100_000, temperature=0), V)[0]
            == Strategy("top-k", top_k=V, temperature=0.05))
    params = BY_PATH["decoding-strategies"].params  # URL values are checked against the view's declaration
    bad = {"temperature": "0", "p": "1.5", "k": "100000", "beam": "abc", "n": "5", "max_new": "201", "lp": "nan"}
    checked = {k: params[k].validate(v) for k, v in bad.items()}
    assert [k for k, (_, msg) in checked.items() if msg] == ["temperature", "p", "k", "beam", "max_new", "lp"]
    assert checked["temperature"] == (0.05, "Temperature T must be at least 0.05; got 0, using 0.05.")
    assert checked["beam"][0] == 4 and "whole number" in checked["beam"][1] and checked["n"] == (5, None)


def test_bad_prompts(gpt2):
    lm = gpt2.caps.stepper
    # empty prompt: start from BOS (no tokenizer needed)
    p = D.prepare_prompt(lm, "", 10)
    assert p.model_input == (0,) and any("Empty" in n for n in p.notes)
    # no tokenizer: a clear error for real text
    with pytest.raises(DecodingError, match="tokenizer"):
        D.prepare_prompt(lm, "hello", 10)
    # beam budget bounded
    p = D.prepare_prompt(lm, "", 200)
    assert p.max_new == 63 and any("do not fit" in n for n in p.notes)
    run = D.decode_all(load_model("builtin:lstm-lm"), "the dog", (Strategy("beam", num_beams=8),), SEED, 200,
                       stop_at_eos=False)
    gen = run.generations[0]
    assert gen.max_new == D.BEAM_BUDGET // 8 and "bound" in gen.notes[0]
    assert len(gen.outputs[0].ids) == D.BEAM_BUDGET // 8


def test_long_prompt_truncated(tmp_path):
    loaded = load_model("builtin:lstm-lm")
    run = D.decode_all(loaded, "the dog " * 400, (Strategy("greedy"),), 0, 10)
    assert any("only the first" in n for n in run.notes)
    gpt = _explorer_gpt()
    run = D.decode_all(gpt, "the dog sleeps " * 30, (Strategy("greedy"), Strategy("top-k")), 0, 30,
                       stop_at_eos=False)
    assert any("sliding window" in n for n in run.notes)
    assert len(run.generations[0].outputs[0].ids) == 30


def _explorer_gpt() -> LoadedModel:
    """builtin:tiny-gpt when trained, else a random explorer GPT with the lstm-lm vocabulary."""
    if "tiny-gpt" in builtin_names():
        return load_model("builtin:tiny-gpt")
    from explorer.models.tiny_gpt import GPT, GPTConfig

    lstm = load_model("builtin:lstm-lm")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(lstm.vocabs["vocab"]), block_size=64, n_layer=2, n_head=4, n_embd=128)).eval()
    return LoadedModel("builtin:random-gpt", "decoder", model, "cpu", "float32", {"config": {"block_size": 64}},
                       vocabs=lstm.vocabs)


@pytest.mark.parametrize("which", ["gpt", "lstm"])
def test_builtin_models_all_strategies(which):
    loaded = _explorer_gpt() if which == "gpt" else load_model("builtin:lstm-lm")
    strategies = tuple(Strategy(k) for k in D.KINDS)
    run = D.decode_all(loaded, "a person riding a motorcycle on", strategies, 0, 15, n=3)
    assert run.prompt_tokens[0] == "<bos>"
    lm_adapter = loaded.caps.stepper
    for g in run.generations:
        o = g.outputs[0]
        assert 1 <= len(o.ids) <= 15 and len(o.logprobs) == len(o.ids)
        with torch.inference_mode():  # the log-probabilities shown are the model's own (T = 1) on this output
            logits, state, _ = lm_adapter.start(torch.tensor([run.prompt_ids]))
            own = []
            for t in o.ids:
                own.append(float(torch.log_softmax(logits[0], -1)[t]))
                logits, state, _ = lm_adapter.step(state, torch.tensor([t]))
        np.testing.assert_allclose(o.logprobs, own, atol=1e-5)
        row = g.summary()
        if g.strategy.do_sample:  # n = 3 samples: self-BLEU is defined
            assert row["samples"] == 3 and 0.0 <= row["self-BLEU"] <= 1.0
        else:  # one output, not n copies of it: no self-BLEU
            assert row["samples"] == 1 and row["self-BLEU"] is None
    # greedy == argmax; beam 1 == greedy on a built-in model too
    lm = loaded.caps.stepper
    pr = D.prepare_prompt(lm, "the computer which i had just put into the machine room", 15)
    g = D.generate(lm, pr, Strategy("greedy"), 0).outputs[0].ids
    b = D.generate(lm, pr, Strategy("beam", num_beams=1), 0).outputs[0].ids
    assert g == b
    # the per-step view: greedy keeps only the argmax, which is the chosen token
    sv = D.step_view(loaded, pr.model_input, pr.start, g, Strategy("greedy"), 0, 1.0)
    assert sv.n_kept == 1 and int(sv.ids[0]) == g[0] and sv.chosen_rank == 0
    sv = D.step_view(loaded, pr.model_input, pr.start, g, Strategy("top-k", top_k=7), 0, 0.5)
    assert sv.n_kept == 7 and sv.kept[:7].all() and not sv.kept[7:].any()
    assert float(sv.final.sum()) == pytest.approx(1.0, abs=1e-5)


def test_no_lm_head_is_refused():
    loaded = LoadedModel("x:y", "state-dict", None, "cpu", "float32")
    with pytest.raises(DecodingError, match="weight_ih_l0|next token"):
        D.decode_all(loaded, "the dog", (Strategy("greedy"),))
    with pytest.raises(DecodingError, match="no language-model head"):
        D.decode_all(load_model("builtin:word2vec"), "the dog", (Strategy("greedy"),))


def test_generated_tokens_can_wrap_in_a_narrow_column():
    """Each generated token is its own span with a break opportunity after it (sub-word tokens carry no spaces),
    and long tokens may break anywhere: the side-by-side columns never overflow into each other."""
    import numpy as np

    from explorer.viz.decoding_strategies import tokens_html

    markup = tokens_html("once upon", ["a", "Ġtime", "longlonglonglonglongtoken"], np.array([-0.1, -1.0, -3.0]))
    assert markup.count("<wbr>") == 3  # after the prompt and between the three tokens
    assert "overflow-wrap:anywhere" in markup


def test_generated_text_ending_inside_a_character_shows_its_bytes():
    """A generated text whose last token holds part of a character ends in the bytes ‹F0 9F›, never in "�"."""
    from real_tokenizers import byte_level_bpe

    tok = byte_level_bpe()
    model = tiny_model("GPT2LMHeadModel", len(tok), n_head=4, n_positions=64, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, **GPT2_SMALL)
    byte = tok.convert_tokens_to_ids("ðŁ")  # the first two bytes F0 9F of an emoji
    with torch.no_grad():  # every position's logits are W_U · w_byte: greedy writes the byte token
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(model.lm_head.weight[byte])
    lm = LoadedModel("test:gpt2", "decoder", model, "cpu", "float32", {}, tokenizer=tok)
    for max_new in (1, 3):
        out = D.decode_all(lm, "Le thé", (Strategy("greedy"),), max_new=max_new).generations[0].outputs[0]
        assert out.ids == (byte,) * max_new and tok.decode(list(out.ids)) == "\ufffd" * max_new
        assert out.text == "‹" + " ".join(["F0 9F"] * max_new) + "›"


def test_deterministic_metrics_do_not_depend_on_n():
    """Greedy and beam give one output whatever n: their distinct-n and quality are that output's (not n pooled
    copies), their self-BLEU does not apply, and the table says so."""
    from explorer.viz.decoding_strategies import summary_rows

    lm = load_model("builtin:tiny-gpt")
    strategies = (Strategy("greedy"), Strategy("beam", num_beams=2), Strategy("top-k", top_k=5))
    runs = {n: D.decode_all(lm, "the old man", strategies, SEED, 12, n) for n in (1, 5, 10)}
    for i in (0, 1):
        sums = [runs[n].generations[i].summary() for n in (1, 5, 10)]
        out = runs[1].generations[i].outputs[0]
        assert all(s["samples"] == 1 and s["self-BLEU"] is None for s in sums)
        for k in (1, 2, 3):
            assert {s[f"distinct-{k}"] for s in sums} == {MT.distinct_n(out.ids, k)}
    assert runs[5].generations[2].summary()["samples"] == 5
    table = summary_rows([g.summary() for g in runs[5].generations])
    assert table[0]["self-BLEU"] == table[1]["self-BLEU"] == "n/a (one output)"
    assert float(table[2]["self-BLEU"]) == pytest.approx(runs[5].generations[2].summary()["self-BLEU"], abs=5e-5)


# ------------------------------------------------------------------------------------------ chat templates
CHAT_TEMPLATE = ("{% for m in messages %}{% if loop.first and m['role'] != 'system' %}{{ '<|im_start|>system\n"
                 "you are a small robot<|im_end|>\n' }}{% endif %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] "
                 "+ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                 "{% endif %}")
CHAT_WORDS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "system", "user", "assistant", "you", "are",
              "a", "small", "robot", "pirate", "what", "is", "the", "red", "car", "?", "fast", "slow", "it", "."]


def tiny_chat_llama() -> LoadedModel:
    """A tiny random Llama whose tokenizer has a chat template in SmolLM2's style (a default system prompt, turns
    opened by the BOS token <|im_start|>, closed by the EOS token <|im_end|>)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(WordLevel({w: i for i, w in enumerate(CHAT_WORDS)}, unk_token="<unk>"))
    tk.pre_tokenizer = WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<|im_start|>",
                                  eos_token="<|im_end|>", pad_token="<|im_end|>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHAT_TEMPLATE
    model = tiny_model("LlamaForCausalLM", len(CHAT_WORDS), seed=0, **SMALL, num_key_value_heads=2,
                       max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=2,
                       initializer_range=0.3, attn_implementation="eager")
    return LoadedModel("local:tiny-chat-llama", "decoder", model.eval(), "cpu", "float32", tokenizer=tok)


def test_chat_template_read_from_its_output():
    loaded = tiny_chat_llama()
    info = D.chat_template(loaded)
    assert info == D.ChatTemplate("you are a small robot", True, "<|im_start|>", ("<|im_end|>",))
    assert D.chat_template(load_model("builtin:lstm-lm")) is None and D.chat_template(tiny_gpt2()) is None
    # the system prompt the model reads: the template's own, or the one given (cut to MAX_SYSTEM characters)
    ids, system = D.chat_ids(loaded.caps.stepper, "what is the red car ?")
    assert system == "you are a small robot"
    tok = loaded.tokenizer
    assert ids == tok.apply_chat_template([{"role": "user", "content": "what is the red car ?"}], tokenize=True,
                                          add_generation_prompt=True, return_dict=True)["input_ids"]
    assert loaded.caps.stepper.sequence_strings(ids)[:3] == ["<|im_start|>", "system", "you"]
    p = D.prepare_prompt(loaded.caps.stepper, "what is it ?", 10, chat=True, system="a " * 600)
    assert p.system == ("a " * 600)[:D.MAX_SYSTEM] and "1,200 characters; only its first 1,000" in p.notes[0]
    assert p.tokens[:4] == ("<|im_start|>", "system", "a", "a") and p.tokens.count("a") == 500
    assert [t for t, s in zip(p.tokens, p.special) if s] == ["<|im_start|>", "<|im_end|>"] * 2 + ["<|im_start|>"]
    with pytest.raises(DecodingError, match="does not fit in the model's 1,024 positions"):  # not cut: refused
        D.prepare_prompt(loaded.caps.stepper, "the red car " * 400, 10, chat=True)


@pytest.mark.parametrize("strategy", [Strategy("greedy"), Strategy("top-p", top_p=0.8), Strategy("beam", num_beams=3)],
                         ids=lambda s: s.kind)
def test_chat_wrapped_prompt_same_tokens_as_model_generate(strategy):
    """The probe wraps the prompt in the chat template; decoding it equals model.generate on the ids the tokenizer's
    apply_chat_template gives, stopping at the model's end token (<|im_end|>)."""
    loaded = tiny_chat_llama()
    for system in ("", "you are a pirate"):
        run = D.decode_all(loaded, "what is the red car ?", (strategy,), SEED, 12, 2, True, True, system)
        messages = ([{"role": "system", "content": system}] if system else []) + \
            [{"role": "user", "content": "what is the red car ?"}]
        ids = loaded.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                   return_dict=True)["input_ids"]
        assert list(run.prompt_ids) == ids and run.chat and run.prompt_text == "what is the red car ?"
        assert run.system == (system or "you are a small robot")
        ref = reference_generate(loaded.caps.stepper, tuple(ids), strategy, SEED, 12, 2 if strategy.do_sample else 1)
        assert [list(o.ids) for o in run.generations[0].outputs] == ref, (strategy.label, system)
        assert not any("may stop at once" in n for n in run.notes)


def test_empty_prompt_names_its_start_token():
    loaded = tiny_chat_llama()
    p = D.prepare_prompt(loaded.caps.stepper, "", 5)
    assert p.model_input == (1,) and p.tokens == ("<|im_start|>",) and p.special == (True,)
    assert p.start_note == p.notes[0] == (
        "Empty prompt: generation starts from the beginning-of-sequence token alone, <|im_start|> (the tokenizer's), "
        "which this chat model uses to open a turn: its chat template writes <|im_start|> before every message, so "
        "the model continues as if a new turn began.")
    lstm = D.prepare_prompt(load_model("builtin:lstm-lm").caps.stepper, "", 5)
    assert lstm.start_note == ("Empty prompt: generation starts from the beginning-of-sequence token alone, <bos> "
                               "(the model's), the token that starts every text it was trained on.")
    # chat: an empty message is an empty user turn, said so
    p = D.prepare_prompt(loaded.caps.stepper, "", 5, chat=True)
    assert "Empty message" in p.notes[0] and p.tokens[-2:] == ("<|im_start|>", "assistant")
    with pytest.raises(DecodingError, match="no chat template"):
        D.prepare_prompt(tiny_gpt2().caps.stepper, "x", 5, chat=True)


def test_large_models_open_with_fewer_tokens():
    assert D.first_open(tiny_gpt2()) == {}
    big = LoadedModel("x:big", "decoder", torch.nn.Linear(8000, 7000), "cpu", "float32")  # 56 M parameters
    assert D.first_open(big) == D.LARGE_DEFAULTS == {"max_new": 20, "n": 3}




@needs_smollm2
def test_smollm2_chat_greedy_equals_model_generate():
    loaded = load_model("pretrained:smollm2")
    text = "What is the capital of France?"
    run = D.decode_all(loaded, text, (Strategy("greedy"),), SEED, 12, 1, True, True, "")
    ids = loaded.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                               add_generation_prompt=True, return_dict=True)["input_ids"]
    assert list(run.prompt_ids) == ids
    out = run.generations[0].outputs[0]
    assert list(out.ids) == reference_generate(loaded.caps.stepper, tuple(ids), Strategy("greedy"), SEED, 12)[0]
    assert out.ids[-1] == 2 and out.tokens[-1] == "<|im_end|>"  # stopped at the model's end-of-turn token
    template = D.chat_template(loaded)
    assert template.default_system == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert run.system == template.default_system and template.opener == "<|im_start|>"
    raw = D.decode_all(loaded, "The capital of France is", (Strategy("greedy"),), SEED, 8)
    assert list(raw.generations[0].outputs[0].ids) == reference_generate(
        loaded.caps.stepper, raw.prompt_ids, Strategy("greedy"), SEED, 8)[0]


# ----------------------------------------------------------------------------- every strategy in one loop
class _Counting:
    """Wraps an adapter, counting its forward calls (start and step) and the rows of each."""

    def __init__(self, adapter) -> None:
        self._adapter, self.calls = adapter, []

    def __getattr__(self, name):
        return getattr(self._adapter, name)

    def start(self, ids, record=False):
        self.calls.append(("start", ids.shape[0]))
        return self._adapter.start(ids, record)

    def step(self, state, tokens, record=False):
        self.calls.append(("step", tokens.shape[0]))
        return self._adapter.step(state, tokens, record)


def test_every_strategy_in_one_loop_equals_its_own_model_generate(gpt2):
    """All of STRATEGIES at once (sampling ones with 3 samples each): one forward per step for every row, the prompt
    read once; each strategy's rows equal model.generate run for it alone with the same seed."""
    adapter = _Counting(gpt2.caps.stepper)
    ids = (5, 6, 7)
    gens = D.generate_all(adapter, prompt_for(ids), STRATEGIES, SEED, n=3)
    for strategy, gen in zip(STRATEGIES, gens):
        n = 3 if strategy.do_sample else 1
        ref = reference_generate(gpt2.caps.stepper, ids, strategy, SEED, MAX_NEW, n)
        assert [list(o.ids) for o in gen.outputs] == ref, strategy.label
    rows = sum(3 if s.do_sample else (s.num_beams if s.kind == "beam" else 1) for s in STRATEGIES)
    assert adapter.calls[0] == ("start", 1)  # the prompt read once, for every row
    steps = [r for kind, r in adapter.calls if kind == "step"]
    assert steps[0] == rows and len(steps) <= MAX_NEW - 1 and steps == sorted(steps, reverse=True)  # ended tracks leave


@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_every_strategy_in_one_loop_on_an_encoder_decoder(kind):
    loaded = _hf_seq2seq(kind)
    adapter = loaded.caps.stepper
    src = (5, 6, 7, 8, adapter.eos_ids[0])
    strategies = (Strategy("greedy"), Strategy("top-p", top_p=0.9), Strategy("beam", num_beams=3),
                  Strategy("sample", temperature=1.5))
    gens = D.generate_all(adapter, D.Prompt(src, adapter.decoder_start, (), (), 12), strategies, SEED, n=2)
    for s, gen in zip(strategies, gens):
        n = 2 if s.do_sample else 1
        assert [list(o.ids) for o in gen.outputs] == reference_generate(adapter, src, s, SEED, 12, n), (kind, s.label)


@needs_smollm2
def test_the_default_decoding_view_on_smollm2_in_one_loop_equals_generate():
    """The view's defaults on the real model (greedy, top-k, top-p, beam; 3 samples; 20 new tokens): every row equals
    model.generate for its strategy alone."""
    loaded = load_model("pretrained:smollm2")
    adapter = loaded.caps.stepper
    defaults = D.first_open(loaded)
    prompt = D.prepare_prompt(adapter, "The capital of France is", defaults["max_new"])
    strategies = tuple(Strategy(k) for k in BY_PATH["decoding-strategies"].params["strategies"].default)
    gens = D.generate_all(adapter, prompt, strategies, SEED, n=defaults["n"])
    for s, gen in zip(strategies, gens):
        n = defaults["n"] if s.do_sample else 1
        ref = reference_generate(adapter, prompt.model_input, s, SEED, prompt.max_new, n)
        assert [list(o.ids) for o in gen.outputs] == ref, s.label


def test_a_long_prompt_is_cut_to_the_request_budget(monkeypatch):
    """A prompt whose generation the budget prices too dear keeps its last tokens (a note names the settings); the
    cut prompt is priced within the budget; a chat message is refused instead; a cheap prompt is left alone."""
    from explorer.runtime import budget

    loaded = load_model("builtin:tiny-gpt")
    monkeypatch.setattr(D, "PROMPT_KEPT", 4)  # tiny-gpt reads 64 tokens: a cut keeps the default 64 of none
    text = " ".join(["the dog runs near the cat"] * 10)
    strategies = (Strategy("greedy"), Strategy("top-k"), Strategy("beam", num_beams=4))
    whole = D.decode_all(loaded, text, strategies, SEED, max_new=10, n=3)
    assert not [n for n in whole.notes if "EXPLORER_REQUEST" in n]
    monkeypatch.setenv("EXPLORER_REQUEST_MB", "0.35")
    cut = D.decode_all(loaded, text, strategies, SEED, max_new=10, n=3)
    note = next(n for n in cut.notes if "EXPLORER_REQUEST_MB" in n)
    kept = len(cut.prompt_ids)
    assert f"only its last {kept} are read" in note and "for 8 rows" in note, note  # greedy 1 + top-k 3 + beam 4
    assert 0 < kept < len(whole.prompt_ids) and cut.prompt_ids == whole.prompt_ids[-kept:]
    shape = budget.shape_of(loaded.model)
    assert budget.generation(shape, kept, 8, 10).within() and not budget.generation(shape, kept + 1, 8, 10).within()
    monkeypatch.setenv("EXPLORER_REQUEST_MB", "0.01")  # not even one token fits
    with pytest.raises(budget.RequestOverBudget, match="fewer new tokens, samples or strategies"):
        D.decode_all(loaded, text, strategies, SEED, max_new=10, n=3)


def test_a_generation_over_the_budget_makes_fewer_new_tokens(monkeypatch):
    """When even a short prompt's rows cost more than the budget (a slower machine than the defaults were sized on),
    each row generates the new tokens that fit, with a note, instead of the page being refused; the rows are the
    same as a run asked for that many tokens."""
    from explorer.runtime import budget

    loaded = load_model("builtin:tiny-gpt")
    text = "the dog runs near the cat"
    strategies = (Strategy("greedy"), Strategy("top-k"), Strategy("beam", num_beams=4))
    whole = D.decode_all(loaded, text, strategies, SEED, max_new=12, n=3)
    has = len(whole.prompt_ids)
    fits = budget.generation(budget.shape_of(loaded.model), has, 8, 5).bytes
    monkeypatch.setenv("EXPLORER_REQUEST_MB", str(fits / 2**20))
    fewer = D.decode_all(loaded, text, strategies, SEED, max_new=12, n=3)
    note = next(n for n in fewer.notes if "EXPLORER_REQUEST_MB" in n)
    assert "generating 12 tokens for 8 rows" in note and "each row generates 5 new tokens" in note, note
    assert "only its last" not in note and fewer.prompt_ids == whole.prompt_ids
    monkeypatch.delenv("EXPLORER_REQUEST_MB")
    asked = D.decode_all(loaded, text, strategies, SEED, max_new=5, n=3)
    assert [[o.ids for o in g.outputs] for g in fewer.generations] == \
        [[o.ids for o in g.outputs] for g in asked.generations]
    assert all(len(o.ids) <= 5 for g in fewer.generations for o in g.outputs)


@needs_smollm2
def test_a_3000_character_prompt_on_smollm2_is_cut_to_a_few_seconds():
    """Before: 102 s of CPU for one rerun. Now the prompt keeps the tokens the budget prices within 5 s."""
    import time

    from explorer.runtime import budget

    loaded = load_model("pretrained:smollm2")
    text = ("The teacher asked the class why the small dog near the old bridge was barking at the birds. " * 34)[:3000]
    strategies = tuple(Strategy(k) for k in ("greedy", "top-k", "top-p", "beam"))
    start = time.process_time()
    run = D.decode_all(loaded, text, strategies, SEED, max_new=20, n=3)
    cpu = time.process_time() - start
    note = next(n for n in run.notes if "EXPLORER_REQUEST_SECONDS" in n)
    assert "only its last" in note and 50 < len(run.prompt_ids) < 600, (note, len(run.prompt_ids))
    assert budget.generation(budget.shape_of(loaded.model), len(run.prompt_ids), 11, 20).within()
    assert cpu < 4 * budget.request_seconds(), cpu  # priced at 5 s; generous for a loaded machine


def test_the_prompt_is_read_once_for_the_run_and_its_step_view():
    """decode_all reads the prompt once and keeps its state (read_prompt): the step view and a rerun with other
    settings start from a copy, with the same numbers as a prompt read afresh; progress says it is reading the
    prompt before the first token, then hands over each strategy's text so far."""
    loaded = load_model("builtin:tiny-gpt")
    adapter = D.generator(loaded)
    strategies = (Strategy("greedy"), Strategy("top-k"), Strategy("beam", num_beams=3))
    seen = []
    run = D.decode_all(loaded, "the dog runs near the", strategies, SEED, max_new=6, n=2,
                       progress=lambda fraction, what, shown=None: seen.append((fraction, what, shown)))
    assert seen[0] == (0.0, f"reading the {len(run.prompt_ids)}-token prompt", None)
    assert all(len(shown) == 3 for _, _, shown in seen[1:]) and len(seen) > 2
    assert model_state.peek(adapter, "prompt states", tuple(run.prompt_ids)) is not None
    again = D.decode_all(loaded, "the dog runs near the", strategies, SEED, max_new=6, n=2)  # from the kept state
    assert [[o.ids for o in g.outputs] for g in again.generations] == \
        [[o.ids for o in g.outputs] for g in run.generations]
    g = run.generations[0]
    cached = D.step_view(loaded, run.prompt_ids, run.start_ids, g.outputs[0].ids, g.strategy, 3, 1.0)
    assert model_state.forget(adapter, "prompt states") == 1  # D.PROMPT_STATES, of which one prompt
    fresh = D.step_view(loaded, run.prompt_ids, run.start_ids, g.outputs[0].ids, g.strategy, 3, 1.0)
    np.testing.assert_array_equal(cached.logits, fresh.logits)
    assert (cached.chosen, cached.chosen_prob, cached.log_z) == (fresh.chosen, fresh.chosen_prob, fresh.log_z)


def test_the_builtin_translation_models_decode_in_the_view() -> None:
    """The decoding view offers the built-in RNN encoder-decoders (capability `stepper`): greedy in the view is the
    seq2seq view's own greedy translation, and the step view's context is what the decoder read (its start token
    and its own output, in the target vocabulary), not the source."""
    from explorer.probes.seq2seq import alignment_trace

    loaded = load_model("builtin:seq2seq-bahdanau")
    assert "stepper" in loaded.caps.names and set(BY_PATH["decoding-strategies"].needs or ()) <= loaded.caps.names
    text = "the agreement on the european economic area was signed in august 1992 ."
    run = D.decode_all(loaded, text, (Strategy("greedy"), Strategy("beam", num_beams=4)), max_new=30)
    greedy = run.generations[0].outputs[0]
    own = alignment_trace(loaded, text, decoding="greedy")
    assert greedy.ids and tuple(greedy.ids) == tuple(own.out_ids)
    assert run.is_encoder_decoder and run.start_ids == tuple(loaded.caps.stepper.decoder_start)
    assert run.prompt_text == text  # the source, not its ids read in the target vocabulary
    from explorer.viz.decoding_strategies import logprob_lines
    from explorer.viz.theme import NORMAL

    fig = logprob_lines(["greedy"], [greedy.logprobs], NORMAL, run.prompt_text, source=True)
    assert fig.layout.title.text == "Log p of each output token for “…signed in august 1992 .”"
    sv = D.step_view(loaded, run.prompt_ids, run.start_ids, greedy.ids, Strategy("greedy"), 2, 1.0)
    target = loaded.caps.stepper.sequence_strings(list(run.start_ids) + list(greedy.ids[:2]))
    assert sv.context == tuple(target) and sv.chosen == greedy.ids[2]
