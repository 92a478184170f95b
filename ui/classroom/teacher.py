"""The teacher's side of a live class: starting one for her text and settings, her
step and settings followed on every run, the door, ending it; the join slide (the code
large, the QR code of the link) and what she sees of the room now (the pulse)."""

from __future__ import annotations

import time

import streamlit as st

from server import class_reads
from server import classes as live_classes
from server import codes, follow
from server.store import Refused, StoreError

from .. import keys, page_run, prebuild, session, share, walk
from ..step_parts import Step
from ..i18n import Translator
from . import room
from .handle import Unreadable, classes, forget
from .membership import QUERY_CLASS, QUERY_HOST, QUERY_LINK, class_view, current, gone, leave, member, slow_down

# the join code as the back of a room reads it (our fixed CSS; the code is checked to be
# six characters of the code alphabet before it is placed here)
CODE_HTML = ('<div style="font-size:6rem;font-weight:700;letter-spacing:0.12em;line-height:1.1;'
             'font-family:ui-monospace,monospace;color:#1B2430">{code}</div>')


REFUSED_START = {"starts": "class.start_limited", "classes": "class.too_many_classes",
                 "start_key": "class.start_key_wrong"}
START_KEY = "class_start_key"  # the passphrase's field, when the server asks for one (ATLAS_START_KEY)
EXPECTED = "class_expected"  # the teacher's «Students I expect»
LOCK_WALK = "class_lock_walk"  # the teacher's «Lock the pages during a vote»
BURST = "class_burst"  # the last burst she saw during the open vote: (vote, n, network, since)


def start(page: str) -> None:
    """on_click of "Start a class": a class for this text and these settings (refused, and
    said what for, past the classes one client may start or the server may hold)."""
    room = classes()
    if room is None:
        return
    view = class_view(walk.get(page))
    with share.store_trouble() as trouble:
        try:
            code, key = room.create(view, page, address=session.address(),
                                    passphrase=st.session_state.get(START_KEY))
        except Refused as exc:
            if exc.what == "start_key":
                slow_down()  # a wrong passphrase slows the session that typed it
            st.toast(session.tr()(REFUSED_START[exc.what]), icon=":material/block:")
            return
        share.keep_applied()  # the link she opened to start it (if any) outlives the links nobody opened
    if trouble:
        return
    prebuild.prebuild(view)
    leave()
    st.session_state.update({keys.CLASS: code, keys.HOST: key, keys.SEEN: 1})
    forget()


def end() -> None:
    """on_click of "End the class": its text, students and answers are deleted. With the
    store away it is not half done: the class stays hers, and she is told to try again."""
    room, code = classes(), member()
    if room is None or code is None:
        return
    with share.store_trouble() as trouble:
        try:
            room.end(code, st.session_state.get(keys.HOST))
        except live_classes.NotHost:
            pass  # ended already (or expired): her session leaves it too
    if trouble:
        return
    leave()
    forget()
    st.toast(session.tr()("class.ended"), icon=":material/logout:")


def _as_host(change) -> None:
    """A teacher's change to her class (``change(room, code, key)``), or a notice when this
    session does not hold the class's key; the class is read afresh after it."""
    room, code = classes(), member()
    if room is None or code is None:
        return
    with share.store_trouble():
        try:
            change(room, code, st.session_state.get(keys.HOST))
        except live_classes.NotHost:
            st.toast(session.tr()("class.not_host"), icon=":material/key_off:")
    forget()


def leave_out(vote: int, network: str, since: float) -> None:
    """on_click of «Leave them out of this vote»: the burst's students (of its network, joined
    since its first join and after the vote opened) have their answers to the open vote set
    aside and cannot answer it (server.classes.Classes.leave_out)."""
    _as_host(lambda room, code, key: room.leave_out(code, key, vote, network, since))


def take_back_left_out(vote: int) -> None:
    """on_click of «Count their answers again»: the leave-out undone while the vote is open
    (server.classes.Classes.take_back_left_out)."""
    _as_host(lambda room, code, key: room.take_back_left_out(code, key, vote))


def set_lock_walk() -> None:
    """on_change of «Lock the pages during a vote»: every member follows it."""
    def change(room, code, key):
        st.session_state[keys.SEEN] = room.set_lock_walk(code, key, bool(st.session_state.get(LOCK_WALK)))

    _as_host(change)


def set_expected() -> None:
    """on_change of «Students I expect»: kept with the class (0: she does not say)."""
    _as_host(lambda room, code, key: room.set_expected(code, key, int(st.session_state.get(EXPECTED) or 0)))


def set_door(open_: bool) -> None:
    """on_click of the door's button: new students may join, or not (those in stay)."""
    _as_host(lambda room, code, key: room.set_door(code, key, open_))


