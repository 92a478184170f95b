"""A question's vote as a class sees it: the panel that draws it (the teacher's open, close,
reveal and vote-again; a student's one answer; once closed, the room's answers as a chart;
once revealed, the measured answer, and then the step's matched question — the same idea on
other numbers, answered alone; beside them the question asked as an estimate, whose own
parts are ui.classroom.estimates'), the teacher's live count of answers in a fragment of
its own (an answer never redraws a following student's page). Its buttons' callbacks are
ui.classroom.vote_actions'; what a member's page may show meanwhile, ui.classroom.gate."""

from __future__ import annotations

import streamlit as st

from server import answers, class_reads
from server import classes as live_classes

from .. import figures, keys, page_run, session, share
from ..i18n import Translator
from ..step_parts import Step
from .handle import classes
from .membership import current, is_teacher
from .teacher import pulse
from . import estimates
from .vote_actions import close_vote, drop_reason, open_first_vote, open_vote, reveal_vote, send_answer, show_reason

def vote_panel(t: Translator, step: Step, qid: str, show_figure) -> None:
    """A step's question ``qid`` in a class: the teacher opens, closes and reveals the
    vote; each student answers once; once closed, the room's answers as a chart (both
    votes side by side after a second one); once revealed, the measured answer — and the
    step's matched question beneath, which the teacher may then open (its own panel, a
    vote of one round without reasons); where the question asks for a count or a ratio,
    the teacher may also ask it as an estimate (a number from each student: its own panel,
    ui.classroom.estimates). With the store away mid-class, a notice (never an error box)
    and the panel as far as it got."""
    with share.store_trouble():
        found = current()
        if classes() is None or not isinstance(found, class_reads.ClassState):
            return
        _vote_panel(t, step, qid, show_figure, found)
        m = step.matched_to(qid)
        if m is not None and any(v.qid == qid and v.state == "revealed" for v in found.votes):
            _vote_panel(t, step, m.id, show_figure, found, form="matched")
        e = step.estimate_of(qid)
        if e is not None:
            _vote_panel(t, step, e.id, show_figure, found, form="estimate")


HEADINGS = {"question": "predict.heading", "matched": "vote.matched_heading", "estimate": "vote.estimate_heading"}


def _vote_panel(t: Translator, step: Step, qid: str, show_figure, found, form: str = "question") -> None:
    """One question's panel, by its ``form``: the step's question ("question"), its matched
    question ("matched": one round, no reasons) or the question asked for a number
    ("estimate"); before it is asked, what the teacher may open."""
    votes = [v for v in found.votes if v.qid == qid]
    teacher = is_teacher()
    if not votes:
        if teacher or (form == "question" and not any(v.page == step.id for v in found.votes)):
            if form != "estimate":  # an estimate is offered in its question's box
                _not_asked(t, step, qid, found, form, teacher)
        return  # a student reads "not open" once a step
    vote = votes[-1]
    with st.container(border=True):
        st.markdown(f"**{t(HEADINGS[form])}** · {vote.question.words('text', t.lang)}")
        if vote.round > 1:
            st.caption(t("vote.second"))
        elif form != "question" and vote.state == "open":
            st.caption(t(f"vote.{form}_alone"))
        if form == "estimate":
            _estimate(t, found, vote, teacher, show_figure)
        elif vote.state == "open":
            labels = vote.question.words("labels", t.lang)
            _open_panel(t, classes(), found, vote, labels, teacher, reasons=form == "question")
            shown_reasons(t, found, votes[0], labels)  # reasons are written with a question's first vote
        else:
            _answered(t, step, qid, found, votes, form, teacher, show_figure)


def _not_asked(t: Translator, step: Step, qid: str, found, form: str, teacher: bool) -> None:
    """A question not yet asked: «not open»; the teacher's Open (and, beside the step's
    question, Open as an estimate where it has one that is not asked yet)."""
    with st.container(border=True):
        said = t("vote.matched_not_open" if form == "matched" else "vote.not_open")
        st.markdown(f"**{t(HEADINGS[form])}** · {said}")
        if not teacher:
            return
        e = step.estimate_of(qid) if form == "question" else None
        c1, c2 = st.columns(2) if e is not None and found.vote_on(e.id) is None else (st.container(), None)
        c1.button(t("vote.matched_open" if form == "matched" else "vote.open"),
                  key=f"vote_open_{keys.slug(qid)}", type="primary", icon=":material/how_to_vote:",
                  on_click=open_first_vote, args=(step.id, qid), width="stretch")
        if c2 is not None:  # or the same question, asked for a number
            c2.button(t("vote.estimate_open"), key=f"vote_open_{keys.slug(e.id)}", icon=":material/pin:",
                      on_click=open_first_vote, args=(step.id, e.id), width="stretch",
                      help=t("vote.estimate_help", f=t.float(answers.ESTIMATE_FACTOR, 1)))


