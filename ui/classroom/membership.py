"""A session's seat in a live class: joining (by the link, by the code typed in the
sidebar), the teacher taking her class back, a student following or exploring on their
own, leaving. The host key stays in the teacher's session: never in an address, a QR
code or a link. A student's anonymous id is in their address (``?class=CODE&me=ID``),
so a reload keeps them in the class as the same student."""

from __future__ import annotations

import time

import streamlit as st

from server import answers, class_reads
from server import classes as live_classes
from server import codes

from .. import keys, page_run, prebuild, session, served_model, share
from ..i18n import Translator
from .. import walk
from ..step_parts import Step
from .handle import Unreadable, classes, forget, guesses, read

QUERY_CLASS, QUERY_ME = "class", "me"  # what a student's address carries
QUERY_HOST = "host"  # the teacher's resume link only (read once, removed from the address)
QUERY_LINK = "j"  # the join link's and QR code's token: a code that exists (read once, removed)
SLOW_AFTER = 3  # wrong keys or codes one session may try before each answer waits …
SLOW_MOST = 8.0  # … 1, 2, 4, then at most 8 seconds


def member() -> str | None:
    """The code of the class this session is in (as teacher or student), or None."""
    return st.session_state.get(keys.CLASS)


def is_teacher() -> bool:
    return member() is not None and st.session_state.get(keys.HOST) is not None


def current():
    """This session's class as this page run reads it (once a run: ui.classroom.handle.read):
    a ClassState (with the student's own answers), None when it has ended, Unreadable when
    the store cannot say; None outside a class."""
    code = member()
    return None if code is None else read(code, st.session_state.get(keys.STUDENT, ""))


def gone(t: Translator) -> None:
    """The class is no longer on the server (ended, expired, or its store lost): this
    session leaves it and is told so once, in its language; its page works on."""
    said, icon = farewell(t)
    st.toast(said, icon=icon)


def farewell(t: Translator) -> tuple[str, str]:
    """This session leaves its class, which is no longer on the server: what to tell it
    (and the notice's icon) — a teacher whose class the server ended unused (no student
    had joined it, and a start needed its place) is told that; anyone else that it ended."""
    code = member()
    why = None
    if is_teacher() and (room := classes()) is not None:
        with share.store_trouble():
            why = room.ended_reason(code)
    leave()
    if why == "unused":
        return t("class.ended_unused", code=codes.spaced(code)), ":material/event_busy:"
    return t("class.ended"), ":material/logout:"


def class_view(step: Step) -> dict:
    """What a class carries to its students: the model, the text and the settings (the
    language and presenter mode stay each reader's)."""
    view = share.current_view(step)
    return {"model": view["model"], "text": view["text"], "settings": view["settings"]}


def _apply(view: dict) -> None:
    """A class's model, text and settings in this session (as a share link's are)."""
    served_model.choose(view.get("model"))  # the teacher's model, where this server offers it
    text = view.get("text")
    if isinstance(text, str) and len(text) <= session.MAX_CHARS:
        page_run.set_by_app(keys.TEXT, text)
    share.apply_settings(view.get("settings"))


def leave() -> None:
    for k in (keys.CLASS, keys.HOST, keys.STUDENT, keys.FOLLOWING, keys.SEEN, keys.PRESENCE_AT):
        st.session_state.pop(k, None)
    for q in (QUERY_CLASS, QUERY_ME):
        if q in st.query_params:
            del st.query_params[q]


def attach(t: Translator):
    """Once per session and class: join the class named in the address (``?class=``),
    as the student ``?me=`` names or a new one — or, with ``?host=`` (the teacher's own
    link to resume), as its teacher; the key leaves the address at once. Returns the
    page to open (the class's step) or None, after saying what went wrong."""
    host = st.query_params.get(QUERY_HOST)
    if host is not None:
        del st.query_params[QUERY_HOST]  # never left in an address, whatever follows
        code = codes.normalize(st.query_params.get(QUERY_CLASS))
        if code is not None:
            st.session_state[keys.CLASS_ASKED] = st.query_params.get(QUERY_CLASS)
            return resume(t, code, host)
    link = st.query_params.get(QUERY_LINK)
    if link is not None:
        del st.query_params[QUERY_LINK]  # a student's address keeps only the class and their id
    raw = st.query_params.get(QUERY_CLASS)
    if raw is None or raw == st.session_state.get(keys.CLASS_ASKED):
        return None
    st.session_state[keys.CLASS_ASKED] = raw
    code = codes.normalize(raw)
    if code is None:
        st.toast(t("class.bad_code"), icon=":material/error:")
        return None
    if member() == code:
        return None
    return join(t, code, st.query_params.get(QUERY_ME), link)


REFUSED = {  # why a join was refused → what the reader is told (a newcomer to a full class hears
    live_classes.UNKNOWN: ("class.unknown", ":material/link_off:"),  # what an unknown code says)
    live_classes.FULL: ("class.unknown", ":material/link_off:"),
    live_classes.NO_SEAT: ("class.full", ":material/group_off:"),
    live_classes.DOOR: ("class.door_closed", ":material/door_front:"),
    live_classes.BUSY: ("class.busy", ":material/hourglass_top:"),
}


