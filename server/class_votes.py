"""A live class's votes (server.classes.Classes, through this mixin): the teacher opens,
closes and reveals a vote, shows or drops a student's reason, leaves a burst of newcomers
out and takes that back; a student answers — one answer per vote, bounded by the seats
held when it opened. Every change is one transaction, the teacher's behind the host key
(``Classes._host``) and each raising the version a member follows (``_bump``) or only the
teacher's count (``_tally``). No Streamlit here.
"""

from __future__ import annotations

import json
import time

from . import limits
from .answers import MAX_OPTIONS, clean_reason, estimate_choice
from .class_reads import COUNTED, LEFT_OUT_STUDENTS, Asked

SEAT_SECONDS = 180.0  # a student unseen for 3 minutes (12 missed presence writes) holds no seat


def seated(db, code: str, now: float) -> int:
    """Seats held: students seen in the last SEAT_SECONDS."""
    return db.execute("SELECT COUNT(*) FROM students WHERE code = ? AND seen >= ?",
                      (code, now - SEAT_SECONDS)).fetchone()[0]


def _choice(question: Asked, choice, number: float | None, reason: str) -> int | None:
    """The option an answer takes, or None when it does not fit its vote: an estimate's
    option is worked out from its number (estimate_choice), sent alone, without a reason;
    an options vote takes one of its options, and no number."""
    if question.is_estimate:
        chosen = estimate_choice(number, question.estimate)
        return None if reason else chosen
    if number is not None or not (isinstance(choice, int) and 0 <= choice < len(question.options)):
        return None
    return choice


