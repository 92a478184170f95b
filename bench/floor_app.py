"""The floor Streamlit itself sets, for bench/classroom.py: a trivial page with the same
kind of sidebar as the app, one cached 372×372 heatmap and a 372-option select box.
Whatever the app costs beyond this page is ours.

With ``ATLAS_FLOOR_FOLLOW`` naming a file, it is the floor of a class that follows: four
such pages (st.navigation), and in the sidebar a fragment rerun every second, as a
student's poll is, that reads the page named in the file and switches to it when the
reader is elsewhere. The bench writes the file as a teacher's move."""

import os

import numpy as np
import plotly.graph_objects as go
import streamlit as st

FOLLOW = os.environ.get("ATLAS_FLOOR_FOLLOW")
PAGES = ("one", "two", "three", "four")

st.set_page_config(page_title="floor", layout="wide")


@st.cache_resource
def heatmap() -> go.Figure:
    z = np.random.default_rng(0).random((372, 372))
    return go.Figure(go.Heatmap(z=z, colorscale="Viridis"))


def floor(title: str = "Floor") -> None:
    st.title(title)
    st.plotly_chart(heatmap(), key="grid")
    st.selectbox("Token", list(range(372)), index=371, key="token")
    st.metric("tokens", "372")


def pages() -> dict:
    """The pages, made anew each run (st.navigation marks the page it returns as run)."""
    return {name: st.Page(lambda name=name: floor(name), title=name, url_path=name, default=name == PAGES[0])
            for name in PAGES}


@st.fragment(run_every=1.0)
def poll(here: str) -> None:
    """A student's tick: where the class is, and a switch there when it is elsewhere."""
    try:
        with open(FOLLOW, encoding="utf-8") as f:
            there = f.read().strip()
    except OSError:
        return
    if there in PAGES and there != here:
        st.switch_page(pages()[there])
    st.caption(f"the class is on {there or PAGES[0]}")


with st.sidebar:
    st.selectbox("Language", ["ja", "pt", "en"], key="lang")
    st.text_area("Text", "A short text.", key="text", height=200)
    st.caption("A caption, as the app's sidebar has.")

if FOLLOW:
    current = st.navigation(list(pages().values()), position="hidden")
    with st.sidebar:
        poll(current.title)
    current.run()
else:
    floor()
