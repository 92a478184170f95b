"""A page run's life: what waits for the end of the page (a share or a handout asked
for in the sidebar), ending a page early, and whether a run is going on (the
FlexAttention warm-up waits for the server to be idle)."""

from __future__ import annotations

import threading
import time

import streamlit as st

from . import keys

_runs = {"active": 0, "last": time.monotonic()}
_runs_lock = threading.Lock()


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


def run_ended() -> None:
    with _runs_lock:
        _runs["active"] -= 1
        _runs["last"] = time.monotonic()


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


def touch() -> None:
    """A fragment's run (a class member's poll, the room's charts): the server is not
    idle, though no page ran (app.py counts only whole runs)."""
    with _runs_lock:
        _runs["last"] = time.monotonic()


def idle_for() -> float:
    """Seconds since the last page run ended (0 while one runs)."""
    with _runs_lock:
        return 0.0 if _runs["active"] > 0 else time.monotonic() - _runs["last"]