def _estimate(t: Translator, found, vote, teacher: bool, show_figure) -> None:
    """An estimate's vote: the teacher's live count while open; else the class's numbers
    (ui.classroom.estimates), with her Reveal once closed or a student's «the page waits»."""
    if teacher and vote.state == "open":
        _teacher_open(t, found.code, vote)
        return
    estimates.estimate_panel(t, found, vote, teacher, show_figure)
    if vote.state != "closed":
        return
    if teacher:
        st.button(t("vote.reveal"), key=f"vote_reveal_{vote.vote}", on_click=reveal_vote, args=(vote.vote,),
                  icon=":material/visibility:")
    elif any(v.vote == vote.vote for v in found.unrevealed()):
        st.caption(t("vote.page_waits"))


def _answered(t: Translator, step: Step, qid: str, found, votes: list, form: str, teacher: bool,
              show_figure) -> None:
    """A closed or revealed vote on options: the reasons shown, the seated class's answers
    (both rounds side by side), those who joined during it said apart, the student's own
    answer, the measured answer once revealed; the teacher's reasons, Reveal and Vote again."""
    vote, first = votes[-1], votes[0]
    question = vote.question
    labels = question.words("labels", t.lang)
    shown_reasons(t, found, first, labels)  # what the class discusses, above its answers
    # the class seated when each vote opened; who joined while it was open is said apart
    rounds = [(v, found.seated(v.vote) or [0] * len(labels)) for v in votes[-2:]]
    st.markdown(f"**{t('vote.chart_title')}**")  # above the chart: a phone's chart toolbar covers its own title
    show_figure(_results_chart(t, rounds, labels), f"vote_chart_{keys.slug(qid)}")
    late = found.late.get(vote.vote) or []
    if sum(late):
        st.caption(t("vote.late", n=t.int(sum(late)), seated=t.int(sum(rounds[-1][1])),
                     split=t.list(f"{labels[i]}: {t.int(c)}" for i, c in enumerate(late))))
    mine = None if teacher else found.mine.get(vote.vote)
    if mine is not None:
        st.caption(t("vote.yours", answer=labels[mine]))
    if any(v.vote == vote.vote for v in found.unrevealed()):  # closed, its answer not yet revealed
        st.caption(held_note(t) if teacher else t("vote.page_waits"))
    if vote.state == "revealed":
        _revealed(t, question, labels, rounds[-1][1])
    if not teacher:
        return
    if form == "question":
        reasons_panel(t, classes(), found.code, first, labels)
    c1, c2 = st.columns(2)
    if vote.state == "closed":
        c1.button(t("vote.reveal"), key=f"vote_reveal_{vote.vote}", on_click=reveal_vote, args=(vote.vote,),
                  icon=":material/visibility:", width="stretch")
    if vote.round < 2 and form == "question":
        c2.button(t("vote.again"), key=f"vote_again_{vote.vote}", on_click=open_vote,
                  args=(step.id, qid, question), icon=":material/replay:", width="stretch")


def _revealed(t: Translator, question: class_reads.Asked, labels: list[str], counts: list[int]) -> None:
    """The measured answer, and the share of the seated class that chose it."""
    right = question.answer
    share_right = counts[right] / sum(counts) if sum(counts) else 0.0
    revealed = "vote.revealed_model" if question.source == "model" else "vote.revealed"
    st.markdown(t(revealed, value=question.words("value_text", t.lang), answer=labels[right],
                  right=t.pct(share_right, 0)))


def shown_reasons(t: Translator, found, vote, labels: list[str]) -> None:
    """The reasons the teacher shows the class, under their option, each as plain text (a
    student's words are never read as Markdown or HTML)."""
    shown = found.shown.get(vote.vote, ())
    if not shown:
        return
    st.markdown(f"**{t('vote.shown_heading')}**")
    for option, reason in sorted(shown, key=lambda r: r[0]):
        st.caption(t("vote.shown_option", answer=labels[option]) if 0 <= option < len(labels) else "")
        st.text(reason)


