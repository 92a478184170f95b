"""One link for the room: ``?s=<key>`` restores language, page, presenter mode, every
step's settings and the text, from the server-side store (:mod:`server.store`). A link
names its page by the page's id (a link made when pages were numbered names it by its
number then: server.class_layout.NUMBERED_PAGES).

A link is checked before anything of it is used: an unknown or evicted key, a language
or page that does not exist, a setting of the wrong kind or out of range each give a
short notice in the reader's language and leave that part at its default.
"""

from __future__ import annotations

import contextlib
import io
import sys
from urllib.parse import urlsplit

import streamlit as st

from attn import settings
from server import store as sharestore
from server.class_layout import NUMBERED_PAGES

from . import keys, page_run, served_model, session, setting_table, walk
from .i18n import LANGS, Translator
from .step_parts import Step

LOCAL_HOSTS = ("localhost", "127.", "::1", "[::1]", "0.0.0.0")


STORE_WAIT = 3.0  # seconds a page run waits for the store's lock at most, before saying so
SWITCH_SECONDS = 0.005  # the interpreter's thread switch interval in a serving process (Python's: 0.005)


@st.cache_resource(show_spinner=False)
def store() -> sharestore.Backend:
    """One store per process (SQLite or PostgreSQL: server.store.open_store); a page run
    waits STORE_WAIT for another process's lock at most, never the store's own 30 s.

    A write holds SQLite's one lock across its statements, and its thread takes the
    interpreter back after each of them: at Python's switch interval of 5 ms, with a whole
    class's page runs busy at once ("everyone, send your text now"), each send held the
    lock 50–80 ms and 23–40 of 100 sends waited past STORE_WAIT; at SWITCH_SECONDS none did
    (bench/classroom.py --scenarios room, docs/deploy.md). Set once, for the process."""
    sys.setswitchinterval(SWITCH_SECONDS)
    return sharestore.open_store(timeout=STORE_WAIT)


def begin_run() -> None:
    """app.py, at the start and at the end of every full run: a notice about the store is
    said once a run (the callbacks that run before a page are part of its run)."""
    st.session_state.pop(keys.NOTICED, None)


def store_notice(exc: sharestore.StoreError) -> None:
    """Say, in the reader's language, why the store could not be used just now (once a
    run: a page asks the store several times, and each would say the same)."""
    said = st.session_state.setdefault(keys.NOTICED, set())
    if exc.reason not in said:
        said.add(exc.reason)
        st.toast(session.tr()(f"share.store_{exc.reason}"), icon=":material/warning:")


class Trouble:
    """What ``store_trouble`` yields: true once the store failed inside its block."""

    def __init__(self):
        self.error: sharestore.StoreError | None = None

    def __bool__(self) -> bool:
        return self.error is not None


@contextlib.contextmanager
def store_trouble():
    """A use of the store that may fail just now (locked, full, read-only, away): its
    StoreError ends the block and is said to the reader in their language (one notice,
    never Streamlit's error box); the code after the block runs, and the yielded
    ``Trouble`` says whether it failed. The one place a StoreError becomes a notice."""
    trouble = Trouble()
    try:
        yield trouble
    except sharestore.StoreError as exc:
        trouble.error = exc
        store_notice(exc)


def current_view(step: Step) -> dict:
    """What a link (and a class) restores: the model, text, language, page (by its id),
    presenter mode and settings — each setting only as a value its row takes (a value no
    widget would take never travels)."""
    values = {k: (list(v) if isinstance(v, tuple) else v) for k in setting_table.KEYS
              if (v := st.session_state.get(k)) is not None}
    return {"text": session.current_text(), "lang": st.session_state.get(keys.LANG, "en"), "page": step.id,
            "presenter": session.presenter(), "model": served_model.model_id(),
            "settings": {k: v for k, v in values.items() if setting_table.valid(k, v)}}


def apply_link(t: Translator):
    """Once per link and session: restore the view of ``?s=``. Returns the page to open
    (or None), after saying what could not be restored. Every value is checked by its
    kind before it is used (a link may hold anything); each setting by its row of
    ui.setting_table, and again by its page on the text (widgets.place), which says so
    when it drops one."""
    key = st.query_params.get("s")
    if not key or st.session_state.get(keys.SHARE_APPLIED) == key:
        return None
    st.session_state[keys.SHARE_APPLIED] = key
    view = None
    with store_trouble() as trouble:
        view = store().get(key, reader=session.reader_id())  # opened by another than its maker: kept first
    if trouble:
        return None
    if store().recreated:
        st.toast(t("share.recreated"), icon=":material/warning:")
    if view is None:
        st.toast(t("share.unknown"), icon=":material/link_off:")
        return None
    bad = False
    text = view.get("text")
    if isinstance(text, str) and len(text) <= session.MAX_CHARS:
        st.session_state[keys.TEXT] = text
    else:
        bad = True
    lang = view.get("lang")
    if isinstance(lang, str) and lang in LANGS:
        st.session_state[keys.LANG] = lang
        st.session_state[keys.LANG_CHOICE] = lang
    else:
        bad = True
    if "model" in view and not served_model.choose(view["model"]):  # a model this server no longer offers
        bad = True
    st.session_state[keys.PRESENTER] = view.get("presenter") is True
    st.session_state[keys.PRESENTER_CHOICE] = st.session_state[keys.PRESENTER]
    bad = not apply_settings(view.get("settings")) or bad
    page = page_of_view(view)
    if page is None:
        bad = True
    if bad:
        st.toast(Translator(st.session_state.get(keys.LANG, "en"))("share.bad_values"), icon=":material/tune:")
    return page


