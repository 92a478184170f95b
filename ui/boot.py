"""Every page runs inside app.py's ``st.navigation`` (sidebar, language, text).

Until app.py has called ``st.navigation`` once, a fresh server takes the
``pages/`` folder for Streamlit's older multipage mode: its first run lists the
page files in the sidebar (app.py among them) and, for a page URL (a bookmark,
after a restart), runs the page file alone. :func:`through_app`, called first by
app.py and by every page, turns that mode off and reruns, this time through
app.py's navigation (the URL picks the same page)."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
