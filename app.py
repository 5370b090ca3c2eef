"""Neural NLP Explorer — router only: page config, sidebar settings, navigation."""
import contextlib

import streamlit as st

import explorer.ui.container_stack  # noqa: F401 -- side effect, before any st call: see its docstring
import explorer.runtime.preload  # noqa: F401 -- side effect, before the rest: see its docstring (a class opens at once)
from explorer.runtime.device import configure_threads
from explorer.ui import lessons, reconnect, settings, upload_store, widget_guard
from explorer.views import HOME, PAGE_ICON, VIEWS

configure_threads()
upload_store.install()  # budgets on Streamlit's store of uploaded files (once per process)
widget_guard.install()  # widget values from the websocket checked before a script reads them (once per process)
reconnect.install()  # a closed tab's session shut down after its reconnect window (once per process)
# projector mode starts with the sidebar collapsed: the first screen is for the chart (its arrow opens the settings)
st.set_page_config(page_title="Neural NLP Explorer", page_icon=PAGE_ICON, layout="wide",
                   initial_sidebar_state="collapsed" if settings.projector_requested() else "auto")

# Streamlit serves the default page at "/" only (its url_path reads ""), so /overview, Home's own path, answered "Page
# not found". Home is therefore also a hidden page at /overview. Streamlit tells pages apart by their url_path,
# default or not, so the default one is named "home" (never in a URL); the alias comes after it, so that
# st.switch_page(home.py) (a lesson step on Home) opens "/".
sections: dict[str, list] = {}
for view in VIEWS:
    home = view is HOME
    page = st.Page(view.script, title=view.title, icon=view.icon, url_path="home" if home else view.url_path,
                   default=home)
    sections.setdefault(view.section, []).append(page)
sections[HOME.section].append(st.Page(HOME.script, title=HOME.title, icon=HOME.icon, url_path=HOME.url_path,
                                      visibility="hidden"))

current = st.navigation(sections)
settings.sidebar()
area = lessons.frame(current.url_path)  # lesson panel and navigation, "save this view as a step"
upload_store.show_refusal()  # why a file sent to an upload box was not kept, once
widget_guard.show_rejected()  # which control ignored a value sent to it, once
with area if area is not None else contextlib.nullcontext():  # a lesson step: the view beside its lesson panel
    current.run()
