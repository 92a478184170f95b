"""A page run's life: what waits for the end of the page (a share or a handout asked
for in the sidebar), ending a page early, and whether a run is going on (the
FlexAttention warm-up waits for the server to be idle)."""

from __future__ import annotations

import functools
import threading
import time

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from . import keys, walk

_runs = {"active": 0, "last": time.monotonic()}
_runs_lock = threading.Lock()
# a running page's thread → what it reads, by id: (it, its bytes, its key)
_held: dict[int, dict[int, tuple[object, int, object]]] = {}


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


def run_started() -> None:
    """app.py, at the start of every run: the warm-up waits while pages run."""
    with _runs_lock:
        _runs["active"] += 1
        _held[threading.get_ident()] = {}


def run_ended() -> None:
    with _runs_lock:
        _runs["active"] -= 1
        _runs["last"] = time.monotonic()
        _held.pop(threading.get_ident(), None)


def reads(thing, nbytes: int, key=None) -> None:
    """This page run reads ``thing`` (an analysis, named by ``key``) of ``nbytes`` until it
    ends: the memory budget counts it as in use (``held_bytes``), and the run finds it again
    by its key (``reading``) once the cache has let it go. Outside a page run, nothing."""
    with _runs_lock:
        mine = _held.get(threading.get_ident())
        if mine is not None:
            mine[id(thing)] = (thing, int(nbytes), key)


def reading(key):
    """What this page run already reads under ``key`` (``reads``), or None: a page asking
    again for a text it holds gets it back, not a second run of the model."""
    with _runs_lock:
        mine = _held.get(threading.get_ident()) or {}
        return next((thing for thing, _, k in mine.values() if k is not None and k == key), None)


def holds() -> bool:
    """Whether this page run reads anything (``reads``)."""
    with _runs_lock:
        return bool(_held.get(threading.get_ident()))


def held_bytes(besides: set[int] = frozenset(), threads: set[int] = frozenset()) -> tuple[int, set[int]]:
    """What the page runs of other threads than this one (and than ``threads``) read now:
    their bytes (each thing once, none whose id is in ``besides``), and the ids of those
    things."""
    me = threading.get_ident()
    with _runs_lock:
        things = {k: nb for tid, held in _held.items() if tid != me and tid not in threads
                  for k, (_, nb, _) in held.items()}
    ids = set(things) - set(besides)
    return sum(things[k] for k in ids), ids


def wait_quiet(limit: float) -> float:
    """Wait while a page runs (at most ``limit`` seconds): work that no reader waits for
    (the start's build) lets the readers' pages have the CPU. The seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        with _runs_lock:
            if _runs["active"] <= 0:
                break
        time.sleep(0.05)
    return time.monotonic() - t0


def fragment_only() -> bool:
    """Whether this run is a fragment's own (a timed part's tick), not a whole run of the
    page: Streamlit's run context records the fragments a run is for."""
    ctx = get_script_run_ctx()
    return ctx is not None and bool(ctx.fragment_ids_this_run)


def drawing(key: str) -> None:
    """Before a whole run draws a page widget (a setting, the text, the model): its value
    as drawn, for ``stale`` to put back."""
    st.session_state.setdefault(keys.AS_DRAWN, {})[key] = st.session_state.get(key)
    st.session_state.setdefault(keys.SET_BY_APP, set()).discard(key)


def set_by_app(key: str, value) -> None:
    """The app puts a page widget's value (a class's text and settings, a link's): the
    value ``stale`` puts back until a run draws the widget with it."""
    st.session_state[key] = value
    st.session_state.setdefault(keys.AS_DRAWN, {})[key] = value
    st.session_state.setdefault(keys.SET_BY_APP, set()).add(key)


def set_by_reader(key: str, value) -> None:
    """A value the reader chose by another control than the widget (a preset's button, a
    tap on a grid): it stands, whatever the app set before."""
    st.session_state[key] = value
    st.session_state.setdefault(keys.AS_DRAWN, {})[key] = value
    st.session_state.setdefault(keys.SET_BY_APP, set()).discard(key)


def stale(key: str) -> bool:
    """In a page widget's on_change: whether the value came from the browser's past, and
    so is no change of the reader's. Page widgets are drawn only by whole runs, and a
    hand on one starts a whole run; a timed fragment's tick carries every widget's value
    as the browser held it when it sent the tick — after the teacher's new text, the old
    text and a token picker under the old text's names (students of a class left the lead
    that way, and their text went back). Such a tick, waiting as the poll asks for a whole
    run, is merged into it: a widget the app set and no run has drawn since is stale in a
    whole run too. The value drawn, or set by the app since, is put back."""
    if not fragment_only() and key not in st.session_state.get(keys.SET_BY_APP, ()):
        return False
    drawn = st.session_state.get(keys.AS_DRAWN, {})
    if key in drawn:
        st.session_state[key] = drawn[key]
    return True


def touch() -> None:
    """A fragment's run (a class member's poll, the room's charts): the server is not
    idle, though no page ran (app.py counts only whole runs)."""
    with _runs_lock:
        _runs["last"] = time.monotonic()


def idle_for() -> float:
    """Seconds since the last page run ended (0 while one runs)."""
    with _runs_lock:
        return 0.0 if _runs["active"] > 0 else time.monotonic() - _runs["last"]


def drawn(page) -> None:
    """app.py, in every whole run: the page (of ui.walk) this session's browser is shown
    now, with the script hash the run was asked for and the run's serial."""
    ctx = get_script_run_ctx()
    if ctx is None or ctx.fragment_ids_this_run:
        return
    serial = (st.session_state.get(keys.DRAWN) or (None, None, 0))[2] + 1
    st.session_state[keys.DRAWN] = (ctx.page_script_hash, page.id, serial)


def timed(every: float):
    """``st.fragment(run_every=every)`` for every timed part of a page (a class member's
    poll, a vote's count, the room's charts), each tick checked first (``redraw_if_left``)."""
    def made(draw):
        @functools.wraps(draw)
        def tick(*args, **kwargs):
            redraw_if_left()
            return draw(*args, **kwargs)
        return st.fragment(run_every=every)(tick)
    return made


def redraw_if_left() -> None:
    """At the start of a timed fragment's run: a tick the browser asked for from the page
    it has just left redraws the page it now shows, whole.

    Such a tick can reach the server as a page switch ends (a class member follows the
    teacher, she presses PageDown): it carries the old page's script hash, and Streamlit's
    front end then takes the page as switched back and clears it, while the run draws
    only the fragment — a blank page, for good (a stress run of a class: one switch in
    about 30 under load). A switch to the page drawn last makes a whole run of it."""
    ctx = get_script_run_ctx()
    seen = st.session_state.get(keys.DRAWN)
    if ctx is None or not ctx.fragment_ids_this_run or seen is None or ctx.page_script_hash == seen[0]:
        return
    if st.session_state.get(keys.REDRAWN) == seen[2]:  # once for each page drawn
        return
    st.session_state[keys.REDRAWN] = seen[2]
    page = walk.by_id(seen[1])
    if page is not None:
        st.switch_page(page.page, query_params=dict(st.query_params))
