"""Decoding strategies: HF definitions, equality with model.generate, metrics against hand values, bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer import decoding as D
from explorer import metrics_text as MT
from explorer.adapters.causal_lm import CannotGenerate, adapter_for
from explorer.registry import BUILTIN_DIR, LoadedModel, builtin_names, load_model

SEED = 3
MAX_NEW = 20


def tiny_gpt2() -> LoadedModel:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=50, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0,
                     eos_token_id=1, pad_token_id=1, initializer_range=0.2, attn_implementation="eager")
    model = GPT2LMHeadModel(cfg).eval()
    return LoadedModel("local:tiny-gpt2", "decoder", model, "cpu", "float32")


@pytest.fixture(scope="module")
def gpt2() -> LoadedModel:
    return tiny_gpt2()


def prompt_for(lm, ids, max_new=MAX_NEW):
    return D.Prompt(tuple(ids), tuple(ids), (), (), max_new)


STRATEGIES = [
    D.Strategy("greedy"),
    D.Strategy("sample", temperature=0.7),
    D.Strategy("top-k", top_k=5),
    D.Strategy("top-p", top_p=0.8, temperature=1.3),
    D.Strategy("typical", typical_p=0.8),
    D.Strategy("min-p", min_p=0.1),
    D.Strategy("beam", num_beams=3),
    D.Strategy("beam", num_beams=4, length_penalty=0.5),
    D.Strategy("top-k", top_k=5, repetition_penalty=1.5, no_repeat_ngram_size=2),
    D.Strategy("beam", num_beams=3, repetition_penalty=1.3, no_repeat_ngram_size=2),
]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.label)
def test_same_tokens_as_model_generate(gpt2, strategy):
    lm = adapter_for(gpt2)
    ns = (1,) if not strategy.do_sample else (1, 3)
    for n in ns:
        for ids in ((5, 6, 7),) if n > 1 else ((5, 6, 7), (9,)):
            gen = D.generate(lm, prompt_for(lm, ids), strategy, SEED, n=n)
            ref = D.hf_generate(gpt2, ids, strategy, SEED, MAX_NEW, n)
            assert [list(o.ids) for o in gen.outputs] == ref, (strategy.label, n, ids)


def test_global_rng_untouched(gpt2):
    lm = adapter_for(gpt2)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    D.generate(lm, prompt_for(lm, (5,)), D.Strategy("sample"), SEED, n=2)
    assert torch.equal(torch.rand(3), expected)


def test_seq2seq_same_as_generate():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=40, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
                   pad_token_id=0, eos_token_id=1, initializer_factor=3.0)
    model = T5ForConditionalGeneration(cfg).eval()
    loaded = LoadedModel("local:tiny-t5", "encoder-decoder", model, "cpu", "float32")
    lm = adapter_for(loaded)
    assert lm.is_encoder_decoder
    src = (5, 6, 7, 8, 1)
    prompt = D.Prompt(src, (0,), (), (), 12)
    for s in (D.Strategy("greedy"), D.Strategy("top-p", top_p=0.9), D.Strategy("beam", num_beams=3)):
        gen = D.generate(lm, prompt, s, SEED)
        assert list(gen.outputs[0].ids) == D.hf_generate(loaded, src, s, SEED, 12)[0], s.label


def test_greedy_is_argmax_at_every_step(gpt2):
    lm = adapter_for(gpt2)
    gen = D.generate(lm, prompt_for(lm, (5, 6)), D.Strategy("greedy"), SEED)
    ids = [5, 6]
    for t in gen.outputs[0].ids:
        logits = gpt2.model(torch.tensor([ids])).logits[0, -1]
        assert t == int(torch.argmax(logits))
        ids.append(t)


def test_beam_one_equals_greedy(gpt2):
    lm = adapter_for(gpt2)
    for ids in ((5, 6), (12,), (3, 4, 30)):
        g = D.generate(lm, prompt_for(lm, ids), D.Strategy("greedy"), SEED).outputs[0].ids
        b = D.generate(lm, prompt_for(lm, ids), D.Strategy("beam", num_beams=1), SEED).outputs[0].ids
        assert g == b


def test_top_k_keeps_exactly_k():
    torch.manual_seed(1)
    logits = torch.randn(1, 100)
    for k in (1, 5, 40, 99):
        s = D.Strategy("top-k", top_k=k).processors(filters_only=True)(None, logits.clone())
        assert int(torch.isfinite(s).sum()) == k
        assert set(torch.topk(logits, k).indices[0].tolist()) == set(torch.isfinite(s[0]).nonzero().flatten().tolist())
    # ties: every token equal to the k-th largest logit is kept (HF's TopKLogitsWarper: scores < kth value removed)
    tied = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0]])
    s = D.Strategy("top-k", top_k=2).processors(filters_only=True)(None, tied.clone())
    assert torch.isfinite(s).sum() == 4


def test_top_p_smallest_prefix():
    rng = np.random.default_rng(0)
    for _ in range(50):
        logits = torch.tensor(rng.normal(size=(1, 30)) * 2, dtype=torch.float32)
        p = float(rng.uniform(0.05, 0.99))
        s = D.Strategy("top-p", top_p=p).processors(filters_only=True)(None, logits.clone())
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
        s = D.Strategy("top-p", top_p=p).processors(filters_only=True)(None, logits.clone())
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
    for s, word in ((D.Strategy("sample", temperature=0), "temperature"),
                    (D.Strategy("top-k", temperature=-1), "temperature"),
                    (D.Strategy("top-p", top_p=1.5), "outside"),
                    (D.Strategy("top-p", top_p=0.0), "outside"),
                    (D.Strategy("top-k", top_k=100_000), "vocabulary"),
                    (D.Strategy("beam", num_beams=50), "beams")):
        fixed, notes = s.checked(V)
        assert notes and word in notes[0], (s, notes)
        fixed.processors()  # valid now: HF's constructors accept it
    assert len(D.check_url_values({"temperature": "0", "p": "1.5", "k": "100000", "beam": "abc", "n": "5"})) == 4
    assert len(D.check_url_values({"temperature": "-1", "p": "0", "k": "100000", "beam": "99"})) == 4


def test_bad_prompts(gpt2):
    lm = adapter_for(gpt2)
    # empty prompt: start from BOS (no tokenizer needed)
    p = D.prepare_prompt(lm, gpt2, "", 10)
    assert p.model_input == (0,) and any("Empty" in n for n in p.notes)
    # no tokenizer: a clear error for real text
    with pytest.raises(D.DecodingError, match="tokenizer"):
        D.prepare_prompt(lm, gpt2, "hello", 10)
    # beam budget bounded
    p = D.prepare_prompt(lm, gpt2, "", 200)
    assert p.max_new == 63 and any("do not fit" in n for n in p.notes)
    run = D.decode_all(load_model("builtin:lstm-lm"), "the dog", (D.Strategy("beam", num_beams=8),), SEED, 200,
                       stop_at_eos=False)
    gen = run.generations[0]
    assert gen.max_new == D.BEAM_BUDGET // 8 and "bound" in gen.notes[0]
    assert len(gen.outputs[0].ids) == D.BEAM_BUDGET // 8


def test_long_prompt_truncated(tmp_path):
    loaded = load_model("builtin:lstm-lm")
    run = D.decode_all(loaded, "the dog " * 400, (D.Strategy("greedy"),), 0, 10)
    assert any("only the first" in n for n in run.notes)
    gpt = _explorer_gpt()
    run = D.decode_all(gpt, "the dog sleeps " * 30, (D.Strategy("greedy"), D.Strategy("top-k")), 0, 30,
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
    strategies = tuple(D.Strategy(k) for k in D.KINDS)
    run = D.decode_all(loaded, "a person riding a motorcycle on", strategies, 0, 15, n=3)
    assert run.prompt_tokens[0] == "<bos>"
    for g in run.generations:
        o = g.outputs[0]
        assert 1 <= len(o.ids) <= 15 and len(o.logprobs) == len(o.ids)
        assert np.all(o.logprobs <= 0)
        row = g.summary()
        assert row["self-BLEU"] is not None
        if not g.strategy.do_sample:
            assert row["self-BLEU"] == pytest.approx(1.0)
    # greedy == argmax; beam 1 == greedy on a built-in model too
    lm = adapter_for(loaded)
    pr = D.prepare_prompt(lm, loaded, "the computer which i had just put into the machine room", 15)
    g = D.generate(lm, pr, D.Strategy("greedy"), 0).outputs[0].ids
    b = D.generate(lm, pr, D.Strategy("beam", num_beams=1), 0).outputs[0].ids
    assert g == b
    # the per-step view: greedy keeps only the argmax, which is the chosen token
    sv = D.step_view(loaded, pr.model_input, pr.start, g, D.Strategy("greedy"), 0, 1.0)
    assert sv.n_kept == 1 and int(sv.ids[0]) == g[0] and sv.chosen_rank == 0
    sv = D.step_view(loaded, pr.model_input, pr.start, g, D.Strategy("top-k", top_k=7), 0, 0.5)
    assert sv.n_kept == 7 and sv.kept[:7].all() and not sv.kept[7:].any()
    assert float(sv.final.sum()) == pytest.approx(1.0, abs=1e-5)


def test_no_lm_head_is_refused():
    loaded = LoadedModel("x:y", "state-dict", None, "cpu", "float32")
    with pytest.raises(CannotGenerate):
        adapter_for(loaded)


def test_checkpoint_files_exist_or_skip():
    if "tiny-gpt" not in builtin_names():
        pytest.skip(f"builtin:tiny-gpt is not in {BUILTIN_DIR} yet")
    loaded = load_model("builtin:tiny-gpt")
    run = D.decode_all(loaded, "time goes by so", (D.Strategy("greedy"), D.Strategy("beam")), 0, 20)
    assert run.generations[0].outputs[0].ids


def test_generated_tokens_can_wrap_in_a_narrow_column():
    """Each generated token is its own span with a break opportunity after it (sub-word tokens carry no spaces),
    and long tokens may break anywhere: the side-by-side columns never overflow into each other."""
    import numpy as np

    from explorer.viz.decoding import tokens_html

    markup = tokens_html("once upon", ["a", "Ġtime", "longlonglonglonglongtoken"], np.array([-0.1, -1.0, -3.0]))
    assert markup.count("<wbr>") == 3  # after the prompt and between the three tokens
    assert "overflow-wrap:anywhere" in markup
