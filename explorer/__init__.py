"""Neural NLP Explorer: the library behind the Streamlit app (no streamlit import outside explorer.ui)."""

__version__ = "0.1.0"
