"""Projections shipped with the app: precomputed PCA, t-SNE and UMAP coordinates of the word-embedding view's
default tables, used only when a request matches one exactly, so a class never waits for a first fit.

An asset is `assets/projections/<name>.json` (what was fitted: the table's key, the rows' ids and words, a SHA-256
fingerprint of those rows' words and float32 vectors, method, dims, parameters, seed, library versions) and
`<name>.safetensors` (rows (N,) int64; coords (N, dims) float32; PCA also mean (D,) and components (dims, D), so
typed words are placed exactly). `find` returns a Projection only when the table key, rows, method, dims,
parameters and fingerprint all match: a table that differs in one bit never uses them.
`python -m explorer.startup.precompute_projections` writes them; tests/test_projection_assets.py refits each one.

Words outside the fitted rows are placed by PCA's linear map, or for UMAP as umap-learn's transform starts
them (`NeighbourMap`); t-SNE places none.
"""
from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from explorer.projections.reduce import METHODS, Params, Placer, Projection
from explorer.runtime.paths import app_root

ASSET_DIR = app_root() / "assets" / "projections"
FORMAT = 1
LIBRARIES = ("numpy", "scikit-learn", "umap-learn", "pynndescent", "numba")


class Table(Protocol):
    """The embedding table a projection is fitted on (explorer.probes.word_embeddings.EmbeddingTable)."""

    @property
    def key(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def words(self) -> Sequence[str]: ...
    @property
    def vectors(self) -> np.ndarray: ...

    def __len__(self) -> int: ...


@runtime_checkable
class _FittedPCA(Protocol):
    """scikit-learn's fitted PCA: what a shipped PCA keeps of it."""

    mean_: np.ndarray
    components_: np.ndarray


def fingerprint(words: Sequence[str], X: np.ndarray) -> str:
    """SHA-256 of the rows' words and their (N, D) vectors as C-ordered float32."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    h = hashlib.sha256(f"{X.shape[0]}x{X.shape[1]}\n".encode())
    h.update("\n".join(words).encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(X.tobytes())
    return h.hexdigest()


def versions() -> dict[str, str]:
    """Installed versions of the libraries a fit depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


class LinearMap:
    """PCA as shipped: transform(Y (M, D)) = (Y − mean) @ componentsᵀ, (M, dims), computed in float64."""

    def __init__(self, mean: np.ndarray, components: np.ndarray) -> None:
        self.mean, self.components = mean.astype(np.float64), components.astype(np.float64)

    def transform(self, Y: np.ndarray) -> np.ndarray:
        return (np.asarray(Y, dtype=np.float64) - self.mean) @ self.components.T


class NeighbourMap:
    """New rows placed as umap-learn's `UMAP.transform` starts them, before its refinement epochs: the average of
    the positions of their k nearest fitted rows (exact search, the fit's metric), weighted by UMAP's membership
    strengths exp(−d/σ), σ found by binary search so that Σ_{j≥2} exp(−d_j/σ) = log2 k (local connectivity 0, as
    transform uses). X: (N, D) fitted rows; coords: (N, dims)."""

    def __init__(self, X: np.ndarray, coords: np.ndarray, k: int, metric: str) -> None:
        self.X, self.coords, self.k, self.metric = X.astype(np.float32), coords, int(min(k, len(X))), metric
        self.unit = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12) if metric == "cosine" else None

    def _distances(self, Y: np.ndarray) -> np.ndarray:
        if self.unit is not None:
            U = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12)
            return np.maximum(0.0, 1.0 - U.astype(np.float64) @ self.unit.T.astype(np.float64))
        sq = (Y.astype(np.float64) ** 2).sum(1)[:, None] - 2 * Y.astype(np.float64) @ self.X.T.astype(np.float64) \
            + (self.X.astype(np.float64) ** 2).sum(1)[None, :]
        return np.sqrt(np.maximum(sq, 0.0))

    def transform(self, Y: np.ndarray) -> np.ndarray:
        Y = np.atleast_2d(np.asarray(Y, dtype=np.float32))
        D = self._distances(Y)
        idx = np.argsort(D, axis=1, kind="stable")[:, : self.k]
        d = np.take_along_axis(D, idx, axis=1)
        target, lo, hi, sigma = np.log2(self.k), np.zeros(len(Y)), np.full(len(Y), np.inf), np.ones(len(Y))
        for _ in range(64):  # umap-learn's smooth_knn_dist, vectorised over rows
            psum = np.where(d[:, 1:] > 0, np.exp(-d[:, 1:] / sigma[:, None]), 1.0).sum(1)
            high = psum > target
            hi = np.where(high, sigma, hi)
            lo = np.where(high, lo, sigma)
            sigma = np.where(np.isinf(hi), sigma * 2, (lo + hi) / 2)
        sigma = np.maximum(sigma, 1e-3 * d.mean())  # umap-learn's MIN_K_DIST_SCALE × the mean k-NN distance
        w = np.where(d > 0, np.exp(-d / sigma[:, None]), 1.0)
        w /= w.sum(1, keepdims=True)
        return np.einsum("mk,mkd->md", w, self.coords[idx].astype(np.float64))


