"""Streamlit-only helpers: cached loaders, shared widgets, URL state, chart display.

This is the only package of `explorer` that imports streamlit.
"""

try:  # app.py routes with st.navigation: never fall back to the legacy pages/ folder mode
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False
except ImportError:  # pragma: no cover - other Streamlit versions
    pass
