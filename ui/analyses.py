"""The analyses of the reader's texts: one run of the model per text, kept read-only in
a byte-bounded cache shared by every reader of the process, made through the process's
one work queue (a reader sees their place in line); the analysis of the page, or why
there is none."""

from __future__ import annotations

import gc
import time

import streamlit as st

from attn import settings
from server.lru import ByteLRU
from server.work_queue import TicketQueue

from .session import current_text, tr
from .served_model import ensure_model, get_model, model_id, token_budget


@st.cache_resource(show_spinner=False)
def _analyses() -> ByteLRU:
    """The analyses of this process, bounded in bytes (``ATLAS_ANALYSIS_MB``; what one
    text holds: docs/deploy.md)."""
    return ByteLRU(settings.read().analysis_bytes, lambda a: a.nbytes)


@st.cache_resource(show_spinner=False)
def work_queue() -> TicketQueue:
    """The process's one queue for heavy work (the model is one)."""
    return TicketQueue()


def in_line(job: str, work, same=None, weight: float = 1.0):
    """Heavy work through the process's queue (server.work_queue.TicketQueue: the same work
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
        return work_queue().run(job, work, on_wait, same=same, weight=weight)
    finally:
        if slot is not None:
            slot.empty()


def release_dropped() -> None:
    """Give back the memory of analyses the cache has just dropped. Readers' finished
    page runs may still hold them: each page runs in a module namespace of its own, and
    a function the page defines refers back to that namespace, so the namespace (and
    the analysis in it) is a reference cycle that only a full collection frees: collected
    here, at most the budget stays (docs/deploy.md).
    The libraries and the model are frozen (``get_model``), so this scans only what
    readers made since."""
    gc.collect()


def cached(text: str, model_id: str):
    """The analysis of ``text`` this process keeps, or None (never runs the model)."""
    return _analyses().get((model_id, text))


def dropped() -> int:
    """How many analyses the process's cache has dropped to stay within its bytes."""
    return _analyses().evicted


def forget_all() -> None:
    """Drop every kept analysis, and size the cache afresh from the settings
    (``ATLAS_ANALYSIS_MB``) at its next use."""
    _analyses.clear()


def get_analysis(text: str, model_id: str, progress=None):
    """One run of the model per text, kept read-only and shared by every page and
    reader; a new text waits its turn for the model in the queue (before heavy work
    still waiting; readers pasting the same text share one run). ``progress``: called with
    (layers done, layers) while this reader's run goes."""
    found = cached(text, model_id)
    if found is not None:
        return found
    return in_line("analysis", _analysis_work(text, model_id, progress), same=(model_id, text),
                   weight=_analysis_weight(text))


def analysis_unseen(text: str, model_id: str):
    """The same analysis, for work without a reader (a class's summaries built in the
    background): through the same queue, with no place in line to show."""
    found = cached(text, model_id)
    if found is not None:
        return found
    return work_queue().run("analysis", _analysis_work(text, model_id), None, same=(model_id, text),
                            weight=_analysis_weight(text))


def _analysis_weight(text: str) -> float:
    # its size for the wait told: characters up to what the budget reads (≈ 5 a token)
    return min(len(text), 5 * token_budget()) / 1000 + 0.2


def _analysis_work(text: str, model_id: str, progress=None):
    cache, key = _analyses(), (model_id, text)

    def work():
        again = cache.get(key)  # analysed meanwhile by a reader ahead in the line
        if again is not None:
            return again
        a = get_model(model_id).analyze(text, progress=progress)
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
    bar, started = st.empty(), time.monotonic()

    def progress(done: int, layers: int) -> None:  # a long text's run: layer by layer, and the time left
        spent = time.monotonic() - started
        if spent > 2 and done < layers:
            left = spent / done * (layers - done)
            bar.progress(done / layers, text=t("common.analysing_layers", done=done, layers=layers,
                                               left=t.int(max(1, round(left)))))

    with st.spinner(t("common.analysing")):
        a = get_analysis(text, model_id(), progress)
    bar.empty()
    if a.n < 3:
        st.info(t("common.too_short", n=a.n))
        return None
    if a.truncated:
        st.caption(t("common.truncated", used=t.int(a.n), total=t.int(a.total_tokens)))
    return a