def join(t: Translator, code: str, student: str | None = None, link: str | None = None):
    """Join ``code`` as a student: the class's text and settings, its step. Returns the
    page of the class's step, or None after a notice. A right credential always passes,
    however many wrong codes came from the client's address: the class's own link or QR
    code (its token, ``link``), or a seat of the class already (``student``: a reload).
    A code typed by hand is a guess: wrong ones slow this session, and the client's
    address may try only so many (in this process: a wrong code costs the store no write)."""
    room = classes()
    if room is None:
        return None
    address = session.address()
    credential = False
    with share.store_trouble() as trouble:
        credential = room.link_token_ok(code, link) or room.has_seat(code, student)
    if trouble:
        return None
    if not credential and not guesses().allowed(address):
        st.toast(t("class.slow_down"), icon=":material/hourglass_top:")
        return None
    student = student if answers.is_student(student) else answers.new_student()
    found, said = None, None
    with share.store_trouble() as trouble:
        said = room.join(code, student, address=address)
        found = room.read(code, student) if said == live_classes.IN else None
    if trouble:
        return None
    if said in (live_classes.UNKNOWN, live_classes.FULL) and not credential:
        guesses().missed(address)
        slow_down()
    if found is None:
        key, icon = REFUSED.get(said, REFUSED[live_classes.UNKNOWN])
        st.toast(t(key), icon=icon)
        return None
    st.session_state.pop(keys.HOST, None)
    st.query_params[QUERY_CLASS] = code
    st.query_params[QUERY_ME] = student
    return _seat(found, {keys.STUDENT: student, keys.FOLLOWING: True, keys.PRESENCE_AT: time.time()},
                 t("class.joined", code=codes.spaced(code)), ":material/group:")


def _seat(found: class_reads.ClassState, seat: dict, notice: str, icon: str):
    """This session in class ``found`` (as ``seat`` says: a student or its teacher): the
    class's text and settings in place, a notice for the class's page, and that page."""
    st.session_state.update({keys.CLASS: found.code, keys.SEEN: found.version, **seat})
    forget()
    _apply(found.view)
    prebuild.prebuild(found.view)
    session.notice_later(notice, icon)  # said on the class's page, after the switch there
    return walk.by_id(found.page)


def resume(t: Translator, code: str, key: str):
    """Take a class back as its teacher (after a reload, from another device, or when
    her server went away): with its host key, checked by the store. Returns the page of
    the class's step, or None after a notice."""
    room = classes()
    if room is None:
        return None
    found = None
    with share.store_trouble() as trouble:  # a key is 256 random bits: checked first, never
        found = room.read(code) if room.is_host(code, key) else None  # refused for its address
    if trouble:
        return None
    if found is None:
        slow_down()  # a wrong key slows the session that typed it, not the school's network
        st.toast(t("class.not_host"), icon=":material/key_off:")
        return None
    leave()  # also takes ?class= out of her address: a reload must not make her a student
    return _seat(found, {keys.HOST: key}, t("class.resumed", code=codes.spaced(code)), ":material/co_present:")


def slow_down() -> None:
    """A wrong key or code typed in this session: after SLOW_AFTER of them, each answer
    waits 1, 2, 4 … SLOW_MOST seconds (a script that guesses is slowed; nobody else is)."""
    wrong = st.session_state.get(keys.WRONG_TRIES, 0) + 1
    st.session_state[keys.WRONG_TRIES] = wrong
    if wrong > SLOW_AFTER:
        time.sleep(min(SLOW_MOST, 2.0 ** (wrong - SLOW_AFTER - 1)))


def query() -> dict:
    """A student's class and id, for a page switch's address."""
    code, me = member(), st.session_state.get(keys.STUDENT)
    return {QUERY_CLASS: code, QUERY_ME: me} if code and me else {}


def write_url() -> None:
    """A student's class and id in the address on every run (page links drop them)."""
    code, me = member(), st.session_state.get(keys.STUDENT)
    if code and me:
        if st.query_params.get(QUERY_CLASS) != code:
            st.query_params[QUERY_CLASS] = code
        if st.query_params.get(QUERY_ME) != me:
            st.query_params[QUERY_ME] = me


def notice_if_left(t: Translator) -> None:
    """A following student who changed the text or a setting with their own hand (a
    widget's change that the browser sent: ui.widgets.changed_by_reader) explores on
    their own now. What the page sets itself — a default worked out on the text, a
    value put back under new token names, the class's own settings — is no change.
    Read once a run, whoever reads it: a change made outside a class is forgotten."""
    changed = st.session_state.pop(keys.CHANGED, None)
    if changed and member() and not is_teacher() and st.session_state.get(keys.FOLLOWING):
        st.session_state[keys.FOLLOWING] = False
        st.toast(t("class.left"), icon=":material/explore:")


def explore() -> None:
    """on_click of "Explore on my own": the screen stops following the teacher."""
    st.session_state[keys.FOLLOWING] = False


def back(t: Translator) -> None:
    """A student returns to the class: its text, settings and step."""
    found = current()
    if isinstance(found, Unreadable):
        return  # the store is away just now: the student stays where they are, and is told
    if found is None:
        gone(t)
        return
    st.session_state.update({keys.FOLLOWING: True, keys.SEEN: found.version})
    _apply(found.view)
    page = walk.by_id(found.page)
    if page is not None:
        st.switch_page(page.page, query_params=dict(st.query_params))
