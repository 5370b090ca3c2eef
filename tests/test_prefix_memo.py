"""The prefix memo: per-position results of a left-to-right model, kept under the token prefix they read, equal a
fresh computation, and typing on at the end of a sentence recomputes only the positions whose prefix changed."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.loading.loaders import LoadedModel, load_model
from explorer.runtime import model_state
from explorer.runtime.prefix_memo import prefix_memo
from explorer.probes.token_attribution import attribution
from explorer.probes.gradients_through_time import gradients_through_time
from families import tiny

SHORT = "the keys to the old cabinet"
LONGER = SHORT + " are on the table"
EDITED = "a keys to the old cabinet are on the table"  # the first word changed: no row of LONGER may be reused


def _forget(lm) -> None:
    for reader in (lm.adapter, lm.caps.lens, lm.caps.gradient):  # a memo is kept by what the probe reads
        if reader is not None:
            model_state.forget(reader)


def _common_prefix(lm, a: str, b: str) -> int:
    ids_a, ids_b = lm.adapter.encode(a).ids, lm.adapter.encode(b).ids
    return next((i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y), min(len(ids_a), len(ids_b)))


def _model(name: str):
    if name == "llama":
        model, tok, family = tiny(name)
        return LoadedModel("test:llama-memo", family, model, "cpu", "float32", {}, tokenizer=tok)
    return load_model(f"builtin:{name}")


@pytest.mark.parametrize("name", ["tiny-gpt", "lstm-lm", "llama"])
def test_attribution_reuses_the_rows_of_the_prefix_and_equals_a_fresh_computation(name):
    lm = _model(name)
    _forget(lm)
    attribution(lm, SHORT, steps=8)
    memo = prefix_memo(lm.caps.gradient, "attribution")
    stored, hits = len(memo), memo.hits
    grown = attribution(lm, LONGER, steps=8)
    common = _common_prefix(lm, SHORT, LONGER)
    # SHORT's rows whose inputs and next token are LONGER's too are reused (a tokenizer may end the text with </s>)
    assert common >= 5 and memo.hits - hits >= common - 1
    assert len(memo) - stored <= len(grown.outputs) - (common - 1)
    edited = attribution(lm, EDITED, steps=8)
    _forget(lm)
    for text, got in ((LONGER, grown), (EDITED, edited)):
        fresh = attribution(lm, text, steps=8)
        assert got.outputs == fresh.outputs and got.reach == fresh.reach
        np.testing.assert_allclose(got.integrated, fresh.integrated, atol=1e-5)
        np.testing.assert_allclose(got.gradient_x_input, fresh.gradient_x_input, atol=1e-5)
        np.testing.assert_allclose(got.value, fresh.value, atol=1e-5)
        np.testing.assert_allclose(got.baseline_value, fresh.baseline_value, atol=1e-5)
        for r, reach in enumerate(got.reach):  # nothing attributed past what each output reads
            assert np.all(got.integrated[r, reach:] == 0)


def test_attribution_of_a_changed_step_count_is_not_reused():
    lm = load_model("builtin:tiny-gpt")
    _forget(lm)
    coarse = attribution(lm, LONGER, steps=2)
    fine = attribution(lm, LONGER, steps=64)
    assert prefix_memo(lm.caps.gradient, "attribution").hits == 0
    assert np.abs(coarse.integrated - fine.integrated).max() > 1e-3
    assert fine.max_completeness < coarse.max_completeness


@pytest.mark.parametrize("name", ["rnn-lm", "lstm-lm"])
def test_gradients_through_time_reuse_the_steps_of_the_prefix(name):
    lm = load_model(f"builtin:{name}")
    _forget(lm)
    gradients_through_time(lm, SHORT)
    memo = prefix_memo(lm.adapter, "gradients")
    hits = memo.hits
    grown = gradients_through_time(lm, LONGER)
    # SHORT's inputs are <bos> + all but its last word: its Jacobians are the first ones of LONGER's
    n_short_steps = len(lm.adapter.encode(SHORT).ids) - 2
    assert memo.hits - hits == n_short_steps
    edited = gradients_through_time(lm, EDITED)
    _forget(lm)
    for text, got in ((LONGER, grown), (EDITED, edited)):
        fresh = gradients_through_time(lm, text)
        np.testing.assert_allclose(got.step_norms, fresh.step_norms, rtol=1e-6)
        np.testing.assert_allclose(got.products, fresh.products, rtol=1e-5)
        np.testing.assert_allclose(got.input_grad, fresh.input_grad, rtol=1e-6)
    assert len(grown.step_norms) == len(grown.tokens) - 1


def test_a_memo_counts_its_entries_and_goes_with_its_owner():
    class Owner:
        pass

    owner = Owner()
    memo = prefix_memo(owner, "test")
    assert prefix_memo(owner, "test") is memo  # one memo per owner and probe
    for k in range(4):
        memo.put((k,), np.full(1000, k, dtype=np.float64))
    assert len(memo) == 4 and memo.get((2,))[0] == 2 and memo.get((9,)) is None
    assert (memo.hits, memo.misses) == (1, 1)
    before = model_state.held_bytes()
    assert before >= 4 * 8000  # each entry counted by the bytes of its array
    del owner, memo
    import gc

    gc.collect()
    assert model_state.held_bytes() <= before - 4 * 8000  # the entries went with their owner


@pytest.mark.parametrize("name", ["tiny-gpt", "lstm-lm", "llama"])
def test_the_logit_lens_reuses_the_columns_of_the_prefix_and_equals_a_fresh_computation(name):
    from explorer.probes.logit_lens import logit_lens

    lm = _model(name)
    _forget(lm)
    logit_lens(lm, SHORT)
    memo = prefix_memo(lm.caps.lens, "lens:10")
    stored, hits = len(memo), memo.hits
    grown = logit_lens(lm, LONGER)
    common = _common_prefix(lm, SHORT, LONGER)
    assert common >= 5 and memo.hits - hits == common  # the shared prefix's columns are not unembedded again
    assert len(memo) - stored == len(grown.tokens) - common
    edited = logit_lens(lm, EDITED)
    _forget(lm)
    for text, got in ((LONGER, grown), (EDITED, edited)):
        fresh = logit_lens(lm, text)
        for field in ("top_tokens", "final_tokens", "topk_tokens", "layers", "tokens"):
            assert getattr(got, field) == getattr(fresh, field), field
        for field in ("top_probs", "final_prob", "topk_probs"):  # equal to float32 rounding (other matmul shapes)
            np.testing.assert_allclose(getattr(got, field), getattr(fresh, field), atol=1e-6)
        np.testing.assert_array_equal(got.final_rank, fresh.final_rank)
        assert got.lens_error == pytest.approx(fresh.lens_error, abs=1e-5)