def teacher_sync(step: Step) -> None:
    """On every teacher's run: the class's step and settings follow hers, as one change
    (which raises the version the students' polls watch). With the store away, nothing
    half done: the next run tries again."""
    code = member()
    found = current()
    if code is None or isinstance(found, Unreadable):
        return  # said once already, by the run's read
    t = session.tr()
    if found is None:  # ended (or expired) elsewhere, or its store lost it
        gone(t)
        return
    view = class_view(step)
    if found.page == step.id and view == found.view:
        return
    room = classes()
    with share.store_trouble():
        try:
            st.session_state[keys.SEEN] = room.lead(code, st.session_state.get(keys.HOST), step.id, view)
            forget()
            if view != found.view:
                prebuild.prebuild(view)
        except live_classes.NotHost:
            leave()
            st.toast(t("class.not_host"), icon=":material/key_off:")


def resume_url(code: str) -> str:
    """The teacher's own link back into her class (it holds the host key: for her alone)."""
    return f"{share.base_url()}/?{QUERY_CLASS}={code}&{QUERY_HOST}={st.session_state.get(keys.HOST, '')}"


def join_url(code: str) -> str:
    """The class's join link (and QR code): its code, and the token that lets a student in
    whatever wrong codes came from their network (server.class_reads.link_token)."""
    key = st.session_state.get(keys.HOST, "")
    token = class_reads.link_token(live_classes.host_hash(key)) if key else ""
    return f"{share.base_url()}/?{QUERY_CLASS}={code}" + (f"&{QUERY_LINK}={token}" if token else "")


def code_html(code) -> str | None:
    """The join code as HTML for the slide, or None: only a code of the code alphabet
    (checked here, whatever the caller holds) is ever placed in it, never a reader's text."""
    ok = isinstance(code, str) and codes.normalize(code) == code
    return CODE_HTML.format(code=codes.spaced(code)) if ok else None


@st.dialog(" ", width="large")
def join_slide(code: str, t: Translator) -> None:
    """The join slide for the projector: the code large, the QR code of the link."""
    st.markdown(f"## {t('class.slide_title')}")
    shown = code_html(code)
    if shown is not None:
        st.html(shown)
    url = join_url(code)
    st.image(share.qr_png(url), width=320)
    st.code(url, language=None)
    st.markdown(f"### {t('class.slide_lead')}")  # read from the back of the room: no small grey caption
    slide_count(code)
    if share.is_local(url):
        st.warning(t("share.local_note"))


@page_run.timed(2.0)
def slide_count(code: str) -> None:
    """The join slide's count of the students present, updating while it is shown."""
    t = session.tr()
    now = pulse(code)
    st.markdown(f"### {t('class.present', n=t.int(now.present if now else 0))}")


def pulse(code: str) -> class_reads.Pulse | None:
    """The room now, for the teacher's panel (None: not readable just now, or ended):
    students present (seen in the last three presence writes), new in the last minute,
    the open vote's answers and how many came from students seen in the last minute."""
    room = classes()
    try:
        return room.pulse(code, time.time() - 3 * follow.PRESENCE_EVERY) if room else None
    except StoreError:
        return None


def pulse_panel(t: Translator, code: str) -> None:
    """In the teacher's poll: who is here, who came in the last minute, and the door."""
    now = pulse(code)
    if now is None:
        return
    st.caption(t("class.pulse", n=t.int(now.present), joined=t.int(now.joined_recently)))
    if now.burst:  # a crowd from one network: said at once, beside the door …
        st.session_state[BURST] = (now.vote, now.burst, now.burst_network, now.burst_since)
        st.warning(t("class.burst", n=t.int(now.burst), s=t.int(class_reads.BURST_SECONDS)), icon=":material/groups:")
    seen = st.session_state.get(BURST)
    if now.vote and seen and seen[0] == now.vote and not now.left_out:  # … and, while its vote is open, left out
        if now.burst:  # what it would set aside, said before she presses
            st.caption(t("class.leave_out_count", answers=now.would_set_aside))
        st.button(t("class.leave_out"), key="class_leave_out", on_click=leave_out,
                  args=(now.vote, seen[2], seen[3]), width="stretch", icon=":material/person_remove:",
                  help=t("class.leave_out_help"))
    if now.left_out:
        st.caption(t("class.left_out", n=now.left_out))
        if now.aside:
            st.caption(t("class.left_out_aside", answers=now.aside))
        st.button(t("class.leave_out_undo"), key="class_leave_out_undo", on_click=take_back_left_out,
                  args=(now.vote,), width="stretch", icon=":material/undo:")
    if now.expected and now.joined > now.expected:
        st.warning(t("class.more_than_expected", joined=t.int(now.joined), expected=t.int(now.expected)),
                   icon=":material/person_alert:")
    if EXPECTED not in st.session_state:
        st.session_state[EXPECTED] = now.expected
    st.number_input(t("class.expected"), min_value=0, max_value=live_classes.MAX_STUDENTS, step=1, key=EXPECTED,
                    on_change=set_expected, help=t("class.expected_help"))
    in_room = room.room_now(code)
    if in_room:
        room.counts(t, in_room[1])  # the texts sent to the room, counted live
    if now.door:
        st.button(t("class.close_door"), key="class_door_close", on_click=set_door, args=(False,), width="stretch",
                  icon=":material/door_front:", help=t("class.close_door_help"))
    else:
        st.caption(t("class.door_closed_note"))
        st.button(t("class.open_door"), key="class_door_open", on_click=set_door, args=(True,), width="stretch",
                  icon=":material/door_open:")
