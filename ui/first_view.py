"""The first chart before the model: a server's first visitors on step 1 see the sample's
step 1 as this model read it at an earlier start — its figure, its numbers, its words, and
when they were computed — while PyTorch and the model load behind it; the page comes alive
(the reader's own text, every setting) once the model is ready. Nothing here imports torch.

The view is written by the start that built step 1 on the sample (``ui.warm.save_view``), one
file a language in the cache folder, keyed by the model and the app's version (every source
file, locale and sample text): a changed app or sample serves nothing stale. Only the packaged
model's start is long enough to need it. A server started ``--cold`` serves none."""

from __future__ import annotations

import datetime
import json
import sys

import streamlit as st
from babel import dates
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attn import settings

from . import warm
from .figures import FrozenFigure
from .i18n import CLDR, Translator, detect_language

HOME = ("",)  # the URL path of step 1: the home page (a link to another page waits for the model)
QUERY = {"lang", "present"}  # a link with more (a shared view, a class) waits for the model
POLL = 0.5  # seconds between the page's looks at whether the model is ready
LIVE = "_atlas_live"  # in a session's state once the app itself has run there


def load(lang: str) -> dict | None:
    """The view in ``lang``, or None: none written, or written for another model or version."""
    try:
        view = json.loads(warm.view_file(lang).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return view if view.get("model") == warm.VIEW_MODEL and view.get("version") == warm.version() else None


def _wanted(asked: str | None) -> bool:
    """This run is a new session's step 1 on the sample, before the model is ready."""
    if not warm.views() or LIVE in st.session_state or warm.loaded() is not None:
        return False
    if "torch" in sys.modules and not warm.running():  # loaded by a page: the app itself says so
        return False
    if settings.read().model_id != warm.VIEW_MODEL or set(st.query_params) - QUERY:
        return False
    return (asked or get_script_run_ctx().pages_manager.intended_page_name or "") in HOME


def serve(find_walk, asked: str | None = None) -> bool:
    """Step 1's view, drawn, where this run wants it and one is saved; the model's load
    started behind it (``find_walk``: as launch.py's). ``asked``: the page a link asked for,
    where the app knows it better than this run's URL. False: the app runs as usual (and
    this session never sees the view again)."""
    if LIVE in st.session_state:  # every run after a session's first: nothing more to ask
        return False
    lang = detect_language(st.query_params.get("lang"), st.context.locale)
    view = load(lang) if _wanted(asked) else None
    if view is None:
        st.session_state[LIVE] = True
        return False
    t = Translator(lang)
    with st.sidebar:
        st.markdown(f"### :material/explore: {t('app.name')}")
        st.caption(t("app.tagline"))
        st.caption(t("first_view.sidebar"))
    st.caption(view["step_of"])
    st.title(view["title"])
    when = dates.format_datetime(datetime.datetime.fromtimestamp(view["computed"]), "medium", locale=CLDR[lang])
    st.info(t("first_view.notice", when=when), icon=":material/hourglass_top:")
    st.markdown(view["lead"])
    for column, (label, value) in zip(st.columns(len(view["key"])), view["key"]):
        column.metric(label, value)
    st.plotly_chart(FrozenFigure.of_dict(view["figure"]), width="stretch", config={"displaylogo": False})
    if warm.view_sent():  # the server's log says it once: whether torch was in the process by then
        print(f"Attention Atlas: step 1's view sent before the model ({lang}; torch imported: "
              f"{'yes' if 'torch' in sys.modules else 'no'})", flush=True)
    warm.start(find_walk)  # a server started plainly (streamlit run app.py): the model loads now
    _until_ready()
    return True


# a timed fragment not made by page_run.timed (which imports torch, through the walk): this
# page has no navigation, so no tick can come from a page left behind
@st.fragment(run_every=POLL)
def _until_ready() -> None:
    if warm.loaded() is not None:
        st.rerun(scope="app")
