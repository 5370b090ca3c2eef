"""Streamlit-only helpers: cached loaders, shared widgets, URL state, chart display.

This is the only package of `explorer` that imports streamlit.
"""
