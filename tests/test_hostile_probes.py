"""Property tests: random Unicode (every category but lone surrogates, controls, long runs) through every function
that reads user text. Each returns data with consistent shapes, or raises its documented input error, never
anything else."""
from __future__ import annotations

import html

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.adapters.seq2seq_rnn import MAX_SOURCE
from explorer.adapters.text import model_max_tokens, no_text
from explorer.adapters.generation import DecodingError, Strategy
from explorer.probes import decoding_strategies as D
from explorer.data.vocab import clean_text, tokenize_words
from explorer.probes import word_embeddings as E
from explorer.probes import contextual_embeddings as CE
from explorer.probes import positional_encodings as PO
from explorer.probes import lstm_gates as RG
from explorer.probes import self_attention as SA
from explorer.probes import seq2seq as S2
from explorer.loading.catalogue import builtin_names
from explorer.loading.loaders import load_model
from explorer.viz import self_attention as VA
from explorer.viz import decoding_strategies as VD
from explorer.viz import lstm_gates as VR
from explorer.viz import seq2seq as VS
from hostile import HOSTILE_TEXTS

# derandomize: the same examples on every run, so CI is reproducible (explore with a larger max_examples locally)
FAST = settings(max_examples=30, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

ANY_CHAR = st.characters(exclude_categories=("Cs",))  # every category; lone surrogates cannot come from a browser
ODD_CHAR = st.characters(categories=("Cc", "Cf", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me", "So", "Sk", "Lo"))
FRAGMENTS = st.sampled_from(["the", "dog", "dogs", "sleeps", ".", "(", ")", '"', "<script>", "</b>", "&amp;",
                             "\x00", "\x1b[0m", "🐕", "👩‍👩‍👧‍👦", "القطة", "השטיח", "猫", "\u200b", "\ufeff", "\u0301",
                             "[SEP]", "[CLS]", "<unk>", "<eos>", "##ing", "Ġ", "▁", "\\", "$x$", "{}"])
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=60),
    st.text(ODD_CHAR, max_size=40),
    st.lists(FRAGMENTS, max_size=40).map(" ".join),
    st.lists(FRAGMENTS, max_size=20).map("".join),
    # long runs (up to ~8,000 characters) without asking hypothesis for thousands of draws
    st.tuples(st.text(ANY_CHAR, min_size=1, max_size=12), st.integers(50, 700)).map(lambda t: (t[0] + " ") * t[1]),
    st.sampled_from(list(HOSTILE_TEXTS.values())),
)


class _Models(dict):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example: keep it short
        return f"models({', '.join(self)})"


@pytest.fixture(scope="module")
def models() -> dict:
    """The built-in models and MiniLM, loaded once for the module."""
    ids = {"lstm": "lstm-lm", "gru": "gru-lm", "gpt": "tiny-gpt", "bahdanau": "seq2seq-bahdanau",
           "dates": "seq2seq-dates", "none": "seq2seq-none", "w2v": "word2vec"}
    out = _Models({key: load_model(f"builtin:{name}") for key, name in ids.items() if name in builtin_names()})
    out["minilm"] = load_model("pretrained:minilm")
    return out


def _model(models: dict, key: str):
    if key not in models:
        pytest.skip(f"{key} is not available")
    return models[key]


# ---------------------------------------------------------------------------------------- cleaning
@FAST
@given(TEXT)
def test_clean_text_and_tokenize_words(text: str) -> None:
    cleaned = clean_text(text)
    assert not any(ord(c) < 32 and c != " " for c in cleaned)  # controls dropped or turned into spaces
    assert "\x00" not in cleaned and "\u200b" not in cleaned and "\ufeff" not in cleaned
    for tok in tokenize_words(text):
        assert tok and not any(c.isspace() for c in tok) and "\x00" not in tok
        assert tok == tok.lower()


# ----------------------------------------------------------------------------------------- encode
@FAST
@given(text=TEXT)
@pytest.mark.parametrize("key", ["lstm", "gpt", "minilm", "w2v"])
def test_encode(models, key: str, text: str) -> None:
    loaded = _model(models, key)
    enc = loaded.adapter.encode(text)
    limit = model_max_tokens(loaded)
    assert len(enc.ids) == len(enc.tokens) <= limit
    assert len(enc.special) in (0, len(enc.ids))
    n_vocab = len(loaded.tokenizer) if loaded.tokenizer is not None else len(loaded.vocabs["vocab"])
    assert all(0 <= i < n_vocab for i in enc.ids)
    if not enc.ids:
        assert enc.notes, "an empty encoding must say why"
    if enc.truncated:
        assert any("only the first" in n for n in enc.notes)


# ------------------------------------------------------------------------------------ recurrent cell
@FAST
@given(text=TEXT)
@pytest.mark.parametrize("key", ["lstm", "gru"])
def test_rnn_gates(models, key: str, text: str) -> None:
    loaded = _model(models, key)
    trace = RG.rnn_gates(loaded, text)
    T = len(trace.tokens)
    assert T == len(trace.ids) <= RG.MAX_TOKENS
    for name in trace.names:
        arr = trace.gates[name]
        assert arr.shape == (trace.num_layers, trace.num_directions, T, trace.hidden_size)
        assert np.isfinite(arr).all()
        if name in ("i", "f", "o", "r", "z") and arr.size:
            assert arr.min() >= 0 and arr.max() <= 1
    if T:
        assert trace.max_abs_error < 1e-4  # the recomputation still equals torch's own cell
        assert trace.next_probs.shape == (T, 5) and (np.diff(trace.next_probs, axis=1) <= 1e-7).all()
        assert len(trace.next_tokens) == T
        escaped = VR.colored_tokens_html(trace.tokens, trace.gates["h"][0, 0, :, 0])
        assert escaped.count("<span") == T and "<script" not in escaped
    else:
        assert trace.notes


@FAST
@given(a=TEXT, b=TEXT)
def test_compare_two_sentences(models, a: str, b: str) -> None:
    loaded = _model(models, "lstm")
    ta, tb = RG.rnn_gates(loaded, a), RG.rnn_gates(loaded, b)
    if not (len(ta) and len(tb)):
        return  # the page says "Type two sentences to compare."
    cmp = RG.compare(ta, tb, "c", 0)
    T = min(len(ta), len(tb))
    assert cmp.diff.shape == (T, ta.hidden_size) and cmp.score.shape == (ta.hidden_size,)
    assert 0 <= cmp.start <= T and np.isfinite(cmp.diff).all() and np.isfinite(cmp.score).all()
    assert bool(cmp.notes) == (len(ta) != len(tb))


# ------------------------------------------------------------------------------------ self-attention
@FAST
@given(text=TEXT, pair=st.one_of(st.just(""), TEXT))
@pytest.mark.parametrize("key", ["minilm", "gpt"])
def test_attention_trace(models, key: str, text: str, pair: str) -> None:
    loaded = _model(models, key)
    try:
        trace = SA.attention_trace(loaded, text, pair)
    except SA.AttentionError as exc:  # a run the model cannot do: a message, never a traceback
        assert len(str(exc)) > 10
        return
    if not trace.tokens:
        assert trace.notes, "no tokens and no note"
        return
    L, H, Tq, Tk = trace.attentions.shape
    assert (Tq, Tk) == (len(trace.tokens), len(trace.key_tokens)) and Tq <= model_max_tokens(loaded)
    assert len(trace.special) == Tq and len(trace.key_special) == Tk and len(trace.padding) == Tk
    atts = trace.attentions.astype(np.float64)
    assert np.isfinite(atts).all()
    np.testing.assert_allclose(atts.sum(-1), 1.0, atol=2e-3 if trace.attentions.dtype == np.float16 else 1e-4)
    if trace.causal:
        assert np.triu(atts[0, 0], 1).max() == 0
    assert len(VA.display_tokens(trace.tokens)) == Tq
    q = SA.default_query(trace.tokens, trace.special)
    assert 0 <= q < Tq


# ------------------------------------------------------------------------------------------- seq2seq
@FAST
@given(text=TEXT, target=st.one_of(st.just(""), TEXT), decoding=st.sampled_from(["greedy", "beam"]))
@pytest.mark.parametrize("key", ["bahdanau", "dates", "none"])
def test_alignment_trace(models, key: str, text: str, target: str, decoding: str) -> None:
    loaded = _model(models, key)
    trace = S2.alignment_trace(loaded, text, target, decoding, beam=3)
    # the right model: bad text is a note, never a Seq2SeqError (the call above would raise it)
    T, S = len(trace.out_ids), len(trace.src_tokens)
    if not T:
        assert trace.notes and not S
        return
    assert T == len(trace.out_tokens) == len(trace.step_logprobs) and T <= S2.MAX_OUTPUT and S <= MAX_SOURCE
    assert np.isfinite(trace.step_logprobs).all() and (trace.step_logprobs <= 1e-6).all()
    assert trace.topk_probs.shape == (T, S2.TOPK)
    if trace.weights is None:
        assert trace.attention == "none" and trace.no_source_logprobs.shape == (T,)
    else:
        assert trace.weights.shape == (1, 1, T, S)
        np.testing.assert_allclose(trace.weights.sum(-1), 1.0, atol=1e-4)
    assert trace.mode == ("forced" if no_text(target) is None else decoding)  # a target with nothing to read is none
    assert len(VS.labels(trace.src_tokens)) == S


# ----------------------------------------------------------------------------------------- positions
@FAST
@given(text=TEXT, seed=st.integers(0, 10_000))
@pytest.mark.parametrize("key", ["minilm", "gpt"])
def test_sentence_vectors_and_permutation(models, key: str, text: str, seed: int) -> None:
    loaded = _model(models, key)
    sv = PO.sentence_vectors(loaded, text)
    T = len(sv.tokens)
    assert T <= sv.max_positions
    for arr in (sv.token, sv.position, sv.total):
        assert arr.shape[0] == T and np.isfinite(arr).all()
    np.testing.assert_allclose(sv.total, sv.token + sv.position, atol=1e-5)
    if not T:
        assert sv.notes
    pt = PO.permutation_experiment(loaded, text, seed)
    assert sorted(pt.perm.tolist()) == list(range(len(pt.tokens)))
    assert len(pt.shuffled) == len(pt.tokens)
    if len(pt.tokens) < 2:
        assert pt.notes and pt.diff_nopos.size == 0
    else:
        assert pt.diff_nopos.shape == pt.diff_pos.shape == (len(pt.tokens),)
        assert pt.max_nopos < 1e-3  # attention without positions is permutation-equivariant, whatever the text


# ---------------------------------------------------------------------------------------- embeddings
@pytest.fixture(scope="module")
def tables(models) -> dict:
    return _Models({key: E.embedding_table(models[key]) for key in ("w2v", "minilm") if key in models})


@FAST
@given(text=TEXT)
@pytest.mark.parametrize("key", ["w2v", "minilm"])
def test_typed_words_and_locate(models, tables, key: str, text: str) -> None:
    if key not in tables:
        pytest.skip(f"{key} is not available")
    table = tables[key]
    words = E.typed_words(text)
    assert len(words) <= E.MAX_TYPED_WORDS and len(set(words)) == len(words) and all(words)
    located = [E.locate(table, w, models[key]) for w in words]
    for loc in located:
        assert loc.row is None or 0 <= loc.row < len(table)
    missing = [loc for loc in located if not loc.found]
    if missing:
        msg = E.not_found_message(missing, table)
        assert ("is not an entry" in msg or "are not entries" in msg) and len(msg) < 2500  # bounded


@FAST
@given(text=TEXT)
@pytest.mark.parametrize("key", ["lstm", "gpt", "minilm", "bahdanau", "w2v"])
def test_contextual(models, key: str, text: str) -> None:
    loaded = _model(models, key)
    try:
        trace = CE.contextual(loaded, text)
    except CE.ContextError as exc:  # the documented error: no layers, or no tokens in the text
        assert len(str(exc)) > 10
        assert key == "w2v" or not loaded.adapter.encode(text).ids
        return
    T = len(trace.tokens)
    assert T >= 1 and len(trace.special) == T and len(trace.layer_names) == len(trace.states)
    for arr in trace.states:
        assert arr.shape[0] == T and np.isfinite(arr).all()


@FAST
@given(a=TEXT, b=TEXT, word=st.one_of(TEXT, FRAGMENTS))
def test_same_word_in_two_sentences(models, a: str, b: str, word: str) -> None:
    loaded = _model(models, "minilm")
    try:
        drift = CE.drift(CE.contextual(loaded, a), CE.contextual(loaded, b), word)
    except CE.ContextError as exc:  # documented: no tokens, or the word is not in a sentence
        assert len(str(exc)) > 10
        return
    assert drift.cos.shape == (7,) and np.isfinite(drift.cos).all() and (np.abs(drift.cos) <= 1 + 1e-5).all()
    assert drift.span_a[0] < drift.span_a[1] and drift.span_b[0] < drift.span_b[1]


# ------------------------------------------------------------------------------------------ decoding
STRATEGIES = (Strategy("greedy"), Strategy("top-k", top_k=5), Strategy("beam", num_beams=2))


@FAST
@given(text=TEXT, seed=st.integers(0, 2**31 - 1))
@pytest.mark.parametrize("key", ["gpt", "lstm"])
def test_decode_all_and_step_view(models, key: str, text: str, seed: int) -> None:
    loaded = _model(models, key)
    try:
        run = D.decode_all(loaded, text, STRATEGIES, seed=seed, max_new=6, n=2)
    except DecodingError as exc:  # documented: the model cannot read this text
        assert len(str(exc)) > 10
        return
    assert run.prompt_ids and len(run.prompt_tokens) == len(run.prompt_ids)
    assert len(run.generations) == len(STRATEGIES)
    for gen in run.generations:
        for out in gen.outputs:
            assert len(out.ids) == len(out.tokens) == len(out.logprobs) <= 6
            assert np.isfinite(out.logprobs).all() and (out.logprobs <= 1e-5).all()
        first = gen.outputs[0]
        escaped = VD.tokens_html(run.prompt_text, first.tokens, first.logprobs)
        assert "<script" not in escaped and html.escape(run.prompt_text) in escaped
        if first.ids:
            sv = D.step_view(loaded, run.prompt_ids, run.start_ids, first.ids, gen.strategy, 0, 1.0)
            assert 0 <= sv.chosen < sv.vocab_size and 0.0 <= sv.kept_mass <= 1.0 + 1e-5
            assert sv.probs.shape == sv.ids.shape == (min(D.TOP, sv.vocab_size),)


# --------------------------------------------------------------------------------------------- viz
@FAST
@given(tokens=st.lists(TEXT, max_size=8), values=st.floats(-5, 5))
def test_html_builders_escape_every_token(tokens: list[str], values: float) -> None:
    """The only two places user text reaches st.html: every '<' in the output is one of the builder's own tags."""
    v = np.full(len(tokens), values, dtype=np.float32)
    sentence = VR.colored_tokens_html(tokens, v)
    assert sentence.count("<") == 2 + 2 * len(tokens)  # <div>, </div>, and <span>, </span> per token
    decoded = VD.tokens_html(" ".join(tokens), tokens, np.full(len(tokens), -1.0))
    # <div>, </div>, the prompt's <span>, </span>, a <wbr> after the prompt and each token but the last
    assert decoded.count("<") == 2 + 2 + 2 * len(tokens) + len(tokens)
    assert all(html.escape(t) in decoded for t in tokens)
