"""The per-request budget (explorer.runtime.budget): a model's shape read from what is there, prices that grow as
the work does, the largest text that fits, refusals naming the limit and its setting; and the self-attention view
cut to the budget before it runs, keeping no more than it priced."""
from __future__ import annotations

import pytest
import torch

from conftest import needs_smollm2
from explorer.loading.loaders import load_model
from explorer.probes import self_attention as SA
from explorer.probes.self_attention import attention_trace
from explorer.runtime import budget
from explorer.runtime.result_cache import nbytes
from families import tiny_model


def test_shape_is_read_from_a_config_or_the_modules() -> None:
    llama = tiny_model("LlamaForCausalLM", 100, seed=0, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2)
    shape = budget.shape_of(llama)
    assert (shape.layers, shape.width, shape.heads) == (3, 32, 4)
    assert shape.params == sum(p.numel() for p in {id(p): p for p in llama.parameters()}.values())

    class Plain(torch.nn.Module):  # no config: its attention modules say it
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(torch.nn.MultiheadAttention(16, 2) for _ in range(5))

    plain = budget.shape_of(Plain())
    assert (plain.layers, plain.width, plain.heads) == (5, 16, 2)
    lstm = budget.shape_of(torch.nn.LSTM(8, 8))
    assert (lstm.layers, lstm.heads) == (1, 0) and lstm.params == 4 * 8 * (8 + 8 + 2)
    assert budget.shape_of(None) == budget.Shape(0, 0, 0, 0)


def test_a_price_is_in_seconds_of_the_models_device(monkeypatch) -> None:
    """A model's Shape says where its parameters are; its prices are that device's seconds (a GPU's rate is measured
    on the GPU), and a refusal says whose seconds it counted."""
    half = budget.shape_of(torch.nn.Linear(4, 4).to(torch.bfloat16))
    assert (half.device, half.dtype) == ("cpu", torch.bfloat16)
    assert budget.shape_of(torch.nn.Linear(4, 4)).dtype == torch.float32
    rates = {"cpu": 1e10, "cuda": 1e13}
    monkeypatch.setattr(budget, "throughput", lambda device="cpu", dtype=torch.float32: rates[device])
    cpu = budget.Shape(params=10_000_000, layers=6, width=256, heads=8)
    gpu = budget.Shape(params=10_000_000, layers=6, width=256, heads=8, device="cuda", dtype=torch.bfloat16)
    calls = 6 * budget.LAYER_CALL_S
    assert budget.forward(gpu, 500).seconds - calls == pytest.approx((budget.forward(cpu, 500).seconds - calls) / 1000)
    assert budget.forward(gpu, 500).device == "cuda" and budget.generation(gpu, 20, 4, 10).device == "cuda"
    assert "5 s of CPU" in budget.limits() and "5 s of GPU" in budget.limits(device="cuda")
    monkeypatch.setenv("EXPLORER_REQUEST_SECONDS", "0.001")
    with pytest.raises(budget.RequestOverBudget, match="0.001 s of GPU"):
        budget.check(budget.forward(gpu, 500), "This")


def test_prices_grow_with_the_work() -> None:
    shape = budget.Shape(params=10_000_000, layers=6, width=256, heads=8)
    one = budget.forward(shape, 100)
    assert budget.forward(shape, 200).seconds > 2 * one.seconds - 6 * budget.LAYER_CALL_S  # T and T² terms
    assert budget.forward(shape, 100, rows=4).seconds == pytest.approx(4 * one.seconds - 3 * 6 * budget.LAYER_CALL_S)
    with_grad = budget.forward(shape, 100, backward=True)
    assert with_grad.seconds > 2.5 * (one.seconds - 6 * budget.LAYER_CALL_S) and with_grad.bytes > one.bytes
    assert budget.forward(shape, 100, kept=10**9).bytes == one.bytes + 10**9
    assert budget.forward(shape, 100, kept=10**9, transient=5).kept == 10**9
    assert budget.forward(shape, 100, kept=10**9, transient=5).bytes == one.bytes + 10**9 + 5
    assert budget.attention_bytes(shape, 100, arrays=2) == 2 * 6 * 8 * 100 * 100 * 4


