"""Neural NLP Explorer: the library behind the Streamlit app (no streamlit import outside explorer.ui).

The folders are the architecture, lowest first: runtime, text, files, data, models, adapters, loading, param_kinds,
views, metrics, projections, probes, training, lessons, viz, presenters, nb, ui, startup (docs/ARCHITECTURE.md;
tests/test_architecture.py).
"""
