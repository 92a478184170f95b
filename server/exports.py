"""What a teacher takes home from a class, as CSV: the room's numbers (one row a measured
text: its language, its tokens, then each step's columns — never its words), the
class's votes (a row an option of each vote: its count, whether it was the measured
answer, and for a question voted twice how many students changed their answer) and the
shares right question by question (first vote, second vote, matched question). Pure
Python, no Streamlit; the room's columns after the first four are given by the caller
(each step declares its own: pages/), read from the typed record attn.room_numbers.
RoomNumbers; column names are stable English identifiers (a spreadsheet's, not the page's)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from attn.room_numbers import RoomNumbers

from .class_reads import ClassState

Column = tuple[str, Callable[[RoomNumbers], Any]]  # a header, and its value for one text's numbers ("" for none)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as a formula


def neutral(cell):
    """A text cell a spreadsheet shows as text: one that starts as a formula could (=, +, -,
    @, a tab or a carriage return) gets a leading apostrophe; numbers as they are."""
    return "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell


def _csv(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[neutral(c) for c in row] for row in rows])
    return out.getvalue()


def room_csv(texts: list, columns: Callable[[list[RoomNumbers]], list[Column]] = lambda done: []) -> str:
    """One row a measured text of the room (server.texts.RoomText), in the order sent: its
    number, language, tokens and the model that measured it (its id, and for a folder its
    weights' fingerprint), then ``columns(every measured text's numbers)``."""
    done = [t for t in texts if t.numbers]
    cols = columns([t.numbers for t in done]) if done else []
    header = ["text", "language", "tokens", "model"] + [name for name, _ in cols]
    rows = [[i, t.lang, t.numbers.n, t.numbers.model or t.model, *(value(t.numbers) for _, value in cols)]
            for i, t in enumerate(done, start=1)]
    return _csv(header, rows)


def votes_csv(found: ClassState, answers: list[tuple]) -> str:
    """A row an option of every vote, in the order opened: question id, page (its id), round,
    state, option (its value as asked; an estimate's two: ``off`` and ``within`` the
    factor), the students seated when the vote opened who chose it and, apart, those who
    joined while it was open (``joined_during_vote``), whether it is the measured answer, on a question's
    second round how many students who answered both rounds changed their answer, the
    reasons written with that option, one a line, and an estimate's numbers under its
    option, one a line (``answers``: (vote, student, choice, reason[, number]) rows, in the
    order written; no student's id is written). A cell a spreadsheet could read as a
    formula is written as text (:func:`neutral`, each reason's line too). An answer set aside
    (its student left out of that vote: a sixth field, true) is counted apart, in
    ``left_out``, and in nothing else."""
    by_vote: dict[int, dict[str, int]] = {}
    reasons: dict[tuple[int, int], list[str]] = {}
    numbers: dict[tuple[int, int], list[str]] = {}
    aside: dict[tuple[int, int], int] = {}
    for vote, student, choice, reason, *rest in answers:
        number = rest[:1]
        if len(rest) > 1 and rest[1]:
            aside[(vote, choice)] = aside.get((vote, choice), 0) + 1
            continue
        by_vote.setdefault(vote, {})[student] = choice
        if reason:
            reasons.setdefault((vote, choice), []).append(neutral(reason))
        if number and number[0] is not None:
            numbers.setdefault((vote, choice), []).append(repr(float(number[0])))
    rows = []
    for v in found.votes:
        changed = ""
        if v.round > 1:
            before = next((w for w in found.votes if w.qid == v.qid and w.round == v.round - 1), None)
            if before is not None:
                a, b = by_vote.get(before.vote, {}), by_vote.get(v.vote, {})
                changed = sum(1 for s in set(a) & set(b) if a[s] != b[s])
        counts = found.seated(v.vote) or [0] * len(v.question.options)
        late = found.late.get(v.vote) or [0] * len(v.question.options)
        for option, value in enumerate(v.question.options):
            rows.append([v.qid, v.page, v.round, v.state, value, counts[option], late[option],
                         int(option == v.question.answer), changed, "\n".join(reasons.get((v.vote, option), [])),
                         "\n".join(numbers.get((v.vote, option), [])), aside.get((v.vote, option), 0)])
    return _csv(["question", "page", "round", "state", "option", "count", "joined_during_vote", "measured_answer",
                 "changed_answer", "reasons", "estimates", "left_out"], rows)


def shares_csv(found: ClassState) -> str:
    """A row a question the class voted on, in the order first opened: its page, then for
    its first vote, its second and its matched question (the vote whose copied question
    ``matches`` it) the share of the students who chose the measured answer and how many
    answered — the three numbers peer instruction's studies report, counted on the students
    seated when each vote opened — and how many answered after joining while it was open. A
    vote still open, or not held, leaves its three cells empty."""
    def share(vote):
        if vote is None or vote.state == "open":
            return ["", "", ""]
        counts = found.seated(vote.vote)  # the class seated when it opened: who joined during it is apart
        answered = sum(counts)
        return [round(counts[vote.question.answer] / answered, 4) if answered else "", answered,
                sum(found.late.get(vote.vote) or [])]

    rows = []
    for qid in dict.fromkeys(v.qid for v in found.votes if not v.question.matches):
        first = next((v for v in found.votes if v.qid == qid and v.round == 1), None)
        second = next((v for v in found.votes if v.qid == qid and v.round == 2), None)
        matched = [v for v in found.votes if v.question.matches == qid]
        page = (first or second).page
        rows.append([qid, page, *share(first), *share(second), matched[-1].qid if matched else "",
                     *share(matched[-1] if matched else None)])
    return _csv(["question", "page", "first_right", "first_answered", "first_joined_during", "second_right",
                 "second_answered", "second_joined_during", "matched_question", "matched_right", "matched_answered",
                 "matched_joined_during"], rows)
