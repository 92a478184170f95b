"""Attention Atlas: why attention costs n², and how windows, hubs and linear
attention escape it — on the reader's own text, with a real model.

    bash scripts/run.sh   (streamlit run app.py, through launch.py)
"""

import os
from contextlib import nullcontext

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui import first_view  # imports no torch: step 1's view before the model (below)

ICON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "icon.png")

FIRST_PAGE = "_atlas_first_page"  # the step a server's first visitor asked for, while folder mode was on
if PagesManager.uses_pages_directory:  # `streamlit run app.py` by hand: a fresh server takes pages/ for
    PagesManager.uses_pages_directory = False  # Streamlit's older folder mode (launch.py turns it off before
    # the first visitor); off for good, and run again through this file's navigation — on the step the
    # link named (folder mode found no such page and ran this file as its home)
    st.session_state[FIRST_PAGE] = get_script_run_ctx().pages_manager.intended_page_name
    st.rerun()
# the tab's icon is a file of ours: a Material icon there is fetched from Google's font server
st.set_page_config(page_title="Attention Atlas", page_icon=ICON, layout="wide")


def the_walk():
    """The pages (importing them imports torch): for the start's background build."""
    import pages as walk_pages

    return walk_pages.WALK


# a new visitor's step 1 while the model loads: drawn, and the rest waits for the model
if first_view.serve(the_walk, asked=st.session_state.get(FIRST_PAGE)):
    st.stop()

# the app itself: its imports bring torch and the model's libraries (a first view is sent by now)
import pages  # noqa: E402,F401 (importing it fills the walk: ui.walk)
from ui import (glossary, handout, keys, page_run, served_model, session, share, step_page, style, walk,  # noqa: E402
                warmup, widgets)
from ui.classroom import gate, handle, membership, panel, teacher, vote_results  # noqa: E402
from ui.i18n import LANGS  # noqa: E402

session.init_language()
served_model.check_environment()  # a server variable it cannot use: one sentence, not a traceback
session.init_presenter()
session.init_text()
share.begin_run()  # a notice about the store is said once a run (a callback's before it too)
handle.begin_run()  # the class (if any) is read once this run, when first asked
link_page = share.apply_link(session.tr())  # a shared link restores language, text, mode and settings
link_page = membership.attach(session.tr()) or link_page  # ?class=CODE: join a live class at its step
served_model.resolve_folder()  # a folder's model loaded once, or another model and a sentence saying why
lang, presenting, t = st.session_state[keys.LANG], session.presenter(), session.tr()
membership.notice_if_left(t)  # a following student who changed the text or a setting explores now

home = walk.home()
nav = st.navigation(step_page.nav_pages(t))
here = walk.by_id(nav.url_path) or home
first = walk.by_id(st.session_state.pop(FIRST_PAGE, None) or "")
if first is not None and first.id != here.id:  # a step's link, the server's first visit: that step
    st.switch_page(first.page, query_params=st.query_params.to_dict())
page_run.drawn(here)  # the page this browser now shows: a timed fragment asked for from another redraws it
if link_page is not None and link_page.id != here.id:
    st.switch_page(link_page.page, query_params={"lang": lang, **({"present": "1"} if presenting else {}),
                                                 **membership.query()})
session.show_notices()  # after any switch above: a switched run's notices are dropped with it

with st.sidebar:
    st.markdown(f"### :material/explore: {t('app.name')}")
    if not presenting:
        st.caption(t("app.tagline"))
    served_model.folder_notice(t)  # the configured model folder cannot serve: why, and what runs
    st.selectbox(
        t("sidebar.language"),
        list(LANGS),
        index=list(LANGS).index(lang),
        format_func=LANGS.get,
        key=keys.LANG_CHOICE,
        on_change=session.on_language_change,
    )
    st.toggle(t("sidebar.presenter"), value=presenting, key=keys.PRESENTER_CHOICE,
              on_change=session.on_presenter_change, help=t("sidebar.presenter_help"))
    session.write_url()  # the sidebar's page links drop the query: write language and mode back
    membership.write_url()  # and a student's class and id
    locked = gate.answers_locked()  # a student while the class votes: no answers by another road
    share_asked = share.share_button(t, locked)
    handout_slot = handout.offer(t, locked)
    panel.sidebar(t, here)
    vote_results.results_table(t)  # the teacher's summary of her class's votes (empty for anyone else)
    # on a projector the controls fold away; the language stays one click away
    with st.expander(t("sidebar.controls"), expanded=False) if presenting else nullcontext():
        served_model.model_choice(t)  # ATLAS_MODELS: the reader picks the model their pages run
        # kept for the session: st.switch_page (Next, PageDown) reruns without widget states,
        # and a widget that is not kept loses its value on the way
        page_run.drawing(keys.TEXT)
        st.text_area(t("sidebar.text"), key=keys.TEXT, persist_state=widgets.KEEP, height=200,
                     help=t("sidebar.text_help"), max_chars=session.MAX_CHARS, on_change=session.text_changed)
        st.caption(t("sidebar.text_cap", n=t.int(session.MAX_CHARS), tokens=t.int(served_model.token_budget())))
        st.file_uploader(t("sidebar.upload"), type=["txt", "md"], key=session.UPLOAD,
                         help=t("sidebar.upload_help", mb=session.UPLOAD_MB), on_change=session.text_uploaded,
                         max_upload_size=session.UPLOAD_MB)
        st.button(t("sidebar.restore"), on_click=session.restore_sample, width="stretch", key="restore_sample")
        st.button(t("sidebar.long_sample"), on_click=session.load_long_sample, width="stretch", key="long_sample",
                  help=t("sidebar.long_sample_help"))
        with st.popover(t("closing.glossary"), icon=":material/menu_book:", width="stretch"):
            glossary.glossary_table(t)
        st.caption(t("sidebar.device", device=served_model.device_line()))
        st.caption(served_model.model_line(t))
style.base_style()
style.page_language(t.lang)
if presenting:
    style.presenter_style()



def after_the_page() -> None:
    """What reads every setting of the page: only once the page has drawn its widgets."""
    if share_asked:
        share.share_view(t, here)
    if handout_slot is not None:
        handout.build_into(handout_slot, t)
    if membership.is_teacher():  # the class follows the teacher's step and settings
        teacher.teacher_sync(here)
    share.begin_run()  # the next run's callbacks (a click before its page) say their own notices


page_run.after_page(after_the_page)  # also when the page stops early (page_run.stop_page)
page_run.run_started()
try:
    nav.run()
    page_run.page_done()
finally:
    page_run.run_ended()
# after the first page: compile FlexAttention in the background once the server is idle
warmup.start_flex_warmup()
