"""What a class member's poll does on each tick, decided from the class's state and the
reader's own, as a pure function (Streamlit's AppTest cannot fire a fragment's
``run_every``: the decision is tested here, the drawing through AppTest)."""

from __future__ import annotations

from dataclasses import dataclass

STAY, MOVE, REFRESH, GONE = "stay", "move", "refresh", "gone"
PRESENCE_EVERY = 15.0  # seconds between two presence writes of one student


@dataclass(frozen=True)
class Seat:
    """One session in a class, as its poll sees it."""

    teacher: bool
    following: bool  # a student who has not gone exploring on their own
    page: str  # the id of the page this session is on
    seen_version: int  # the class version this session last drew


def decide(version: int | None, class_page: str | None, seat: Seat) -> tuple[str, str | None]:
    """``(action, page)``: ``gone`` when the class has ended; ``stay`` when nothing
    changed since the seat's last drawing (or a student explores on their own);
    ``move`` to the class's page when a following student is elsewhere; else
    ``refresh`` (a vote opened or closed, a count changed, the settings moved)."""
    if version is None:
        return GONE, None
    if version == seat.seen_version:
        return STAY, None
    if seat.teacher:
        return REFRESH, None
    if not seat.following:
        return STAY, None
    if class_page is not None and class_page != seat.page:
        return MOVE, class_page
    return REFRESH, None


def presence_due(last_written: float | None, now: float) -> bool:
    """Whether a student's presence should be written now (at most every 15 s)."""
    return last_written is None or now - last_written >= PRESENCE_EVERY
