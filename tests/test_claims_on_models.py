"""Every view's "what to notice" and presets, checked against the model they are shown for (issue 34).

Each view is opened (AppTest) on the model families it accepts, among a causal model (SmolLM2 when installed, and
the built-in tiny GPT so that something always runs), a bidirectional one (MiniLM; the built-in masked LM where the
view needs a masked-LM head) and a recurrent one (the built-in LSTM; GRU and Elman where the view reads the cell).
Each claim the page makes is recomputed here from the model's own run, mostly from its activation record rather
than the page's probe: rows said to differ do by more than a stated threshold, a value said to be 1 is 1 within
1e-6, a value said to be 0 is 0 within float32 rounding, the numbers printed are the recomputed ones, and a claim
that the model contradicts is not offered (absent from the page's text).
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

from conftest import assert_no_exception, needs_smollm2, run_page
from explorer.adapters.generation import Strategy
from explorer.adapters import examples as AE
from explorer.data import examples as E
from explorer.loading import pretrained
from explorer.loading.loaders import load_model
from explorer.probes import contextual_embeddings as CE
from explorer.probes import decoding_strategies as D
from explorer.probes import interventions as I
from explorer.probes import lstm_gates as G
from explorer.probes import word_embeddings as W
from explorer.probes.logit_lens import logit_lens
from explorer.probes.masked_words import MaskedWordsError, masked_fill
from explorer.probes.positional_encodings import learned_analysis, model_positions, permutation_experiment
from explorer.probes.self_attention import find_token
from explorer.probes.token_attribution import attribution, default_outputs
from explorer.text.escape import md_unescape
from explorer.views import BY_PATH

needs_minilm = pytest.mark.skipif(not pretrained.is_installed("minilm"), reason="MiniLM is not installed")
SMOLLM2 = pytest.param("pretrained:smollm2", marks=needs_smollm2)
MINILM = pytest.param("pretrained:minilm", marks=needs_minilm)
CAUSAL = [SMOLLM2, "builtin:tiny-gpt"]
BIDIRECTIONAL = [MINILM]
RECURRENT = ["builtin:lstm-lm"]
ZERO = 1e-5  # a value the page says is 0 (float32 rounding of a difference of two runs)


@functools.lru_cache(maxsize=None)
def model(model_id: str, task: str | None = None):
    """One loaded model per id for the whole module (the pages load theirs through the app's own cache)."""
    return load_model(model_id, task=task)


def page(view: str, params: dict[str, str]):
    """The page of `view` (a URL path) opened with `params`, checked for exceptions."""
    at = run_page(BY_PATH[view].script, params, timeout=300)
    assert_no_exception(at)
    return at


def notice(at) -> str:
    """The page's "what to notice" points as a reader sees them, one per line."""
    return "\n".join(md_unescape(m.value)[2:] for m in at.markdown if m.value.startswith("- "))


def texts(at) -> str:
    return "\n".join(md_unescape(e.value) for kind in ("markdown", "caption", "info", "warning")
                     for e in getattr(at, kind))


def accepts(view: str, loaded) -> bool:
    return set(BY_PATH[view].needs or ()) <= loaded.caps.names


def f3(x: float) -> str:
    return f"{x:.3f}"


# ------------------------------------------------------------------------------------------- self-attention
def attention(loaded, text: str) -> tuple[tuple[str, ...], np.ndarray]:
    """(tokens, (L, H, T, T) attention) from the model's own record."""
    adapter = loaded.adapter
    enc = adapter.encode(text)
    prefix = next(iter(adapter.streams.values()))  # "blocks.{l}.attn"
    rec = adapter.run(enc, names=[prefix.replace("{l}", "*") + ".pattern"])
    return tuple(enc.tokens), rec.stack(prefix + ".pattern").astype(np.float64)


@pytest.mark.parametrize("model_id", [*CAUSAL, *BIDIRECTIONAL])
def test_self_attention_claims(model_id: str) -> None:
    loaded = model(model_id)
    adapter = loaded.adapter
    assert accepts("self-attention", loaded)
    said = notice(page("self-attention", {"model": model_id}))
    example = adapter.examples("attention").default
    tokens, A = attention(loaded, example)
    L, H, T, _ = A.shape

    # "Rows sum to 1 … to within e"
    error = float(np.abs(A.sum(-1) - 1).max())
    assert error < 1e-6 and f"to within {error:.1e}" in said
    # the mask: causal models exactly 0 above the diagonal, the others not masked there
    above = A[..., np.triu(np.ones((T, T), dtype=bool), 1)]
    if adapter.causal:
        assert above.max() == 0.0 and "the weights above the diagonal are exactly 0" in said
        assert "attends both ways" not in said
    else:
        assert above.max() > 0.1 and f"the largest weight there on that example: {above.max():.3f}" in said
        assert "exactly 0 (" not in said
    # where the heads park their weight
    top = A.mean(2).argmax(-1)
    special = np.array(adapter.encode(example).special or (False,) * T, dtype=bool)
    if special.any():
        assert f"{int(special[top].sum())} of the {L * H} heads give their largest weight" in said
    else:
        assert f"{int((top == 0).sum())} of the {L * H} heads give their largest weight" in said
        assert f"to the first token, “{tokens[0]}”" in said and "hiding special tokens changes nothing" in said
        assert "[CLS]" not in said
    # rollout, recomputed: Ã_l = rownorm(½ mean_h A_l + ½ I), R_l = Ã_l R_{l−1}
    R, rows = np.eye(T), []
    for layer in range(L):
        a = 0.5 * A[layer].mean(0) + 0.5 * np.eye(T)
        R = (a / a.sum(-1, keepdims=True)) @ R
        rows.append(R.max(-1).mean())
    assert f"averages {rows[0]:.2f} at layer 0 and {rows[-1]:.2f} at layer {L - 1}" in said
    assert ("gather the weight on a few tokens" if rows[-1] > rows[0] else "spread the weight out") in said

    # the pronoun pair: only the one whose deciding word the model reads, and the head said to shift does
    offered = adapter.examples("attention").sentences
    not_for_it = E.PRONOUN_PAIRS[not adapter.causal]
    assert not any(s in offered or s in said for s in not_for_it)
    pair = AE.pronoun_pair(adapter)
    if AE.language_of(loaded) != "natural":  # a built-in's generated English: no pair, no claim
        assert pair is None and "Compare “" not in said
        return
    assert pair == E.PRONOUN_PAIRS[adapter.causal]
    at = page("self-attention", {"model": model_id, "mode": "compare"})  # the second sentence: the pair's own
    assert at.text_input(key="text2").value == pair[1] and "is not in the second sentence" not in texts(at)
    m = re.search(r"in layer (\d+), head (\d+) “it” gives “animal” ([\d.]+) and “street” ([\d.]+) in the first, "
                  r"([\d.]+) and ([\d.]+) in the second: it shifts from “animal” to “street”", said)
    assert m, said
    layer, head = int(m[1]), int(m[2])
    (ta, Aa), (tb, Ab) = attention(loaded, pair[0]), attention(loaded, pair[1])
    ia, ib = find_token(ta, "it"), find_token(tb, "it")
    a = Aa[layer, head, ia, [find_token(ta, "animal"), find_token(ta, "street")]]
    b = Ab[layer, head, ib, [find_token(tb, "animal"), find_token(tb, "street")]]
    assert a[0] > a[1] and b[1] > b[0]  # animal first in A, street first in B
    assert [m[i] for i in range(3, 7)] == [f3(a[0]), f3(a[1]), f3(b[0]), f3(b[1])]
    n = min(Aa.shape[-1], Ab.shape[-1])
    assert np.abs(Aa[layer, head, ia, :n] - Ab[layer, head, ib, :n]).max() > 0.05  # the two rows differ
    if adapter.causal:  # the pair it is not offered: the word that decides comes after "it", which it cannot read
        (t0, A0), (t1, A1) = attention(loaded, not_for_it[0]), attention(loaded, not_for_it[1])
        i0, i1 = find_token(t0, "it"), find_token(t1, "it")
        assert i0 == i1 and np.abs(A0[:, :, i0] - A1[:, :, i1]).max() == 0.0  # identical rows


# ------------------------------------------------------------------------------------------- interventions
@pytest.mark.parametrize("model_id", [*CAUSAL, *RECURRENT])
def test_interventions_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("interventions", loaded)
    said = notice(page("interventions", {"model": model_id}))
    clean = loaded.adapter.examples("contrast").default
    args = (clean, *E.CONTRASTS[clean])
    c = I.contrast(loaded, *args)
    differ = np.flatnonzero(c.differs)
    n = len(differ)
    assert n and f"these prompts differ in {n} token{'s' if n != 1 else ''}" in said
    if "resid" in I.layout(loaded).kinds:
        row = I.patching(loaded, *args, "resid", "denoise").restored[0]
        agree = np.delete(row, differ)
        assert np.abs(agree).max() < ZERO  # "where the prompts agree it restores 0"
        if n == 1:
            assert abs(row[differ[0]] - 1) < 1e-6 and "makes the input the clean prompt and restores 1" in said
        else:  # each patch restores part only: "restores 1" is not said, and it would be false
            assert "restores 1" not in said and (row[differ] < 0.99).all()
            assert "(here " + ", ".join(f3(v) for v in row[differ]) + ")" in said
        assert "Patching h" not in said
    else:
        h = I.patching(loaded, *args, "h", "denoise").restored[-1]  # the top layer's h
        assert abs(h[-1] - 1) < 1e-6 and f"it restores 1 (here {h[-1]:.6f})" in said
        assert np.abs(h[:differ[0]]).max() < ZERO
        assert f"restores {h[differ[0]:].min():.3f} to {h[differ[0]:].max():.3f}" in said
        if "c" in I.layout(loaded).kinds:  # an LSTM: h alone restores part before the last position
            assert h[differ[0]:-1].max() < 0.99 and "the cell state c, still corrupted, carries the rest" in said
        assert "residual stream" not in said


@needs_smollm2
def test_interventions_one_differing_token_restores_one_on_smollm2() -> None:
    """The tip's "restores 1", on SmolLM2's preset whose prompts differ in one token."""
    loaded = model("pretrained:smollm2")
    clean = "The keys to the cabinet"
    args = (clean, *E.CONTRASTS[clean])
    differ = np.flatnonzero(I.contrast(loaded, *args).differs)
    row = I.patching(loaded, *args, "resid", "denoise").restored[0]
    assert len(differ) == 1 and abs(row[differ[0]] - 1) < 1e-6 and np.abs(np.delete(row, differ)).max() < ZERO


# ------------------------------------------------------------------------------------------- decoding
@pytest.mark.parametrize("model_id", [*CAUSAL, *RECURRENT])
def test_decoding_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("decoding-strategies", loaded)
    params = {"model": model_id, "max_new": "3", "n": "2"}
    at = page("decoding-strategies", params)
    said = notice(at)
    prompt = loaded.adapter.examples("prompt").default
    run = D.decode_all(loaded, prompt, tuple(Strategy(k) for k in ("greedy", "top-k", "top-p", "beam")), 0, 3, 2)
    rows = [g.summary() for g in run.generations]
    fixed = [r["mean log-prob"] for r in rows if r["deterministic"]]
    sampled = [r["mean log-prob"] for r in rows if not r["deterministic"]]
    assert min(fixed) > max(sampled)  # "greedy and beam search pick likely tokens"
    assert all(f"{v:.3f}" in said for v in fixed) and f"against {min(sampled):.3f} to {max(sampled):.3f}" in said
    reps = ", ".join(f"{r['repetition rate']:.3f}" for r in rows if r["deterministic"])
    assert f"their repetition rate here is {reps}" in said
    assert "System prompt:" not in texts(at)  # raw text: no system prompt to speak of
    if D.chat_template(loaded) is not None:  # an instruct model: the caption comes with chat mode
        assert "System prompt:" in texts(page("decoding-strategies", {**params, "chat": "1",
                                                                       "strategies": "greedy,top-k"}))


# ------------------------------------------------------------------------------------------- logit lens
@pytest.mark.parametrize("model_id", [*CAUSAL, *RECURRENT])
def test_logit_lens_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("logit-lens", loaded)
    said = notice(page("logit-lens", {"model": model_id}))
    text = loaded.adapter.examples("agreement").default
    trace = logit_lens(loaded, text)
    logits = loaded.adapter.run(loaded.adapter.encode(text), names=("logits",))["logits"]
    own = loaded.adapter.token_strings([int(logits[-1].argmax())])[0]
    assert trace.final_tokens[-1] == own and trace.lens_error < 1e-4  # "the top row is the model's output"
    assert f"equals the model's own logits to {trace.lens_error:.1e}" in said
    if len(trace.layers) == 1:
        assert "This model has one layer" in said and "Read a column" not in said
        return
    ranks = trace.final_rank[:, -1]
    assert f"ranks {int(ranks[0]) + 1} after {trace.layers[0]}" in said
    k = int(np.flatnonzero(ranks < 10)[0])
    assert (ranks[:k] >= 10).all() and f"enters the top 10 after {trace.layers[k]} (rank {int(ranks[k]) + 1})" in said


# ------------------------------------------------------------------------------------------- token attribution
@pytest.mark.parametrize("model_id", [*CAUSAL, *RECURRENT])
def test_token_attribution_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("token-attribution", loaded)
    said = notice(page("token-attribution", {"model": model_id}))
    trace = attribution(loaded, loaded.adapter.examples("agreement").default, "", 256, default_outputs(loaded))
    if trace.kept:  # a model without position vectors: the kept first input gets no share
        assert (trace.integrated[:, list(trace.kept)] == 0).all()
        assert f"the baseline keeps “{trace.inputs[trace.kept[0]]}” as it is: it gets no share" in said
    else:
        assert "adds no position vectors" not in said
    if len(trace.outputs) > 1:
        assert f"here {trace.evaluations.min()} to {trace.evaluations.max()}" in said
    else:
        assert "gradient evaluations (here" not in said
    assert "encoder-decoder" not in said


# ------------------------------------------------------------------------------------------- recurrent cell
@pytest.mark.parametrize("model_id", ["builtin:lstm-lm", "builtin:gru-lm", "builtin:rnn-lm"])
def test_recurrent_cell_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("lstm-gates", loaded)
    said = notice(page("lstm-gates", {"model": model_id}))
    a_text, b_text = ("the dog that the farmers feed sleeps in the garden .",  # the page's first pair
                      "the dogs that the farmers feed sleep in the garden .")
    assert f"in “{a_text}” / “{b_text}”" in said
    a, b = G.rnn_gates(loaded, a_text), G.rnn_gates(loaded, b_text)
    cell = a.cell
    state = "c" if cell == "lstm" else "h"
    start, verb = [t for t in range(len(a)) if a.ids[t] != b.ids[t]][:2]
    end = verb - 1
    diff = b.gates[state][0, 0] - a.gates[state][0, 0]
    unit = int(np.abs(diff[end]).argmax())
    assert abs(diff[end, unit]) > 0.5  # the unit said to carry the subject's number does differ at the verb
    assert (f"unit {unit}'s {G.LABELS[state]} differs by {diff[start, unit]:+.2f} at “{a.tokens[start]}” and by "
            f"{diff[end, unit]:+.2f} at “{a.tokens[end]}”") in said
    shown = G.rnn_gates(loaded, loaded.adapter.examples("agreement").default)
    if cell == "lstm":
        f = a.gates["f"][0, 0, start + 1:end + 1, unit].mean()
        assert f > 0.5 and f"its forget gate f averaging {f:.2f}" in said and "Update gates" not in said
        c, h = np.abs(shown.gates["c"]).max(), np.abs(shown.gates["h"]).max()
        assert c > 1 > h and f"|c| reaches {c:.2f} and |h| {h:.4f}" in said  # c unbounded, h within ±1
    elif cell == "gru":
        z = a.gates["z"][0, 0, start + 1:end + 1, unit].mean()
        assert f"its update gate z averaging {z:.2f}" in said and "Forget gates" not in said
        assert "cell state c is unbounded" not in said and "A GRU has no cell state" in said
    else:
        assert "No gate keeps an Elman RNN's state" in said and "Sort by saturation" not in said
        assert "Forget gates" not in said and "cell state c is unbounded" not in said
    if cell != "rnn":
        keep = shown.gates["f" if cell == "lstm" else "z"][0, 0]
        on = (keep < 0.1) | (keep > 0.9)
        assert f"{on.mean():.0%} of the" in said and f"{int((on.mean(0) >= 0.9).sum())} of the 256 units" in said


# ------------------------------------------------------------------------------------------- word embeddings
def analogy_by_hand(table, loaded) -> tuple[str, int]:
    """3CosAdd with numpy: the top answer of king − man + woman and the rank of queen (a, b, c left out)."""
    rows = [W.locate(table, w, loaded).row for w in E.ANALOGY]
    U = table.vectors.astype(np.float64)
    U /= np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-12)
    sims = U @ (U[rows[0]] - U[rows[1]] + U[rows[2]])
    sims[rows[:3]] = -np.inf
    sims[np.array(table.special, dtype=bool)] = -np.inf
    order = np.argsort(-sims, kind="stable")
    return table.words[order[0]], int(np.flatnonzero(order == rows[3])[0]) + 1


