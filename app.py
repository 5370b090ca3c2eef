"""Neural NLP Explorer — router only: page config, sidebar settings, navigation."""
import streamlit as st

import explorer.preload  # first: see its docstring (a class opening the app at once)
from explorer.device import configure_threads
from explorer.ui import lessons, settings
from explorer.views import HOME, VIEWS

configure_threads()
st.set_page_config(page_title="Neural NLP Explorer", page_icon=":material/neurology:", layout="wide")

sections: dict[str, list] = {}
for view in VIEWS:
    page = st.Page(view.script, title=view.title, icon=view.icon, url_path=view.url_path, default=view is HOME)
    sections.setdefault(view.section, []).append(page)

current = st.navigation(sections)
settings.sidebar()
lessons.frame(current.url_path)  # lesson bar and navigation, "save this view as a step"
current.run()
