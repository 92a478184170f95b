"""The classes of this process's store, the versions a poll reads (at most once a second
per process whatever the number of members polling), and the class as a page run reads
it: once, failing closed when the store cannot say."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import streamlit as st

from server import classes as live_classes
from server import limits

from .. import keys, share


@st.cache_resource(show_spinner=False)
def _classes() -> live_classes.Classes:
    """The classes of this process's store (the share links' file)."""
    return live_classes.Classes(share.store())


def classes() -> live_classes.Classes | None:
    """The classes, or None after a notice when the store cannot be used just now."""
    with share.store_trouble():
        return _classes()
    return None


@st.cache_data(ttl=1.0, max_entries=512, show_spinner=False)
def versions(code: str) -> tuple[int, int, int] | None:
    """A class's ``(version, tally, room_version)`` (server.classes), read at most once a
    second per process whatever the number of members polling (None: the class has ended)."""
    return _classes().versions(code)


@st.cache_data(ttl=2.0, max_entries=512, show_spinner=False)
def state_at(code: str, version: int, tally: int):
    """The class as every member reads it alike (its state and every vote's counts, no one's
    own answers) at ``version`` and ``tally`` (from :func:`versions`): read once for every
    member of this process whose page runs at that moment — a teacher's move reruns every
    following student's page at once, and each read gives up the interpreter lock while
    SQLite works (a fifth of a following student's page run among a hundred, in a profile).
    Every change to what members see raises one of the two, so the key names the state."""
    return _classes().shared_read(code)


@st.cache_resource(show_spinner=False)
def guesses() -> limits.Guesses:
    """Wrong join codes per client address, counted in this process (they cost no write)."""
    return limits.Guesses()


@dataclass(frozen=True)
class Unreadable:
    """The class could not be read just now (``reason``: the store's): a member's page
    then shows no step's numbers, which could answer an open vote."""

    reason: str


def begin_run() -> None:
    """app.py, at the start of every full run: the class is read afresh this run."""
    st.session_state.pop(keys.CLASS_READ, None)


def read_again() -> None:
    """What this run read of the class is older than the version its poll has just seen (a
    full run reads the class in the sidebar before its poll ticks): the page that follows
    reads it again, so that it draws what the seen version holds."""
    st.session_state.pop(keys.CLASS_READ, None)


def read(code: str, student: str = ""):
    """The class ``code`` as this page run sees it, read once however often the run asks
    (``begin_run`` forgets it): a ClassState with every vote's counts and the student's
    own answers, None when it has ended, or Unreadable when the store cannot say (after
    one notice in the reader's language)."""
    kept = st.session_state.get(keys.CLASS_READ)
    if kept is not None and kept[0] == (code, student):
        return kept[1]
    room = classes()
    found = Unreadable("unavailable") if room is None else None
    if room is not None:
        with share.store_trouble() as trouble:
            found = read_from(room, code, student)
        if trouble:
            found = Unreadable(trouble.error.reason)
    st.session_state[keys.CLASS_READ] = ((code, student), found)
    return found


def read_from(room, code: str, student: str):
    """:meth:`Classes.read` through :func:`state_at`: the version and tally read now (a page
    run shows the class as it is, not as it was up to a second ago on another replica), the
    shared part once for everyone at them, the student's own answers apart."""
    now = room.versions(code)
    if now is None:
        return None
    shared = state_at(code, now[0], now[1])
    if shared is None:
        return None
    mine, numbers = room.own(code, student)
    return dataclasses.replace(shared, mine=mine, mine_numbers=numbers)


def forget() -> None:
    """What this run read of the class is stale (it changed the class): read it again."""
    st.session_state.pop(keys.CLASS_READ, None)
    versions.clear()  # this process's members see the change at their next poll, not a second later


def is_error(found) -> bool:
    return isinstance(found, Unreadable)

