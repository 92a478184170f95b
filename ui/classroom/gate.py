"""What a class member's page may show while the class votes: a step whose vote has not had
its answer revealed holds its numbers back on every member's screen, and a student's share
link and handout (which hold every step's answer) wait; a class that cannot be read fails
closed."""

from __future__ import annotations

import streamlit as st

from .. import keys
from ..i18n import Translator
from ..step_parts import Step
from .handle import Unreadable
from .membership import back, current, gone, is_teacher, member

# what a member's page may show: the question alone; a notice alone; a notice that the
# teacher locked the walk to the class's step while it votes
HELD, UNREAD, LOCKED = "held", "unread", "locked"


def gate(t: Translator, step: Step) -> str | None:
    """What a class member's page of ``step`` may show, from the class as this run read
    it: ``HELD`` — a vote on one of the step's questions has not had its answer revealed
    (open, or closed for the discussion and a second vote: the question, the class's
    answers and nothing of the step's own numbers, on every member's screen, the
    teacher's and the projector's too); ``UNREAD`` — the class cannot be read just now (a
    notice alone: the step's numbers could answer a vote it cannot see); ``LOCKED`` — a
    student on another page while a vote is held, when the teacher locks the walk (a notice
    and the way back to the class's step); None — the whole
    page (outside a class too; a class that is gone is said once, and its member's page
    works on). A vote left closed when the teacher moves on holds its step until she
    reveals it."""
    if member() is None:
        return None
    found = current()
    if isinstance(found, Unreadable):
        st.session_state[keys.UNREAD] = True  # the poll redraws the page once the class can be read
        return UNREAD
    if found is None:
        gone(t)
        return None
    if found.unrevealed(step.id):
        return HELD
    if found.lock_walk and not is_teacher() and found.unrevealed():  # another page would answer it
        return LOCKED
    return None


def answers_locked() -> bool:
    """Whether this session is a student whose class has a vote whose answer is not
    revealed yet (open, or closed before the reveal) — or whose class cannot be read just
    now (fail closed): the handout and share links, which show every step's answer, wait."""
    if member() is None or is_teacher():
        return False
    found = current()
    return isinstance(found, Unreadable) or (found is not None and bool(found.unrevealed()))


def pending_note(t: Translator) -> None:
    """A student's answer still waiting for the store, said where the page stops."""
    pending = st.session_state.get(keys.PENDING)
    if pending:
        st.warning(t("vote.pending_alone"), icon=":material/schedule_send:")


def locked_note(t: Translator) -> None:
    """A student's page while the class votes with the walk locked: why it waits, and the
    way back to the class's step."""
    st.info(t("class.walk_locked"), icon=":material/lock_clock:")
    if st.button(t("class.back"), key="class_back_locked", width="stretch", icon=":material/groups:"):
        back(t)
