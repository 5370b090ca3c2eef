"""numba's compile cache on disk, so that umap-learn/pynndescent functions compiled with cache=True are compiled
once per machine rather than once per process.

`configure()` sets NUMBA_CACHE_DIR to `$XDG_CACHE_HOME/neural-nlp-explorer/numba` (default `~/.cache/…`) unless
the variable is already set (a user's value, even empty, is kept) or numba is already imported (it reads the
variable once, at import). Called when explorer.projections.reduce is imported, before it imports umap (nothing else in
the explorer imports umap or numba).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_dir() -> Path:
    """Where the explorer keeps numba's cache: $XDG_CACHE_HOME (default ~/.cache)/neural-nlp-explorer/numba."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neural-nlp-explorer" / "numba"


def configure() -> str | None:
    """Set NUMBA_CACHE_DIR when nobody has; returns the directory numba will use (None: numba's own default)."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return os.environ["NUMBA_CACHE_DIR"] or None
    if "numba" in sys.modules:  # too late: numba read its configuration when it was imported
        return None
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable home: numba falls back to its own locations
        return None
    if not os.access(path, os.W_OK):
        return None
    os.environ["NUMBA_CACHE_DIR"] = str(path)
    return str(path)
