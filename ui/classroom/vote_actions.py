"""What a vote's buttons do, each an on_click callback (it runs before the page, so a press
is never lost to a page that could not read the class): the teacher opens a question's
vote (its words copied in every language), closes it, reveals its answer; a student sends
one answer, kept for the poll to send again when the store cannot take it just now. The
SQL is server.classes'."""

from __future__ import annotations

import streamlit as st

from server import answers, class_reads
from server import classes as live_classes

from .. import analyses, keys, measures, served_model, session, setting_table, share, walk, summaries
from ..i18n import LANGS, Translator
from ..step_parts import Step
from .handle import classes, forget
from .membership import member

def question_copy(step: Step, qid: str, a, text: str, model_id: str) -> class_reads.Asked:
    """What a vote keeps of a step's question ``qid`` (one of its own, a matched one or an
    estimate), made when the teacher opens it: the option values, the measured answer's
    option, the question's words in every language (each student reads it in their own),
    for a matched question the question it matches, and for an estimate the measured number
    (its two options: off by more than the factor, or within it) — so that later changes to
    the page or its settings leave the vote as it was asked."""
    given = {k: st.session_state[k] for k in setting_table.KEYS if k in st.session_state}
    # a step that needs no text (the cost model) has nothing to fit its settings to
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), given) if a is not None else {}
    texts, labels, values = {}, {}, {}
    options, answer, source, estimate = (), 0, None, None
    for lang in LANGS:
        t = Translator(lang)
        q = summaries.asked(step, qid, t, a, text, model_id, cfg)
        texts[lang], values[lang] = q.text, q.value_text
        source = q.source  # measured on the class's text, or worked out by the cost model
        if q.form == "estimate":  # a number: counted as two options, within the factor or not
            estimate = float(q.answer)
            labels[lang] = [t("vote.estimate_off", f=t.float(answers.ESTIMATE_FACTOR, 1)),
                            t("vote.estimate_near", f=t.float(answers.ESTIMATE_FACTOR, 1))]
            options, answer = tuple(answers.ESTIMATE_OPTIONS), 1
            continue
        labels[lang] = [q.label(o) for o in q.options]
        options, answer = tuple(q.options), q.options.index(q.right)
    m = summaries.matched(step, qid)
    return class_reads.Asked(options, answer, texts, labels, values, source, estimate,
                             m.of if m is not None else None)  # a matched question: the one whose discussion it checks


def open_first_vote(page: str, qid: str) -> None:
    """on_click of "Open the vote" (and "Ask the matched question", "Ask for an estimate"): the step's question
    ``qid`` on the class's text and settings, copied in every language (its arguments stay
    small: the step's id, never the analysis)."""
    step = walk.get(page)
    text, model_id = session.current_text(), served_model.model_id()
    a = analyses.get_analysis(text, model_id) if step.needs_text and text.strip() else None
    if a is None and step.needs_text:
        return
    open_vote(page, qid, question_copy(step, qid, a, text, model_id))


def open_vote(page: str, qid: str, question: class_reads.Asked) -> None:
    _host_action(lambda room, code, key: room.open_vote(code, key, page, qid, question))


def close_vote(vote: int) -> None:
    _host_action(lambda room, code, key: room.set_state(code, key, vote, "closed"))


def reveal_vote(vote: int) -> None:
    _host_action(lambda room, code, key: room.set_state(code, key, vote, "revealed"))


def show_reason(vote: int, student: str, shown: bool) -> None:
    """on_click of a reason's "Show the class" / "Take it back" (the teacher's)."""
    _host_action(lambda room, code, key: room.show_reason(code, key, vote, student, shown))


def drop_reason(vote: int, student: str) -> None:
    """on_click of a reason's "Remove" (the teacher's): its words are gone for good."""
    _host_action(lambda room, code, key: room.drop_reason(code, key, vote, student))


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


def send_answer(code: str, vote: int) -> None:
    """on_click of Send (a callback: it runs before the page, so a press is never lost to a
    page that could not read the class): the answer and its reason, if the student wrote
    one — or an estimate's number — or why not; when the store cannot keep it just now, it
    stays chosen and the poll sends it again until the vote closes."""
    choice = st.session_state.get(f"vote_pick_{vote}")
    typed = st.session_state.get(f"vote_number_{vote}")  # as typed: read in the reader's language
    number = None if typed is None else answers.read_number(typed, session.tr().lang)
    reason = st.session_state.get(f"vote_reason_{vote}") or ""
    pending = {"code": code, "vote": vote, "choice": choice, "reason": reason, "number": number}
    room = classes()
    if room is None or (choice is None and number is None):
        if choice is not None or number is not None:
            st.session_state[keys.PENDING] = pending
        return
    said = None
    with share.store_trouble() as trouble:
        said = room.answer(code, vote, st.session_state.get(keys.STUDENT, ""), choice, reason=reason,
                           address=session.address(), number=number)
    if trouble:  # not lost: kept here and sent again by the poll
        st.session_state[keys.PENDING] = pending
    elif said != "taken":
        st.toast(session.tr()(f"vote.refused_{said}"), icon=":material/block:")
    forget()
