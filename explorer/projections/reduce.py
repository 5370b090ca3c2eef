"""Fit PCA, t-SNE or UMAP on a table of vectors and place new points (pure: numpy, scikit-learn, umap-learn).

    proj = fit(X, "umap", dims=2, params={"n_neighbors": 15}, progress=lambda frac, msg: ...)
    proj.coords            # (N, dims) positions of the fitted rows
    transform(proj, Y)     # (M, dims) positions of new rows (PCA, UMAP), or None (t-SNE cannot place new points)

PCA: scikit-learn's PCA in float64 (centred; the eigenvectors of the D × D covariance for tall tables, else
the full SVD), exact and deterministic; `transform` is the same linear map.
t-SNE (van der Maaten & Hinton 2008): scikit-learn's Barnes-Hut TSNE (exact method above 3 dimensions is not
offered); it optimises positions of the given points only, so it has no transform.
UMAP (McInnes et al. 2018): umap-learn; `transform` places new points from their nearest fitted neighbours and
a short optimisation with the fitted points fixed. umap-learn compiles with numba on its first use in a process
(a minute or more on 2 cores; less once numba's disk cache holds the functions umap-learn and pynndescent mark
cache=True, see explorer/runtime/numba_cache.py); progress is reported per optimisation epoch.

`progress(fraction, message)` is called with fraction in [0, 1]; it may raise to cancel the fit (umap: at the
next epoch; PCA and t-SNE are not interruptible inside scikit-learn).

Seeds: t-SNE always uses `seed`; UMAP uses it only with `deterministic=True` (umap-learn then optimises on one
thread, reproducibly on the same library versions; the app's live fits are parallel and unseeded). Shipped
projections (explorer/projections/assets.py) are fitted deterministically.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from explorer.runtime import numba_cache
from explorer.runtime.errors import ViewError

numba_cache.configure()  # before umap imports numba: compiled functions are kept on disk

METHODS: dict[str, str] = {"pca": "PCA", "tsne": "t-SNE", "umap": "UMAP"}
CAN_TRANSFORM = {"pca": True, "tsne": False, "umap": True}
#: a method's parameters (perplexity, metric, n_neighbors, min_dist, n_epochs), as scikit-learn and umap-learn take them
Params = dict[str, float | str | None]
DEFAULTS: dict[str, Params] = {
    "pca": {},
    "tsne": {"perplexity": 30.0, "metric": "cosine"},
    "umap": {"n_neighbors": 15, "min_dist": 0.1, "metric": "cosine", "n_epochs": None},
}
Progress = Callable[[float, str], None]


class Placer(Protocol):
    """A fitted map that places new rows (scikit-learn's PCA, umap-learn's UMAP, a shipped asset's map)."""

    def transform(self, Y: np.ndarray) -> np.ndarray: ...


class ProjectionError(ViewError, ValueError):
    """The data cannot be projected as asked; str() is a message for the user."""

    alert = "warning"


@dataclass
class Projection:
    """A fitted projection. coords: (N, dims) float32 positions of the N fitted rows (in input order)."""

    method: str
    dims: int
    params: Params
    coords: np.ndarray
    model: Placer | None = field(repr=False, default=None)  # the fitted sklearn PCA / umap.UMAP (None for t-SNE)
    seconds: float = 0.0
    explained: tuple[float, ...] = ()  # PCA: explained variance ratio per component
    memo: dict = field(default_factory=dict, repr=False)  # derived results a caller keeps with the fit (figures, CSV)
    shipped: str = ""  # not empty for coordinates read from assets/projections: what was fitted, how, with what
    placement: str = ""  # how `transform` places new rows, when it is not the fitted method's own transform
    frame: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(repr=False, default=None)  # aligned(): (a, M, b)

    @property
    def can_transform(self) -> bool:
        return CAN_TRANSFORM[self.method]

    def __len__(self) -> int:
        return int(self.coords.shape[0])


def params_for(method: str, params: Mapping[str, float | str | None] | None = None) -> Params:
    """The method's default parameters updated with `params` (unknown keys dropped)."""
    if method not in METHODS:
        raise ProjectionError(f"Unknown projection method '{method}': use one of {', '.join(METHODS)}.")
    merged = dict(DEFAULTS[method])
    for key, value in (params or {}).items():
        if key in merged:
            merged[key] = value
    return merged


def check(X: np.ndarray, method: str, dims: int) -> str | None:
    """Why X (N, D) cannot be projected to `dims` with `method`, or None when it can."""
    if dims not in (2, 3):
        return f"Projections are 2-D or 3-D, not {dims}-D."
    if X.ndim != 2:
        return f"Expected a (rows, dimensions) table, got shape {X.shape}."
    n, d = X.shape
    if d < dims:
        return (f"The vectors have {d} dimension{'s' if d != 1 else ''}: a {dims}-D projection needs at least {dims}. "
                + ("With 1-D vectors every word is a point on a line: compare the values directly." if d == 1 else
                   "Choose 2-D."))
    if n < dims + 1:
        return f"{n} row(s) are too few to fit a {dims}-D projection (at least {dims + 1} needed)."
    if method == "umap" and n < 4:
        return "UMAP needs at least 4 points."
    if not np.isfinite(X).all():
        return "The table holds NaN or infinite values."
    return None


def _noop(fraction: float, message: str) -> None:  # pragma: no cover - trivial
    pass


class _TqdmSink:
    """A file for tqdm (bar_format '{n}/{total}') that turns its writes into progress(fraction) calls."""

    _PAT = re.compile(r"(\d+)/(\d+)")

    def __init__(self, progress: Progress, start: float, span: float, label: str) -> None:
        self.progress, self.start, self.span, self.label = progress, start, span, label

    def write(self, text: str) -> int:
        found = self._PAT.findall(text)
        if found:
            n, total = (int(v) for v in found[-1])
            if total:
                self.progress(self.start + self.span * n / total, f"{self.label}: epoch {n}/{total}")
        return len(text)

    def flush(self) -> None:
        pass


def fit(X: np.ndarray, method: str, dims: int = 2, params: Mapping[str, float | str | None] | None = None,
        progress: Progress | None = None, seed: int = 0, deterministic: bool = False) -> Projection:
    """Fit `method` on X (N, D) -> Projection with coords (N, dims). Raises ProjectionError for bad input.
    deterministic: UMAP with random_state=seed (see the module docstring)."""
    progress = progress or _noop
    X = np.ascontiguousarray(X, dtype=np.float32)
    reason = check(X, method, dims)
    if reason:
        raise ProjectionError(reason)
    fitted = params_for(method, params)
    n = X.shape[0]
    t0 = time.perf_counter()
    explained: tuple[float, ...] = ()
    if method == "pca":
        from sklearn.decomposition import PCA

        progress(0.0, f"PCA of {n:,} vectors")
        # float64 for accuracy; for tall tables (N >> D) the D × D covariance route is fast and exact
        solver = "covariance_eigh" if X.shape[0] >= 4 * X.shape[1] else "full"
        try:
            model = PCA(n_components=dims, svd_solver=solver)
            coords = model.fit_transform(X.astype(np.float64))
        except ValueError:  # scikit-learn < 1.5 has no covariance_eigh
            model = PCA(n_components=dims, svd_solver="full")
            coords = model.fit_transform(X.astype(np.float64))
        explained = tuple(float(v) for v in model.explained_variance_ratio_)
    elif method == "tsne":
        from sklearn.manifold import TSNE

        asked = fitted["perplexity"]
        assert not isinstance(asked, (str, type(None)))  # a number (min() refuses a text or None)
        perplexity = float(min(asked, max(1.0, (n - 1) / 3.0)))
        fitted["perplexity"] = perplexity
        progress(0.0, f"t-SNE of {n:,} vectors (perplexity {perplexity:g}); this cannot show finer progress")
        model = None
        coords = TSNE(n_components=dims, perplexity=perplexity, metric=fitted["metric"], init="pca",
                      random_state=seed, method="barnes_hut").fit_transform(X)
    else:
        import umap  # noqa: F401  (import is slow the first time: numba)

        asked = fitted["n_neighbors"]
        assert not isinstance(asked, (str, type(None)))  # a number (min() refuses a text or None)
        n_neighbors = int(min(asked, n - 1))
        fitted["n_neighbors"] = n_neighbors
        min_dist = fitted["min_dist"]
        assert min_dist is not None  # a number or its text (float() refuses None)
        progress(0.02, f"UMAP of {n:,} vectors: nearest neighbours (a server's first UMAP also compiles umap-learn's "
                       "numba code)")
        sink = _TqdmSink(progress, 0.3, 0.7, "UMAP layout")
        model = umap.UMAP(n_components=dims, n_neighbors=n_neighbors, min_dist=float(min_dist),
                          metric=fitted["metric"], low_memory=True, n_epochs=fitted["n_epochs"],
                          random_state=seed if deterministic else None, n_jobs=1 if deterministic else -1,
                          tqdm_kwds={"disable": False, "file": sink, "bar_format": "{n}/{total}", "mininterval": 0.25,
                                     "ascii": True})
        coords = model.fit_transform(X)
    coords = np.asarray(coords, dtype=np.float32)
    progress(1.0, f"{METHODS[method]} done")
    return Projection(method, dims, fitted, coords, model, time.perf_counter() - t0, explained)


def transform(proj: Projection, Y: np.ndarray) -> np.ndarray | None:
    """Positions (M, dims) of new rows Y (M, D) in the fitted space; None when the method cannot place new points."""
    if not proj.can_transform or proj.model is None:
        return None
    Y = np.ascontiguousarray(np.atleast_2d(Y), dtype=np.float32)
    if Y.shape[0] == 0:
        return np.zeros((0, proj.dims), dtype=np.float32)
    coords = np.asarray(proj.model.transform(Y), dtype=np.float32)
    if proj.frame is not None:  # a fit rotated onto another (aligned): its new points too
        a, M, b = proj.frame
        coords = ((coords - a) @ M + b).astype(np.float32)
    return coords


def aligned(proj: Projection, target: np.ndarray, placement: str) -> Projection:
    """`proj` turned, mirrored, scaled and shifted to best match `target` (N, dims), the coordinates of the same rows
    in another fit (orthogonal Procrustes with scale: min over M = sR, R orthogonal, of |(X − a)M + b − Y|). A
    t-SNE or UMAP map's axes mean nothing: this puts, e.g., a training step's map in the trained model's frame
    without changing any distance between its points (up to the one scale)."""
    X = np.asarray(proj.coords, dtype=np.float64)
    Y = np.asarray(target, dtype=np.float64)
    a, b = X.mean(axis=0), Y.mean(axis=0)
    X0, Y0 = X - a, Y - b
    U, S, Vt = np.linalg.svd(X0.T @ Y0)
    M = (U @ Vt) * (S.sum() / max(float((X0 ** 2).sum()), 1e-12))              # (dims, dims)
    return Projection(proj.method, proj.dims, proj.params, (X0 @ M + b).astype(np.float32), proj.model, proj.seconds,
                      proj.explained, shipped=proj.shipped, placement=placement, frame=(a, M, b))


def pca(X: np.ndarray, dims: int = 2) -> tuple[np.ndarray, tuple[float, ...]]:
    """Plain PCA coordinates (N, dims) and explained-variance ratios (for small tables such as one sentence)."""
    proj = fit(X, "pca", dims)
    return proj.coords, proj.explained


__all__ = ["METHODS", "CAN_TRANSFORM", "DEFAULTS", "Projection", "ProjectionError", "params_for", "check", "fit",
           "transform", "aligned", "pca"]
