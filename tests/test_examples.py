"""Each model's example sentences (explorer.data.examples): the views' defaults and presets come from the loaded model,
in its own vocabulary; unknown words are named and marked; the decoding view's prompt, hint and min_new_tokens."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from conftest import assert_no_exception, run_page, needs_smollm2
from explorer.adapters import examples as AE
from explorer.data import examples as E
from explorer.text.escape import md_unescape
from explorer.adapters.text import Encoded
from explorer.loading.catalogue import builtin_names
from explorer.data import english, translation
from explorer.data.vocab import tokenize_words
from explorer.adapters.generation import Strategy
from explorer.loading.loaders import load_model
from explorer.probes import decoding_strategies as D
from explorer.probes.lstm_gates import rnn_gates
from explorer.views import BY_PATH, KINDS, VIEWS
from testkit.view_cases import CASES

SENTENCE_VIEWS = [v for v in VIEWS if "text" in v.params and v.sentences]
_MODELS: dict[tuple[str, str | None], object] = {}


def model(model_id: str, task: str | None = None):
    if (model_id, task) not in _MODELS:
        _MODELS[model_id, task] = load_model(model_id, task=task)
    return _MODELS[model_id, task]


def default_model(view) -> str:
    p = view.params.get("model") or view.params["models"]
    return p.default if isinstance(p.default, str) else p.default[0]


def test_every_sentence_view_declares_a_purpose() -> None:
    assert {v.url_path for v in SENTENCE_VIEWS} == {v.url_path for v in VIEWS if "text" in v.params}
    assert all(v.sentences in E.PURPOSES for v in SENTENCE_VIEWS)


@pytest.mark.parametrize("view", SENTENCE_VIEWS, ids=lambda v: v.url_path)
def test_default_sentence_has_no_unknown_word_for_the_default_model(view) -> None:
    loaded = model(default_model(view), "masked-lm" if view.url_path == "masked-words" else None)
    ex = loaded.adapter.examples(view.sentences)
    assert ex.sentences and not ex.note
    for sentence in ex.sentences:
        enc = loaded.adapter.encode(sentence)
        assert enc.n_unknown == 0 and enc.ids, (view.url_path, sentence, enc.notes)


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_examples_are_their_own_language(name: str) -> None:
    loaded = model(f"builtin:{name}")
    language = AE.language_of(loaded)
    assert language == loaded.meta["corpus"]["generator"]
    purposes = {v.sentences for v in SENTENCE_VIEWS if set(v.needs or ()) <= loaded.caps.names}  # its views
    assert purposes
    for purpose in purposes:
        ex = loaded.adapter.examples(purpose)
        assert not ex.note and ex.language == language, (name, purpose)
        for sentence in ex.sentences:
            assert loaded.adapter.encode(sentence).n_unknown == 0, (name, purpose, sentence)


def test_english_examples_are_words_of_the_generated_language() -> None:
    words = set(english.vocabulary())
    for purpose, sentences in E.ENGLISH.items():
        for sentence in sentences:
            assert set(tokenize_words(sentence.replace("[MASK]", ""))) <= words, (purpose, sentence)


def test_real_english_examples_are_words_the_real_english_models_know() -> None:
    from explorer.data import wordnet_english
    from explorer.data.vocab import Vocab

    known = set(Vocab.build([list(s) for s in wordnet_english.sentences("train")], max_size=12_000).itos)
    for purpose, sentences in E.WORDNET.items():
        for sentence in sentences:
            assert set(tokenize_words(sentence.replace("[MASK]", ""))) <= known, (purpose, sentence)


def test_purposes_say_what_they_are() -> None:
    for lang in ("english", "natural", "wordnet"):
        assert all(not s.rstrip().endswith((".", "?", "!")) for s in E.sentences(lang, "prompt"))
        assert all("[MASK]" in s for s in E.sentences(lang, "masked"))
    # the translation default changes word order: its gold alignment crosses
    src = translation.tokenize(E.sentences("translation", "translation")[0])
    _, align = translation.translate_with_alignment(src)
    assert any(i < k and j > m for i, j in align for k, m in align)
    assert model("builtin:seq2seq-bahdanau").adapter.examples("translation").default == translation.PRESETS[0]


def test_hugging_face_models_get_natural_english() -> None:
    minilm = model("pretrained:minilm")
    assert AE.language_of(minilm) == "natural"
    assert minilm.adapter.examples("attention").sentences == E.NATURAL["attention"]
    assert minilm.adapter.examples("order").default == "The dog bit the man."


class WordAdapter:
    """A user's checkpoint whose vocabulary is a set of words (no corpus in its meta)."""

    def __init__(self, words: set[str]) -> None:
        self.id, self.loaded, self.words = "upload:test", SimpleNamespace(meta={}), words

    def encode(self, text: str) -> Encoded:
        toks = tuple(tokenize_words(text))
        return Encoded((0,) * len(toks), toks, (), False, sum(t not in self.words for t in toks))


