"""Attention Atlas: why attention costs n², and how windows, hubs and linear
attention escape it — on the reader's own text, with a real model.

    .venv/bin/streamlit run app.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import streamlit as st  # noqa: E402

from attn import model as atlas_model  # noqa: E402
from ui import boot, state  # noqa: E402
from ui.i18n import LANGS  # noqa: E402

boot.through_app()
st.set_page_config(page_title="Attention Atlas", page_icon=":material/explore:", layout="wide")

lang = state.init_language()
state.init_text()
t = state.tr()

PAGES = [
    ("pages/1_every_pair.py", "every-pair", ":material/grid_on:"),
    ("pages/2_nearly_empty.py", "nearly-empty", ":material/grain:"),
    ("pages/3_neighbours.py", "neighbours", ":material/swap_horiz:"),
    ("pages/4_hubs.py", "hubs", ":material/hub:"),
    ("pages/5_linear.py", "linear", ":material/linear_scale:"),
    ("pages/6_honest_catch.py", "honest-catch", ":material/balance:"),
    ("pages/7_payoff.py", "payoff", ":material/speed:"),
    ("pages/8_closing.py", "closing", ":material/school:"),
]
pages = [
    st.Page(path, title=t(f"nav.page{i + 1}"), url_path=url, icon=icon, default=(i == 0))
    for i, (path, url, icon) in enumerate(PAGES)
]
nav = st.navigation(pages)

with st.sidebar:
    st.markdown(f"### :material/explore: {t('app.name')}")
    st.caption(t("app.tagline"))
    st.selectbox(
        t("sidebar.language"),
        list(LANGS),
        index=list(LANGS).index(lang),
        format_func=LANGS.get,
        key="lang_choice",
        on_change=state.on_language_change,
    )
    if st.query_params.get("lang") != lang:
        st.query_params["lang"] = lang
    st.text_area(t("sidebar.text"), key="text", height=200, help=t("sidebar.text_help"))
    st.button(t("sidebar.restore"), on_click=state.restore_sample, width="stretch")
    st.caption(t("sidebar.device", device=state.device_line()))
    name = atlas_model.MODEL_LABEL if state.model_kind() == "gemma" else t("sidebar.tiny_model")
    st.caption(t("sidebar.about", model=name, quant=atlas_model.QUANT_LABEL, licence=atlas_model.LICENCE_LABEL))

nav.run()
# after the first page is drawn: compile FlexAttention in the background, once per process
state.start_flex_warmup()
