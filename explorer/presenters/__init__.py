"""Presenters: one per view. A presenter takes a probe's record (its Trace) and the view's settings and returns a
`Presentation`: the named figures and tables with what their numbers are, and the notes, warnings and captions the
view says, as plain text. No Streamlit: the page lays a Presentation out (explorer.ui.present), the notebook returns
it (explorer.nb), so that both show the same figures and say the same words."""
