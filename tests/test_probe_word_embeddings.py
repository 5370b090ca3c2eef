"""Unit tests of explorer/probes/word_embeddings.py, contextual_embeddings.py, explorer/files/vector_text.py and
explorer/projections/reduce.py: numbers against brute force,
scikit-learn and the models' own outputs; malformed files and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.projections import reduce as PR
from explorer.data.vocab import SPECIALS, Vocab
from explorer.models.rnn_lm import RNNLanguageModel
from explorer.models.tiny_gpt import GPT, GPTConfig
from explorer.models.word2vec import SkipGram
from explorer.files import vector_text as VT
from explorer.probes import contextual_embeddings as C
from explorer.probes import word_embeddings as P
from explorer.loading.loaders import LoadedModel
from families import tiny_model

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
    from explorer.loading.loaders import _load_hf_source

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "the", "bank", "river", "my", "account",
             "of", "##s", "dog"]
    tiny_model("BertModel", len(words), seed=0, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64).save_pretrained(tmp_path)
    from transformers import BertTokenizerFast

    BertTokenizerFast(vocab={w: i for i, w in enumerate(words)}).save_pretrained(tmp_path)
    loaded = _load_hf_source("local:tiny-bert", tmp_path, True, "cpu", "float32", None)
    table = P.embedding_table(loaded)
    assert table.words == tuple(words) and table.subword and "id order" in table.order_note
    np.testing.assert_array_equal(table.vectors, loaded.model.get_input_embeddings().weight.detach().numpy())
    assert table.words[table.order[0]] == "the" and table.special[table.index["[unused0]"]]
    loc = P.locate(table, "dogs", loaded)
    assert not loc.found and loc.pieces == ("dog", "##s") and loc.split
    assert "dog + ##s" in P.not_found_message([loc], table)
    assert P.locate(table, "Dog", loaded).row == table.index["dog"]
    assert table.scheme == "wordpiece" and P.whole_words(table)[table.index["dog"]]
    assert not P.whole_words(table)[table.index["##s"]] and not P.whole_words(table)[table.index["[unused0]"]]

    # contextual: the model's own hidden states; drift = cosine of the same word in two sentences per layer
    a, b = C.contextual(loaded, "the bank of the river"), C.contextual(loaded, "my bank account")
    enc = loaded.tokenizer("the bank of the river", return_tensors="pt")
    with torch.inference_mode():
        ref = loaded.model(**enc, output_hidden_states=True).hidden_states
    assert len(a.states) == 3 and a.tokens[0] == "[CLS]"
    assert a.layer_names == ("embeddings", "after layer 0", "after layer 1") and not a.left_to_right
    assert a.positions == "learned"
    for mine, theirs in zip(a.states, ref):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5)
    d = C.drift(a, b, "bank")
    for layer in range(3):
        u, v = a.states[layer][2].astype(np.float64), b.states[layer][2].astype(np.float64)
        assert abs(d.cos[layer] - u @ v / np.linalg.norm(u) / np.linalg.norm(v)) < 1e-5
    with pytest.raises(C.ContextError):
        C.drift(a, b, "river")
    cp = C.context_projection(a)
    assert cp.coords.shape == (3, len(a.tokens), 2) and "all layers" in cp.fitted


def test_contextual_rnn_and_gpt_match_model_outputs() -> None:
    torch.manual_seed(0)
    V = len(SPECIALS) + len(WORDS)
    lm = RNNLanguageModel(V, 6, 10, num_layers=2, cell="gru")
    trace = C.contextual(_loaded(lm), "the big dog")
    ids = torch.tensor([[2] + [4 + WORDS.index(w) for w in ("the", "big", "dog")]])  # <bos> first, as trained
    assert trace.tokens == ("<bos>", "the", "big", "dog") and trace.special == (True, False, False, False)
    with torch.inference_mode():
        out, _ = lm.rnn(lm.embedding(ids))
        layer1 = torch.nn.GRU(6, 10, batch_first=True)
        layer1.load_state_dict({k: v for k, v in lm.rnn.state_dict().items() if k.endswith("_l0")})
        first, _ = layer1(lm.embedding(ids))
    assert [s.shape for s in trace.states] == [(4, 6), (4, 10), (4, 10)]
    assert trace.layer_names == ("embeddings", "after layer 0", "after layer 1")  # recurrent layers 0 and 1
    assert trace.left_to_right and trace.positions == "recurrent"
    np.testing.assert_allclose(trace.states[0], lm.embedding(ids)[0].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(trace.states[1], first[0].numpy(), atol=1e-5)  # layer 1 alone, torch's own GRU
    np.testing.assert_allclose(trace.states[-1], out[0].numpy(), atol=1e-5)
    cp = C.context_projection(trace)  # the embedding layer has another width: left out, NaN
    assert np.isnan(cp.coords[0]).all() and not np.isnan(cp.coords[1:]).any() and "another width" in cp.fitted

    gpt = GPT(GPTConfig(vocab_size=V, block_size=16, n_layer=2, n_head=2, n_embd=8))
    trace = C.contextual(_loaded(gpt), "the big dog")
    with torch.inference_mode():
        logits = gpt(ids)
        mine = gpt.lm_head(gpt.ln_f(torch.from_numpy(trace.states[-1])))
    np.testing.assert_allclose(mine.numpy(), logits[0].numpy(), atol=1e-5)
    assert trace.layer_names == ("embeddings", "after layer 0", "after layer 1")  # blocks 0 and 1, before ln_f
    assert trace.left_to_right and trace.positions == "learned"
    with pytest.raises(C.ContextError, match="no layers"):
        C.contextual(_loaded(SkipGram(V, 4)), "the dog")
    with pytest.raises(C.ContextError):
        C.contextual(_loaded(gpt), "   ")


# ------------------------------------------------------------------------------------- text files
def test_parse_text_file_round_trip() -> None:
    V = np.random.default_rng(6).normal(size=(5, 3)).astype(np.float32)
    words = ["the", "dog", "new york", "ünïcode", "3"]
    for header in (False, True):
        table = P.text_file_table(VT.table_to_text(words, V, header=header), "v.txt")
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
    with pytest.raises(VT.EmbeddingFileError) as info:
        VT.parse_text_embeddings(data)
    assert info.value.line == line and reason in info.value.reason


def test_header_count_mismatch_is_a_note() -> None:
    table = P.text_file_table(b"5 2\na 1 2\nb 3 4\n")
    assert len(table) == 2 and "announces 5" in table.notes[0]


def test_background_rows_clamp_and_typed_words() -> None:
    table = _table(n=30)
    assert len(P.background_rows(table, 10_000)) == 30
    assert P.typed_words("the dog, the cat!  \x00 ") == ["the", "dog", "cat"]
    assert P.typed_words("") == []


# ------------------------------------------------------------------ words as the model reads them (tokenizers)
TINY_CORPUS = [
    "king of the hill is a game",  # "king" at the start of a text: its own entry, without the space mark
    "the king and the queen saw the river bank",
    "a king met a queen by the bank of the river",
    "the old king said the queen saw a dog",
] * 30


def _byte_level_bpe():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TINY_CORPUS, vocab_size=300, min_frequency=2, special_tokens=["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>", pad_token="<|endoftext|>")


def _metaspace():
    """A SentencePiece-style unigram tokenizer (Metaspace pre-tokenizer and decoder, "▁" for a space), with both
    "▁king" and "king" as pieces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for line in TINY_CORPUS for w in line.split()})
    pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("▁", -3.0)]
    pieces += [("▁" + w, -2.0) for w in words] + [(w, -2.5) for w in words]
    pieces += [(c, -5.0) for c in sorted({c for line in TINY_CORPUS for c in line if not c.isspace()})]
    tok = Tokenizer(models.Unigram(pieces, unk_id=0))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<unk>")


