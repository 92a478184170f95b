"""Shared state of the app: language, the reader's text, the model and its cached
results. The one place for caching: ``st.cache_resource`` for the model and the
analyses (read-only objects, never copied), ``st.cache_data`` for small numbers.
"""

from __future__ import annotations

import gc
import threading
import time

import streamlit as st
import torch

from attn import backend, convert, settings
from attn import model as atlas_model
from attn.device import compute_dtype, device_info, pick_device

from . import keys
from .i18n import Translator, detect_language
from .samples import sample_text
from room.serving import ByteLRU, TicketQueue

_convert_lock = threading.Lock()
MAX_CHARS = 100_000  # the text area's cap (a few hundred pages; the analysis reads its first tokens)


def model_kind() -> str:
    return settings.read().model_kind


# --- language and text -----------------------------------------------------------


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


def token_budget() -> int:
    """Tokens the analysis reads at most (the model's budget on this device)."""
    return atlas_model.token_budget(pick_device())


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
    """Keep the URL in step; switch the sample text too while it is untouched."""
    new = st.session_state[keys.LANG_CHOICE]
    old = st.session_state.get(keys.LANG, "en")
    st.session_state[keys.LANG] = new
    st.query_params["lang"] = new
    if st.session_state.get(keys.TEXT) == sample_text(old):
        st.session_state[keys.TEXT] = sample_text(new)


def restore_sample() -> None:
    st.session_state[keys.TEXT] = sample_text(st.session_state.get(keys.LANG, "en"))


def init_text() -> None:
    if keys.TEXT not in st.session_state:
        st.session_state[keys.TEXT] = sample_text(st.session_state.get(keys.LANG, "en"))


def current_text() -> str:
    return st.session_state.get(keys.TEXT, "")


# --- settings ----------------------------------------------------------------------------
# Every setting is a row of ui.setting_table; its widget keeps its value for the session
# (persist_state), across page switches and st.switch_page alike.

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


def after_page(action) -> None:
    """What must run once the page has drawn its widgets (app.py: a share or a handout
    asked for in the sidebar), even when the page ends early: ``stop_page`` runs it."""
    st.session_state[keys.AFTER_PAGE] = action


def page_done() -> None:
    """Run (once) what waits for the end of the page."""
    action = st.session_state.pop(keys.AFTER_PAGE, None)
    if action is not None:
        action()


def stop_page() -> None:
    """End the page here (st.stop), after what waits for its end: nothing can be drawn
    once Streamlit has been asked to stop."""
    page_done()
    st.stop()


def forget_setting(key: str) -> None:
    """A kept value that no longer fits its widget (a shorter text, another model)."""
    if key in st.session_state.get(keys.FROM_LINK, set()):  # it came with a shared link: say so
        st.session_state[keys.FROM_LINK].discard(key)
        st.toast(tr()("share.dropped"), icon=":material/tune:")
    if key in st.session_state:
        del st.session_state[key]


# --- the model ---------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def get_model(kind: str):
    """One model per process, shared by every reader (it switches its attention only
    under its own lock and restores it). Once loaded, everything alive so far (the
    libraries, the model) is moved out of the garbage collector's sight (gc.freeze):
    it lives as long as the process, and each collection then scans only what readers
    make."""
    threads = settings.read().torch_threads
    if threads:  # a replica's share of the machine's cores (scripts/serve.sh), not every core
        torch.set_num_threads(threads)
    model = atlas_model.tiny() if kind == "tiny" else atlas_model.load()
    gc.collect()
    gc.freeze()
    return model


def _converting(step) -> None:
    """Convert (or repair) the model under the process's lock, with a progress bar."""
    t = tr()
    with _convert_lock:
        bar = st.progress(0.0, text=t("model.converting"))

        def progress(fraction: float, stage: str) -> None:
            bar.progress(min(1.0, fraction), text=t("model.converting") + " — " + t(f"model.stage_{stage}"))

        try:
            step(progress)
        finally:
            bar.empty()


