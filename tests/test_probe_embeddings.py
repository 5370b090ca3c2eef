"""Unit tests of explorer/probes/embeddings.py and explorer/projection.py: numbers against brute force,
scikit-learn and the models' own outputs; malformed files and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer import projection as PR
from explorer.data.vocab import SPECIALS, Vocab
from explorer.models.rnn_lm import RNNLanguageModel
from explorer.models.tiny_gpt import GPT, GPTConfig
from explorer.models.word2vec import SkipGram
from explorer.probes import embeddings as P
from explorer.loaders import LoadedModel

WORDS = ["king", "queen", "man", "woman", "dog", "dogs", "cat", "cats", "red", "blue", "big", "small", "the", "a"]


def _table(n: int = 200, d: int = 16, seed: int = 0) -> P.EmbeddingTable:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n)]
    vectors = rng.normal(size=(n, d)).astype(np.float32)
    vectors[5] = 0.0  # a zero row: cosine 0, never a crash
    return P.make_table("test", "random", words, vectors)


def _loaded(model: torch.nn.Module, words=WORDS) -> LoadedModel:
    vocab = Vocab(words, freq={w: 100 - i for i, w in enumerate(words)})
    return LoadedModel(f"test:{type(model).__name__}", "x", model.eval(), "cpu", "float32", {}, vocabs={"vocab": vocab})


def _brute_cos(V: np.ndarray, target: np.ndarray) -> np.ndarray:
    V = V.astype(np.float64)
    t = target.astype(np.float64)
    out = np.zeros(len(V))
    for i, v in enumerate(V):
        nv, nt = np.linalg.norm(v), np.linalg.norm(t)
        out[i] = v @ t / (nv * nt) if nv * nt > 0 else 0.0
    return out


# ------------------------------------------------------------------------------ neighbours, analogies
def test_neighbours_equal_brute_force() -> None:
    table = _table()
    for row in (0, 7, 199):
        got = P.neighbours(table, row, k=10)
        sims = _brute_cos(table.vectors, table.vectors[row])
        sims[row] = -np.inf
        expected = np.argsort(-sims, kind="stable")[:10]
        assert list(got.rows) == list(expected)
        np.testing.assert_allclose(got.cos, sims[expected], atol=1e-5)
        assert row not in got.rows


def test_analogy_excludes_queries_and_matches_brute_force() -> None:
    table = _table(seed=1)
    a, b, c = 3, 10, 42
    got = P.analogy(table, a, b, c, k=5)
    V = table.vectors.astype(np.float64)
    unit = V / np.linalg.norm(V, axis=1, keepdims=True).clip(1e-30)
    target = unit[a] - unit[b] + unit[c]
    sims = _brute_cos(V, target)
    sims[[a, b, c]] = -np.inf
    expected = np.argsort(-sims, kind="stable")[:5]
    assert list(got.rows) == list(expected)
    assert not {a, b, c} & set(got.rows)
    np.testing.assert_allclose(got.cos, sims[expected], atol=1e-5)


def test_analogy_finds_planted_answer() -> None:
    rng = np.random.default_rng(2)
    base = rng.normal(size=(4, 32))
    vecs = {"man": base[0], "woman": base[0] + base[1], "king": base[0] + base[2], "queen": base[0] + base[1] + base[2]}
    words = list(vecs) + [f"x{i}" for i in range(50)]
    V = np.vstack([*vecs.values(), rng.normal(size=(50, 32)) * 3]).astype(np.float32)
    table = P.make_table("planted", "planted", words, V)
    got = P.analogy(table, table.index["king"], table.index["man"], table.index["woman"], k=3)
    assert got.words[0] == "queen"


def test_axis_coords_put_pair_at_0_and_1() -> None:
    table = _table()
    xy = P.axis_coords(table, [1, 2, 3, 4], (1, 2), (3, 4))
    np.testing.assert_allclose(xy[:, 0][:2], [0.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(xy[:, 1][2:], [0.0, 1.0], atol=1e-5)
    with pytest.raises(P.EmbeddingError):
        P.axis_coords(P.make_table("t", "t", ["a", "b"], np.ones((2, 3))), [0, 1], (0, 1))


# ----------------------------------------------------------------------------------------- projection
def test_pca_equals_sklearn_up_to_sign_and_transform_is_exact() -> None:
    from sklearn.decomposition import PCA

    X = np.random.default_rng(3).normal(size=(300, 20)).astype(np.float32)
    for dims in (2, 3):
        proj = PR.fit(X, "pca", dims)
        ref = PCA(n_components=dims, svd_solver="full").fit_transform(X.astype(np.float64))
        for j in range(dims):
            sign = np.sign(ref[:, j] @ proj.coords[:, j])
            np.testing.assert_allclose(proj.coords[:, j], sign * ref[:, j], atol=1e-5)
        np.testing.assert_allclose(PR.transform(proj, X[:7]), proj.coords[:7], atol=1e-5)


def test_projection_bad_input() -> None:
    one_d = np.arange(10, dtype=np.float32)[:, None]
    assert "1 dimension" in PR.check(one_d, "pca", 2)
    with pytest.raises(PR.ProjectionError, match="1 dimension"):
        PR.fit(one_d, "pca", 2)
    assert PR.check(np.ones((2, 5), np.float32), "pca", 2)  # too few rows
    with pytest.raises(PR.ProjectionError):
        PR.fit(np.ones((5, 5), np.float32), "nope", 2)


def test_tsne_has_no_transform() -> None:
    X = np.random.default_rng(4).normal(size=(60, 8)).astype(np.float32)
    proj = PR.fit(X, "tsne", 2, {"perplexity": 10})
    assert proj.coords.shape == (60, 2) and PR.transform(proj, X[:3]) is None


def test_umap_transform_lands_near_fitted_position() -> None:
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(6, 16)) * 6
    X = (centres[np.arange(300) % 6] + rng.normal(size=(300, 16))).astype(np.float32)
    calls = []
    proj = PR.fit(X, "umap", 2, {"n_neighbors": 10, "n_epochs": 60, "metric": "euclidean"},
                  progress=lambda f, m: calls.append(f))
    assert proj.coords.shape == (300, 2) and calls[-1] == 1.0 and len(calls) > 3  # per-epoch progress
    placed = PR.transform(proj, X[:30])
    spread = float(np.linalg.norm(proj.coords.max(0) - proj.coords.min(0)))
    dist = np.linalg.norm(placed - proj.coords[:30], axis=1)
    assert np.median(dist) < 0.1 * spread, (np.median(dist), spread)


# ---------------------------------------------------------------------------------------- tables
def test_tables_from_builtin_architectures() -> None:
    torch.manual_seed(0)
    V = len(SPECIALS) + len(WORDS)
    for model, attr in ((SkipGram(V, 8), "in_embed"), (RNNLanguageModel(V, 6, 10), "embedding"),
                        (GPT(GPTConfig(vocab_size=V, block_size=16, n_layer=2, n_head=2, n_embd=8)), "wte")):
        table = P.embedding_table(_loaded(model))
        np.testing.assert_array_equal(table.vectors, getattr(model, attr).weight.detach().numpy())
        assert table.words[4:] == tuple(WORDS) and attr in table.source
        assert [table.words[r] for r in table.order[:3]] == WORDS[:3]  # frequency order
        assert all(table.special[r] for r in table.order[-4:])  # specials last
        assert table.classes[table.index["dog"]] == "animals"


def test_table_from_hf_model(tmp_path) -> None:
    from transformers import BertConfig, BertModel

    from explorer.loaders import _load_hf_source

    torch.manual_seed(0)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "the", "bank", "river", "my", "account",
             "of", "##s", "dog"]
    cfg = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(tmp_path)
    from transformers import BertTokenizerFast

    BertTokenizerFast(vocab={w: i for i, w in enumerate(words)}).save_pretrained(tmp_path)
    loaded = _load_hf_source("local:tiny-bert", tmp_path, True, "cpu", "float32", None)
    table = P.embedding_table(loaded)
    assert table.words == tuple(words) and table.subword and "id order" in table.order_note
    np.testing.assert_array_equal(table.vectors, loaded.model.get_input_embeddings().weight.detach().numpy())
    assert table.words[table.order[0]] == "the" and table.special[table.index["[unused0]"]]
    loc = P.locate(table, "dogs", loaded.tokenizer)
    assert not loc.found and loc.pieces == ("dog", "##s")
    assert "dog + ##s" in P.not_found_message([loc], table)
    assert P.locate(table, "Dog", loaded.tokenizer).row == table.index["dog"]

    # contextual: the model's own hidden states; drift = cosine of the same word in two sentences per layer
    a, b = P.contextual(loaded, "the bank of the river"), P.contextual(loaded, "my bank account")
    enc = loaded.tokenizer("the bank of the river", return_tensors="pt")
    with torch.inference_mode():
        ref = loaded.model(**enc, output_hidden_states=True).hidden_states
    assert len(a.states) == 3 and a.tokens[0] == "[CLS]"
    for mine, theirs in zip(a.states, ref):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5)
    d = P.drift(a, b, "bank")
    for layer in range(3):
        u, v = a.states[layer][2].astype(np.float64), b.states[layer][2].astype(np.float64)
        assert abs(d.cos[layer] - u @ v / np.linalg.norm(u) / np.linalg.norm(v)) < 1e-5
    with pytest.raises(P.ContextError):
        P.drift(a, b, "river")
    cp = P.context_projection(a)
    assert cp.coords.shape == (3, len(a.tokens), 2) and "all layers" in cp.fitted


def test_contextual_rnn_and_gpt_match_model_outputs() -> None:
    torch.manual_seed(0)
    V = len(SPECIALS) + len(WORDS)
    lm = RNNLanguageModel(V, 6, 10, num_layers=2, cell="gru")
    trace = P.contextual(_loaded(lm), "the big dog")
    ids = torch.tensor([[2] + [4 + WORDS.index(w) for w in ("the", "big", "dog")]])  # <bos> first, as trained
    assert trace.tokens == ("<bos>", "the", "big", "dog") and trace.special == (True, False, False, False)
    with torch.inference_mode():
        out, _ = lm.rnn(lm.embedding(ids))
        layer1 = torch.nn.GRU(6, 10, batch_first=True)
        layer1.load_state_dict({k: v for k, v in lm.rnn.state_dict().items() if k.endswith("_l0")})
        first, _ = layer1(lm.embedding(ids))
    assert [s.shape for s in trace.states] == [(4, 6), (4, 10), (4, 10)]
    np.testing.assert_allclose(trace.states[0], lm.embedding(ids)[0].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(trace.states[1], first[0].numpy(), atol=1e-5)  # layer 1 alone, torch's own GRU
    np.testing.assert_allclose(trace.states[-1], out[0].numpy(), atol=1e-5)
    cp = P.context_projection(trace)  # the embedding layer has another width: left out, NaN
    assert np.isnan(cp.coords[0]).all() and not np.isnan(cp.coords[1:]).any() and "another width" in cp.fitted

    gpt = GPT(GPTConfig(vocab_size=V, block_size=16, n_layer=2, n_head=2, n_embd=8))
    trace = P.contextual(_loaded(gpt), "the big dog")
    with torch.inference_mode():
        logits = gpt(ids)
        mine = gpt.lm_head(gpt.ln_f(torch.from_numpy(trace.states[-1])))
    np.testing.assert_allclose(mine.numpy(), logits[0].numpy(), atol=1e-5)
    with pytest.raises(P.ContextError, match="no layers"):
        P.contextual(_loaded(SkipGram(V, 4)), "the dog")
    with pytest.raises(P.ContextError):
        P.contextual(_loaded(gpt), "   ")


# ------------------------------------------------------------------------------------- text files
def test_parse_text_file_round_trip() -> None:
    V = np.random.default_rng(6).normal(size=(5, 3)).astype(np.float32)
    words = ["the", "dog", "new york", "ünïcode", "3"]
    for header in (False, True):
        table = P.parse_text_embeddings(P.table_to_text(words, V, header=header), "v.txt")
        assert table.words == tuple(words)
        np.testing.assert_allclose(table.vectors, V, rtol=1e-5)
        assert table.classes[1] == "animals" and table.key.startswith("file:")


@pytest.mark.parametrize("data, line, reason", [
    (b"", 0, "empty"),
    (b"the 1 2 3\ndog 1 2\n", 2, "3 numbers"),
    (b"the 1 2 3\ndog 1 x 3\n", 2, "'x' is not a number"),
    (b"the 1 2 3\ndog 1 2 nan\n", 2, "NaN"),
    (b"2 3\nthe 1 2 3\ndog 1 2\n", 3, "3 numbers"),
    (b"the 1 2\n\xff\xfe 1 2\n", 2, "UTF-8"),
    (b"justoneword\n", 1, "one field"),
    (b"the cat sat\n", 1, "not a number"),
])
def test_parse_text_file_errors(data: bytes, line: int, reason: str) -> None:
    with pytest.raises(P.EmbeddingFileError) as info:
        P.parse_text_embeddings(data)
    assert info.value.line == line and reason in info.value.reason


def test_header_count_mismatch_is_a_note() -> None:
    table = P.parse_text_embeddings(b"5 2\na 1 2\nb 3 4\n")
    assert len(table) == 2 and "announces 5" in table.notes[0]


def test_background_rows_clamp_and_typed_words() -> None:
    table = _table(n=30)
    assert len(P.background_rows(table, 10_000)) == 30
    assert P.typed_words("the dog, the cat!  \x00 ") == ["the", "dog", "cat"]
    assert P.typed_words("") == []
