"""The floor Streamlit itself sets, for bench/classroom.py: a trivial page with the same
kind of sidebar as the app, one cached 372×372 heatmap and a 372-option select box.
Whatever the app costs beyond this page is ours."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")

with st.sidebar:
    st.selectbox("Language", ["ja", "pt", "en"], key="lang")
    st.text_area("Text", "A short text.", key="text", height=200)
    st.caption("A caption, as the app's sidebar has.")


@st.cache_resource
def heatmap() -> go.Figure:
    z = np.random.default_rng(0).random((372, 372))
    return go.Figure(go.Heatmap(z=z, colorscale="Viridis"))


st.title("Floor")
st.plotly_chart(heatmap(), key="grid")
st.selectbox("Token", list(range(372)), index=371, key="token")
st.metric("tokens", "372")
