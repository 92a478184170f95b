"""A class member's poll: a small fragment that ticks every second in the sidebar's
class panel. What a tick does is decided by server.follow.decide, a pure function: a
following student moves with the teacher and redraws when what they follow changed
(the step, the text and settings, a vote's state: the class's ``version``); an answer
or a new student (the ``tally``) never redraws a student's page. The teacher's count of
answers redraws in a fragment of its own (ui.classroom.votes). A tick also sends again a
student's answer the store could not keep, and redraws a page that stopped because the
class could not be read, once it can be."""

from __future__ import annotations

import time

import streamlit as st

from server import follow
from server.classes import NotHost
from server.store import StoreError

from .. import keys, page_run, prebuild, session, walk
from ..step_parts import Step
from . import room as room_panel
from .handle import classes, forget, read_again, state_at, versions
from .membership import _apply, farewell, is_teacher, member
from .teacher import pulse_panel


def tick(step: Step) -> None:
    """One poll of a class member: move with the teacher, redraw on a change, leave an
    ended class; a student's presence written at most every 15 s. While the store is
    out of reach the page stays as it is (the next tick tries again; the class's
    actions say so when they are used)."""
    code = member()
    if code is None:
        return
    try:
        _tick(code, step)
    except StoreError:
        pass


def _tick(code: str, step: Step) -> None:
    found = versions(code)
    seat = follow.Seat(teacher=is_teacher(), following=bool(st.session_state.get(keys.FOLLOWING)), page=step.id,
                       seen_version=st.session_state.get(keys.SEEN, 0))
    version, tally = (None, None) if found is None else found[:2]
    action, to = follow.decide(version, None, seat) if version is None else _decide(code, version, tally, seat)
    now = time.time()
    if follow.presence_due(st.session_state.get(keys.PRESENCE_AT), now):
        st.session_state[keys.PRESENCE_AT] = now
        room = classes()
        try:
            if room is not None and seat.teacher:  # her class is not ended to make room while she is here
                room.host_here(code, st.session_state.get(keys.HOST), now)
            elif room is not None:
                room.join(code, st.session_state.get(keys.STUDENT, ""), now, address=session.address())
        except (StoreError, NotHost):
            pass  # presence is a count on the teacher's screen: the next tick tries again
    if action != follow.GONE and (_send_pending(code) | room_panel.send_pending(code)
                                  or st.session_state.pop(keys.UNREAD, False)):
        forget()  # the answer is kept (or the class readable again): the page redraws with it
        _redraw()
        return
    if action == follow.GONE:
        said, icon = farewell(session.tr())
        if page_run.fragment_only():  # said after the rerun that takes the class away
            session.notice_later(said, icon)
            st.rerun(scope="app")
        st.toast(said, icon=icon)
        return
    if action == follow.STAY:
        return
    st.session_state[keys.SEEN] = version
    if not page_run.fragment_only():
        # a full run read the class before this tick (gate.answers_locked, in the sidebar): a
        # change made in between would be marked seen and never drawn (a phone kept showing a
        # closed vote without the reason the teacher showed after)
        read_again()
    if seat.teacher:  # the class moved by another session of hers (her other device): her page redraws
        _redraw()
        return
    found = state_at(code, version, tally) if classes() is not None else None
    if found is not None:
        _apply(found.view)
        prebuild.prebuild(found.view)
    if action == follow.MOVE:
        page = walk.by_id(to)
        if page is not None:
            st.switch_page(page.page, query_params=dict(st.query_params))
    _redraw()


def _send_pending(code: str) -> bool:
    """A student's answer the store could not keep, sent again: True once it is settled
    (kept, or refused because the vote closed before it could be: said so)."""
    pending = st.session_state.get(keys.PENDING)
    if not pending or pending.get("code") != code:
        return False
    said = classes().answer(code, pending["vote"], st.session_state.get(keys.STUDENT, ""), pending["choice"],
                            reason=pending.get("reason", ""), address=session.address(), number=pending.get("number"))
    if said == "busy":  # too many reasons from this network: the answer goes without its own
        said = classes().answer(code, pending["vote"], st.session_state.get(keys.STUDENT, ""), pending["choice"])
        if said == "taken":
            session.notice_later(session.tr()("vote.lost_reason"), ":material/comments_disabled:")
    st.session_state.pop(keys.PENDING, None)
    if said in ("closed", "full"):
        session.notice_later(session.tr()(f"vote.lost_{said}"), ":material/block:")
    return True


def _redraw() -> None:
    """After a tick that changed what the page shows: a poll's own run reruns the app;
    in a full run (the sidebar draws the poll before the page) the page that follows
    draws it, and a rerun would drop the click that started this run."""
    if page_run.fragment_only():
        st.rerun(scope="app")


def _decide(code: str, version: int, tally: int, seat: follow.Seat):
    if version == seat.seen_version or seat.teacher or not seat.following:
        return follow.decide(version, None, seat)
    room = classes()  # something moved: where is the class now (read once for every member polling)
    found = state_at(code, version, tally) if room is not None else None
    return follow.decide(version, found.page if found else None, seat)


@page_run.timed(1.0)
def poll(step: Step) -> None:
    """A class member's tick each second, in the sidebar's class panel; the teacher's
    shows the students present, counted live."""
    page_run.touch()  # a class polling keeps the server busy: no background compile meanwhile
    tick(step)
    code = member()
    if code is not None and is_teacher():
        pulse_panel(session.tr(), code)
