"""Plotly figure builders: Trace -> go.Figure. No torch models, no streamlit here."""