@pytest.mark.parametrize("model_id", [*CAUSAL, *BIDIRECTIONAL, *RECURRENT])
def test_word_embeddings_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("word-embeddings", loaded)
    said = notice(page("word-embeddings", {"model": model_id, "method": "pca", "section": "contextual"}))
    table = W.embedding_table(loaded)
    rows = W.background_rows(table, 5000, table.subword)
    classed = [int(r) for r in rows if table.classes[int(r)]][:W.MAX_COHESION_ROWS]
    if len({table.classes[r] for r in classed}) > 1:  # the chart's colours: do words of one class sit together?
        names = np.array([table.classes[r] for r in classed])
        U = table.vectors[classed].astype(np.float64)
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        S = U @ U.T
        same = (names[:, None] == names[None, :]) & ~np.eye(len(names), dtype=bool)
        within, between = S[same].mean(), S[names[:, None] != names[None, :]].mean()
        assert within > between + 0.05 and "sit closer together than words of different classes" in said
        assert f"mean cosine {within:.2f} within a class, {between:.2f} between classes" in said
        assert "one colour" not in said
    else:  # one colour on the chart: no class is claimed, the colours' cosines are
        assert "Words of one class" not in said and "The chart has one colour" in said
        found = [W.locate(table, w, loaded) for w in E.COLOURS.split()]
        U = table.vectors[[loc.row for loc in found]].astype(np.float64)
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        within = (U @ U.T)[~np.eye(len(found), dtype=bool)].mean()
        assert within > 0.3 and f"have mean cosine {within:.2f} with one another" in said and "sit together" in said
    first, rank = analogy_by_hand(table, loaded)
    assert f"gives “{first}” first" in said
    assert ("the expected “queen”" in said) if rank == 1 else (f"“queen” ranks {rank}: analogies work only roughly"
                                                              in said)
    # the same word in two sentences: words the model reads, and what reading left to right implies
    a, b, word = CE.drift_pair(loaded)
    assert all(loaded.adapter.encode(s).n_unknown == 0 for s in (a, b)) and f"“{a}”" in said
    assert ("'bank'" in said) == (word == "bank")
    ta, tb = CE.contextual(loaded, a), CE.contextual(loaded, b)
    drift = CE.drift(ta, tb, word)
    assert drift.cos[-1] < 0.99  # "can drift apart through the layers"
    if CE.reads_left_to_right(loaded.adapter):  # "followed by different words keeps the same vector"
        longer = CE.contextual(loaded, a + " and the cat")
        assert np.allclose(CE.drift(ta, longer, word).cos, 1.0, atol=1e-5)
        assert "reads left to right" in said
    else:
        assert "reads the whole sentence both ways" in said


