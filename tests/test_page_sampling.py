"""AppTest of app_pages/sampling.py: defaults, URL state, a local tiny GPT-2 (with and without tokenizer), bad input."""
from __future__ import annotations


import pytest
import torch

from conftest import assert_no_exception, run_page

PAGE = "app_pages/sampling.py"


def texts(at) -> str:
    parts = [x.value for x in list(at.warning) + list(at.info) + list(at.error)]
    return "\n".join(str(p) for p in parts)


def test_defaults():
    at = run_page(PAGE)
    assert_no_exception(at)
    assert not at.error
    assert any("Greedy" in m.value for m in at.markdown)
    assert "greedy,top-k,top-p,beam" in str(at.query_params["strategies"])


def test_url_params():
    params = {"model": "builtin:lstm-lm", "text": "the dog that the farmers feed", "seed": "7", "max_new": "12",
              "strategies": "greedy,sample,top-k,top-p,typical,min-p", "temperature": "0.7", "k": "5", "p": "0.8",
              "beam": "3", "n": "3", "step": "2", "col": "2"}
    at = run_page(PAGE, params)
    assert_no_exception(at)
    assert not at.error
    assert at.session_state["seed"] == 7 and at.session_state["k"] == 5
    assert at.session_state["temperature"] == pytest.approx(0.7)
    heads = [m.value for m in at.markdown if m.value.startswith("**")]
    assert any("k=5, T=0.7" in h for h in heads) and len([h for h in heads if "(" in h or "Greedy" in h]) >= 6


def test_bad_inputs():
    params = {"model": "builtin:lstm-lm", "text": "", "temperature": "0", "p": "1.5", "k": "100000",
              "beam": "50", "max_new": "100000", "strategies": "greedy,bogus,beam"}
    at = run_page(PAGE, params)
    assert_no_exception(at)
    msg = texts(at)
    for said in ("Temperature T must be at least 0.05; got 0, using 0.05.", "Top-p: p is limited to 1 here; got 1.5",
                 "Top-k: k is limited to 1,000 here; got 100,000", "Beams is limited to 8 here; got 50, using 8.",
                 "New tokens is limited to 200 here; got 100,000, using 200."):
        assert said in msg, said  # each out-of-range URL value is named with what was used, from the declaration
    assert "Empty prompt" in msg
    # emoji, control characters, one strategy only
    at = run_page(PAGE, {"model": "builtin:lstm-lm", "text": "🙂 the\x00 dog\u200b runs", "strategies": "greedy"})
    assert_no_exception(at)
    assert "second strategy" in texts(at)


def _save_gpt2(folder, with_tokenizer: bool) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    words = ["<unk>", "<eos>", "time", "goes", "by", "so", "the", "a", "dog", "runs", "fast", "and", "slow", "."]
    cfg = GPT2Config(vocab_size=len(words), n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=1,
                     eos_token_id=1, pad_token_id=1, initializer_range=0.2)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    if with_tokenizer:
        from tokenizers import Tokenizer
        from tokenizers.models import WordLevel
        from tokenizers.pre_tokenizers import Whitespace
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
        tok.pre_tokenizer = Whitespace()
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", bos_token="<eos>",
                                       pad_token="<eos>")
        fast.save_pretrained(folder)


def test_local_tiny_gpt2(tmp_path, monkeypatch):
    _save_gpt2(tmp_path / "gpt2-tok", True)
    _save_gpt2(tmp_path / "gpt2-notok", False)
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    at = run_page(PAGE, {"model": "local:gpt2-tok", "text": "time goes by so", "max_new": "10",
                         "strategies": "greedy,top-p,min-p,beam"})
    assert_no_exception(at)
    assert not at.error, texts(at)
    # longer than the 32 positions: truncated, said so
    at = run_page(PAGE, {"model": "local:gpt2-tok", "text": "the dog runs fast and slow . " * 20, "max_new": "10"})
    assert_no_exception(at)
    assert "cut" in texts(at) or "only the first" in texts(at)
    at = run_page(PAGE, {"model": "local:gpt2-notok", "text": "time goes by so"})
    assert_no_exception(at)
    assert "cannot read text" in texts(at)


def test_metrics_table_holds_each_columns_own_metrics():
    """The one metrics table (a column per strategy) holds each column's first output's metrics, as the probe
    computed them."""
    from explorer.generation import Strategy
    from explorer.loaders import load_model
    from explorer.probes.decoding import decode_all

    text = "the dog that the farmers feed"
    at = run_page(PAGE, {"model": "builtin:tiny-gpt", "text": text, "strategies": "greedy,top-k", "seed": "0"})
    assert_no_exception(at)
    frame = next(d.value for d in at.dataframe if "metric" in d.value.columns)
    run = decode_all(load_model("builtin:tiny-gpt"), text, (Strategy("greedy"), Strategy("top-k", top_k=40)), 0, 30,
                     5, True)
    for gen in run.generations:
        m = gen.outputs[0].metrics
        assert list(frame["metric"]) == list(m)
        assert frame[gen.strategy.label].tolist() == pytest.approx([round(float(v), 4) for v in m.values()])
