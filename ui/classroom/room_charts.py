"""The room on a page of the walk: when the teacher shows it, every text the class sent is
one point (or one line, or one row) of each of the page's room charts (its step declares
them: ui.step_parts.RoomChart), tested on all of them at once — the viewer's own point
ringed — with what the room's numbers say beneath. Redrawn in a fragment of its own from the
room's own version, every TEACHER_REFRESH seconds on the teacher's screen and every
ROOM_REFRESH on a student's (a text sent never redraws a following student's page); each
chart is built once per room version, chart, setting and language in a process, whoever
views it. A text's words are never on it: numbers and languages only."""

from __future__ import annotations

import dataclasses

import streamlit as st

from .. import drawing, figures, keys, page_run, room_figures, served_model, session, walk
from ..i18n import Translator
from ..step_parts import RoomView, Step
from .handle import Unreadable
from .membership import current, is_teacher, member
from .room import room_now

ROOM_REFRESH = 3.0  # a student's phone: their own point, a few seconds after it is measured
TEACHER_REFRESH = 1.0  # the teacher's chart (one session, the one the class watches): each text as it lands
RINGED = 1024  # charts with a student's own point ringed, kept (a class of 200 on five steps, a few versions)


def shown() -> bool:
    found = current()
    return found is not None and not isinstance(found, Unreadable) and found.room


def section(t: Translator, step: Step, **settings) -> None:
    """The room's part of a page (``settings``: the page's own, e.g. its layer or window,
    which the room follows where it measured them)."""
    if not step.room or member() is None or not shown():
        return
    st.subheader(t("room.verdict_heading" if not step.is_step else "room.heading"), divider="gray")
    (live_teacher if is_teacher() else live)(step.id, tuple(sorted(settings.items())))


@page_run.timed(ROOM_REFRESH)
def live(page: str, settings: tuple) -> None:
    draw(page, settings)


@page_run.timed(TEACHER_REFRESH)
def live_teacher(page: str, settings: tuple) -> None:
    draw(page, settings)


def draw(page: str, settings: tuple) -> None:
    """The room's charts of a page, as the room is now."""
    t, code = session.tr(), member()
    step = walk.by_id(page)
    if code is None or step is None:
        return
    now = room_now(code)
    if now is None:
        return
    version, texts = now
    model = served_model.measured_as(served_model.model_id())
    measured = [x for x in texts if x.state == "done" and x.numbers]
    # a chart draws the numbers of the page's model only (those of a release that named none, too)
    done = [x for x in measured if x.numbers.model in (model, "")]
    waiting = sum(1 for x in texts if x.state in ("waiting", "working"))
    if step.is_step:
        st.caption(t("room.status", n=t.int(len(done)), waiting=t.int(waiting)))
    if len(done) < len(measured):
        st.caption(t("room.other_model", n=len(measured) - len(done)))
    if not done:
        st.info(t("room.none_yet"), icon=":material/hourglass_top:")
        return
    cfg = dict(settings)
    for chart in step.room:
        view = drawing.figure_once(f"room_{page}_{chart.id}", (code, version, settings, model),
                                   lambda chart=chart: frozen_view(chart.build(t, done, cfg)))
        if view.figure is not None:
            fig = view.figure
            me = st.session_state.get(keys.STUDENT)
            if me in view.where:  # their own point ringed: a figure of its own, built once per version and student
                fig = ringed(t.lang, page, chart.id, code, version, settings, model, me, fig, view.where[me],
                             t("room.yours"))
            drawing.show_figure(fig, key=f"room_chart_{step.key}_{chart.id}")
        if view.table is not None:
            drawing.data_table(view.table)
        for line in view.said:
            st.caption(line)


def frozen_view(view: RoomView) -> RoomView:
    """A room chart's view with its figure read-only: it is shared by every viewer."""
    return dataclasses.replace(view, figure=figures.frozen(view.figure)) if view.figure is not None else view


@st.cache_resource(max_entries=RINGED, show_spinner=False)
def ringed(lang: str, page: str, chart: str, code: str, version: int, settings: tuple, model: str, me: str, _fig,
           _at, _name: str):
    """A shared room chart with one student's own point ringed: made once per room version
    and student, from the figure's dict (room_figures.ring)."""
    return room_figures.ring(_fig, *_at, _name)
