"""The teacher's side of a live class: starting one for her text and settings, her
step and settings followed on every run, ending it; the join slide (the code large,
the QR code of the link) and the students present."""

from __future__ import annotations

import time

import streamlit as st

from room import classes as room_classes
from room import codes, follow
from room.store import StoreError

from .. import keys, prebuild, reader, share
from ..i18n import Translator
from .handle import classes
from .membership import QUERY_CLASS, QUERY_HOST, class_view, leave, member

# the join code as the back of a room reads it (our fixed CSS; the code is checked to be
# six characters of the code alphabet before it is placed here)
CODE_HTML = ('<div style="font-size:6rem;font-weight:700;letter-spacing:0.12em;line-height:1.1;'
             'font-family:ui-monospace,monospace;color:#1B2430">{code}</div>')


def start(step: int) -> None:
    """on_click of "Start a class": a class for this text and these settings."""
    room = classes()
    if room is None:
        return
    view = class_view(step)
    with share.store_trouble() as trouble:
        code, key = room.create(view, step)
    if trouble:
        return
    prebuild.prebuild(view)
    leave()
    st.session_state.update({keys.CLASS: code, keys.HOST: key, keys.SEEN: 1})


def end() -> None:
    """on_click of "End the class": its text, students and answers are deleted."""
    room, code = classes(), member()
    if room is not None and code is not None:
        try:
            room.end(code, st.session_state.get(keys.HOST))
        except (room_classes.NotHost, StoreError):
            pass  # ended already, or the store is away: the teacher's session leaves it either way
    leave()
    st.toast(reader.tr()("class.ended"), icon=":material/logout:")


def teacher_sync(step: int) -> None:
    """On every teacher's run: the class's step and settings follow hers (each change
    raises the class's version, which the students' polls see)."""
    room, code = classes(), member()
    if room is None or code is None:
        return
    with share.store_trouble():
        try:
            found = room.state(code)
            if found is None:  # ended (or expired) elsewhere
                leave()
                st.toast(reader.tr()("class.ended"), icon=":material/logout:")
                return
            view = class_view(step)
            if found.step != step or view != found.view:  # one change: a student never sees one half
                st.session_state[keys.SEEN] = room.lead(code, st.session_state.get(keys.HOST), step, view)
                if view != found.view:
                    prebuild.prebuild(view)
        except room_classes.NotHost:
            leave()
            st.toast(reader.tr()("class.not_host"), icon=":material/key_off:")


def resume_url(code: str) -> str:
    """The teacher's own link back into her class (it holds the host key: for her alone)."""
    return f"{share.base_url()}/?{QUERY_CLASS}={code}&{QUERY_HOST}={st.session_state.get(keys.HOST, '')}"


def join_url(code: str) -> str:
    return f"{share.base_url()}/?{QUERY_CLASS}={code}"


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


@st.fragment(run_every=2.0)
def slide_count(code: str) -> None:
    """The join slide's count of the students present, updating while it is shown."""
    t = reader.tr()
    st.markdown(f"### {t('class.present', n=t.int(present_count(code)))}")


def present_count(code: str) -> int:
    room = classes()
    try:
        return room.present(code, time.time() - 3 * follow.PRESENCE_EVERY) if room else 0
    except StoreError:
        return 0