class ClassVotes:
    """The votes of :class:`server.classes.Classes` (its store, host check and versions)."""

    def open_vote(self, code: str, key, page: str, qid: str, question: Asked, now: float | None = None) -> int:
        """Open a vote on question ``qid`` of a page (its id; ``question``: its text, option labels
        and the measured answer's option, copied so that later changes leave it as asked).
        A second vote on the same question is its round 2; the vote open before it closes.
        Opening the question that is open already changes nothing (a click replayed by a
        rerun, or two of the teacher's tabs): its vote is returned.
        The seats held now bound the answers it takes (with the students who join later)."""
        if not isinstance(qid, str) or not qid:
            raise ValueError("a vote needs its question's id")
        now = time.time() if now is None else now
        if not 2 <= len(question.options) <= MAX_OPTIONS:
            raise ValueError("a vote needs 2 to 12 options")
        with self.store.transaction() as db:
            self._host(db, code, key)
            already = db.execute("SELECT vote FROM votes WHERE code = ? AND qid = ? AND state = 'open'",
                                 (code, qid)).fetchone()
            if already is not None:
                return already[0]
            db.execute("UPDATE votes SET state = 'closed' WHERE code = ? AND state = 'open'", (code,))
            last = db.execute("SELECT COALESCE(MAX(vote), 0) FROM votes WHERE code = ?", (code,)).fetchone()[0]
            rounds = db.execute("SELECT COUNT(*) FROM votes WHERE code = ? AND qid = ?", (code, qid)).fetchone()[0]
            db.execute("INSERT INTO votes (code, vote, page, qid, round, state, question, seats, opened) "
                       "VALUES (?, ?, ?, ?, ?, 'open', ?, ?, ?)",
                       (code, last + 1, str(page), qid, rounds + 1, json.dumps(question.to_json(), ensure_ascii=False),
                        seated(db, code, now), now))
            self._bump(db, code, now)
        return last + 1

    def set_state(self, code: str, key, vote: int, state: str, now: float | None = None) -> int:
        """Close a vote (answers refused from now on) or reveal it (the measured answer).
        Returns the version."""
        if state not in ("closed", "revealed"):
            raise ValueError(f"a vote can be closed or revealed, not {state!r}")
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE votes SET state = ? WHERE code = ? AND vote = ?", (state, code, int(vote)))
            return self._bump(db, code, now)

    def show_reason(self, code: str, key, vote: int, student: str, shown: bool, now: float | None = None) -> int:
        """Show one student's reason to the whole class, or take it back (the teacher's
        choice; nothing a student wrote reaches another student's screen otherwise).
        Returns the version (every member's page shows the reasons shown)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE answers SET shown = ? WHERE code = ? AND vote = ? AND student = ? AND reason != ''",
                       (int(bool(shown)), code, int(vote), student))
            return self._bump(db, code, now)

    def drop_reason(self, code: str, key, vote: int, student: str, now: float | None = None) -> int:
        """Remove one student's reason for good (its words are erased, wherever they were
        shown; the answer still counts). Returns the version."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE answers SET reason = '', shown = 0 WHERE code = ? AND vote = ? AND student = ?",
                       (code, int(vote), student))
            return self._bump(db, code, now)

    def leave_out(self, code: str, key, vote: int, network: str, since: float, now: float | None = None) -> int:
        """Leave out of an open vote the students of one ``network`` (server.limits.key) who
        joined at or after ``since`` and after the vote opened (a burst the teacher saw on her
        panel: Pulse.burst_network, burst_since): a student seated before the vote opened is
        never left out. Their answers to it are set aside, not deleted (counted nowhere, kept
        for the CSV, counted again by :meth:`take_back_left_out` while the vote is open), and
        answer() refuses theirs ("left out"); they stay in the class and answer the next
        vote. How many students that is (0: the vote is not open)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            row = db.execute("SELECT opened FROM votes WHERE code = ? AND vote = ? AND state = 'open'",
                             (code, int(vote))).fetchone()
            if row is None or not network:
                return 0
            since = max(float(since), float(row[0]))
            had = db.execute("SELECT since FROM left_out WHERE code = ? AND vote = ? AND network = ?",
                             (code, int(vote), network)).fetchone()
            if had is None:
                db.execute("INSERT INTO left_out (code, vote, network, since) VALUES (?, ?, ?, ?)",
                           (code, int(vote), network, since))
            elif since < had[0]:
                db.execute("UPDATE left_out SET since = ? WHERE code = ? AND vote = ? AND network = ?",
                           (since, code, int(vote), network))
            left = db.execute(f"SELECT COUNT(*) FROM students WHERE code = ? AND student IN ({LEFT_OUT_STUDENTS})",
                              (code, code, int(vote))).fetchone()[0]
            self._tally(db, code, now)
        return int(left)

    def take_back_left_out(self, code: str, key, vote: int, now: float | None = None) -> bool:
        """Undo :meth:`leave_out` on a vote still open: its students may answer again, and
        the answers set aside count again. Whether anything was undone."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            if db.execute("SELECT 1 FROM votes WHERE code = ? AND vote = ? AND state = 'open'",
                          (code, int(vote))).fetchone() is None:
                return False
            undone = db.execute("DELETE FROM left_out WHERE code = ? AND vote = ?", (code, int(vote))).rowcount
            self._tally(db, code, now)
        return bool(undone)

    def reasons(self, code: str, key, vote: int) -> list[tuple[str, int, str, bool]]:
        """Every reason written with a vote, for its teacher only: (student, option, reason,
        shown), in the order written (``NotHost`` without the class's host key)."""
        with self.store.reading() as db:
            self._host(db, code, key)
            return [(s, c, r, bool(sh)) for s, c, r, sh in db.execute(
                "SELECT student, choice, reason, shown FROM answers a WHERE code = ? AND vote = ? AND reason != '' "
                f"AND {COUNTED} ORDER BY at, student", (code, int(vote))).fetchall()]

    def answer(self, code: str, vote: int, student: str, choice: int | None, now: float | None = None,
               reason: str = "", address: str | None = None, number: float | None = None) -> str:
        """A student's answer, with the first vote on a question an optional written
        ``reason`` (:func:`clean_reason`) — or, on an estimate's vote, the ``number`` the
        student estimates (its option, within the factor or not, is worked out here:
        :func:`estimate_choice`; ``choice`` is not read): ``"taken"``, or why not — ``"closed"`` (the vote is
        not open), ``"again"`` (this student answered this vote already), ``"full"`` (the vote
        took as many answers as seats were held when it opened, plus the students who
        joined since), ``"busy"`` (too many reasons from this client ``address`` just now:
        server.limits.reasons(); the answer is not taken either, so that it can be sent
        again with or without its reason), ``"unknown"`` (no such class, vote, student or
        option; a reason too long, or with a second vote; an estimate that is no positive
        finite number or comes with a reason, or a number on an options vote). One transaction: two answers at
        once from one student leave one."""
        now = time.time() if now is None else now
        reason = clean_reason(reason)
        if reason is None:
            return "unknown"
        with self.store.transaction() as db:
            row = db.execute("SELECT state, question, seats, opened, round FROM votes WHERE code = ? AND vote = ?",
                             (code, int(vote))).fetchone()
            joined = db.execute("SELECT 1 FROM students WHERE code = ? AND student = ?", (code, student)).fetchone()
            if row is None or joined is None:
                return "unknown"
            if row[0] != "open":
                return "closed"
            choice = _choice(Asked.from_json(json.loads(row[1])), choice, number, reason)
            if choice is None:
                return "unknown"
            if db.execute("SELECT 1 FROM answers WHERE code = ? AND vote = ? AND student = ?",
                          (code, int(vote), student)).fetchone() is not None:
                return "again"
            if db.execute(f"SELECT 1 FROM students WHERE code = ? AND student = ? AND student IN ({LEFT_OUT_STUDENTS})",
                          (code, student, code, int(vote))).fetchone() is not None:
                return "left_out"
            taken = db.execute(f"SELECT COUNT(*) FROM answers a WHERE code = ? AND vote = ? AND {COUNTED}",
                               (code, int(vote))).fetchone()[0]
            since = db.execute("SELECT COUNT(*) FROM students WHERE code = ? AND joined >= ?",
                               (code, row[3])).fetchone()[0]
            if taken >= row[2] + since:
                return "full"
            if reason and row[4] != 1:
                return "unknown"  # a reason goes with the first vote on a question
            if reason and not limits.take(db, limits.reasons(), address, now):
                return "busy"
            done = db.execute("INSERT INTO answers (code, vote, student, choice, at, reason, number) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                              (code, int(vote), student, choice, now, reason,
                               None if number is None else float(number))).rowcount
            if not done:
                return "again"
            self._tally(db, code, now)  # the teacher's count moved; nothing a student follows did
        return "taken"
