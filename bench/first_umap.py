"""The first UMAP of a fresh process: the word-embedding view's default UMAP of MiniLM's whole words (5,000 rows,
n_neighbors 15, min_dist 0.1, cosine), from request to coordinates, with the model and its table already loaded
(their load time is printed apart). Prints one JSON line.

    python bench/first_umap.py shipped     # the shipped asset (explorer/projection_assets.find)
    python bench/first_umap.py fit         # a fit as the page's background job runs it: fit + the transform warm-up

Run it in a new process each time; NUMBA_CACHE_DIR chooses numba's disk cache (an empty folder: a cold cache).
bench/bench_word_embeddings.py runs the three cases (shipped; fit, cold cache; fit, warm cache).
"""
from __future__ import annotations

import json
import os
import sys
import time

from _common import ROOT  # sets the import path and the offline environment first


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "shipped"
    os.chdir(ROOT)  # as the app runs
    t0 = time.perf_counter()
    from explorer.startup import precompute_projections as PP
    from explorer.projections import reduce as PR

    spec = next(s for s in PP.specs() if s.name == "minilm-whole-umap-2d")
    table, rows = PP.table_rows(spec)
    out = {"mode": mode, "load_model_and_table_s": time.perf_counter() - t0, "rows": len(rows),
           "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR", "")}
    params = PP.request_params("umap")
    t0 = time.perf_counter()
    if mode == "shipped":
        from explorer.projections import assets as A

        proj = A.find(table, rows, "umap", 2, params)
        assert proj is not None, "no shipped asset matches"
        out["request_to_coords_s"] = time.perf_counter() - t0
    else:
        proj = PR.fit(table.vectors[rows], "umap", 2, params)
        out["fit_s"] = time.perf_counter() - t0
        PR.transform(proj, table.vectors[rows[:1]])  # what the background job does before it reports done
        out["request_to_coords_s"] = time.perf_counter() - t0
    out["coords"] = list(proj.coords.shape)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
