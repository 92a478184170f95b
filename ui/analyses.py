"""The analyses of the reader's texts: one run of the model per text, kept read-only in
a byte-bounded cache shared by every reader of the process, made through the process's
one work queue (a reader sees their place in line); the analysis of the page, or why
there is none."""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass, field

import streamlit as st

from attn import model_run, settings
from server.lru import ByteLRU
from server.work_queue import TicketQueue

from . import page_run
from .session import current_text, tr
from .served_model import ensure_model, get_model, model_id, token_budget


@st.cache_resource(show_spinner=False)
def _analyses() -> ByteLRU:
    """The analyses of this process, bounded in bytes (``ATLAS_ANALYSIS_MB``; what one
    text holds: docs/deploy.md)."""
    return ByteLRU(settings.read().analysis_bytes, lambda a: a.nbytes)


# The memory budget (ATLAS_ANALYSIS_MB) counts the analyses kept, those other readers' page
# runs are reading (ui.page_run.reads: a page reading a long text holds its analysis until it
# ends, whether or not the cache still keeps it) and those being made: a new text's run waits
# until the memory it needs fits (a reader's own page, and what it holds, never waits on itself;
# a page that already reads an analysis never waits at all)
_MAKING: dict[int, int] = {}  # a run being made (by its Reading's id) → the bytes it will hold
_MAKING_LOCK = threading.Lock()
ASIDE = 1.0  # seconds a new text's run stands aside while the memory it needs is in use
MEMORY_WAIT = 300.0  # at most: then it runs


def held_bytes(threads: set[int] = frozenset()) -> int:
    """Bytes the analyses in use hold: kept, read by other readers' pages (but those of
    ``threads``), being made."""
    kept = _analyses()
    read, _ = page_run.held_bytes(besides={id(a) for a in kept.values()}, threads=threads)
    with _MAKING_LOCK:
        making = sum(_MAKING.values())
    return kept.nbytes + read + making


def _room_for(need: int, turn, reading: Reading) -> None:
    """Before a run that will hold ``need`` bytes: while the analyses in use would pass the
    budget with it, the kept ones are dropped (least recently used first), and while other
    readers' pages still read the rest, the run stands aside (``turn.aside``: shorter work
    goes meanwhile) until one ends. A run alone is never held back, whatever its size; nor
    is a page that already reads an analysis itself (two such pages, each waiting for what
    the other holds, would wait for each other), and what the pages waiting on this very
    run hold (readers of the same text: ``turn.sharers``) is not counted against it."""
    budget = settings.read().analysis_bytes
    began = time.monotonic()
    while True:
        held = held_bytes(turn.sharers())
        if held == 0 or held + need <= budget or time.monotonic() - began > MEMORY_WAIT:
            reading.for_memory = False
            return
        kept = _analyses()
        if kept.shrink(kept.nbytes - (held + need - budget)):
            release_dropped()
            continue
        if page_run.holds():
            reading.for_memory = False
            return
        reading.for_memory = True
        turn.aside(ASIDE)


@st.cache_resource(show_spinner=False)
def work_queue() -> TicketQueue:
    """The process's one queue for heavy work (the model is one)."""
    return TicketQueue()


def in_line(job: str, work, same=None, weight: float = 1.0, pieces: bool = False, saying=None):
    """Heavy work through the process's queue (server.work_queue.TicketQueue: the same work
    is done once, ``same`` saying what it makes; ``weight`` its size; ``pieces``: the work
    is handed the queue's ``turn`` to call between its pieces); while others come first,
    the reader sees their place in the line and about how long it is (``saying(ahead,
    seconds)``: the sentence, where the work has its own)."""
    t = tr()
    slot = None

    def on_wait(ahead: int, seconds: float) -> None:
        nonlocal slot
        if slot is None:
            slot = st.empty()
        seconds = max(1, round(seconds))
        told = saying(ahead, seconds) if saying is not None else None
        slot.info(told or t("queue.waiting", ahead=t.int(ahead), seconds=t.int(seconds)),
                  icon=":material/hourglass_top:")

    try:
        return work_queue().run(job, work, on_wait, same=same, weight=weight, pieces=pieces)
    finally:
        if slot is not None:
            slot.empty()


_PACES: dict[str, float] = {}  # a model → the least base pace its analyses ran at in this process
_PACES_LOCK = threading.Lock()


def pace(a, model_id: str) -> float:
    """The model's seconds a token on the text of ``a``: its own analysis' pace, or less where
    another analysis of this process ran faster (attn.model_run.base_pace, brought to this
    length): a run slowed by other work beside it (a server's start, a class) says more than
    the model takes; none says less."""
    return min(a.seconds / max(a.n, 1), model_run.pace_at(_PACES.get(model_id, float("inf")), a.n))


def _record_pace(a, model_id: str) -> None:
    if a.n >= 16 and a.seconds > 0:
        base = model_run.base_pace(a.seconds, a.n)
        with _PACES_LOCK:
            _PACES[model_id] = min(base, _PACES.get(model_id, float("inf")))


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