# ------------------------------------------------------------------------------------------- positional encodings
@pytest.mark.parametrize("model_id", [*CAUSAL, *BIDIRECTIONAL])
def test_positional_encodings_claims(model_id: str) -> None:
    loaded = model(model_id)
    assert accepts("positional-encodings", loaded)
    text = loaded.adapter.examples("order").default
    kind = model_positions(loaded, "").kind
    said = notice(page("positional-encodings", {"model": model_id, "panel": "learned"}))
    if kind == "learned":
        cos = learned_analysis(loaded).cosine
        n = cos.shape[0]
        near = np.diagonal(cos, 1).mean()
        far = cos[np.abs(np.subtract.outer(np.arange(n), np.arange(n))) > n // 4].mean()
        assert near > far + 0.1 and f"have similar vectors: cosine {near:.2f}" in said and f"{far:.2f} between" in said
        assert "Rotary models" not in said
    else:
        assert kind == "rotary" and "A learned table" not in said
        spread = model_positions(loaded, text).spread
        assert spread < 1e-4 and f"coincide to {spread:.1e}" in said
    said = notice(page("positional-encodings", {"model": model_id, "panel": "sentence"}))
    if kind != "learned":  # no position vectors to add: the panel says so and claims nothing about them
        assert "position vectors are" not in said
        return
    rec = loaded.adapter.run(loaded.adapter.encode(text), names=("embed", "pos_embed"))
    word = np.linalg.norm(rec["embed"], axis=1).mean()
    position = np.linalg.norm(rec["pos_embed"], axis=1).mean()
    assert f"the word vectors are {word:.2f} long on average and the position vectors {position:.2f}" in said
    pt = permutation_experiment(loaded, text, 0)
    assert pt.max_nopos < ZERO and pt.max_pos > 0.01  # equivariant without positions, not with them
    if loaded.adapter.causal:
        assert pt.diff_causal.max() > 0.01 and "A decoder's causal mask is itself a source of order" in said
    else:
        assert "causal mask" not in said


# ------------------------------------------------------------------------------------------- masked words
@pytest.mark.parametrize("model_id", ["builtin:masked-lm", MINILM])
def test_masked_words_claims(model_id: str) -> None:
    loaded = model(model_id, "masked-lm")
    assert accepts("masked-words", loaded)
    said = notice(page("masked-words", {"model": model_id}))
    a = "the keys to the cabinet [MASK] on the table ."
    try:
        trace = masked_fill(loaded, a, 10)
    except MaskedWordsError:  # no masked-LM head (MiniLM's sentence-embedding checkpoint): nothing is claimed
        assert not said
        return
    b = BY_PATH["masked-words"].params["b"].default  # the second sentence: the numbers swapped

    def p(text: str, word: str) -> float:
        t = masked_fill(loaded, text, 10, word)
        return float(t.word_probs[0, 0])

    assert p(a, "are") > 10 * p(a, "is") and p(b, "is") > 10 * p(b, "are")  # agreement from both sides
    cut = masked_fill(loaded, "the keys to the cabinet [MASK]", 10)
    assert cut.top_tokens[0][0] != trace.top_tokens[0][0]  # "the words after the mask matter"
    assert "Agreement from both sides" in said
