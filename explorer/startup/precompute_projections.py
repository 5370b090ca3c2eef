"""Regenerate the shipped projections (assets/projections/, see explorer/projections/assets.py): the word-embedding
view's default rows of builtin:word2vec, of MiniLM's whole words and of GloVe's most frequent words, projected with
PCA, t-SNE and UMAP in 2-D with the view's default parameters (read from its declaration in explorer/views.py),
seed 0, deterministically.

    python -m explorer.startup.precompute_projections            # all of them (about a minute on 2 cores, after numba)
    python -m explorer.startup.precompute_projections --list
    python -m explorer.startup.precompute_projections minilm-whole-umap-2d
    python -m explorer.startup.precompute_projections glove-pca-2d glove-tsne-2d glove-umap-2d
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

from explorer.projections import reduce as PR
from explorer.projections import assets as A

if TYPE_CHECKING:
    from explorer.probes.word_embeddings import EmbeddingTable

SEED = 0
# (asset prefix, model id, whole words only): what the page asks for by default. GloVe is a word vocabulary, where
# the page offers no whole-words toggle: its N most frequent entries.
TABLES = (("word2vec", "builtin:word2vec", False), ("minilm-whole", "pretrained:minilm", True),
          ("glove", "pretrained:glove", False))
DIMS = (2,)


@dataclass(frozen=True)
class Spec:
    """One shipped projection: asset name, model id, whole-words filter, method, dims."""

    name: str
    model_id: str
    whole: bool
    method: str
    dims: int


def view_defaults() -> dict[str, float | str | None]:
    """The word-embedding view's declared defaults (URL parameter name -> value: text, a number or None)."""
    from explorer.views import VIEWS

    view = next(v for v in VIEWS if v.url_path == "word-embeddings")
    return {name: p.default for name, p in view.params.items()}


def request_params(method: str, d: Mapping[str, float | str | None] | None = None) -> PR.Params:
    """The parameters the page asks for by default (what `projection.params_for` makes of its controls)."""
    d = d or view_defaults()
    asked = {"umap": {"n_neighbors": d["nb"], "min_dist": d["md"], "metric": d["metric"]},
             "tsne": {"perplexity": d["perp"], "metric": d["metric"]}, "pca": {}}[method]
    return PR.params_for(method, asked)


def specs() -> list[Spec]:
    return [Spec(f"{short}-{method}-{dims}d", mid, whole, method, dims)
            for short, mid, whole in TABLES for method in PR.METHODS for dims in DIMS]


def table_rows(spec: Spec) -> tuple[EmbeddingTable, np.ndarray]:
    """(EmbeddingTable, rows (N,)) the page projects by default for the spec's model (CPU, float32)."""
    from explorer.loading.loaders import load_model
    from explorer.probes import word_embeddings as P

    table = P.embedding_table(load_model(spec.model_id, "cpu", "float32"))
    n = view_defaults()["n"]
    assert isinstance(n, int)  # declared P("int", ...) in explorer/views.py
    return table, P.background_rows(table, int(n), spec.whole)


def fit_spec(spec: Spec, table: EmbeddingTable, rows: np.ndarray) -> PR.Projection:
    """A fresh, deterministic fit of the spec's rows (what the shipped asset holds)."""
    return PR.fit(table.vectors[rows], spec.method, spec.dims, request_params(spec.method), seed=SEED,
                  deterministic=True)


def build(spec: Spec) -> str:
    table, rows = table_rows(spec)
    proj = fit_spec(spec, table, rows)
    path = A.save(spec.name, table, rows, request_params(spec.method), proj, SEED,
                  rows_note=table.first(len(rows), spec.whole))
    return f"{path.relative_to(A.ASSET_DIR.parent.parent)}: {len(rows):,} rows, {proj.seconds:.1f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m explorer.startup.precompute_projections",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="asset names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the asset names")
    args = ap.parse_args(argv)
    todo = specs()
    if args.list:
        print("\n".join(s.name for s in todo))
        return 0
    unknown = set(args.names) - {s.name for s in todo}
    if unknown:
        print(f"unknown: {', '.join(sorted(unknown))}; see --list", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    for spec in todo:
        if not args.names or spec.name in args.names:
            print(build(spec), flush=True)
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
