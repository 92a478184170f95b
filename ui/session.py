"""The reader's session: their language, their text, presenter mode, what the address
keeps of them, the notices kept for the next run, and a kept setting forgotten."""

from __future__ import annotations

import secrets

import streamlit as st

from server import limits, texts

from . import keys, page_run
from .i18n import Translator, detect_language
from .samples import long_text, sample_text

# the text area's cap: the model's whole context of English text (32,768 tokens of Gemma 3 ≈ 140,000
# characters); the analysis reads the device's budget of its first tokens (attn.budgets)
MAX_CHARS = 150_000
UPLOAD_MB = 2  # a text file's bound, in Streamlit's megabytes (2 × 1024² bytes): said in the upload's help
UPLOAD_BYTES = UPLOAD_MB * 1024 * 1024  # (the server takes a request 1 MB larger: a file's framing is not the file)


def init_language() -> str:
    """Once per session: from ``?lang=``, else the browser, else English."""
    if keys.LANG not in st.session_state:
        st.session_state[keys.LANG] = detect_language(st.query_params.get("lang"), st.context.locale)
    return st.session_state[keys.LANG]


def init_presenter() -> bool:
    """Once per session: presenter mode from ``?present=1``."""
    if keys.PRESENTER not in st.session_state:
        st.session_state[keys.PRESENTER] = st.query_params.get("present") == "1"
    return st.session_state[keys.PRESENTER]


def on_presenter_change() -> None:
    st.session_state[keys.PRESENTER] = bool(st.session_state[keys.PRESENTER_CHOICE])


def write_url() -> None:
    """Language and presenter mode in the address on every run (page links and
    st.switch_page drop the query otherwise), so a reload or a shared link keeps them."""
    lang = st.session_state.get(keys.LANG, "en")
    if st.query_params.get("lang") != lang:
        st.query_params["lang"] = lang
    if st.session_state.get(keys.PRESENTER):
        if st.query_params.get("present") != "1":
            st.query_params["present"] = "1"
    elif "present" in st.query_params:
        del st.query_params["present"]
    if "s" in st.query_params and st.session_state.get(keys.SHARE_APPLIED) == st.query_params.get("s"):
        del st.query_params["s"]  # applied once: a reload keeps what the reader has done since


def tr() -> Translator:
    return Translator(st.session_state.get(keys.LANG, "en"))


def on_language_change() -> None:
    """Keep the URL in step; switch the sample text too while it is untouched (never in
    a class: its students read the class's text, each in their own language)."""
    new = st.session_state[keys.LANG_CHOICE]
    old = st.session_state.get(keys.LANG, "en")
    st.session_state[keys.LANG] = new
    st.query_params["lang"] = new
    if keys.CLASS not in st.session_state:
        for sample in (sample_text, long_text):  # the short sample, or the long one, in the new language
            if st.session_state.get(keys.TEXT) == sample(old):
                st.session_state[keys.TEXT] = sample(new)
                break


def text_changed() -> None:
    """on_change of the text area, and the sample's button: the reader's own change (a
    text a timed fragment's tick brought is put back instead: ``page_run.stale``)."""
    if page_run.stale(keys.TEXT):
        return
    st.session_state.setdefault(keys.CHANGED, set()).add(keys.TEXT)


UPLOAD = "text_file"  # the sidebar's file upload (a .txt or .md file, read as the text)


def text_uploaded() -> None:
    """on_change of the file upload: its contents become the text, read as UTF-8 (a
    byte-order mark allowed); a file in another encoding is refused in words, and a file
    longer than the text area holds is cut to it, and said."""
    upload = st.session_state.get(UPLOAD)
    if upload is None:
        return
    t = tr()
    data = upload.getvalue()
    if len(data) > UPLOAD_BYTES:  # a client that went round the widget's own bound
        notice_later(t("sidebar.upload_too_big", name=upload.name, mb=UPLOAD_MB), ":material/block:")
        return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = None
    # a NUL is no letter of a text: UTF-16 saved without its byte-order mark reads as valid
    # UTF-8 with a NUL between the letters, and a file of NULs is no text either
    if text is None or "\x00" in text:
        notice_later(t("sidebar.upload_not_utf8", name=upload.name), ":material/block:")
        return
    if not texts.clean(text).strip():
        notice_later(t("sidebar.upload_empty", name=upload.name), ":material/block:")
        return
    if len(text) > MAX_CHARS:
        notice_later(t("sidebar.upload_cut", name=upload.name, n=t.int(MAX_CHARS), total=t.int(len(text))),
                     ":material/content_cut:")
        text = text[:MAX_CHARS]
    else:
        notice_later(t("sidebar.upload_read", name=upload.name, n=t.int(len(text))), ":material/upload_file:")
    st.session_state[keys.TEXT] = text
    text_changed()


def load_long_sample() -> None:
    """The sidebar's second sample button: the language's long sample, a whole chapter."""
    st.session_state[keys.TEXT] = long_text(st.session_state.get(keys.LANG, "en"))
    text_changed()


def restore_sample() -> None:
    st.session_state[keys.TEXT] = sample_text(st.session_state.get(keys.LANG, "en"))
    text_changed()


def init_text() -> None:
    if keys.TEXT not in st.session_state:
        st.session_state[keys.TEXT] = sample_text(st.session_state.get(keys.LANG, "en"))


def current_text() -> str:
    """The reader's text as the app keeps it (server.texts.clean: no NUL nor other control
    characters but tab and newline), for the analysis, links and classes alike."""
    return texts.clean(st.session_state.get(keys.TEXT, ""))


def presenter() -> bool:
    """Presenter mode (for a projector): answers wait for their reveal."""
    return bool(st.session_state.get(keys.PRESENTER, False))


def notice_later(text: str, icon: str) -> None:
    """A notice (toast) for the run after a page switch: those of a run that switches
    page are dropped with it."""
    st.session_state.setdefault(keys.NOTICES, []).append((text, icon))


def show_notices() -> None:
    """app.py, on every run: the notices kept for it."""
    for text, icon in st.session_state.pop(keys.NOTICES, []):
        st.toast(text, icon=icon)


def address() -> str:
    """The client, as the limits count it (server.limits.key): its address as the server
    gives it (``st.context.ip_address``: the connection's own, or what a proxy trusted by
    ``FORWARDED_ALLOW_IPS`` forwarded), or "local" for the server's own machine. Never a
    header read here: a client could forge one."""
    try:
        found = st.context.ip_address
    except Exception:  # outside a browser's session (a test's script run)
        found = None
    return limits.key(found)


def reader_id() -> str:
    """This session's own id, made once: whether the one who opens a link made it."""
    if keys.READER_ID not in st.session_state:
        st.session_state[keys.READER_ID] = secrets.token_urlsafe(12)
    return st.session_state[keys.READER_ID]


def forget_setting(key: str) -> None:
    """A kept value that no longer fits its widget (a shorter text, another model)."""
    if key in st.session_state.get(keys.FROM_LINK, set()):  # it came with a shared link: say so
        st.session_state[keys.FROM_LINK].discard(key)
        st.toast(tr()("share.dropped"), icon=":material/tune:")
    if key in st.session_state:
        del st.session_state[key]