def page_of_view(view: dict) -> Step | None:
    """The page a view (a link's, a class's) opens: by its id, or, in a view made when the
    pages were numbered, by its number then (None: no such page now)."""
    page = view.get("page")
    if page is None:
        number = view.get("step")
        whole = isinstance(number, int) and not isinstance(number, bool)  # true is not step 1
        page = NUMBERED_PAGES.get(number) if whole else None
    return walk.by_id(page) if isinstance(page, str) else None


def apply_settings(raw) -> bool:
    """Put a view's settings in place, each checked by its row of ui.setting_table (and
    again by its page on the text, which says so when it drops one). False when some
    did not fit."""
    link = st.session_state.setdefault(keys.FROM_LINK, set())
    ok = True
    for k, v in (raw if isinstance(raw, dict) else {}).items():
        if setting_table.valid(k, v):
            page_run.set_by_app(k, v)
            link.add(k)
        else:
            ok = False
    return ok


def keep_applied() -> None:
    """The link this session opened, if any, is kept first from now on (a class was
    started from it). Inside the caller's ``store_trouble``."""
    key = st.session_state.get(keys.SHARE_APPLIED)
    if key:
        store().keep(key)


def base_url() -> str:
    """The address a class should open: ATLAS_PUBLIC_URL, else the reader's own."""
    public = settings.read().public_url
    if public:
        return public
    parts = urlsplit(st.context.url or "http://localhost:8501/")
    return f"{parts.scheme}://{parts.netloc}"


def is_local(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host == "localhost" or host.startswith(LOCAL_HOSTS)


def qr_png(url: str) -> bytes:
    import segno

    buf = io.BytesIO()
    segno.make(url, error="m").save(buf, kind="png", scale=8, border=2)
    return buf.getvalue()


@st.dialog(" ", width="medium")
def _share_dialog(url: str, t: Translator) -> None:
    st.subheader(t("share.dialog_title"))
    st.markdown(t("share.lead"))
    st.code(url, language=None)
    st.image(qr_png(url), caption=t("share.qr_caption"), width=260)
    st.caption(t("share.kept_note"))
    held = None
    with contextlib.suppress(sharestore.StoreError):
        held = store().count()
    if held is not None:  # how long links are kept here: while there is room, those opened by others first
        st.caption(t("share.kept_for", views=t.int(store().max_views), mb=t.int(store().max_bytes // 2**20),
                     held=t.int(held)))
    if is_local(url):
        st.warning(t("share.local_note"))


LINKS_PER_SESSION = 40  # new links one reader may make: enough for a lesson, too few to push out the room's


def share_button(t: Translator, locked: bool = False) -> bool:
    """The sidebar's share button: whether it was pressed. app.py then calls
    ``share_view`` once the page has drawn its widgets (a widget's value read before its
    page draws it in this run can still be the browser's raw value). ``locked``: a
    student while their class votes (a link would show the answers elsewhere)."""
    return st.button(t("share.button"), icon=":material/qr_code_2:", width="stretch", key="share", disabled=locked,
                     help=t("vote.locked") if locked else None)


def share_view(t: Translator, step: Step) -> None:
    """Keep the view, then show its link and QR code. A reader makes at most
    LINKS_PER_SESSION different links (the same view again is the same link), so that
    no one session can push the room's links out of the store."""
    view = current_view(step)
    made = st.session_state.setdefault(keys.LINKS_MADE, set())
    if sharestore.key_of(view) not in made and len(made) >= LINKS_PER_SESSION:
        st.toast(t("share.too_many", n=t.int(LINKS_PER_SESSION)), icon=":material/block:")
        return
    with store_trouble() as trouble:
        try:
            key = store().put(view, address=session.address(), maker=session.reader_id())
        except sharestore.Refused as exc:  # this network's links or bytes an hour (server.limits)
            st.toast(t(f"share.limited_{exc.what}"), icon=":material/block:")
            return
    if trouble:
        return
    made.add(key)
    _share_dialog(f"{base_url()}/{walk.link(step)}?s={key}", t)
