"""Libraries that import one another, imported once by the first script run, before any page.

A class opening the app together starts many script runs at once, each on its own thread. When two of them import
modules that import each other (pandas imports pyarrow and narwhals; plotly and Streamlit's dataframe code import
pandas) from different ends at the same moment, Python breaks the cycle of import locks by handing one thread a
partially initialised module, and its page fails with e.g. "partially initialized module 'pandas' has no attribute
'Series'" (tests/test_serve.py met it on the decoding page's table). app.py imports this module first: the first
run imports them all while every other run waits on this one module's lock, holding no other. transformers has its
own such module (explorer.runtime.hf_runtime), imported when a view first needs it.

Then the heap these imports leave (with Streamlit's, imported before) is frozen out of the garbage collector
(explorer.runtime.heap): full collections stop walking ~260,000 objects that live as long as the process; and the
threads of the sessions' scripts hand the interpreter to one another every millisecond (explorer.runtime.threads).
"""
import narwhals
import numpy
import pandas
import plotly.graph_objects
import plotly.io
import pyarrow
import scipy.sparse.linalg
import torch

from explorer.runtime import heap, threads

__all__ = ["narwhals", "numpy", "pandas", "plotly", "pyarrow", "scipy", "torch"]

heap.freeze()
threads.share_interpreter()
