"""Neural NLP Explorer: the library behind the Streamlit app (no streamlit import outside explorer.ui)."""
from explorer import numba_cache as _numba_cache

__version__ = "0.1.0"

_numba_cache.configure()  # before anything imports umap/numba: compiled functions are kept on disk
