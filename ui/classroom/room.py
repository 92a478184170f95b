"""The room in the class panel: a student sends one text of their own to the room (in any
language; replace or withdraw it), never leaving the class's lead by doing so; the teacher
shows the room on the steps, adds texts of her own, removes any (seeing only their first
words, never on a projector) and downloads the room's numbers and the votes as CSV. The
texts wait in the store until a replica measures them (ui.room_work); their words are
then dropped."""

from __future__ import annotations

import hashlib
import secrets

import streamlit as st

from attn import room_numbers
from server import exports
from server import texts as room_texts
from server.class_reads import ClassState
from server.store import StoreError

from .. import drawing, keys, room_figures, room_work, served_model, session, share, walk
from ..i18n import LANGS, Translator
from .handle import classes, forget, versions
from .membership import current, is_teacher, member

LANG_CHOICES = (*LANGS, "other")


@st.cache_data(max_entries=64, show_spinner=False)
def texts_at(code: str, room_version: int) -> list:
    """The room's texts as they stood at ``room_version`` (read once per version and
    process, whoever asks: the charts of every reader of the class)."""
    return room_work.rooms().texts(code)


def room_now(code: str) -> tuple[int, list] | None:
    """The room's version and texts now (None: the class is gone, or the store away)."""
    try:
        found = versions(code)
        return None if found is None else (found[2], texts_at(code, found[2]))
    except StoreError:
        return None


def csv_columns(done: list) -> list:
    """The room's CSV columns after its first three: each page's own, in the walk's order
    (pages.<step>.csv), given every measured text's numbers."""
    return [column for page in walk.pages() if page.csv for column in page.csv(done)]


def student_panel(t: Translator, code: str) -> None:
    """A student's text for the room: where it stands, and a form to send, replace or
    withdraw it (its state read in one small query)."""
    me = st.session_state.get(keys.STUDENT, "")
    mine = None
    with share.store_trouble():
        mine = room_work.rooms().mine(code, me)
    with st.popover(t("room.student_heading"), icon=":material/edit_note:", width="stretch"):
        st.caption(t("room.student_help", chars=t.int(room_texts.MAX_CHARS), tokens=t.int(room_numbers.ROOM_TOKENS)))
        if mine is not None:
            state, n, lang = mine
            st.markdown(t(f"room.mine_{state}", n=t.int(n), language=room_figures.language(t, lang)))
        if keys.ROOM_PENDING in st.session_state:  # not lost: the poll sends it as soon as the store takes it
            st.info(t("room.pending"), icon=":material/schedule_send:")
        st.text_area(t("room.text_label"), key="room_text", max_chars=room_texts.MAX_CHARS, height=140)
        st.selectbox(t("room.lang_label"), LANG_CHOICES, key="room_lang",
                     format_func=lambda x: room_figures.language(t, x),
                     index=LANG_CHOICES.index(t.lang) if t.lang in LANG_CHOICES else 0)
        c1, c2 = st.columns(2)
        c1.button(t("room.send" if mine is None else "room.replace"), key="room_send", on_click=send, args=(code, me),
                  type="primary", width="stretch", icon=":material/send:")
        if mine is not None:
            c2.button(t("room.withdraw"), key="room_withdraw", on_click=withdraw, args=(code, me), width="stretch",
                      icon=":material/delete:")


def send(code: str, owner: str) -> None:
    """on_click of the room's Send: the text from the form, for the room (not the page's
    text: the student's screen still follows the class). When the store cannot take it
    just now (a whole class pressing Send at once), it is kept in this session and the
    poll sends it again until it is taken or refused for a reason (``send_pending``)."""
    t = session.tr()
    text, lang = st.session_state.get("room_text", ""), st.session_state.get("room_lang", t.lang)
    said = offer(t, code, owner, text, lang)
    if said == "taken":
        st.session_state["room_text"] = ""
    forget()


def offer(t: Translator, code: str, owner: str, text: str, lang: str) -> str | None:
    """One try at a text for the room, its outcome said: "taken", a refusal, or None when
    the store could not take it now — then kept for the poll (keys.ROOM_PENDING)."""
    try:
        said = room_work.rooms().send(code, owner, text, lang, address=session.address())
    except StoreError as exc:
        if exc.reason != "locked":  # away, full, read-only: said as every use of the store says it
            share.store_notice(exc)
            return None
        if keys.ROOM_PENDING not in st.session_state:
            st.toast(t("room.pending"), icon=":material/schedule_send:")
        st.session_state[keys.ROOM_PENDING] = {"code": code, "owner": owner, "text": text, "lang": lang}
        return None
    st.session_state.pop(keys.ROOM_PENDING, None)
    room_work.start()  # this process measures texts too (every replica that serves a class does)
    if said == "taken":
        room_work.sent()
        st.toast(t("room.sent"), icon=":material/send:")
    else:
        st.toast(t(f"room.refused_{said}", chars=t.int(room_texts.MAX_CHARS)), icon=":material/block:")
    return said