def reasons_panel(t: Translator, room, code: str, vote, labels: list[str]) -> None:
    """The teacher's view of the reasons written with a question's first vote, grouped by
    option and without names; one click shows one to the class, another takes it back, a
    third removes it for good. On a projector (presenter mode) only their count is drawn, and
    that they are private: the browser on the wall never receives one (it shows only the
    reasons she shows, ``shown_reasons``); she reads them on a device of her own (her teacher
    link, without presenter mode)."""
    try:
        written = room.reasons(code, st.session_state.get(keys.HOST), vote.vote)
        late = room.joined_during(code, vote.vote) if not session.presenter() else set()
    except live_classes.NotHost:
        return
    if session.presenter():
        st.caption(t("vote.reasons_private", n=len(written)))
        return
    with st.expander(t("vote.reasons_heading", n=len(written)), expanded=bool(written)):
        if not written:
            st.caption(t("vote.reasons_none"))
        rows = list(enumerate(written))
        _reason_rows(t, vote, labels, [r for r in rows if r[1][0] not in late])
        crowd = [r for r in rows if r[1][0] in late]  # a crowd that joined mid-vote: one line, folded
        if crowd and st.toggle(t("vote.reasons_late", n=len(crowd)), key=f"reasons_late_{vote.vote}"):
            _reason_rows(t, vote, labels, crowd)


def _reason_rows(t: Translator, vote, labels: list[str], rows: list) -> None:
    """Reasons under their option, each with Show / Take back and Remove (``rows``: (place
    in the written order, (student, option, reason, shown)))."""
    for option, label in enumerate(labels):
        mine = [(i, s, r, sh) for i, (s, c, r, sh) in rows if c == option]
        if not mine:
            continue
        st.markdown(f"**{label}**")
        for i, student, reason, shown in mine:
            c1, c2, c3 = st.columns([4, 1, 1], vertical_alignment="center")
            c1.text(reason)
            c2.button(t("vote.hide_reason" if shown else "vote.show_reason"), key=f"reason_{vote.vote}_{i}",
                      on_click=show_reason, args=(vote.vote, student, not shown),
                      icon=":material/visibility_off:" if shown else ":material/cast:", width="stretch")
            c3.button(t("vote.drop_reason"), key=f"reason_drop_{vote.vote}_{i}", on_click=drop_reason,
                      args=(vote.vote, student), icon=":material/delete:", width="stretch",
                      help=t("vote.drop_reason_help"))


def held_note(t: Translator) -> str:
    """What the teacher reads under a vote whose answer is not revealed yet: every screen,
    hers too, holds the step's numbers until she reveals — on a projector (presenter mode),
    what the class reads instead."""
    return t("vote.page_waits") if session.presenter() else t("vote.held_teacher")


def _open_panel(t: Translator, room, found, vote, labels: list[str], teacher: bool, reasons: bool = True) -> None:
    code = found.code
    if teacher:
        _teacher_open(t, code, vote)
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
    reasons = reasons and vote.round == 1
    if reasons:  # a reason goes with the first vote: what the class discusses before the second
        # its label read by screen readers and shown as the placeholder: Send stays on a phone's first screen
        st.text_input(t("vote.reason"), key=f"vote_reason_{vote.vote}", max_chars=answers.MAX_REASON,
                      placeholder=t("vote.reason"), label_visibility="collapsed", disabled=waiting)
    if waiting:  # the choice stays selected; the poll sends it when the store can keep it
        st.warning(t("vote.pending", answer=labels[pending["choice"]]), icon=":material/schedule_send:")
    else:
        st.button(t("vote.send"), key=f"vote_send_{vote.vote}", type="primary", disabled=choice is None,
                  icon=":material/send:", width="stretch", on_click=send_answer, args=(code, vote.vote))
    if reasons:
        st.caption(t("vote.reason_help"))
    st.caption(t("vote.page_waits"))


def _teacher_open(t: Translator, code: str, vote) -> None:
    """The teacher's side of an open vote: the live count and Close."""
    live_count(code, vote.vote)
    st.button(t("vote.close"), key=f"vote_close_{vote.vote}", on_click=close_vote, args=(vote.vote,),
              type="primary", icon=":material/lock:")
    st.caption(held_note(t))


@page_run.timed(1.0)
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