def _wordpiece():
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(TINY_CORPUS, vocab_size=120, min_frequency=1,
                           special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return BertTokenizerFast(tokenizer_object=wp._tokenizer, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                             pad_token="[PAD]", mask_token="[MASK]")


def _tiny_model(tmp_path, scheme: str):
    """A tiny random Hugging Face model reading with a tokenizer of `scheme`, loaded as the app loads one."""
    from explorer.loading.loaders import _load_hf_source

    tok = {"byte-level": _byte_level_bpe, "sentencepiece": _metaspace, "wordpiece": _wordpiece}[scheme]()
    torch.manual_seed(0)
    if scheme == "byte-level":
        model = tiny_model("GPT2LMHeadModel", len(tok), n_positions=64, n_embd=16, n_layer=2, n_head=2)
    elif scheme == "sentencepiece":
        model = tiny_model("LlamaForCausalLM", len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    else:
        model = tiny_model("BertModel", len(tok), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=64)
    folder = tmp_path / scheme
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return _load_hf_source(f"local:{scheme}", folder, True, "cpu", "float32", None), tok


@pytest.mark.parametrize("scheme, mark", [("byte-level", "Ġ"), ("sentencepiece", "▁")])
def test_a_typed_word_is_the_entry_read_inside_a_sentence(tmp_path, scheme: str, mark: str) -> None:
    """Byte-level BPE and SentencePiece vocabularies hold 'king' after a space ("Ġking" / "▁king", shown "·king")
    and 'king' without it: the typed word is the in-sentence entry, found with the model's own tokenizer; the page
    names both."""
    loaded, tok = _tiny_model(tmp_path, scheme)
    table = P.embedding_table(loaded)
    assert table.scheme == scheme and table.marked
    vocab = tok.get_vocab()
    assert mark + "king" in vocab and "king" in vocab  # both forms exist: the lookup must pick the sentence one
    in_sentence, bare = vocab[mark + "king"], vocab["king"]
    loc = P.locate(table, "king", loaded)
    assert (loc.row, loc.entry, loc.how, loc.pieces) == (in_sentence, "·king", "sentence", ("·king",))
    assert table.words[in_sentence] == "·king"  # the table's words are display strings
    assert tok("the king", add_special_tokens=False)["input_ids"][-1] == in_sentence  # what the model reads
    np.testing.assert_array_equal(table.vectors[loc.row],
                                  loaded.model.get_input_embeddings().weight[in_sentence].detach().numpy())
    line = P.read_as(loc, table)
    assert line.startswith(f"‘king’ → ·king, id {in_sentence}") and mark not in line
    if scheme == "byte-level":  # the start of a text reads "king" (SentencePiece here prepends "▁" there too)
        assert loc.start == ("king",) and loc.start_row == bare and f"‘king’ is king, id {bare}" in line
    queen = P.locate(table, "queen", loaded)
    assert queen.entry == "·queen" and not queen.split
    whole = P.whole_words(table)
    assert whole[in_sentence] and not whole[bare]  # whole words: "·" + letters; "king" is a word-internal form
    assert not any(whole[i] for w, i in vocab.items() if not w.startswith(mark) or not w[1:].isalpha() or len(w) < 3)
    split = P.locate(table, "kingqueenx", loaded)  # no single entry: the pieces it is read as, shown as text
    assert not split.found and split.split and split.pieces[0].startswith("·")
    message = P.not_found_message([split], table)
    assert "split in a sentence into" in message and mark not in message


def test_wordpiece_and_word_vocabularies_look_words_up_as_typed(tmp_path) -> None:
    loaded, tok = _tiny_model(tmp_path, "wordpiece")
    table = P.embedding_table(loaded)
    assert table.scheme == "wordpiece" and not table.marked
    loc = P.locate(table, "King", loaded)
    assert (loc.row, loc.entry, loc.how) == (tok.get_vocab()["king"], "king", "lowercased")
    kings = P.locate(table, "kingly", loaded)
    assert not kings.found and kings.pieces[0] == "king" and all(p.startswith("##") for p in kings.pieces[1:])
    whole = P.whole_words(table)
    assert whole[table.index["king"]] and not any(whole[i] for i, w in enumerate(table.words) if w.startswith("##"))
    assert not any(whole[i] for i, s in enumerate(table.special) if s)
    # a file's words (no tokenizer): exactly, then lowercased
    words = P.make_table("file", "file", ["king", "Queen", "new york", "4x4", "a"], np.eye(5, dtype=np.float32))
    assert P.locate(words, "KING").entry == "king" and P.locate(words, "Queen").how == "exact"
    assert P.locate(words, "kings").row is None
    assert P.whole_words(words).tolist() == [True, True, False, False, False]


# ----------------------------------------------------------------------------- the two packaged models
def _require(name: str):
    from explorer.loading import pretrained
    from explorer.loading.loaders import load_model

    if not pretrained.is_installed(name):
        pytest.skip(f"pretrained:{name} is not installed")
    return load_model(f"pretrained:{name}")


@pytest.fixture(scope="module")
def smollm2():
    loaded = _require("smollm2")
    return loaded, P.embedding_table(loaded)


@pytest.fixture(scope="module")
def glove():
    loaded = _require("glove")
    return loaded, P.embedding_table(loaded)


def test_smollm2_reads_king_as_the_word_after_a_space(smollm2) -> None:
    loaded, table = smollm2
    king = P.locate(table, "king", loaded)
    assert (king.row, king.entry, king.start, king.start_row) == (4197, "·king", ("king",), 644)
    assert P.read_as(king, table).startswith("‘king’ → ·king, id 4197") and "king, id 644" in P.read_as(king, table)
    nn = P.neighbours(table, king.row, 10)
    assert "·queen" in nn.words and "·King" in nn.words
    for word in ("queen", "saw"):  # single entries after a space (split only at the start of a text)
        loc = P.locate(table, word, loaded)
        assert loc.found and loc.entry == "·" + word and not loc.split and len(loc.start) == 2
    man, woman = P.locate(table, "man", loaded), P.locate(table, "woman", loaded)
    assert P.analogy(table, king.row, man.row, woman.row, 3).words[0] == "·queen"
    whole = P.whole_words(table)
    assert whole[table.index["·king"]] and not whole[table.index["····"]] and not whole[table.index["ing"]]
    assert not whole[table.index["·,"]] and not whole[table.index["<|im_start|>"]]
    kept = [table.words[r] for r in P.background_rows(table, 5000, whole=True)]
    assert len(kept) == 5000 and all(w[0] == "·" and w[1:].isalpha() and len(w) >= 3 for w in kept)


def test_glove_neighbours_and_analogy_over_all_400k_words(glove) -> None:
    loaded, table = glove
    assert len(table) == 400_000 and table.order_kind == "frequency" and table.scheme == "plain"
    king = P.locate(table, "King", loaded)
    assert king.entry == "king" and king.how == "lowercased"
    got = P.neighbours(table, king.row, 10)
    V = loaded.model.weight.detach().numpy().astype(np.float64)  # an independent cosine over every row
    sims = V @ V[king.row] / (np.linalg.norm(V, axis=1) * np.linalg.norm(V[king.row])).clip(1e-30)
    sims[king.row] = -np.inf
    expected = np.argsort(-sims, kind="stable")[:10]
    assert list(got.rows) == expected.tolist()
    np.testing.assert_allclose(got.cos, sims[expected], atol=1e-5)
    man, woman = P.locate(table, "man", loaded), P.locate(table, "woman", loaded)
    assert P.analogy(table, king.row, man.row, woman.row, 5).words[0] == "queen"
    assert [table.words[r] for r in P.background_rows(table, 3)] == ["the", ",", "."]  # most frequent first


# ----------------------------------------------------------------------------- the same word in two sentences
def _drift(loaded, a: str, b: str, word: str):
    ta, tb = C.contextual(loaded, a), C.contextual(loaded, b)
    return ta, tb, C.drift(ta, tb, word)


def test_smollm2_default_pair_drifts_and_the_encoder_pair_would_not(smollm2) -> None:
    """A causal model with rotary positions: the same token has the same vector at the embeddings (no position
    vector), and only the words before 'bank' can move it. The default pair puts them first; 'bank' is pulled
    apart far more than between two sentences of the same sense; the encoder's pair ('bank' before its context)
    stays identical at every layer."""
    loaded, _ = smollm2
    a, b, word = C.drift_pair(loaded)
    assert (a, b, word) == C.PAIR_LEFT_TO_RIGHT
    ta, tb, d = _drift(loaded, a, b, word)
    assert ta.left_to_right and ta.positions == "rotary"
    assert ta.layer_names[0] == "embeddings" and ta.layer_names[1] == "after layer 0"
    assert ta.layer_names[-1] == "after layer 29 + final norm" and len(ta.layer_names) == 31
    assert d.cos[0] > 0.9999 and d.cos[-1] < 0.7
    control = _drift(loaded, a, "We walked along the muddy river bank", word)[2]
    assert control.cos[-1] > d.cos[-1] + 0.25  # the same sense stays close; the two senses are pulled apart
    story = " ".join(C.drift_story(ta, tb, d))
    assert "adds no position vector" in story and "A causal model reads only the tokens before" in story
    assert f"cos {d.cos[0]:.3f} at the embeddings" in story and f"{d.cos[-1]:.3f} after layer 29" in story
    same = _drift(loaded, *C.PAIR_BOTH_WAYS[:1], "the bank of the stream", "bank")
    assert np.allclose(same[2].cos, 1.0, atol=1e-5)  # the tokens before 'bank' agree: every layer identical
    assert "the tokens before ‘bank’ are the same in A and B" in " ".join(C.drift_story(*same))


def test_minilm_default_pair_drifts_apart_with_depth() -> None:
    loaded = _require("minilm")
    a, b, word = C.drift_pair(loaded)
    assert (a, b, word) == C.PAIR_BOTH_WAYS
    ta, tb, d = _drift(loaded, a, b, word)
    assert not ta.left_to_right and ta.positions == "learned" and d.span_a[0] == d.span_b[0] == 2
    assert ta.layer_names == ("embeddings", *(f"after layer {i}" for i in range(6)))
    assert d.cos[0] > 0.9999 and d.cos[-1] < 0.85  # same token, same position: identical; then apart
    control = _drift(loaded, a, "the bank of the stream", word)[2]
    assert control.cos[-1] > d.cos[-1] + 0.1
    story = " ".join(C.drift_story(ta, tb, d))
    assert "token 2 in both sentences" in story and "both directions" in story


def test_projection_legend_is_bounded_and_hover_keeps_each_class() -> None:
    """37 classes: the legend has MAX_LEGEND entries (the largest classes, then "n other classes" in grey), and the
    hover of a point in the grey group still names its own class."""
    from explorer.viz.theme import NORMAL
    from explorer.viz.word_embeddings import MAX_LEGEND, NO_CLASS, OTHER_COLOUR, projection_background

    classes = [f"class{i:02d}" for i in range(37) for _ in range(37 - i)] + [None] * 5
    words = [f"w{i}" for i in range(len(classes))]
    fig = projection_background(words, classes, np.random.default_rng(0).normal(size=(len(words), 2)), NORMAL)
    traces = [t.to_plotly_json() for t in fig.data]
    names = [t["name"] for t in traces]
    assert len(names) == MAX_LEGEND and names[-1] == NO_CLASS and names[-2] == "27 other classes"
    assert names[:MAX_LEGEND - 2] == [f"class{i:02d}" for i in range(MAX_LEGEND - 2)]  # the largest first
    rest = traces[-2]
    assert rest["marker"]["color"] == OTHER_COLOUR and len(rest["text"]) == sum(37 - i for i in range(10, 37))
    assert {row[1] for row in rest["customdata"]} == {f"class{i:02d}" for i in range(10, 37)}
    assert "class: %{customdata[1]}" in rest["hovertemplate"]
    assert len({t["marker"]["color"] for t in traces[:MAX_LEGEND - 2]}) == MAX_LEGEND - 2  # a colour each


def test_labels_of_close_typed_words_take_different_sides() -> None:
    """"king" and "queen" land side by side: their labels go on different sides; a far word keeps the top."""
    from explorer.viz.word_embeddings import label_positions

    coords = np.array([[0.0, 0.0], [0.01, 0.0], [0.02, 0.01], [1.0, 1.0]])
    sides = label_positions(coords)
    assert sides[0] == "top center" and len(set(sides[:3])) == 3 and sides[3] == "top center"
    assert label_positions(np.zeros((0, 2))) == []


def test_a_model_has_context_when_it_computes_vectors_in_the_sentence() -> None:
    """The word-embeddings view's 'same word in two sentences' says a word vector has no context only for models
    that are one vector per word; a recurrent network from a user's state dict has its layers' states (it used to
    be told it had none, by its family)."""
    from explorer.loading import pretrained
    from explorer.loading.loaders import load_model
    from explorer.probes import contextual_embeddings as CE

    for mid in ("builtin:word2vec", "pretrained:glove"):
        if mid != "pretrained:glove" or pretrained.is_installed("glove"):
            assert not CE.has_context(load_model(mid))
    words = ["the", "dog", "cat", "runs", "sleeps", "."]
    lstm = torch.nn.LSTM(8, 12, batch_first=True)
    state = {"embedding.weight": torch.randn(len(words) + 4, 8),
             **{f"rnn.{k}": v for k, v in lstm.state_dict().items()}}
    upload = LoadedModel("upload:lstm", "state-dict", None, "cpu", "float32", state_dict=state,
                         vocabs={"vocab": Vocab(["<pad>", "<unk>", "<bos>", "<eos>", *words], keep_ids=True)})
    for loaded in (upload, load_model("builtin:seq2seq-bahdanau"), load_model("builtin:tiny-gpt")):
        assert CE.has_context(loaded), loaded.id
        trace = CE.contextual(loaded, "the dog runs")
        assert len(trace.states) >= 2 and trace.states[-1].shape[0] == len(trace.tokens)
