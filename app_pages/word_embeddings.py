"""Word embeddings: PCA, t-SNE and UMAP of a whole vocabulary, neighbours, analogies, two-axis views and
contextual embeddings layer by layer."""
import streamlit as st

from explorer.ui import embedding_sections as S
from explorer.ui import settings
from explorer.ui.state import Controls
from explorer.ui.widgets import page_header, top_row, what_to_notice

c = Controls("word-embeddings")
page_header("Word embeddings",
            "A whole vocabulary projected with PCA, t-SNE or UMAP; nearest neighbours, analogies and two-axis views "
            "by cosine similarity; and how a sentence's token vectors move through the layers of a model.")
theme = settings.theme()
col_model, col_text = top_row()
# the projection's method and dimensions, and (under Vectors) where the table comes from and how much of it
columns = st.columns([1.2, 0.8, 1, 1.2], vertical_alignment="bottom")
vectors = columns[2].popover("Vectors", icon=":material/tune:", width="stretch")
v = S.pick_vectors(c, vectors, col_model)
text, found = S.highlighted(c, col_text, v)
fitted = S.projection_section(c, columns, vectors, v, found, theme)

here = ""  # the computed cosines of the same-word comparison, when this run drew it (quoted in what to notice)
section: str = c.radio("section", format_func=S.SECTIONS.get, label_visibility="collapsed")
if section == "neighbours":
    S.neighbours_section(c, v, found)
elif section == "analogies":
    S.analogies_section(c, v)
elif section == "axes":
    S.axes_section(c, v, fitted, found, theme)
elif section == "contextual":
    here = S.contextual_section(c, v, text, theme)
what_to_notice(S.notices(v, fitted, here))
