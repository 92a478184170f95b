"""One link for the room: ``?s=<key>`` restores language, step, presenter mode, every
step's settings and the text, from the server-side store (:mod:`ui.sharestore`).

A link is checked before anything of it is used: an unknown or evicted key, a language
or step that does not exist, a setting of the wrong kind or out of range each give a
short notice in the reader's language and leave that part at its default.
"""

from __future__ import annotations

import io
import math
from urllib.parse import urlsplit

import streamlit as st

from attn import settings
from attn.features import FEATURE_MAPS

from . import sharestore, state
from .i18n import LANGS, Translator
from .steps import PAGES
from .swaps import SWEEP_METRICS

_APPLIED = state.SHARE_APPLIED
LOCAL_HOSTS = ("localhost", "127.", "::1", "[::1]", "0.0.0.0")


@st.cache_resource(show_spinner=False)
def store() -> sharestore.Store:
    """One store per process (SQLite handles the other processes)."""
    return sharestore.Store(sharestore.default_path())


def _setting_ok(key: str, value) -> bool:
    """The kind and range of a setting, whatever the text (what depends on the text, a
    head or a hub that exists, is checked by each page with widgets.fit)."""

    def count(v, lo=0):
        return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= 1_000_000

    if key in state.PLAYGROUND_SETTINGS:
        from .playground import setting_ok

        return setting_ok(key, value)
    if key.endswith(("_w", "_rw", "_rl")):
        return count(value, 1)
    if key.endswith(("_layer", "_token")):
        return count(value)
    if key.endswith("_head"):
        return value == "avg" or count(value)
    if key.endswith("_hubs"):
        return isinstance(value, list) and all(count(v) for v in value)
    if key.endswith("_p"):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1
    if key.endswith("_feature"):
        return value in FEATURE_MAPS
    if key.endswith("_causal"):
        return isinstance(value, bool)
    if key.endswith("_metric"):
        return value in SWEEP_METRICS
    if key.endswith("_guess"):
        return value is None or isinstance(value, str) or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
    return False


def current_view(step_number: int) -> dict:
    """What a link restores: the text, language, step, presenter mode and settings."""
    kept = st.session_state.get(state.KEPT, {})
    values = {k: st.session_state.get(k, kept.get(k)) for k in state.SETTINGS}
    return {"text": state.current_text(), "lang": st.session_state.get("lang", "en"), "step": step_number,
            "presenter": state.presenter(),
            "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items() if v is not None}}


def apply_link(t: Translator):
    """Once per link and session: restore the view of ``?s=``. Returns the page to open
    (or None), after saying what could not be restored."""
    key = st.query_params.get("s")
    if not key or st.session_state.get(_APPLIED) == key:
        return None
    st.session_state[_APPLIED] = key
    view = store().get(key)
    if store().recreated:
        st.toast(t("share.recreated"), icon=":material/warning:")
    if view is None:
        st.toast(t("share.unknown"), icon=":material/link_off:")
        return None
    bad = False
    text = view.get("text")
    if isinstance(text, str) and len(text) <= state.MAX_CHARS:
        st.session_state["text"] = text
    else:
        bad = True
    lang = view.get("lang")
    if lang in LANGS:
        st.session_state["lang"] = lang
        st.session_state["lang_choice"] = lang
    else:
        bad = True
    st.session_state["presenter"] = view.get("presenter") is True
    st.session_state["presenter_choice"] = st.session_state["presenter"]
    kept = st.session_state.setdefault(state.KEPT, {})
    link = st.session_state.setdefault("_from_link", set())
    raw = view.get("settings") if isinstance(view.get("settings"), dict) else {}
    for k, v in raw.items():
        if k in state.SETTINGS and _setting_ok(k, v):
            kept[k] = v
            st.session_state[k] = v
            link.add(k)
        else:
            bad = True
    step = view.get("step")
    page = next((p for p in PAGES if p.number == step), None) if isinstance(step, int) else None
    if page is None:
        bad = True
    if bad:
        st.toast(Translator(st.session_state.get("lang", "en"))("share.bad_values"), icon=":material/tune:")
    return page


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
    if is_local(url):
        st.warning(t("share.local_note"))


def share_button(t: Translator, step_number: int) -> None:
    """The sidebar's share button: keep the view, then show its link and QR code."""
    if st.button(t("share.button"), icon=":material/qr_code_2:", width="stretch", key="share"):
        key = store().put(current_view(step_number))
        page = next(p for p in PAGES if p.number == step_number)
        _share_dialog(f"{base_url()}/{page.link}?s={key}", t)