def send_pending(code: str) -> bool:
    """A text for the room the store could not take, offered again (by the poll): True
    once it is settled — taken, or refused for a reason (both said)."""
    pending = st.session_state.get(keys.ROOM_PENDING)
    if not pending or pending.get("code") != code:
        return False
    return offer(session.tr(), code, pending["owner"], pending["text"], pending["lang"]) is not None


def withdraw(code: str, owner: str) -> None:
    """on_click of Withdraw (a student's own text) or of Remove (the teacher's, any text)."""
    with share.store_trouble():
        room_work.rooms().withdraw(code, owner)
        st.toast(session.tr()("room.withdrawn"), icon=":material/delete:")
    forget()


def handle_of(code: str, owner: str) -> str:
    """A text's handle in the teacher's widget keys, which travel to her browser: made with a
    secret of her session's own, never the student's id (an id is all that ``?me=`` needs)."""
    salt = st.session_state.setdefault(keys.HANDLE_SALT, secrets.token_hex(16))
    return hashlib.sha256(f"{salt}:{code}:{owner}".encode()).hexdigest()[:16]


def remove(code: str, owner: str) -> None:
    """on_click of the teacher's Remove: her host key checked, then the text goes."""
    room = classes()
    if room is not None and room.is_host(code, st.session_state.get(keys.HOST)):
        withdraw(code, owner)


def show(code: str) -> None:
    """on_change of the teacher's toggle: the room on every step, for every member."""
    room = classes()
    with share.store_trouble():
        st.session_state[keys.SEEN] = room.show_room(code, st.session_state.get(keys.HOST),
                                                      bool(st.session_state.get("room_shown")))
    forget()


def teacher_panel(t: Translator, code: str) -> None:
    """The teacher's room: shown on the steps or not, the texts (their first words, only
    off the projector) with a button to remove each, a text of her own to add, and the
    exports."""
    found = current()
    shown = isinstance(found, ClassState) and found.room
    now = room_now(code)
    texts = now[1] if now else []
    with st.popover(t("room.teacher_heading"), icon=":material/scatter_plot:", width="stretch"):
        st.session_state["room_shown"] = shown
        st.toggle(t("room.show"), key="room_shown", on_change=show, args=(code,), help=t("room.show_help"))
        counts(t, texts)
        unserved = []
        with share.store_trouble():
            unserved = room_work.rooms().unserved(code)
        if unserved:  # texts that wait for a model no server here measures now
            st.warning(t("room.unserved", models=t.list(served_model.model_name(t, m or served_model.default_model())
                                                        for m in unserved)), icon=":material/hourglass_disabled:")
        if not session.presenter():  # the texts' first words are for her eyes, never the projector's
            for x in texts:
                c1, c2 = st.columns([5, 1], vertical_alignment="center")
                state = t("room.state_failed_crashed" if x.reason == "crashed" else f"room.state_{x.state}")
                c1.caption(t("room.item", language=room_figures.language(t, x.lang), preview=drawing.literal(x.preview),
                             state=state))  # a reader's words: escaped, never Markdown
                c2.button(" ", key=f"room_remove_{handle_of(code, x.owner)}", icon=":material/close:",
                          on_click=remove, args=(code, x.owner), help=t("room.remove"))
            st.text_area(t("room.add_label"), key="room_text", max_chars=room_texts.MAX_CHARS, height=100)
            st.selectbox(t("room.lang_label"), LANG_CHOICES, key="room_lang",
                         format_func=lambda v: room_figures.language(t, v),
                         index=LANG_CHOICES.index(t.lang) if t.lang in LANG_CHOICES else 0)
            st.button(t("room.add"), key="room_add", on_click=send, args=(code, f"teacher:{secrets.token_hex(6)}"),
                      width="stretch", icon=":material/add:")
            if isinstance(found, ClassState):
                downloads(t, code, found, texts)


def counts(t: Translator, texts: list) -> None:
    """How many texts the room holds, measured and waiting (the teacher's live panel too)."""
    if texts:
        st.caption(t("room.counts", n=t.int(len(texts)), done=t.int(sum(1 for x in texts if x.state == "done")),
                     waiting=t.int(sum(1 for x in texts if x.state in ("waiting", "working")))))


def downloads(t: Translator, code: str, found, texts: list) -> None:
    """The room's numbers, the class's votes and its shares right question by question, as CSV files."""
    st.download_button(t("room.download_room"), exports.room_csv(texts, csv_columns), file_name=f"room-{code}.csv",
                       mime="text/csv", key="room_csv", width="stretch", icon=":material/download:")
    answers = []
    with share.store_trouble():
        answers = classes().answers_of(code)
    st.download_button(t("room.download_votes"), exports.votes_csv(found, answers), file_name=f"votes-{code}.csv",
                       mime="text/csv", key="votes_csv", width="stretch", icon=":material/download:")
    st.download_button(t("room.download_shares"), exports.shares_csv(found), file_name=f"shares-{code}.csv",
                       mime="text/csv", key="shares_csv", width="stretch", icon=":material/download:")


def panel(t: Translator) -> None:
    """The room's part of the class panel, as this session's role has it."""
    code = member()
    if code is None:
        return
    if is_teacher():
        teacher_panel(t, code)
    else:
        student_panel(t, code)
