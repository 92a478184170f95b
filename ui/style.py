"""The page's own fixed style, one job: its CSS (contrast, wrapping, presenter mode's
sizes) and the language it tells the browser. Nothing here holds a reader's text or an
address's value: each st.html below is a constant of ours (``page_language`` takes one of
our language codes, checked)."""

from __future__ import annotations

import json

import streamlit as st

from .i18n import LANGS


BASE_CSS = """
<style>
/* WCAG AA: Streamlit's faded grey (#767c83, 4.2:1 on white) is too light for captions and
   key hints on a projector; this grey reads 7.3:1 on white and 6.7:1 on the sidebar. */
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p,
.stApp kbd, .stApp [data-testid="stWidgetLabel"] small { color: #4f5660; opacity: 1; }
/* formulas never scroll (a scrolling region without anything to focus is out of reach
   of the keyboard) */
.stApp .katex-display { overflow: visible; }
/* a class's vote is answered on phones: each option and button a large touch target */
.stApp [class*="st-key-vote_"] button { min-height: 48px; }
.stApp [class*="st-key-vote_pick_"] [role="radiogroup"] label { min-height: 44px; align-items: center; }
/* a label wraps onto a second line rather than being cut off: the sidebar's page names, a
   metric's label and its delta, a widget's label, a button's label (longer in Japanese and
   Portuguese, larger in presenter mode) */
.stApp [data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"],
.stApp [data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"] *, .stApp [data-testid="stMetricLabel"],
.stApp [data-testid="stMetricLabel"] *, .stApp [data-testid="stWidgetLabel"],
.stApp [data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"] *,
.stApp [data-testid="stMetricDelta"] [data-testid="stMarkdownContainer"],
.stApp [data-testid="stMetricDelta"] [data-testid="stMarkdownContainer"] *,
.stApp button [data-testid="stMarkdownContainer"], .stApp button [data-testid="stMarkdownContainer"] * {
  white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: break-word; }
/* on a phone a step's title is smaller, so that a class's question fits the first screen */
@media (max-width: 640px) { .stApp h1 { font-size: 1.9rem; } }
/* Japanese has no spaces: titles, labels and buttons break between phrases (Chromium's
   phrase segmenter), never inside a word ("パネ／ル"); it needs the page's language set to
   Japanese (page_language); a phrase wider than its box still breaks (anywhere). No angle
   brackets in our CSS: the sanitiser drops a style that has one */
:lang(ja) .stApp h1, :lang(ja) .stApp h2, :lang(ja) .stApp h3, :lang(ja) .stApp [data-testid="stSidebar"] *,
:lang(ja) .stApp [data-testid="stMetricLabel"] *, :lang(ja) .stApp [data-testid="stWidgetLabel"] *,
:lang(ja) .stApp button * { word-break: auto-phrase; overflow-wrap: anywhere; }
</style>
"""


def base_style() -> None:
    """Our fixed CSS for every page: contrast that passes WCAG AA."""
    st.html(BASE_CSS)


LANG_SCRIPT = "<script>document.documentElement.lang = {lang};</script>"


def page_language(lang: str) -> None:
    """Tell the browser the page's language (``<html lang>``; Streamlit's page says "en"
    whatever the reader chose): screen readers then read each language in its own voice,
    and Japanese lines break between phrases. Our own fixed script; ``lang`` is one of
    ours, never the reader's text."""
    if lang not in LANGS:
        raise ValueError(f"not a language of ours: {lang!r}")
    st.html(LANG_SCRIPT.format(lang=json.dumps(lang)), unsafe_allow_javascript=True)


PRESENTER_CSS = """
<style>
.stApp [data-testid="stMarkdownContainer"], .stApp [data-testid="stMarkdownContainer"] p,
.stApp [data-testid="stMarkdownContainer"] li, .stApp [data-testid="stWidgetLabel"] p,
.stApp [data-testid="stMetricLabel"] p, .stApp label, .stApp label p { font-size: 24px; }
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p { font-size: 22px; }
.stApp [data-testid="stMetricValue"], .stApp [data-testid="stMetricValue"] *,
.stApp [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p { font-size: 3.6rem; line-height: 1.2; }
.stApp h1 { font-size: 3.4rem; }
.stApp h2, .stApp h3 { font-size: 2.2rem; }
/* a slider's value sits where Streamlit places it for its own size: larger, it covered the track */
.stApp [data-testid="stSliderThumbValue"] [data-testid="stMarkdownContainer"],
.stApp [data-testid="stSliderThumbValue"] [data-testid="stMarkdownContainer"] p,
.stApp [data-testid="stSliderTickBar"] [data-testid="stMarkdownContainer"],
.stApp [data-testid="stSliderTickBar"] [data-testid="stMarkdownContainer"] p { font-size: 14px; }
/* tables grow with the text (presenter mode draws them as static tables: see data_table) */
.stApp [data-testid="stTable"] th, .stApp [data-testid="stTable"] td { font-size: 20px; }
</style>
"""


def presenter_style() -> None:
    """Presenter mode's type sizes: body text at least 22 px, each key number large.
    (Our own fixed CSS; no reader text goes into it.)"""
    st.html(PRESENTER_CSS)