def test_fit_tokens_finds_the_largest_text_within_the_budget(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_REQUEST_MB", "2")
    shape = budget.Shape(params=1_000, layers=4, width=64, heads=4)

    def price(t: int) -> budget.Price:
        return budget.forward(shape, t, kept=budget.attention_bytes(shape, t))

    cap = budget.fit_tokens(price, 4096)
    assert price(cap).within() and not price(cap + 1).within()
    assert max(t for t in range(1, 4097) if price(t).within()) == cap
    assert "EXPLORER_REQUEST_MB" in cap.why and "2 MB" in cap.why and "EXPLORER_SESSION_RESULTS_MB" in cap.why
    whole = budget.fit_tokens(price, 10)
    assert whole == 10 and whole.why == "this view's limit"


def test_check_refuses_naming_the_limit_and_its_settings(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_REQUEST_SECONDS", "2")
    budget.check(budget.Price(1.9, 10), "A run")
    with pytest.raises(budget.RequestOverBudget) as err:
        budget.check(budget.Price(7.25, 600 * 2**20), "Decoding this prompt", "Shorten it.")
    message = str(err.value)
    assert message.startswith("Decoding this prompt would take ~7.2 s and ~600 MB, over this server's budget per "
                              "request: 2 s of CPU, 400 MB, a result of 128 MB")
    assert "EXPLORER_REQUEST_SECONDS" in message
    monkeypatch.setenv("EXPLORER_SESSION_RESULTS_MB", "10")
    assert not budget.Price(0.1, 10, kept=11 * 2**20).within()  # a result no session could keep: priced too dear
    assert message.endswith("Shorten it.") and budget.RequestOverBudget.alert == "warning"
    monkeypatch.setenv("EXPLORER_REQUEST_SECONDS", "nonsense")
    assert budget.request_seconds() == 5.0


def test_self_attention_reads_only_what_fits_and_keeps_no_more_than_it_priced(monkeypatch) -> None:
    loaded = load_model("builtin:tiny-gpt")
    text = " ".join(["the dog runs"] * 20)  # 60 words: the model reads 64 tokens at most
    whole = attention_trace(loaded, text)
    assert len(whole.tokens) > 40 and not [n for n in whole.notes if "EXPLORER_REQUEST" in n]
    monkeypatch.setenv("EXPLORER_REQUEST_MB", "0.1")
    shape = budget.shape_of(loaded.model)
    cut = attention_trace(loaded, text)
    n = len(cut.tokens)
    priced = SA.price(shape, n)
    assert 5 < n < len(whole.tokens) and priced.within() and not SA.price(shape, n + 1).within()
    assert any(f"has 60 tokens; only the first {n - 1} are used" in note  # the text's tokens: <bos> is not typed
               and "0.1 MB, a result of" in note and "EXPLORER_REQUEST_MB" in note for note in cut.notes), cut.notes
    assert nbytes(cut) <= priced.kept + 64 * 1024  # its arrays, and the tokens and notes of any trace
    assert torch.allclose(torch.as_tensor(cut.attentions[:, :, :n, :n]).float(),
                          torch.as_tensor(whole.attentions[:, :, :n, :n]).float(), atol=1e-6)  # causal: the same


@needs_smollm2
def test_smollm2_shape_and_a_long_sentence_cut_to_the_budget() -> None:
    loaded = load_model("pretrained:smollm2")
    shape = budget.shape_of(loaded.model)
    assert (shape.layers, shape.width, shape.heads) == (30, 576, 9) and 134e6 < shape.params < 136e6
    cap = budget.fit_tokens(lambda t: SA.price(shape, t), 8192)
    assert 100 < cap < 1024  # a 1,024-token sentence (3.3 GB before) is cut
    assert SA.price(shape, cap).kept <= budget.session_result_bytes()  # its result stays in the session's cache


def test_contextual_embeddings_and_the_rotary_panel_read_only_what_fits(monkeypatch) -> None:
    """The other views that run the whole model on the typed text: cut to the budget with a note, as self-attention."""
    from explorer.probes.contextual_embeddings import contextual

    loaded = load_model("builtin:tiny-gpt")
    text = " ".join(["the dog runs"] * 20)
    whole = contextual(loaded, text)
    monkeypatch.setenv("EXPLORER_REQUEST_MB", "0.3")
    cut = contextual(loaded, text)
    cap = budget.cap_tokens(loaded.model, 64)
    assert len(cut.tokens) == cap < len(whole.tokens), (len(cut.tokens), int(cap), len(whole.tokens))
    assert any("EXPLORER_REQUEST_MB" in n and "only the first" in n for n in cut.notes), cut.notes
    shape = budget.shape_of(loaded.model)
    assert budget.forward(shape, cap, kept=budget.layer_bytes(shape, cap, 2),
                          transient=budget.layer_bytes(shape, cap, 2)).within()


@pytest.mark.parametrize("model_id, probe", [("builtin:tiny-gpt", "lens"), ("builtin:masked-lm", "masked"),
                                             ("builtin:seq2seq-bahdanau", "seq2seq")])
def test_the_lens_masked_words_and_seq2seq_read_what_the_budget_prices(model_id, probe, monkeypatch) -> None:
    """Each view's work is priced from the tokens it reads: above the budget the text is cut to the tokens that
    fit, with a note that names the settings; within it, the whole text is read."""
    from explorer.loading.loaders import load_model
    from explorer.probes.logit_lens import logit_lens
    from explorer.probes.masked_words import masked_fill
    from explorer.probes.seq2seq import alignment_trace

    loaded = load_model(model_id)
    text = " ".join(["the cat sat on the [MASK] ."] * 6) if probe == "masked" else \
        " ".join(["the red car is fast ."] * 6)
    run = {"lens": lambda: logit_lens(loaded, text), "masked": lambda: masked_fill(loaded, text),
           "seq2seq": lambda: alignment_trace(loaded, text)}[probe]

    def read(trace) -> int:
        return len(trace.src_tokens if probe == "seq2seq" else trace.tokens)

    whole = run()
    assert not any("budget per request" in n for n in whole.notes)
    monkeypatch.setenv("EXPLORER_REQUEST_SECONDS", "1e-9")
    cut = run()
    said = " ".join(cut.notes)
    assert "this server's budget per request" in said and "EXPLORER_REQUEST_SECONDS" in said, said
    assert read(cut) < read(whole)
