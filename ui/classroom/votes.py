"""A question's vote as a class sees it: the panel that draws it (the teacher's open, close,
reveal and vote-again; a student's one answer; once closed, the room's answers as a chart;
once revealed, the measured answer), the teacher's live count of answers in a fragment of
its own (an answer never redraws a following student's page). Its buttons' callbacks are
ui.classroom.vote_actions'; what a member's page may show meanwhile, ui.classroom.gate."""

from __future__ import annotations

import streamlit as st

from server import classes as live_classes

from .. import figures, keys, session, share
from ..i18n import Translator
from ..step_parts import Step
from .handle import classes
from .membership import current, is_teacher
from .teacher import pulse
from .vote_actions import close_vote, open_first_vote, open_vote, reveal_vote, send_answer

def _words(question: dict, part: str, lang: str):
    return question[part].get(lang) or question[part].get("en")


def vote_panel(t: Translator, step: Step, qid: str, show_figure) -> None:
    """A step's question ``qid`` in a class: the teacher opens, closes and reveals the
    vote; each student answers once; once closed, the room's answers as a chart (both
    votes side by side after a second one); once revealed, the measured answer. With the
    store away mid-class, a notice (never an error box) and the panel as far as it got."""
    with share.store_trouble():
        _vote_panel(t, step, qid, show_figure)


def _vote_panel(t: Translator, step: Step, qid: str, show_figure) -> None:
    room, found = classes(), current()
    if room is None or not isinstance(found, live_classes.ClassState):
        return
    votes = [v for v in found.votes if v.qid == qid]
    vote = votes[-1] if votes else None
    teacher = is_teacher()
    with st.container(border=True):
        if vote is None:
            st.markdown(f"**{t('predict.heading')}** · " + t("vote.not_open"))
            if teacher:
                st.button(t("vote.open"), key=f"vote_open_{keys.slug(qid)}", type="primary",
                          icon=":material/how_to_vote:", on_click=open_first_vote, args=(step.id, qid))
            return
        question = vote.question
        labels = _words(question, "labels", t.lang)
        st.markdown(f"**{t('predict.heading')}** · {_words(question, 'text', t.lang)}")
        if vote.round > 1:
            st.caption(t("vote.second"))
        if vote.state == "open":
            _open_panel(t, room, found, vote, labels, teacher)
            return
        rounds = [(v, found.counts.get(v.vote, [0] * len(labels))) for v in votes[-2:]]
        st.markdown(f"**{t('vote.chart_title')}**")  # above the chart: a phone's chart toolbar covers its own title
        show_figure(_results_chart(t, rounds, labels), f"vote_chart_{keys.slug(qid)}")
        mine = None if teacher else found.mine.get(vote.vote)
        if mine is not None:
            st.caption(t("vote.yours", answer=labels[mine]))
        if any(v.vote == vote.vote for v in found.unrevealed()):  # closed, its answer not yet revealed
            st.caption(held_note(t) if teacher else t("vote.page_waits"))
        if vote.state == "revealed":
            right = question["answer"]
            counts = rounds[-1][1]
            share_right = counts[right] / sum(counts) if sum(counts) else 0.0
            revealed = "vote.revealed_model" if question.get("source") == "model" else "vote.revealed"
            st.markdown(t(revealed, value=_words(question, "value_text", t.lang), answer=labels[right],
                          right=t.pct(share_right, 0)))
        if teacher:
            c1, c2 = st.columns(2)
            if vote.state == "closed":
                c1.button(t("vote.reveal"), key=f"vote_reveal_{vote.vote}", on_click=reveal_vote, args=(vote.vote,),
                          icon=":material/visibility:", width="stretch")
            if vote.round < 2:
                c2.button(t("vote.again"), key=f"vote_again_{vote.vote}", on_click=open_vote,
                          args=(step.id, qid, question), icon=":material/replay:", width="stretch")


def held_note(t: Translator) -> str:
    """What the teacher reads under a vote whose answer is not revealed yet: every screen,
    hers too, holds the step's numbers until she reveals — on a projector (presenter mode),
    what the class reads instead."""
    return t("vote.page_waits") if session.presenter() else t("vote.held_teacher")


def _open_panel(t: Translator, room, found, vote, labels: list[str], teacher: bool) -> None:
    code = found.code
    if teacher:
        live_count(code, vote.vote)
        st.button(t("vote.close"), key=f"vote_close_{vote.vote}", on_click=close_vote, args=(vote.vote,),
                  type="primary", icon=":material/lock:")
        st.caption(held_note(t))
        return
    mine = found.mine.get(vote.vote)
    if mine is not None:
        st.markdown(t("vote.sent", answer=labels[mine]))
        st.caption(t("vote.page_waits"))
        return
    pending = st.session_state.get(keys.PENDING)
    waiting = pending is not None and (pending.get("code"), pending.get("vote")) == (code, vote.vote)
    choice = st.radio(t("predict.pick"), list(range(len(labels))), index=None, key=f"vote_pick_{vote.vote}",
                      format_func=labels.__getitem__, disabled=waiting)
    if waiting:  # the choice stays selected; the poll sends it when the store can keep it
        st.warning(t("vote.pending", answer=labels[pending["choice"]]), icon=":material/schedule_send:")
    else:
        st.button(t("vote.send"), key=f"vote_send_{vote.vote}", type="primary", disabled=choice is None,
                  icon=":material/send:", width="stretch", on_click=send_answer, args=(code, vote.vote))
    st.caption(t("vote.page_waits"))


@st.fragment(run_every=1.0)
def live_count(code: str, vote: int) -> None:
    """The teacher's count of answers to the open vote — how many came from students seen
    in the last minute, and the students present — redrawn each second in its own
    fragment: an answer redraws this line, not her page nor any student's."""
    t = session.tr()
    now = pulse(code)
    if now is not None:
        st.markdown(t("vote.answered", k=t.int(now.answered), n=t.int(now.present)))
        st.caption(t("vote.answered_recently", k=t.int(now.answered_recently)))


def _results_chart(t: Translator, rounds: list, labels: list[str]):
    """The room's answers, one bar per option (the first and second votes side by side)."""
    groups = [{"name": t("vote.round", r=v.round), "values": counts} for v, counts in rounds]
    fig = figures.grouped_bars(groups, labels, title="", y_title=t("vote.chart_axis"),
                               separators=t.separators, hover="%{x}: %{y}", height=320)
    top = max([1] + [c for _, counts in rounds for c in counts])
    # students are counted whole: a tick every 1, 2, 5… so no two ticks read the same
    fig.update_yaxes(tickformat=",d", rangemode="tozero", dtick=next(d for d in (1, 2, 5, 10, 20, 50, 100)
                                                                     if top / d <= 8))
    return fig
