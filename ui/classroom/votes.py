"""A class's votes, one job: opening, closing and revealing a question's vote (the
teacher), one answer each (a student), the panel that draws them, the room's results
and whether a student's answers are locked while a vote is open. The teacher's count of
answers redraws in a fragment of its own, from the class's ``tally`` (an answer never
redraws a following student's page). The SQL is server.classes'."""

from __future__ import annotations

import streamlit as st

from server import classes as live_classes

from .. import analyses, figures, keys, measures, served_model, session, setting_table, share, steps, summaries
from ..i18n import LANGS, Translator
from ..step_parts import Step
from .handle import Unreadable, classes, forget
from .membership import current, gone, is_teacher, member
from .teacher import pulse


def question_copy(step: Step, qid: str, a, text: str, model_id: str) -> dict:
    """What a vote keeps of a step's question ``qid``, made when the teacher opens it: the
    option values, the measured answer's option, and the question's words in every
    language (each student reads it in their own), so that later changes to the page
    or its settings leave the vote as it was asked."""
    given = {k: st.session_state[k] for k in setting_table.KEYS if k in st.session_state}
    # a step that needs no text (the cost model) has nothing to fit its settings to
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), given) if a is not None else {}
    out = {"text": {}, "labels": {}, "value_text": {}}
    for lang in LANGS:
        sm = summaries.get(step, Translator(lang), a, text, model_id, summaries.inputs(step, cfg),
                           **summaries.extra(step))
        q = summaries.question(sm, qid)
        out["text"][lang], out["value_text"][lang] = q.text, q.value_text
        out["labels"][lang] = [q.label(o) for o in q.options]
        out["options"], out["answer"] = list(q.options), q.options.index(q.right)
        out["source"] = q.source  # measured on the class's text, or worked out by the cost model
    return out


def _words(question: dict, part: str, lang: str):
    return question[part].get(lang) or question[part].get("en")


def open_first_vote(page: str, qid: str) -> None:
    """on_click of "Open the vote": the step's question ``qid`` on the class's text and
    settings, copied in every language (its arguments stay small: the step's id, never
    the analysis)."""
    step = steps.get(page)
    text, model_id = session.current_text(), served_model.model_id()
    a = analyses.get_analysis(text, model_id) if step.needs_text and text.strip() else None
    if a is None and step.needs_text:
        return
    open_vote(page, qid, question_copy(step, qid, a, text, model_id))


def open_vote(page: str, qid: str, question: dict) -> None:
    _host_action(lambda room, code, key: room.open_vote(code, key, page, qid, question))


def close_vote(vote: int) -> None:
    _host_action(lambda room, code, key: room.set_state(code, key, vote, "closed"))


def reveal_vote(vote: int) -> None:
    _host_action(lambda room, code, key: room.set_state(code, key, vote, "revealed"))


def _host_action(action) -> None:
    """on_click of a teacher's vote button: the change, or a notice saying why not."""
    room, code, t = classes(), member(), session.tr()
    if room is None or code is None:
        return
    with share.store_trouble():
        try:
            action(room, code, st.session_state.get(keys.HOST))
            found = room.versions(code)  # her own change: her poll need not redraw it again
            if found is not None:
                st.session_state[keys.SEEN] = found[0]
        except live_classes.NotHost:
            st.toast(t("class.not_host"), icon=":material/key_off:")
    forget()


HELD, UNREAD = "held", "unread"  # what a member's step page may show: the question alone; a notice alone


def gate(t: Translator, step: Step) -> str | None:
    """What a class member's page of ``step`` may show, from the class as this run read
    it: ``HELD`` — a vote on one of the step's questions has not had its answer revealed
    (open, or closed for the discussion and a second vote: the question, the class's
    answers and nothing of the step's own numbers, on every member's screen, the
    teacher's and the projector's too); ``UNREAD`` — the class cannot be read just now (a
    notice alone: the step's numbers could answer a vote it cannot see); None — the whole
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
    return HELD if found.unrevealed(step.id) else None


def results(t: Translator) -> list[tuple[str, str, str]]:
    """The teacher's summary of every question her class has voted on, step by step: in
    the first vote and in the second, how many answered once closed, and the share right
    once the question's answer was revealed — never before (a share right would give the
    right option away), "—" for none yet. Empty outside a class of hers, or when the class cannot be read."""
    found = current() if is_teacher() else None
    if not isinstance(found, live_classes.ClassState):
        return []
    rows = []
    asked = {v.qid for v in found.votes}
    questions = steps.questions()
    for qid in (q for q in questions if q in asked):  # in the walk's order
        step = questions[qid]
        revealed = any(v.qid == qid and v.state == "revealed" for v in found.votes)  # its answer is known
        cells = []
        for r in (1, 2):
            vote = next((v for v in found.votes if v.qid == qid and v.round == r), None)
            counts = found.counts.get(vote.vote, []) if vote is not None and vote.state != "open" else []
            answered = sum(counts)
            if not answered:
                cells.append("—")
            elif revealed:
                cells.append(t("vote.result_cell", right=t.pct(counts[vote.question["answer"]] / answered, 0),
                               n=t.int(answered)))
            else:
                cells.append(t("vote.result_cell_hidden", n=t.int(answered)))
        label = t("vote.result_step", step=steps.number(step))
        rows.append((label if len(step.questions) == 1 else f"{label} · {step.questions.index(qid) + 1}", *cells))
    return rows


def results_table(t: Translator) -> None:
    """The summary (``results``) on the teacher's screen, when her class has voted."""
    rows = results(t)
    if rows:  # lines, not a table: the sidebar is narrow (a table's third column was cut off)
        st.markdown(f"**{t('vote.results_heading')}**")
        st.markdown("\n".join("- " + t("vote.result_line", step=step, first=first, second=second,
                                        first_label=t("vote.col_first"), second_label=t("vote.col_second"))
                               for step, first, second in rows))


def answers_locked() -> bool:
    """Whether this session is a student whose class has a vote whose answer is not
    revealed yet (open, or closed before the reveal) — or whose class cannot be read just
    now (fail closed): the handout and share links, which show every step's answer, wait."""
    if member() is None or is_teacher():
        return False
    found = current()
    return isinstance(found, Unreadable) or (found is not None and bool(found.unrevealed()))


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


def send_answer(code: str, vote: int) -> None:
    """on_click of Send (a callback: it runs before the page, so a press is never lost to a
    page that could not read the class): the answer, or why not; when the store cannot keep
    it just now, it stays chosen and the poll sends it again until the vote closes."""
    choice = st.session_state.get(f"vote_pick_{vote}")
    room = classes()
    if room is None or choice is None:
        if choice is not None:
            st.session_state[keys.PENDING] = {"code": code, "vote": vote, "choice": choice}
        return
    said = None
    with share.store_trouble() as trouble:
        said = room.answer(code, vote, st.session_state.get(keys.STUDENT, ""), choice)
    if trouble:  # not lost: kept here and sent again by the poll
        st.session_state[keys.PENDING] = {"code": code, "vote": vote, "choice": choice}
    elif said != "taken":
        st.toast(session.tr()(f"vote.refused_{said}"), icon=":material/block:")
    forget()


def pending_note(t: Translator) -> None:
    """A student's answer still waiting for the store, said where the page stops."""
    pending = st.session_state.get(keys.PENDING)
    if pending:
        st.warning(t("vote.pending_alone"), icon=":material/schedule_send:")


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
