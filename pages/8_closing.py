"""Closing page: what a reader can safely ignore."""

import json

import streamlit as st

from ui import boot, state
from ui.i18n import ROOT

boot.through_app()

t = state.tr()
st.title(t("closing.title"))
st.markdown(t("closing.body"))
st.subheader(t("closing.glossary"))
glossary = json.loads((ROOT / "assets" / "glossary.json").read_text(encoding="utf-8"))
lang = t.lang
st.table(  # a static table wraps long meanings; the glossary's texts are ours, not the reader's
    {t("closing.col_term"): [g[lang]["term"] for g in glossary],
     t("closing.col_meaning"): [g[lang]["meaning"] for g in glossary]},
    hide_index=True,
)
st.caption(t("closing.credits"))
