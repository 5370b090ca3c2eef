"""Timing of the word-embedding view (pages/word_embeddings.py) on MiniLM's 30,522 × 384 word pieces, CPU.

    python bench/bench_word_embeddings.py [--runs 5] [--n 30000]

Rows: numba warm-up (a UMAP fit of 5,000 rows, which takes the NN-descent path, + transform; once per process), bare umap-learn fit of the N most frequent
(id order) MiniLM rows with the view's parameters (one run: it takes ~16 s on 2 cores), the page's first UMAP
projection of the same rows (AppTest, model and table already cached, progress shown), the ratio page / bare fit
(target <= 1.2), the cached reopen (a new session opening the same link; median of runs), and the typed-word
update (changing the typed words: entries outside the fitted N are placed by transform; median; target < 0.5 s).
PCA rows: bare scikit-learn PCA of the full table and the page with ?method=pca.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from _common import ROOT  # noqa: E402  (sets the environment first)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from explorer import projection as PR  # noqa: E402
from explorer.probes import embeddings as P  # noqa: E402
from explorer.loaders import load_model  # noqa: E402

PAGE = "pages/word_embeddings.py"


def page(params: dict[str, str]) -> tuple[AppTest, float]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    t0 = time.perf_counter()
    at.switch_page(PAGE)
    at.run()
    dt = time.perf_counter() - t0
    assert not at.exception, [e.value for e in at.exception]
    return at, dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--n", type=int, default=30000, help="rows fitted (the rest are placed by transform)")
    args = parser.parse_args()
    runs = max(5, args.runs)
    rows_out: list[tuple[str, float]] = []

    class _Rows(list):  # print each row as soon as it is measured (partial results survive a failure)
        def append(self, item: tuple[str, float]) -> None:
            super().append(item)
            print(f"  measured: {item[0]}: {item[1]:.2f}", file=sys.stderr, flush=True)

    rows_out = _Rows()

    loaded = load_model("pretrained:minilm", "cpu", "float32")
    table = P.embedding_table(loaded)
    rows = P.background_rows(table, args.n)
    X = table.vectors[rows]
    params = PR.params_for("umap")

    t0 = time.perf_counter()
    # > 4096 rows so that umap-learn's NN-descent path (used for the full table) is compiled too
    small = PR.fit(X[:5000], "umap", 2, {**params, "n_epochs": 20})
    PR.transform(small, X[:2])
    rows_out.append(("numba warm-up (UMAP fit of 5,000 rows, 20 epochs, + transform)", time.perf_counter() - t0))

    import umap

    t0 = time.perf_counter()
    reducer = umap.UMAP(n_components=2, n_neighbors=params["n_neighbors"], min_dist=params["min_dist"],
                        metric=params["metric"], low_memory=True)
    reducer.fit_transform(X)
    bare_umap = time.perf_counter() - t0
    rows_out.append((f"bare umap-learn fit, {len(X):,} × {X.shape[1]} (1 run)", bare_umap))

    t0 = time.perf_counter()
    from sklearn.decomposition import PCA

    PCA(n_components=2, svd_solver="covariance_eigh").fit_transform(table.vectors.astype(np.float64))
    rows_out.append((f"bare PCA, {len(table):,} × {table.dim}", time.perf_counter() - t0))

    base = {"model": "pretrained:minilm", "n": str(args.n), "dims": "2", "text": "king queen dog cat"}
    at, pca_page = page({**base, "method": "pca"})  # loads the model and the table into the caches
    _, pca_page = page({**base, "method": "pca"})
    rows_out.append(("page with ?method=pca (model cached, PCA cached)", pca_page))

    at, first = page({**base, "method": "umap"})
    rows_out.append(("page: first UMAP projection (same rows, with progress)", first))
    ratio = first / bare_umap
    rows_out.append(("ratio first projection / bare umap-learn fit", ratio))

    reopen = statistics.median(page({**base, "method": "umap"})[1] for _ in range(runs))
    rows_out.append((f"cached reopen: new session, same link (median of {runs})", reopen))

    tail = [table.words[r] for r in table.order[args.n: args.n + 400] if not table.special[r]]
    words = ["king queen", "dog cat horse", "paris london berlin", "red green blue", "man woman child",
             "apple banana bread", "doctor teacher nurse"]
    times = []
    for i in range(runs + 2):
        extra = " ".join(tail[3 * i: 3 * i + 3]) if len(tail) > 3 * i else ""
        at.text_input(key="text").set_value(f"{words[i % len(words)]} {extra}")
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, [e.value for e in at.exception]
    update = statistics.median(times[1:])
    rows_out.append((f"typed-word update (incl. words placed by transform; median of {len(times) - 1})", update))

    print(f"Word-embedding view, CPU ({torch.get_num_threads()} torch threads, {os.cpu_count()} cores visible), "
          f"pretrained:minilm word pieces, N = {args.n:,} of {len(table):,}")
    print(f"| {'measurement':<72} | {'s':>8} |")
    print(f"|{'-' * 74}|{'-' * 10}|")
    for name, value in rows_out:
        print(f"| {name:<72} | {value:>8.2f} |")
    print(f"\ntarget ratio <= 1.2: {'met' if ratio <= 1.2 else 'NOT met'}; cached reopen < 1 s: "
          f"{'met' if reopen < 1 else 'NOT met'}; typed-word update < 0.5 s: {'met' if update < 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