def was_dropped(text: str, model_id: str) -> bool:
    """Whether this text's analysis was kept, then dropped to stay within the budget."""
    return _analyses().was_dropped((model_id, text))


def dropped() -> int:
    """How many analyses the process's cache has dropped to stay within its bytes."""
    return _analyses().evicted


def forget_all() -> None:
    """Drop every kept analysis, and size the cache afresh from the settings
    (``ATLAS_ANALYSIS_MB``) at its next use."""
    _analyses.clear()


@dataclass
class Reading:
    """One reader's text being read: the tokens read so far, of how many, and the seconds
    its run stood aside for shorter texts (the time left is told from the time it ran)."""

    done: int = 0
    tokens: int = 0
    paused: float = 0.0
    began: float = field(default_factory=time.monotonic)
    for_memory: bool = False  # waiting for the memory other readers' analyses hold

    def read(self, done: int, tokens: int) -> None:
        self.done, self.tokens = done, tokens

    def seconds_left(self) -> float:
        """The run's own pace so far times the tokens left."""
        ran = time.monotonic() - self.began - self.paused
        return ran / max(self.done, 1) * (self.tokens - self.done)


def get_analysis(text: str, model_id: str, reading: Reading | None = None, saying=None, progress=None):
    """One run of the model per text, kept read-only and shared by every page and
    reader; a new text waits its turn for the model in the queue (by the work it has left:
    a long text gives the model up between its chunks to shorter texts; readers pasting
    the same text share one run). ``reading``: kept up to date while this reader's run goes
    (``progress(done, tokens)`` called too); ``saying``: the place in line, in words. The
    page run reads it until it ends (the memory budget counts it: ui.page_run.reads), and
    finds it there first when it asks again: the cache may have dropped it meanwhile (to make
    room for another reader's text), or hold a copy read again since."""
    found = page_run.reading((model_id, text))  # first: a copy read again meanwhile would be held twice
    if found is None:
        found = cached(text, model_id)
    if found is None:
        found = in_line("analysis", _analysis_work(text, model_id, reading, progress), same=(model_id, text),
                        weight=_analysis_weight(text), pieces=True, saying=saying)
    page_run.reads(found, found.nbytes, key=(model_id, text))
    return found


def analysis_unseen(text: str, model_id: str):
    """The same analysis, for work without a reader (a class's summaries built in the
    background): through the same queue, with no place in line to show."""
    found = cached(text, model_id)
    if found is not None:
        return found
    return work_queue().run("analysis", _analysis_work(text, model_id), None, same=(model_id, text),
                            weight=_analysis_weight(text), pieces=True)


def _analysis_weight(text: str) -> float:
    # its size in tokens (the unit its rate is measured in), guessed until the text is
    # read (≈ 4 characters a token, at most what the budget reads); the run tells it then
    return min(len(text) / 4, token_budget()) + 1


def _analysis_work(text: str, model_id: str, reading: Reading | None = None, progress=None):
    cache, key = _analyses(), (model_id, text)
    reading = reading if reading is not None else Reading()

    def read(done: int, tokens: int) -> None:
        reading.read(done, tokens)
        if progress is not None:
            progress(done, tokens)

    def work(turn):
        again = cache.get(key)  # analysed meanwhile by a reader ahead in the line
        if again is not None:
            return again

        model = get_model(model_id)

        def between(left: int, tokens: int) -> None:  # the model may go to a shorter text here
            stood = time.monotonic()
            turn(left, weight=tokens)
            if left == tokens:  # before the run: the memory it will hold must fit
                need = model.memory_bytes(tokens)
                _room_for(need, turn, reading)
                with _MAKING_LOCK:
                    _MAKING[id(reading)] = need
            reading.paused += time.monotonic() - stood

        try:
            a = model.analyze(text, progress=read, between=between)
        finally:
            with _MAKING_LOCK:
                _MAKING.pop(id(reading), None)
        _record_pace(a, model_id)
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
    bar, reading = st.empty(), Reading()

    def progress(done: int, tokens: int) -> None:  # a long text's run: the tokens read, and the time left
        if time.monotonic() - reading.began > 2 and 0 < done < tokens:
            bar.progress(done / tokens, text=t("common.analysing_tokens", done=t.int(done), tokens=t.int(tokens),
                                               left=t.int(max(1, round(reading.seconds_left())))))

    def saying(ahead: int, seconds: int) -> str | None:  # a long text standing aside for shorter ones
        if reading.for_memory:
            return t("queue.memory")
        if not 0 < reading.done < reading.tokens:
            return None
        return t("queue.paused", done=t.int(reading.done), tokens=t.int(reading.tokens), ahead=t.int(ahead),
                 seconds=t.int(seconds))

    again = was_dropped(text, model_id())  # read before, dropped to stay within the memory budget
    with st.spinner(t("common.analysing_again" if again else "common.analysing")):
        a = get_analysis(text, model_id(), reading, saying, progress)
    bar.empty()
    if a.n < 3:
        st.info(t("common.too_short", n=a.n))
        return None
    if a.truncated:
        st.caption(t("common.truncated", used=t.int(a.n), total=t.int(a.total_tokens)))
    return a
