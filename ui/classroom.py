"""A live class on the page: the teacher starts one from the sidebar (a join code, a
join link and its QR code); students join by the link or by typing the code, in their
own language, and their screens follow the teacher's step and settings. The class
lives in the store (room.classes); this module draws it and keeps the session's part.

The host key stays in the teacher's session: never in an address, a QR code or a
link. A student's anonymous id is in their address (``?class=CODE&me=ID``), so a reload
keeps them in the class as the same student. A small fragment polls the class's version
every second (one store read per process per tick, shared by every session through a
one-second cache); what it does is decided by room.follow.decide, a pure function."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, OrderedDict

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from room import classes as room_classes
from room import codes, follow
from room.store import StoreError

from . import keys, live, setting_table, share, state, steps, summary
from .i18n import Translator
from .steps import page_of

QUERY_CLASS, QUERY_ME = "class", "me"  # what a student's address carries
QUERY_HOST = "host"  # the teacher's resume link only (read once, removed from the address)
# the join code as the back of a room reads it (our fixed CSS; the code is checked to be
# six characters of the code alphabet before it is placed here)
CODE_HTML = ('<div style="font-size:6rem;font-weight:700;letter-spacing:0.12em;line-height:1.1;'
             'font-family:ui-monospace,monospace;color:#1B2430">{code}</div>')


@st.cache_resource(show_spinner=False)
def _classes() -> room_classes.Classes:
    """The classes of this process's store (the share links' file)."""
    return room_classes.Classes(share.store(), steps.first_questions())


def classes() -> room_classes.Classes | None:
    """The classes, or None after a notice when the store cannot be used just now."""
    with share.store_trouble():
        return _classes()
    return None


@st.cache_data(ttl=1.0, max_entries=512, show_spinner=False)
def class_version(code: str) -> int | None:
    """A class's version, read at most once a second per process whatever the number
    of students polling (None: the class has ended)."""
    return _classes().version(code)


PREBUILDS = 16  # class views whose summaries this process keeps track of having built
PREBUILD_AGAIN = 10.0  # seconds after a build ends before the same view is checked again


@st.cache_resource(show_spinner=False)
def _prebuilds() -> dict:
    return {"lock": threading.Lock(), "views": OrderedDict()}  # view → (thread, when it ended or None)


def prebuild(view: dict) -> threading.Thread | None:
    """Every step's summary for a class's text and settings, in all three languages,
    built in the background on this process: the first student to open a step in their
    language finds it built. Called wherever a process meets a class's view (its start,
    the teacher's changes, a student joining or following), so every replica serving the
    class builds it; a view built a while ago is checked again (the summaries' cache is
    bounded, and only what it dropped is built again). Returns the thread."""
    text, settings = view.get("text"), view.get("settings") or {}
    if not isinstance(text, str) or not text.strip() or not isinstance(settings, dict):
        return None
    kind = state.model_kind()
    key = (kind, text, json.dumps(settings, sort_keys=True, default=str))
    book = _prebuilds()
    with book["lock"]:
        found = book["views"].get(key)
        if found is not None:
            thread, ended = found
            book["views"].move_to_end(key)
            if ended is None or time.time() - ended < PREBUILD_AGAIN:
                return thread
        thread = threading.Thread(target=_build_summaries, args=(key, text, kind, dict(settings)), daemon=True,
                                  name="atlas-class-summaries")
        book["views"][key] = (thread, None)
        while len(book["views"]) > PREBUILDS:
            book["views"].popitem(last=False)
    thread.start()
    return thread


PREBUILD_FAILED: Counter = Counter()  # background builds that raised, by the exception's class


def _build_summaries(key: tuple, text: str, kind: str, settings: dict) -> None:
    try:
        a = state.analysis_unseen(text, kind)
        if a.n >= 3:  # a shorter text has no steps to build (its pages say so)
            rows, last = live.on_this_device()  # step 7 as its page shows it, live rows included
            summary.build_all(a, text, kind, settings, live_rows=rows, live_last=last)
    except Exception as exc:  # reported, never swallowed: logged with its traceback and counted
        PREBUILD_FAILED[type(exc).__name__] += 1  # (a reader who opens the step builds it then, and sees the error)
        logging.getLogger(__name__).exception("building a class's summaries in the background")
    finally:
        book = _prebuilds()
        with book["lock"]:
            found = book["views"].get(key)
            if found is not None and found[0] is threading.current_thread():
                book["views"][key] = (found[0], time.time())


def member() -> str | None:
    """The code of the class this session is in (as teacher or student), or None."""
    return st.session_state.get(keys.CLASS)


def is_teacher() -> bool:
    return member() is not None and st.session_state.get(keys.HOST) is not None


def class_view(step: int) -> dict:
    """What a class carries to its students: the text and the settings (the language
    and presenter mode stay each reader's)."""
    view = share.current_view(step)
    return {"text": view["text"], "settings": view["settings"]}


def _apply(view: dict) -> None:
    """A class's text and settings in this session (as a share link's are)."""
    text = view.get("text")
    if isinstance(text, str) and len(text) <= state.MAX_CHARS:
        st.session_state[keys.TEXT] = text
    share.apply_settings(view.get("settings"))
    st.session_state[keys.CLASS_VIEW] = view


def _still_the_class() -> bool:
    """Whether this session still holds the class's text and every setting the class
    set (a widget's own default for a setting the class did not set is no change)."""
    view = st.session_state.get(keys.CLASS_VIEW)
    if not isinstance(view, dict):
        return True

    def same(a, b):
        return (list(a) if isinstance(a, (list, tuple)) else a) == (list(b) if isinstance(b, (list, tuple)) else b)

    settings = view.get("settings") or {}
    return st.session_state.get(keys.TEXT) == view.get("text") and all(
        same(st.session_state.get(k), v) for k, v in settings.items()
        if k in setting_table.ROWS and setting_table.row(k).kind != "guess")


def _leave_class() -> None:
    for k in (keys.CLASS, keys.HOST, keys.STUDENT, keys.FOLLOWING, keys.SEEN, keys.CLASS_VIEW, keys.PRESENCE_AT):
        st.session_state.pop(k, None)
    for q in (QUERY_CLASS, QUERY_ME):
        if q in st.query_params:
            del st.query_params[q]


# --- joining -------------------------------------------------------------------------


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
    return join(t, code, st.query_params.get(QUERY_ME))


def join(t: Translator, code: str, student: str | None = None):
    """Join ``code`` as a student: the class's text and settings, its step. Returns the
    page of the class's step, or None after a notice."""
    room = classes()
    if room is None:
        return None
    student = student if room_classes.is_student(student) else room_classes.new_student()
    found = None
    with share.store_trouble() as trouble:
        try:
            joined = room.join(code, student)
        except room_classes.ClassFull:
            st.toast(t("class.full"), icon=":material/group_off:")
            return None
        found = room.state(code) if joined else None
    if trouble:
        return None
    if found is None:
        st.toast(t("class.unknown"), icon=":material/link_off:")
        return None
    st.session_state.pop(keys.HOST, None)
    st.query_params[QUERY_CLASS] = code
    st.query_params[QUERY_ME] = student
    return _seat(found, {keys.STUDENT: student, keys.FOLLOWING: True, keys.PRESENCE_AT: time.time()},
                 t("class.joined", code=codes.spaced(code)), ":material/group:")


def _seat(found: room_classes.ClassState, seat: dict, notice: str, icon: str):
    """This session in class ``found`` (as ``seat`` says: a student or its teacher): the
    class's text and settings in place, a notice for the class's page, and that page."""
    st.session_state.update({keys.CLASS: found.code, keys.SEEN: found.version, **seat})
    _apply(found.view)
    prebuild(found.view)
    state.notice_later(notice, icon)  # said on the class's page, after the switch there
    return page_of(found.step)


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


# --- the teacher ---------------------------------------------------------------------------


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
    prebuild(view)
    _leave_class()
    st.session_state.update({keys.CLASS: code, keys.HOST: key, keys.SEEN: 1})


def end() -> None:
    """on_click of "End the class": its text, students and answers are deleted."""
    room, code = classes(), member()
    if room is not None and code is not None:
        try:
            room.end(code, st.session_state.get(keys.HOST))
        except (room_classes.NotHost, StoreError):
            pass  # ended already, or the store is away: the teacher's session leaves it either way
    _leave_class()
    st.toast(state.tr()("class.ended"), icon=":material/logout:")


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
                _leave_class()
                st.toast(state.tr()("class.ended"), icon=":material/logout:")
                return
            key = st.session_state.get(keys.HOST)
            if found.step != step:
                room.move(code, key, step)
            view = class_view(step)
            if view != found.view:
                room.set_view(code, key, view)
                prebuild(view)
        except room_classes.NotHost:
            _leave_class()
            st.toast(state.tr()("class.not_host"), icon=":material/key_off:")


def resume(t: Translator, code: str, key: str):
    """Take a class back as its teacher (after a reload, from another device, or when
    her server went away): with its host key, checked by the store. Returns the page of
    the class's step, or None after a notice."""
    room = classes()
    if room is None:
        return None
    found = None
    with share.store_trouble() as trouble:
        found = room.state(code) if room.is_host(code, key) else None
    if trouble:
        return None
    if found is None:
        st.toast(t("class.not_host"), icon=":material/key_off:")
        return None
    _leave_class()  # also takes ?class= out of her address: a reload must not make her a student
    return _seat(found, {keys.HOST: key}, t("class.resumed", code=codes.spaced(code)), ":material/co_present:")


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
    t = state.tr()
    st.markdown(f"### {t('class.present', n=t.int(present_count(code)))}")


def sidebar(t: Translator, step: int) -> None:
    """The sidebar's class panel: start or join; in a class, its code and its controls."""
    code = member()
    with st.expander(t("class.heading"), expanded=code is not None, icon=":material/groups:"):
        if code is None:
            st.button(t("class.start"), key="class_start", on_click=start, args=(step,), width="stretch",
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
                        st.switch_page(page.path, query_params=dict(st.query_params))
            if not state.presenter():  # the key is typed where the room cannot see it
                take_back(t)
            return
        st.markdown(t("class.code", code=codes.spaced(code)))
        if is_teacher():
            poll(step)  # the students present, counted live
            if st.button(t("class.show_slide"), key="class_slide", width="stretch", icon=":material/qr_code_2:"):
                join_slide(code, t)
            if not state.presenter():  # never on a projector: the link holds the host key
                with st.popover(t("class.resume_heading"), icon=":material/key:", width="stretch"):
                    st.caption(t("class.resume_help"))
                    st.code(resume_url(code), language=None)
                    st.markdown(t("class.key_label"))
                    st.code(st.session_state.get(keys.HOST, ""), language=None)
            st.button(t("class.end"), key="class_end", on_click=end, width="stretch", icon=":material/logout:")
            return
        poll(step)
        if st.session_state.get(keys.FOLLOWING):
            st.caption(t("class.following"))
            st.button(t("class.explore"), key="class_explore", width="stretch", icon=":material/explore:",
                      on_click=explore)
        else:
            st.caption(t("class.exploring"))
            if st.button(t("class.back"), key="class_back", width="stretch", icon=":material/groups:"):
                back(t)


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
                    st.switch_page(page.path, query_params=dict(st.query_params))


def explore() -> None:
    """on_click of "Explore on my own": the screen stops following the teacher."""
    st.session_state[keys.FOLLOWING] = False


def present_count(code: str) -> int:
    room = classes()
    try:
        return room.present(code, time.time() - 3 * follow.PRESENCE_EVERY) if room else 0
    except StoreError:
        return 0


def back(t: Translator) -> None:
    """A student returns to the class: its text, settings and step."""
    room, code = classes(), member()
    found = None
    with share.store_trouble() as trouble:
        found = room.state(code) if room is not None and code else None
    if trouble:
        return  # the store is away just now: the student stays where they are, and is told
    if found is None:
        _leave_class()
        st.toast(t("class.ended"), icon=":material/logout:")
        return
    st.session_state.update({keys.FOLLOWING: True, keys.SEEN: found.version})
    _apply(found.view)
    page = page_of(found.step)
    if page is not None:
        st.switch_page(page.path, query_params=dict(st.query_params))


# --- following ------------------------------------------------------------------------


def notice_if_left(t: Translator) -> None:
    """A following student who changed the text or a setting explores on their own now."""
    if member() and not is_teacher() and st.session_state.get(keys.FOLLOWING) and not _still_the_class():
        st.session_state[keys.FOLLOWING] = False
        st.toast(t("class.left"), icon=":material/explore:")


def tick(step: int) -> None:
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


def _tick(code: str, step: int) -> None:
    version = class_version(code)
    seat = follow.Seat(teacher=is_teacher(), following=bool(st.session_state.get(keys.FOLLOWING)), page=step,
                       seen_version=st.session_state.get(keys.SEEN, 0))
    action, to = follow.decide(version, None, seat) if version is None else _decide(code, version, seat)
    now = time.time()
    if not seat.teacher and follow.presence_due(st.session_state.get(keys.PRESENCE_AT), now):
        st.session_state[keys.PRESENCE_AT] = now
        room = classes()
        try:
            if room is not None:
                room.join(code, st.session_state.get(keys.STUDENT, ""), now)
        except (StoreError, room_classes.ClassFull):
            pass  # presence is a count on the teacher's screen: the next tick tries again
    if action == follow.GONE:
        _leave_class()
        if _alone():  # said after the rerun that takes the class away
            state.notice_later(state.tr()("class.ended"), ":material/logout:")
            st.rerun(scope="app")
        st.toast(state.tr()("class.ended"), icon=":material/logout:")
        return
    if action == follow.STAY:
        return
    st.session_state[keys.SEEN] = version
    if seat.teacher:  # an answer came in (or her own change): her page redraws its count
        _redraw()
        return
    found = classes().state(code)
    if found is not None:
        _apply(found.view)
        prebuild(found.view)
    if action == follow.MOVE:
        page = page_of(to)
        if page is not None:
            st.switch_page(page.path, query_params=dict(st.query_params))
    _redraw()


def _alone() -> bool:
    """Whether this run is the poll fragment's own, not a full run of the page
    (Streamlit's run context records the fragments a run is for)."""
    ctx = get_script_run_ctx()
    return ctx is not None and bool(ctx.fragment_ids_this_run)


def _redraw() -> None:
    """After a tick that changed what the page shows: a poll's own run reruns the app;
    in a full run (the sidebar draws the poll before the page) the page that follows
    draws it, and a rerun would drop the click that started this run."""
    if _alone():
        st.rerun(scope="app")


def _decide(code: str, version: int, seat: follow.Seat):
    if version == seat.seen_version or seat.teacher or not seat.following:
        return follow.decide(version, None, seat)
    found = classes().state(code)  # something moved: where is the class now
    return follow.decide(version, found.step if found else None, seat)


@st.fragment(run_every=1.0)
def poll(step: int) -> None:
    """A class member's tick each second, in the sidebar's class panel; the teacher's
    shows the students present, counted live."""
    tick(step)
    code = member()
    if code is not None and is_teacher():
        st.caption(state.tr()("class.present", n=state.tr().int(present_count(code))))