def test_unknown_vocabulary_gets_the_sentences_it_reads_or_a_note() -> None:
    own = E.ENGLISH["agreement"][3]  # in no natural-English example
    ex = AE.for_model(WordAdapter(set(tokenize_words(own))), "agreement")
    assert ex.sentences == (own,) and not ex.note and ex.language == "english"
    none = AE.for_model(WordAdapter({"the"}), "agreement")
    assert none.sentences and "None of the example sentences" in none.note
    with pytest.raises(ValueError):
        AE.for_model(WordAdapter(set()), "nonsense")


# ------------------------------------------------------------------------------------------ unknown words
def test_unknown_words_are_named_and_marked() -> None:
    lm = model("builtin:lstm-lm")
    enc = lm.adapter.encode("the zzqx is on the table .")
    assert "zzqx→<unk>" in enc.tokens and enc.ids[enc.tokens.index("zzqx→<unk>")] == lm.adapter.vocab.unk_id
    assert any("zzqx" in n and "zzqx→<unk>" in n for n in enc.notes)
    trace = rnn_gates(lm, "the zzqx is on the table .")
    assert "zzqx→<unk>" in trace.tokens  # the charts' labels
    s2s = model("builtin:seq2seq-bahdanau").adapter.encode("the zzqx is red .")
    assert "zzqx→<unk>" in s2s.tokens and any("zzqx" in n for n in s2s.notes)
    minilm = model("pretrained:minilm").adapter.encode("a 🦘 here")
    if minilm.n_unknown:
        assert "🦘→[UNK]" in minilm.tokens and any("🦘→[UNK]" in n for n in minilm.notes)


# a built-in word-level model each view offers, and extra URL state to reach its sentence (testkit/view_cases.py)
OOV_PAGES = {path: case.word_level for path, case in CASES.items() if case.word_level}


@pytest.mark.parametrize("view", SENTENCE_VIEWS, ids=lambda v: v.url_path)
def test_every_view_names_the_unknown_words(view) -> None:
    model_id, extra = OOV_PAGES[view.url_path]
    text = "the keys to the zzqx cabinet are [MASK] ." if view.url_path == "masked-words" else \
        "the keys to the zzqx cabinet are"
    at = run_page(view.script, {**({"model": model_id} if model_id else {}), "text": text, **extra})
    assert_no_exception(at)
    shown = [str(x.value) for x in list(at.warning) + list(at.info)]
    assert any("zzqx" in s for s in shown), (view.url_path, shown)


# ------------------------------------------------------------------------------------------ sentence widget
def test_presets_and_default_follow_the_model() -> None:
    page = "app_pages/lstm_gates.py"
    at = run_page(page, {"model": "builtin:lstm-lm"})
    lstm = model("builtin:lstm-lm").adapter.examples("agreement")
    assert at.text_input(key="text").value == lstm.default
    presets = [s for s in at.radio if s.label == "Example sentences"]
    assert presets and [md_unescape(o) for o in presets[0].options] == list(lstm.sentences)
    # a typed sentence is kept when the model changes
    at.text_input(key="text").set_value("the dog sleeps .").run()
    at.selectbox(key="model").set_value("builtin:gru-lm").run()
    assert_no_exception(at)
    assert at.text_input(key="text").value == "the dog sleeps ."


def test_switching_model_switches_an_untouched_default() -> None:
    at = run_page("app_pages/self_attention.py", {"mode": "head"})
    minilm = model("pretrained:minilm").adapter.examples("attention")
    assert at.text_input(key="text").value == minilm.default
    at.selectbox(key="model").set_value("builtin:tiny-gpt").run()
    assert_no_exception(at)
    gpt = model("builtin:tiny-gpt").adapter.examples("attention")
    assert at.text_input(key="text").value == gpt.default != minilm.default
    presets = [s for s in at.radio if s.label == "Example sentences"]
    assert [md_unescape(o) for o in presets[0].options] == list(gpt.sentences)


def test_a_sentence_from_the_url_is_kept_when_the_model_changes() -> None:
    minilm = model("pretrained:minilm").adapter.examples("attention")
    at = run_page("app_pages/self_attention.py", {"mode": "head", "text": minilm.default})
    at.selectbox(key="model").set_value("builtin:tiny-gpt").run()
    assert_no_exception(at)
    assert at.text_input(key="text").value == minilm.default


# ------------------------------------------------------------------------------------------ decoding
def page_strategies(kinds=("greedy", "top-k", "top-p", "beam"), **extra) -> tuple[Strategy, ...]:
    p = BY_PATH["decoding-strategies"].params
    settings = dict(temperature=p["temperature"].default, top_k=p["k"].default, top_p=p["p"].default,
                    typical_p=p["typical"].default, min_p=p["minp"].default, num_beams=p["beam"].default,
                    length_penalty=p["lp"].default, repetition_penalty=p["rep"].default,
                    no_repeat_ngram_size=p["ngram"].default, min_new_tokens=p["min_new"].default)
    return tuple(Strategy(k, **{**settings, **extra}) for k in kinds)


