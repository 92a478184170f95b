"""The teacher's summary of her class's votes, question by question: how many answered in
the first vote, the second and the matched question, and the share right of each once its
answer was revealed — never before (it would give the right option away): the three numbers
the studies of peer instruction report. Her sidebar and her handout show it."""

from __future__ import annotations

import streamlit as st

from server import class_reads

from .. import walk
from ..i18n import Translator
from .membership import current, is_teacher

def results(t: Translator) -> list[tuple[str, str, str, str]]:
    """The teacher's summary of every question her class has voted on, step by step: in
    the first vote, the second and the step's matched question, how many answered once
    closed, and the share right once that question's answer was revealed — never before (a
    share right would give the right option away), "—" for none yet. Empty outside a class
    of hers, or when the class cannot be read. A question asked as an estimate has a row of its
    own (its share right: the estimates within the factor)."""
    found = current() if is_teacher() else None
    if not isinstance(found, class_reads.ClassState):
        return []
    rows = []
    asked = {v.qid for v in found.votes}
    questions = walk.questions()
    for qid, step in questions.items():  # in the walk's order
        label = t("vote.result_step", step=walk.number(step))
        label = label if len(step.questions) == 1 else f"{label} · {step.questions.index(qid) + 1}"
        if qid in asked:
            m = step.matched_to(qid)
            rounds = [(qid, 1), (qid, 2)] + ([(m.id, 1)] if m is not None else [])
            rows.append((label, *[cell(t, found, q, r) for q, r in rounds], *["—"] * (3 - len(rounds))))
        e = step.estimate_of(qid)
        if e is not None and e.id in asked:  # right: within the factor
            rows.append((f"{label} · {t('vote.estimate_row')}", cell(t, found, e.id, 1), "—", "—"))
    return rows


def cell(t: Translator, found, qid: str, r: int) -> str:
    """Round ``r`` of question ``qid``: "—" (not voted, or still open), how many answered, and
    once the question's answer was revealed, the share right."""
    vote = next((v for v in found.votes if v.qid == qid and v.round == r), None)
    counts = found.seated(vote.vote) if vote is not None and vote.state != "open" else []  # seated when it opened
    answered = sum(counts)
    if not answered:
        return "—"
    if any(v.qid == qid and v.state == "revealed" for v in found.votes):  # its answer is known
        return t("vote.result_cell", right=t.pct(counts[vote.question.answer] / answered, 0), n=t.int(answered))
    return t("vote.result_cell_hidden", n=t.int(answered))


def results_table(t: Translator) -> None:
    """The summary (``results``) on the teacher's screen, when her class has voted."""
    rows = results(t)
    if rows:  # lines, not a table: the sidebar is narrow (a table's third column was cut off)
        st.markdown(f"**{t('vote.results_heading')}**")
        st.markdown("\n".join("- " + t("vote.result_line", step=step, first=first, second=second, matched=matched,
                                        first_label=t("vote.col_first"), second_label=t("vote.col_second"),
                                        matched_label=t("vote.col_matched"))
                               for step, first, second, matched in rows))