def ensure_model():
    """The model, converting it first (once, with a progress bar) when needed. A copy
    that fails to load is checked in full and converted again once (a damaged file
    whose size still looks right); a copy that cannot be rebuilt stops the page with
    one sentence saying which folder to delete."""
    kind = model_kind()
    try:
        if kind == "gemma" and not convert.is_converted():
            _converting(lambda progress: convert.is_converted() or convert.convert(progress))
        try:
            return get_model(kind)
        except Exception:
            if kind != "gemma":
                raise
            _converting(convert.repair)  # converts again when the copy is damaged
            return get_model(kind)  # a failure now is not the copy's
    except convert.CacheDamaged as exc:
        st.error(tr()("model.damaged", path=str(exc.path)), icon=":material/error:")
        stop_page()


def check_environment() -> None:
    """Stop with one sentence naming an environment variable the server cannot use."""
    try:
        settings.read()
    except settings.SettingError as exc:
        st.error(tr()("app.bad_environment", variable=exc.variable), icon=":material/error:")
        st.stop()


def model_line(t: Translator) -> str:
    """The model, its quantisation and licence, in the reader's language."""
    name = atlas_model.MODEL_LABEL if model_kind() == "gemma" else t("sidebar.tiny_model")
    return t("sidebar.about", model=name, quant=atlas_model.QUANT_LABEL, licence=t("sidebar.licence"))


@st.cache_resource(show_spinner=False)
def _device_info() -> dict:
    return device_info(pick_device())


def device_line() -> str:
    """The device in the reader's language."""
    info, t = _device_info(), tr()
    if info["kind"] == "cuda":
        return t("sidebar.device_cuda", name=info["name"], gib=t.int(info["gib"]), dtype=info["dtype"])
    return t("sidebar.device_cpu", threads=t.int(info["threads"]), dtype=info["dtype"])


IDLE_BEFORE_COMPILE = 5.0  # seconds without a page run before FlexAttention compiles
_runs = {"active": 0, "last": time.monotonic()}
_runs_lock = threading.Lock()


def run_started() -> None:
    """app.py, at the start of every run: the warm-up waits while pages run."""
    with _runs_lock:
        _runs["active"] += 1


def run_ended() -> None:
    with _runs_lock:
        _runs["active"] -= 1
        _runs["last"] = time.monotonic()


def idle_for() -> float:
    """Seconds since the last page run ended (0 while one runs)."""
    with _runs_lock:
        return 0.0 if _runs["active"] > 0 else time.monotonic() - _runs["last"]


def start_flex_warmup():
    """The background compile (``_flex_warmup``), unless ``ATLAS_FLEX_WARMUP=0``."""
    return _flex_warmup() if settings.read().flex_warmup else None


@st.cache_resource(show_spinner=False)
def _flex_warmup():
    """Compile FlexAttention in the background, once per process, for the live
    benchmark's kind of call (head size 64; with and without hubs) — but only once no
    page has run for IDLE_BEFORE_COMPILE seconds, so that the compile does not compete
    with the first readers. Until it is ready, step 7 uses the blocked kernel. On CUDA,
    then the playground's composed-pattern kernel on the model's own heads (one kernel
    serves every composition); on the CPU the playground's blocked kernel is as fast
    (docs/performance.md), so nothing more is compiled there."""
    device = pick_device()
    dtype = compute_dtype(device)
    kind = model_kind()

    def wait_then_compile():
        while idle_for() < IDLE_BEFORE_COMPILE:
            time.sleep(0.5)
        warm = [{"q_shape": (1, 4, 1024, 64), "dtype": dtype, "device": device, "causal": True, "hubs": hubs}
                for hubs in (False, True)]
        if device.type == "cuda":  # the playground's one kernel for every composition, on the model's heads
            model = get_model(kind)  # loaded by then (the first page needed it): found in the cache
            warm.append({"q_shape": (1, model.n_heads, 1024, model.head_dim), "dtype": torch.float32,
                         "device": device, "kind": "pattern"})
        backend.start_warmup(warm)

    waiter = threading.Thread(target=wait_then_compile, name="flex-warmup-waiter", daemon=True)
    waiter.start()
    return waiter


