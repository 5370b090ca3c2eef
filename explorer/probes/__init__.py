"""Pure probes: model + text -> a Trace of numpy arrays (no streamlit, no plotly)."""
