"""Warm a fresh install before a class: load every built-in model and the packaged pretrained models once (a check
that they load; SmolLM2 is converted from GGUF to float32 safetensors in the user cache), and compile umap-learn's numba
functions into the on-disk cache (explorer.runtime.numba_cache).

    python -m explorer.startup.warmup        # also run by the Dockerfile, so every replica starts warm
"""
from __future__ import annotations

import os
import time

import numpy as np

from explorer.loading import pretrained
from explorer.loading.catalogue import builtin_names
from explorer.loading.loaders import load_model


def main() -> int:
    print(f"numba cache: {os.environ.get('NUMBA_CACHE_DIR') or 'numba default'}")
    ids = [f"builtin:{name}" for name in builtin_names()] + [p.id for p in pretrained.available()]
    for model_id in ids:
        start = time.perf_counter()
        loaded = load_model(model_id)
        print(f"{model_id}: loaded in {time.perf_counter() - start:.2f} s ({loaded.family})")
    from explorer.projections.reduce import fit, transform

    start = time.perf_counter()
    # 5,000 rows: above umap-learn's 4,096-row threshold, so the nearest-neighbour descent (pynndescent) and the
    # transform of typed words are compiled too, not only the small-table exact path
    X = np.random.default_rng(0).standard_normal((5000, 32)).astype(np.float32)
    proj = fit(X, "umap", dims=2)
    transform(proj, X[:4])
    print(f"UMAP fit and transform compiled in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