# --- analyses ----------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _analyses() -> ByteLRU:
    """The analyses of this process, bounded in bytes (``ATLAS_ANALYSIS_MB``): one
    text of 370 tokens holds ≈ 60 MB, one of 1,024 tokens ≈ 265 MB."""
    return ByteLRU(settings.read().analysis_bytes, lambda a: a.nbytes)


@st.cache_resource(show_spinner=False)
def work_queue() -> TicketQueue:
    """The process's one queue for heavy work (the model is one)."""
    return TicketQueue()


def in_line(kind: str, work, same=None, weight: float = 1.0):
    """Heavy work through the process's queue (room.serving.TicketQueue: the same work
    is done once, ``same`` saying what it makes; ``weight`` its size); while others
    come first, the reader sees their place in the line and about how long it is."""
    t = tr()
    slot = None

    def on_wait(ahead: int, seconds: float) -> None:
        nonlocal slot
        if slot is None:
            slot = st.empty()
        slot.info(t("queue.waiting", ahead=t.int(ahead), seconds=t.int(max(1, round(seconds)))),
                  icon=":material/hourglass_top:")

    try:
        return work_queue().run(kind, work, on_wait, same=same, weight=weight)
    finally:
        if slot is not None:
            slot.empty()


def release_dropped() -> None:
    """Give back the memory of analyses the cache has just dropped. Readers' finished
    page runs may still hold them: each page runs in a module namespace of its own, and
    a function the page defines refers back to that namespace, so the namespace (and
    the analysis in it) is a reference cycle that only a full collection frees. Left to
    the collector's own schedule, thirty readers' own texts held every analysis they
    had ever made (≈ 2 GB); collected here, at most the budget stays (docs/deploy.md).
    The libraries and the model are frozen (``get_model``), so this scans only what
    readers made since."""
    gc.collect()


def get_analysis(text: str, kind: str):
    """One run of the model per text, kept read-only and shared by every page and
    reader; a new text waits its turn for the model in the queue (before heavy work
    still waiting; readers pasting the same text share one run)."""
    found = _analyses().get((kind, text))
    if found is not None:
        return found
    return in_line("analysis", _analysis_work(text, kind), same=(kind, text), weight=_analysis_weight(text))


def analysis_unseen(text: str, kind: str):
    """The same analysis, for work without a reader (a class's summaries built in the
    background): through the same queue, with no place in line to show."""
    found = _analyses().get((kind, text))
    if found is not None:
        return found
    return work_queue().run("analysis", _analysis_work(text, kind), None, same=(kind, text),
                            weight=_analysis_weight(text))


def _analysis_weight(text: str) -> float:
    # its size for the wait told: characters up to what the budget reads (≈ 5 a token)
    return min(len(text), 5 * token_budget()) / 1000 + 0.2


def _analysis_work(text: str, kind: str):
    cache, key = _analyses(), (kind, text)

    def work():
        again = cache.get(key)  # analysed meanwhile by a reader ahead in the line
        if again is not None:
            return again
        a = get_model(kind).analyze(text)
        if cache.put(key, a):
            release_dropped()
        return a

    return work


def analysis_or_message():
    """The analysis of the current text, or None after showing why there is none."""
    t = tr()
    text = current_text()
    if not text.strip():
        st.info(t("common.need_text"))
        return None
    ensure_model()
    with st.spinner(t("common.analysing")):
        a = get_analysis(text, model_kind())
    if a.n < 3:
        st.info(t("common.too_short", n=a.n))
        return None
    if a.truncated:
        st.caption(t("common.truncated", used=t.int(a.n), total=t.int(a.total_tokens)))
    return a
