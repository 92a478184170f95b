"""The sidebar's class panel: start a class or join one; in a class, its code and the
controls of one's role (the teacher's slide, link back and end; a student's follow or
explore)."""

from __future__ import annotations

import streamlit as st

from attn import settings
from server import codes

from server.class_reads import ClassState

from .. import keys, session, walk
from ..step_parts import Step
from ..i18n import Translator
from . import room
from .membership import back, current, explore, is_teacher, join, member, resume
from .polling import poll
from .teacher import LOCK_WALK, START_KEY, end, join_slide, resume_url, set_lock_walk, start
from .vote_actions import close_vote, reveal_vote


def sidebar(t: Translator, step: Step) -> None:
    """The sidebar's class panel: start or join; in a class, its code and its controls."""
    code = member()
    with st.expander(t("class.heading"), expanded=code is not None, icon=":material/groups:"):
        if code is None:
            if settings.read().start_key is not None:  # a public server: starting needs its passphrase
                st.text_input(t("class.start_key_label"), key=START_KEY, type="password", max_chars=200)
            st.button(t("class.start"), key="class_start", on_click=start, args=(step.id,), width="stretch",
                      icon=":material/co_present:", help=t("class.start_help"))
            typed = st.text_input(t("class.join_label"), key="class_code_typed", max_chars=16,
                                  placeholder="7KQ 2M9")
            if st.button(t("class.join_button"), key="class_join", width="stretch"):
                found = codes.normalize(typed)
                if found is None:
                    st.error(t("class.bad_code"))
                else:
                    page = join(t, found)
                    if page is not None:
                        st.switch_page(page.page, query_params=dict(st.query_params))
            if not session.presenter():  # the key is typed where the room cannot see it
                take_back(t)
            return
        st.markdown(t("class.code", code=codes.spaced(code)))
        if is_teacher():
            poll(step)  # the students present, counted live
            if st.button(t("class.show_slide"), key="class_slide", width="stretch", icon=":material/qr_code_2:"):
                join_slide(code, t)
            orphans(t)  # a vote on a page the walk no longer has: it would hold the class's pages unseen
            lock_walk_choice(t)
            if not session.presenter():  # never on a projector: the link holds the host key
                with st.popover(t("class.resume_heading"), icon=":material/key:", width="stretch"):
                    st.caption(t("class.resume_help"))
                    st.code(resume_url(code), language=None)
                    st.markdown(t("class.key_label"))
                    st.code(st.session_state.get(keys.HOST, ""), language=None)
            room.panel(t)
            st.button(t("class.end"), key="class_end", on_click=end, width="stretch", icon=":material/logout:")
            return
        poll(step)
        room.panel(t)
        if st.session_state.get(keys.FOLLOWING):
            st.caption(t("class.following"))
            st.button(t("class.explore"), key="class_explore", width="stretch", icon=":material/explore:",
                      on_click=explore)
        else:
            st.caption(t("class.exploring"))
            if st.button(t("class.back"), key="class_back", width="stretch", icon=":material/groups:"):
                back(t)


def lock_walk_choice(t: Translator) -> None:
    """The teacher's choice: while a vote is held, a student exploring alone waits on the
    class's step (another step's page could answer it). Off by default."""
    found = current()
    if isinstance(found, ClassState):
        st.session_state[LOCK_WALK] = found.lock_walk
        st.toggle(t("class.lock_walk"), key=LOCK_WALK, on_change=set_lock_walk, help=t("class.lock_walk_help"))


def orphans(t: Translator) -> None:
    """The teacher's votes held on a page this server's walk no longer has (a class kept
    across an upgrade): each still holds the class's share links and handouts, and no page
    draws it, so her sidebar does — with Close while it is open, and Reveal."""
    found = current()
    if not isinstance(found, ClassState):
        return
    for vote in found.unrevealed():
        if walk.by_id(vote.page) is not None:
            continue
        st.warning(t("vote.orphan", question=vote.question.words("text", t.lang)), icon=":material/help:")
        if vote.state == "open":
            st.button(t("vote.close"), key=f"orphan_close_{vote.vote}", on_click=close_vote, args=(vote.vote,),
                      width="stretch", icon=":material/lock:")
        st.button(t("vote.reveal"), key=f"orphan_reveal_{vote.vote}", on_click=reveal_vote, args=(vote.vote,),
                  width="stretch", icon=":material/visibility:")


def take_back(t: Translator) -> None:
    """A teacher takes her class back by typing its code and her teacher key (another
    device, or a reload without her link): a password field, never in presenter mode."""
    with st.popover(t("class.take_back_heading"), icon=":material/key:", width="stretch"):
        st.caption(t("class.take_back_help"))
        typed = st.text_input(t("class.join_label"), key="class_take_code", max_chars=16, placeholder="7KQ 2M9")
        key = st.text_input(t("class.take_back_key"), key="class_take_key", type="password", max_chars=128)
        if st.button(t("class.take_back_button"), key="class_take", width="stretch", icon=":material/co_present:"):
            code = codes.normalize(typed)
            if code is None:
                st.error(t("class.bad_code"))
            elif not key.strip():
                st.error(t("class.take_back_no_key"))
            else:
                page = resume(t, code, key.strip())
                if page is not None:
                    st.switch_page(page.page, query_params=dict(st.query_params))
