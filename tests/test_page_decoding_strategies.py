"""AppTest of app_pages/decoding_strategies.py: defaults, URL state, a local tiny GPT-2 (with and without tokenizer),
bad input."""
from __future__ import annotations


import pytest

from conftest import assert_no_exception, run_page, needs_smollm2
from explorer.text.escape import md_unescape
from families import GPT2_SMALL, tiny_model

PAGE = "app_pages/decoding_strategies.py"


def texts(at) -> str:
    parts = [x.value for x in list(at.warning) + list(at.info) + list(at.error)]
    return "\n".join(md_unescape(p) for p in parts)


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
    heads = [m.value for m in at.markdown if m.value.startswith("**")]  # each column's strategy and settings
    samples = [md_unescape(m.value) for m in at.markdown]  # every column's outputs in full, strategy first
    assert any("k=5, T=0.7" in h for h in heads)
    assert len([s for s in samples if "(1)" in s or s.startswith("Greedy")]) >= 6


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
    words = ["<unk>", "<eos>", "time", "goes", "by", "so", "the", "a", "dog", "runs", "fast", "and", "slow", "."]
    tiny_model("GPT2LMHeadModel", len(words), seed=0, n_positions=32, **GPT2_SMALL, n_head=2, bos_token_id=1,
               eos_token_id=1, pad_token_id=1, initializer_range=0.2).save_pretrained(folder)
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
    from explorer.adapters.generation import Strategy
    from explorer.loading.loaders import load_model
    from explorer.probes.decoding_strategies import decode_all

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


# ------------------------------------------------------------------------------------------ instruct models
def _captions(at) -> str:
    return "\n".join(md_unescape(c.value) for c in at.caption)


def test_chat_template_on_a_local_instruct_model(tmp_path, monkeypatch):
    """A model whose tokenizer has a chat template: the page says so, offers the chat toggle (off: raw text), shows
    the wrapped tokens the model reads and the template's own system prompt, read from the template."""
    from test_decoding import tiny_chat_llama

    loaded = tiny_chat_llama()
    loaded.model.save_pretrained(tmp_path / "chat-llama")
    loaded.tokenizer.save_pretrained(tmp_path / "chat-llama")
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    params = {"model": "local:chat-llama", "text": "what is the red car ?", "max_new": "5", "n": "1",
              "strategies": "greedy,beam"}
    at = run_page(PAGE, params)
    assert_no_exception(at)
    assert not at.error, texts(at)
    assert at.toggle(key="chat").value is False and at.session_state["chat"] is False
    captions = _captions(at)
    assert "local:chat-llama is an instruct model with a chat template" in captions and "raw text" in captions
    assert "prompt as the model reads it (6 tokens): what · is · the · red · car · ?" in captions
    assert "System prompt:" not in captions  # raw text: no system prompt to speak of
    assert "The prompt ends in '?'" in texts(at) and "Or turn on Chat template" in texts(at)
    at = run_page(PAGE, {**params, "chat": "1"})
    assert_no_exception(at)
    assert not at.error, texts(at)
    captions = _captions(at)
    assert "System prompt: empty: the template's own, “you are a small robot”." in captions
    assert ("the chat as the model reads it (template included) (19 tokens): <|im_start|> · system · you · are · a · "
            "small · robot · <|im_end|> · <|im_start|> · user · what · is · the · red · car · ? · <|im_end|> · "
            "<|im_start|> · assistant") in captions
    assert "after the template's own system prompt “you are a small robot”" in captions
    assert "each reply ends at <|im_end|>, the model's end-of-turn token" in captions
    assert at.text_input(key="text").label == "Message (a user turn)"
    assert "The prompt ends in" not in texts(at)  # a question is what a user turn is
    at = run_page(PAGE, {**params, "chat": "1", "system": "you are a pirate"})
    assert_no_exception(at)
    captions = _captions(at)
    assert "after the system prompt “you are a pirate”" in captions and "· pirate · <|im_end|> ·" in captions
    assert _qp(at, "system") == "you are a pirate" and _qp(at, "chat") == "1"


def _qp(at, key: str):
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def test_models_without_a_template_have_no_chat_toggle():
    at = run_page(PAGE, {"model": "builtin:lstm-lm", "text": "", "max_new": "3", "n": "1"})
    assert_no_exception(at)
    assert not [t for t in at.toggle if t.key == "chat"]
    assert ("Empty prompt: generation starts from the beginning-of-sequence token alone, <bos> (the model's)"
            in texts(at))




@needs_smollm2
def test_smollm2_is_the_default_and_opens_with_bounded_work():
    from explorer.views import BY_PATH

    assert BY_PATH["decoding-strategies"].params["model"].default == "pretrained:smollm2"
    at = run_page(PAGE)
    assert_no_exception(at)
    assert not at.error, texts(at)
    assert _qp(at, "model") == "pretrained:smollm2"
    # explorer.probes.decoding_strategies.first_open
    assert at.session_state["max_new"] == 20 and at.session_state["n"] == 3
    assert at.session_state["chat"] is False  # raw text: the same comparison as with the built-in models
    assert "pretrained:smollm2 is an instruct model with a chat template" in _captions(at)
    assert "System prompt:" not in _captions(at)  # chat mode is off: the caption comes with it
    # a value in the URL wins over the model's size
    at = run_page(PAGE, {"max_new": "7", "n": "2", "strategies": "greedy,top-k"})
    assert at.session_state["max_new"] == 7 and at.session_state["n"] == 2


@needs_smollm2
def test_smollm2_empty_prompt_names_im_start():
    at = run_page(PAGE, {"model": "pretrained:smollm2", "text": "", "max_new": "3", "n": "1",
                         "strategies": "greedy,beam"})
    assert_no_exception(at)
    assert ("Empty prompt: generation starts from the beginning-of-sequence token alone, <|im_start|> (the "
            "tokenizer's), which this chat model uses to open a turn") in texts(at)
    assert "prompt as the model reads it (1 tokens): <|im_start|>" in _captions(at)


def test_without_smollm2_the_views_open_the_builtin_gpt(monkeypatch):
    """The default model of the decoder views is pretrained:smollm2 only where it is installed; elsewhere the
    declared fallback, builtin:tiny-gpt, opens with the view's own defaults (30 tokens, 5 samples, no chat)."""
    import explorer.loading.pretrained as pretrained
    from explorer import views

    monkeypatch.setattr(pretrained, "is_installed", lambda name: False)
    fallback = views.installed_or("smollm2", "builtin:tiny-gpt")
    assert fallback == "builtin:tiny-gpt"
    for path in ("decoding-strategies", "logit-lens", "token-attribution"):
        monkeypatch.setitem(views.BY_PATH[path].params, "model", views.P("model", fallback))
    at = run_page(PAGE)
    assert_no_exception(at)
    assert not at.error, texts(at)
    assert _qp(at, "model") == "builtin:tiny-gpt" and at.session_state["max_new"] == 30 and at.session_state["n"] == 5
    assert not [t for t in at.toggle if t.key == "chat"]
    at = run_page("app_pages/logit_lens.py")
    assert_no_exception(at)
    assert at.session_state["model"] == "builtin:tiny-gpt"
