"""Shared state of the app: language, the reader's text, the model and its cached
results. The one place for caching: ``st.cache_resource`` for the model and the
analyses (read-only objects, never copied), ``st.cache_data`` for small numbers.
"""

from __future__ import annotations

import gc
import threading
import time

import streamlit as st

from attn import convert, settings
from attn import model as atlas_model
from attn.device import device_info, pick_device

from .i18n import Translator, detect_language
from .samples import sample_text
from .serving import ByteLRU, TicketQueue

_convert_lock = threading.Lock()
MAX_CHARS = 100_000  # the text area's cap (a few hundred pages; the analysis reads its first tokens)


def model_kind() -> str:
    return settings.read().model_kind


# --- language and text -----------------------------------------------------------


def init_language() -> str:
    """Once per session: from ``?lang=``, else the browser, else English."""
    if "lang" not in st.session_state:
        st.session_state["lang"] = detect_language(st.query_params.get("lang"), st.context.locale)
    return st.session_state["lang"]


def init_presenter() -> bool:
    """Once per session: presenter mode from ``?present=1``."""
    if "presenter" not in st.session_state:
        st.session_state["presenter"] = st.query_params.get("present") == "1"
    return st.session_state["presenter"]


def on_presenter_change() -> None:
    st.session_state["presenter"] = bool(st.session_state["presenter_choice"])


def token_budget() -> int:
    """Tokens the analysis reads at most (the model's budget on this device)."""
    return atlas_model.token_budget(pick_device())


def write_url() -> None:
    """Language and presenter mode in the address on every run (page links and
    st.switch_page drop the query otherwise), so a reload or a shared link keeps them."""
    lang = st.session_state.get("lang", "en")
    if st.query_params.get("lang") != lang:
        st.query_params["lang"] = lang
    if st.session_state.get("presenter"):
        if st.query_params.get("present") != "1":
            st.query_params["present"] = "1"
    elif "present" in st.query_params:
        del st.query_params["present"]
    if "s" in st.query_params and st.session_state.get(SHARE_APPLIED) == st.query_params.get("s"):
        del st.query_params["s"]  # applied once: a reload keeps what the reader has done since


def tr() -> Translator:
    return Translator(st.session_state.get("lang", "en"))


def on_language_change() -> None:
    """Keep the URL in step; switch the sample text too while it is untouched."""
    new = st.session_state["lang_choice"]
    old = st.session_state.get("lang", "en")
    st.session_state["lang"] = new
    st.query_params["lang"] = new
    if st.session_state.get("text") == sample_text(old):
        st.session_state["text"] = sample_text(new)


def restore_sample() -> None:
    st.session_state["text"] = sample_text(st.session_state.get("lang", "en"))


def init_text() -> None:
    if "text" not in st.session_state:
        st.session_state["text"] = sample_text(st.session_state.get("lang", "en"))


def current_text() -> str:
    return st.session_state.get("text", "")


# --- settings that survive moving between steps ------------------------------------------

# The playground's settings (ui/playground.py gives their defaults and checks).
PLAYGROUND_SETTINGS = ("pg_on", "pg_w", "pg_dilated", "pg_stride", "pg_hub_mode", "pg_hubs", "pg_random", "pg_rblock",
                       "pg_seed", "pg_local", "pg_causal", "pg_scope", "pg_layer", "pg_rl")
# Every step's settings, by widget key. Streamlit forgets a widget's value when its page is
# not drawn; app.py calls keep_settings() on every run, so they are held outside the widgets.
SETTINGS = (
    "s1_layer", "s1_head", "s1_token", "s2_layer", "s2_head", "s2_p", "s3_layer", "s3_head", "s3_w", "s3_rw",
    "s3_rl", "s4_hubs", "s4_w", "s5_layer", "s5_head", "s5_feature", "s5_causal", "s6_layer", "s6_head", "s6_w",
    "s6_hubs", "s6_feature", "s6_swap_layer", "s6_swap_metric",
    *(f"p{i}_guess" for i in range(1, 8)),
    *PLAYGROUND_SETTINGS,
)
KEPT = "_kept_settings"
SHARE_APPLIED = "_share_applied"  # the share key (?s=) this session has already applied


def keep_settings() -> None:
    """Remember the settings the last run drew, and give back those of pages not drawn
    since (each page checks a given-back value against its widget with widgets.fit)."""
    kept = st.session_state.setdefault(KEPT, {})
    for key in SETTINGS:
        if key in st.session_state:
            kept[key] = st.session_state[key]
        elif key in kept:
            st.session_state[key] = kept[key]


def presenter() -> bool:
    """Presenter mode (for a projector): answers wait for their reveal."""
    return bool(st.session_state.get("presenter", False))


def forget_setting(key: str) -> None:
    """A kept value that no longer fits its widget (a shorter text, another model)."""
    st.session_state.get(KEPT, {}).pop(key, None)
    if key in st.session_state.get("_from_link", set()):  # it came with a shared link: say so
        st.session_state["_from_link"].discard(key)
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
    model = atlas_model.tiny() if kind == "tiny" else atlas_model.load()
    gc.collect()
    gc.freeze()
    return model


def ensure_model():
    """The model, converting it first (once, with a progress bar) when needed."""
    kind = model_kind()
    if kind == "gemma" and not convert.is_converted():
        t = tr()
        with _convert_lock:
            if not convert.is_converted():
                bar = st.progress(0.0, text=t("model.converting"))

                def progress(fraction: float, stage: str) -> None:
                    bar.progress(min(1.0, fraction), text=t("model.converting") + " — " + t(f"model.stage_{stage}"))

                convert.convert(progress)
                bar.empty()
    return get_model(kind)


def model_line(t: Translator) -> str:
    """The model, its quantisation and licence, in the reader's language."""
    name = atlas_model.MODEL_LABEL if model_kind() == "gemma" else t("sidebar.tiny_model")
    return t("sidebar.about", model=name, quant=atlas_model.QUANT_LABEL, licence=atlas_model.LICENCE_LABEL)


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


@st.cache_resource(show_spinner=False)
def start_flex_warmup():
    """Compile FlexAttention in the background, once per process, for the live
    benchmark's kind of call (head size 64; with and without hubs) — but only once no
    page has run for IDLE_BEFORE_COMPILE seconds, so that the compile does not compete
    with the first readers. Until it is ready, step 7 uses the blocked kernel. On CUDA,
    then the playground's composed-pattern kernel on the model's own heads (one kernel
    serves every composition); on the CPU the playground's blocked kernel is as fast
    (docs/performance.md), so nothing more is compiled there."""
    import torch

    from attn import flex
    from attn.device import compute_dtype

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
        flex.start_warmup(warm)

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


def in_line(kind: str, work):
    """Heavy work through the process's queue, first come first served; while others
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
        return work_queue().run(kind, work, on_wait)
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
    reader; a new text waits its turn for the model in the queue."""
    cache, key = _analyses(), (kind, text)
    found = cache.get(key)
    if found is not None:
        return found

    def work():
        again = cache.get(key)  # analysed meanwhile by a reader ahead in the line
        if again is not None:
            return again
        a = get_model(kind).analyze(text)
        if cache.put(key, a):
            release_dropped()
        return a

    return in_line("analysis", work)


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
