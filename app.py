"""Attention Atlas: why attention costs n², and how windows, hubs and linear
attention escape it — on the reader's own text, with a real model.

    .venv/bin/streamlit run app.py
"""

from contextlib import nullcontext

import streamlit as st

from attn import model as atlas_model
from attn import settings
from ui import boot, state, widgets
from ui.i18n import LANGS
from ui.steps import PAGES

boot.through_app()
st.set_page_config(page_title="Attention Atlas", page_icon=":material/explore:", layout="wide")

lang = state.init_language()
presenting = state.init_presenter()
state.init_text()
t = state.tr()

nav = st.navigation([
    st.Page(p.path, title=t(p.title_key), url_path=p.url_path, icon=p.icon, default=p.default) for p in PAGES
])

with st.sidebar:
    st.markdown(f"### :material/explore: {t('app.name')}")
    if not presenting:
        st.caption(t("app.tagline"))
    st.selectbox(
        t("sidebar.language"),
        list(LANGS),
        index=list(LANGS).index(lang),
        format_func=LANGS.get,
        key="lang_choice",
        on_change=state.on_language_change,
    )
    st.toggle(t("sidebar.presenter"), value=presenting, key="presenter_choice", on_change=state.on_presenter_change,
              help=t("sidebar.presenter_help"))
    state.write_url()  # the sidebar's page links drop the query: write language and mode back
    # on a projector the controls fold away; the language stays one click away
    with st.expander(t("sidebar.controls"), expanded=False) if presenting else nullcontext():
        st.text_area(t("sidebar.text"), key="text", height=200, help=t("sidebar.text_help"))
        st.button(t("sidebar.restore"), on_click=state.restore_sample, width="stretch")
        with st.popover(t("closing.glossary"), icon=":material/menu_book:", width="stretch"):
            widgets.glossary_table(t)
        st.caption(t("sidebar.device", device=state.device_line()))
        name = atlas_model.MODEL_LABEL if settings.read().model_kind == "gemma" else t("sidebar.tiny_model")
        st.caption(t("sidebar.about", model=name, quant=atlas_model.QUANT_LABEL, licence=atlas_model.LICENCE_LABEL))
if presenting:
    widgets.presenter_style()

state.keep_settings()
nav.run()
# after the first page is drawn: compile FlexAttention in the background, once per process
state.start_flex_warmup()