@dataclass(frozen=True)
class Asset:
    """One shipped projection: its JSON record and where its arrays are."""

    name: str
    meta: dict
    arrays: Path


@lru_cache(maxsize=4)
def index(folder: Path = ASSET_DIR) -> tuple[Asset, ...]:
    """Every asset in `folder` (read once per process)."""
    out = []
    for path in sorted(folder.glob("*.json")):
        meta = json.loads(path.read_text(encoding="utf-8"))
        arrays = path.with_suffix(".safetensors")
        if meta.get("format") == FORMAT and arrays.is_file():
            out.append(Asset(path.stem, meta, arrays))
    return tuple(out)


def _arrays(asset: Asset) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(asset.arrays))


def find(table: Table, rows: np.ndarray, method: str, dims: int, params: Params,
         folder: Path = ASSET_DIR) -> Projection | None:
    """The shipped projection of `table` (an EmbeddingTable: key, words, vectors) rows `rows` (N,) with exactly
    this method, dims and parameters (as `projection.params_for` returns them), or None."""
    rows = np.asarray(rows, dtype=np.int64)
    for asset in index(folder):
        m = asset.meta
        if (m["table_key"], m["method"], m["dims"], m["n"]) != (table.key, method, dims, len(rows)) \
                or m["params"] != params:
            continue
        arrays = _arrays(asset)
        if not np.array_equal(arrays["rows"], rows):
            continue
        X = table.vectors[rows]
        if fingerprint([table.words[r] for r in rows], X) != m["fingerprint"]:
            continue
        return _projection(asset, arrays, X)
    return None


def describe(meta: dict) -> str:
    """What a shipped projection is, in one sentence part (for badges and captions)."""
    p = meta["fitted_params"]
    how = {"pca": "exact",
           "tsne": f"perplexity {p.get('perplexity', 0):g}, {p.get('metric')}, PCA initialisation, seed {meta['seed']}",
           "umap": f"n_neighbors {p.get('n_neighbors')}, min_dist {p.get('min_dist')}, {p.get('metric')}, "
                   f"seed {meta['seed']}"}[meta["method"]]
    lib = {"pca": "scikit-learn", "tsne": "scikit-learn", "umap": "umap-learn"}[meta["method"]]
    return (f"precomputed {METHODS[meta['method']]} coordinates shipped with the app ({how}; {lib} "
            f"{meta['versions'].get(lib, '?')}), fitted on these {meta['n']:,} rows of this same table "
            f"(fingerprint {meta['fingerprint'][:12]} checked)")


def _projection(asset: Asset, arrays: dict[str, np.ndarray], X: np.ndarray) -> Projection:
    m = asset.meta
    coords = np.ascontiguousarray(arrays["coords"], dtype=np.float32)
    model: Placer | None = None
    placement = ""
    if m["method"] == "pca":
        model = LinearMap(arrays["mean"], arrays["components"])
    elif m["method"] == "umap":
        k = int(m["fitted_params"]["n_neighbors"])
        model = NeighbourMap(X, coords, k, m["fitted_params"]["metric"])
        placement = (f"the membership-weighted mean of the positions of their {k} nearest fitted entries, which is "
                     "where UMAP's transform starts them (its refinement epochs need a live fit)")
    return Projection(m["method"], int(m["dims"]), dict(m["fitted_params"]), coords, model, 0.0,
                      tuple(m.get("explained", ())), shipped=describe(m), placement=placement)


def save(name: str, table: Table, rows: np.ndarray, params: Params, proj: Projection, seed: int,
         rows_note: str = "", folder: Path = ASSET_DIR) -> Path:
    """Write `proj` (fitted on table rows `rows` with request parameters `params`) as asset `name`; returns the
    JSON path. rows_note: which rows these are, in words (e.g. "5,000 first whole-word entries")."""
    from safetensors.numpy import save_file

    rows = np.asarray(rows, dtype=np.int64)
    words = [table.words[r] for r in rows]
    arrays = {"rows": rows, "coords": np.ascontiguousarray(proj.coords, dtype=np.float32)}
    if proj.method == "pca":
        assert isinstance(proj.model, _FittedPCA)  # fit's (it has both)
        arrays["mean"] = np.asarray(proj.model.mean_, dtype=np.float64)
        arrays["components"] = np.asarray(proj.model.components_, dtype=np.float64)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(folder / f"{name}.safetensors"))
    meta = {"format": FORMAT, "table_key": table.key, "table_source": table.source, "table_rows": len(table),
            "n": len(rows), "rows": rows_note, "method": proj.method, "dims": proj.dims, "params": params,
            "fitted_params": proj.params, "seed": seed, "deterministic": True, "explained": list(proj.explained),
            "fingerprint": fingerprint(words, table.vectors[rows]), "versions": versions(),
            "python": platform.python_version(), "fit_seconds": round(proj.seconds, 2), "words": words}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    index.cache_clear()
    return path


__all__ = ["ASSET_DIR", "Asset", "LinearMap", "NeighbourMap", "describe", "find", "fingerprint", "index", "save",
           "versions"]