def test_decoding_default_prompt_gives_different_outputs() -> None:
    view = BY_PATH["decoding-strategies"]
    p = view.params
    loaded = model(p["model"].default)
    prompt = loaded.adapter.examples(view.sentences).default
    assert D.ends_sentence(prompt) is None
    sized = D.first_open(loaded)  # what the page opens with on a large model (fewer new tokens and samples)
    run = D.decode_all(loaded, prompt, page_strategies(tuple(p["strategies"].default)), p["seed"].default,
                       sized.get("max_new", p["max_new"].default), sized.get("n", p["n"].default), p["eos"].default)
    by_kind = {g.strategy.kind: g.outputs[0].ids for g in run.generations}
    assert len({by_kind["greedy"], by_kind["top-k"], by_kind["top-p"]}) == 3, by_kind
    assert all(len(ids) > 1 for ids in by_kind.values())
    assert not any("may stop at once" in n for n in run.notes)


def test_a_finished_prompt_gets_the_hint() -> None:
    loaded = model("builtin:tiny-gpt")
    run = D.decode_all(loaded, "the keys to the old cabinet are on the table .", page_strategies(("greedy",)), 0, 5)
    assert any("the model may stop at once: remove the final '.'" in n for n in run.notes)
    at = run_page("app_pages/decoding_strategies.py", {"text": "the dog sleeps .", "max_new": "3", "n": "1"})
    assert_no_exception(at)
    assert any("the model may stop at once" in str(x.value) for x in at.info)


def test_min_new_tokens_and_the_models_own_probabilities() -> None:
    loaded = model("builtin:tiny-gpt")
    adapter = loaded.adapter
    text = "the keys to the old cabinet are on the table ."
    eos = set(adapter.eos_ids)
    plain = D.decode_all(loaded, text, page_strategies(("greedy",)), 0, 8)
    assert plain.generations[0].outputs[0].ids[-1] in eos and len(plain.generations[0].outputs[0].ids) < 5
    run = D.decode_all(loaded, text, page_strategies(KINDS, min_new_tokens=5), 0, 12, n=3)
    for gen in run.generations:
        for out in gen.outputs:
            assert len(out.ids) >= 5 and not eos & set(out.ids[:5]), (gen.strategy.kind, out.tokens)
            # the log-probabilities shown are the model's own, read from one forward pass over prompt + output
            ids = list(run.prompt_ids) + list(out.ids)
            rec = adapter.run(Encoded(tuple(ids), tuple(adapter.token_strings(ids))), names=("logits",))
            lp = torch.log_softmax(torch.as_tensor(rec["logits"], dtype=torch.float64), -1).numpy()
            own = [lp[len(run.prompt_ids) - 1 + j, t] for j, t in enumerate(out.ids)]
            np.testing.assert_allclose(out.logprobs, own, atol=1e-4)


def test_min_new_tokens_is_a_declared_control() -> None:
    p = BY_PATH["decoding-strategies"].params["min_new"]
    assert p.default == 0 and p.kind == "int"
    _, notes = D.checked(Strategy("greedy", min_new_tokens=10**6), 100)
    assert notes and "limited" in notes[0]
    at = run_page("app_pages/decoding_strategies.py", {"min_new": "4", "max_new": "6", "n": "1"})
    assert_no_exception(at)
    assert at.session_state["min_new"] == 4


# ------------------------------------------------------------------------------------------ a real model


@needs_smollm2
@pytest.mark.parametrize("path", ["logit-lens", "token-attribution"])
def test_smollm2_defaults_end_where_the_prediction_is_a_word(path: str) -> None:
    """The lens and attribution views open SmolLM2 (when installed) on a prompt whose next token is a word: not a
    sentence ending in "." whose prediction is the chat end token."""
    from explorer.probes.logit_lens import logit_lens

    view = BY_PATH[path]
    assert view.params["model"].default == "pretrained:smollm2"
    loaded = model("pretrained:smollm2")
    default = loaded.adapter.examples(view.sentences).default
    assert default == "The capital of France is" and D.ends_sentence(default) is None
    trace = logit_lens(loaded, default)
    enc = loaded.adapter.encode(default)
    final = int(torch.as_tensor(loaded.adapter.run(enc, names=("logits",))["logits"][-1]).argmax())
    assert final not in set(loaded.tokenizer.all_special_ids)  # <|im_end|>, <|im_start|>, <|endoftext|>
    assert trace.final_tokens[-1] == loaded.adapter.token_strings([final])[0] == "·Paris"
    assert trace.final_tokens[-1].lstrip("·").isalpha()
    # every natural agreement prompt stops before a word, for this model too
    for sentence in loaded.adapter.examples(view.sentences).sentences:
        t = logit_lens(loaded, sentence)
        assert t.final_tokens[-1].lstrip("·").isalpha(), (sentence, t.final_tokens[-1])


def test_natural_agreement_prompts_stop_before_the_verb() -> None:
    assert all(D.ends_sentence(s) is None for s in E.NATURAL["agreement"])
    assert E.NATURAL["agreement"][0] == "The capital of France is"
    assert (E.sentences("natural", "chat") == E.NATURAL["chat"]
            and all(s.endswith((".", "?")) for s in E.NATURAL["chat"]))
