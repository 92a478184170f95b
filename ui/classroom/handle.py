"""The classes of this process's store, and the versions a poll reads: read at most once
a second per process whatever the number of members polling."""

from __future__ import annotations

import streamlit as st

from room import classes as room_classes

from .. import share, steps


@st.cache_resource(show_spinner=False)
def _classes() -> room_classes.Classes:
    """The classes of this process's store (the share links' file)."""
    return room_classes.Classes(share.store(), steps.first_questions())


def classes() -> room_classes.Classes | None:
    """The classes, or None after a notice when the store cannot be used just now."""
    with share.store_trouble():
        return _classes()
    return None


@st.cache_data(ttl=1.0, max_entries=512, show_spinner=False)
def versions(code: str) -> tuple[int, int] | None:
    """A class's ``(version, tally)`` (room.classes), read at most once a second per
    process whatever the number of members polling (None: the class has ended)."""
    return _classes().versions(code)
