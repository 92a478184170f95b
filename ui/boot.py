"""Every page runs inside app.py's ``st.navigation`` (sidebar, language, text).

A fresh server asked first for a page URL (a bookmark, after a restart) has not yet
run app.py, so Streamlit still takes the ``pages/`` folder for its older multipage
mode and would run the page file alone. :func:`through_app` turns that mode off
and reruns, this time through app.py (the page's URL picks the same page)."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
