"""A class as its pages read it, from a connection the caller holds: its state as members
follow it (``ClassState``: step, view, versions, door, votes), every vote's counts, and
what the teacher's panel shows of the room now (``Pulse``); ``ClassReads``, the reads a
store's classes answer, each in one read. server.classes holds the writes and the rules;
no Streamlit here."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field

from . import answers

RECENT_SECONDS = 60.0  # the teacher's "in the last minute"
BURST_SECONDS = 20.0  # joins from one network within this window count as a burst …
BURST_AT = 10  # … from this many on
# a student who joined after the vote ``v`` opened (``s``: the students table; a vote of a
# layout that recorded no opening time has none): the one rule both late_of and
# ClassReads.joined_during read
JOINED_DURING = "v.opened > 0 AND s.joined >= v.opened"
# the students left out of one vote (parameters: code, vote): of a network the teacher left
# out of it, joined at or after its since (server.classes.Classes.leave_out)
LEFT_OUT_STUDENTS = ("SELECT s.student FROM students s JOIN left_out l ON l.code = s.code AND l.network = s.network "
                     "WHERE l.code = ? AND l.vote = ? AND s.joined >= l.since")
# an answer ``a`` (the answers table) whose student is left out of its vote: set aside, not
# deleted — kept for the teacher's CSV, counted nowhere, counted again if she takes it back
ASIDE = ("EXISTS (SELECT 1 FROM left_out l JOIN students ls ON ls.code = l.code AND ls.network = l.network "
         "WHERE l.code = a.code AND l.vote = a.vote AND ls.student = a.student AND ls.joined >= l.since)")
COUNTED = f"NOT {ASIDE}"


def link_token(stored_host_hash: str) -> str:
    """The token a class's join link and QR code carry (``&j=``): made from what the store
    keeps of the host key (its SHA-256, server.classes.host_hash), so that only the
    teacher's session and the store can make it; a student who scans it holds a code that
    exists without having guessed one."""
    return hashlib.sha256(f"join:{stored_host_hash}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Asked:
    """A vote's own copy of its question, made when the teacher opens it
    (ui.classroom.vote_actions.question_copy), so that later changes to the page or its
    settings leave the vote as it was asked; kept with the vote as JSON (``to_json``,
    ``from_json``; an estimate's JSON says ``"kind": "estimate"`` and its ``"value"``, as
    earlier layouts wrote it)."""

    options: tuple  # the option values (an estimate's two: off by more than the factor, or within it)
    answer: int  # the measured answer's option
    text: dict = field(default_factory=dict)  # language → the question's words
    labels: dict = field(default_factory=dict)  # language → the options' labels
    value_text: dict = field(default_factory=dict)  # language → the measured value, written out
    source: str | None = None  # "model": worked out by the cost model; else measured on the class's text
    estimate: float | None = None  # an estimate's measured number (None: a question on options)
    matches: str | None = None  # a matched question: the id of the question whose discussion it checks

    @property
    def is_estimate(self) -> bool:
        return self.estimate is not None

    def words(self, part: str, lang: str):
        """Its ``part`` ("text", "labels", "value_text") in ``lang``, or in English."""
        got = getattr(self, part)
        return got.get(lang) or got.get("en")

    def to_json(self) -> dict:
        out = {"options": list(self.options), "answer": self.answer, "text": self.text, "labels": self.labels,
               "value_text": self.value_text, "source": self.source}
        if self.estimate is not None:
            out["kind"], out["value"] = "estimate", self.estimate
        if self.matches is not None:
            out["matches"] = self.matches
        return out

    @classmethod
    def from_json(cls, d: dict) -> Asked:
        """As kept; a plain string where the words are per language reads as English."""
        def per_lang(x):
            return x if isinstance(x, dict) else {"en": x} if x is not None else {}

        options = d.get("options")
        return cls(tuple(options) if isinstance(options, list) else (), int(d.get("answer", 0)),
                   per_lang(d.get("text")), per_lang(d.get("labels")), per_lang(d.get("value_text")),
                   d.get("source"), float(d["value"]) if d.get("kind") == "estimate" else None, d.get("matches"))


@dataclass(frozen=True)
class Vote:
    vote: int  # 1, 2, … in the order opened
    page: str  # the id of the step it asks on
    qid: str  # the question's stable id (a step may ask several: pages/ declares them)
    round: int  # 1: the first vote on this question; 2: after discussing
    state: str  # open / closed / revealed
    question: Asked  # its own copy: words, options (labels), the measured answer's option


@dataclass(frozen=True)
class ClassState:
    code: str
    page: str  # the teacher's page, by its id
    version: int  # what a student follows moved (the step, the view, a vote's state)
    view: dict  # the text and settings, as a share link keeps them
    votes: tuple[Vote, ...]
    tally: int = 0  # what only the teacher's panel shows moved (an answer, a new student, the door)
    door: bool = True  # new students may join
    counts: dict = field(default_factory=dict)  # vote → how many chose each option (``read`` fills it)
    mine: dict = field(default_factory=dict)  # vote → the reading student's own answer (``read``)
    room: bool = False  # the room's texts shown on the steps (the teacher's choice)
    shown: dict = field(default_factory=dict)  # vote → the reasons the teacher shows the class: ((option, text), …)
    guesses: dict = field(default_factory=dict)  # estimate vote, once closed → the class's numbers, sorted (``read``)
    mine_numbers: dict = field(default_factory=dict)  # estimate vote → the reading student's number (``read``)
    # vote → how many of ``counts`` came from students who joined while it was open (``read``):
    # a crowd that joins mid-vote is counted apart from the class seated when it opened
    late: dict = field(default_factory=dict)
    lock_walk: bool = False  # while a vote is held, a student's other pages wait (the teacher's choice; off)

    def seated(self, vote: int) -> list[int]:
        """A vote's counts from the students seated before it opened (its result, first)."""
        counts = self.counts.get(vote) or []
        late = self.late.get(vote) or [0] * len(counts)
        return [c - x for c, x in zip(counts, late)]

    def vote_on(self, qid: str) -> Vote | None:
        """The latest vote on a question (by its id), or None."""
        found = [v for v in self.votes if v.qid == qid]
        return found[-1] if found else None

    def votes_on(self, page: str) -> list[Vote]:
        return [v for v in self.votes if v.page == page]

    def unrevealed(self, page: str | None = None) -> list[Vote]:
        """The votes whose answer the class must not see yet (on ``page``, or on any page):
        the latest vote on each question while it is open, or closed before its answer was
        revealed — from *Open* to *Reveal*, through the discussion and a second vote. A
        question revealed once stays revealed (a second vote opened after the reveal holds
        the page only while it is open)."""
        latest: dict[str, Vote] = {}
        revealed = set()
        for v in self.votes:
            if page is None or v.page == page:
                latest[v.qid] = v
                if v.state == "revealed":
                    revealed.add(v.qid)
        return [v for qid, v in latest.items()
                if v.state == "open" or (v.state == "closed" and qid not in revealed)]


@dataclass(frozen=True)
class Pulse:
    """What the teacher's panel shows of the room now."""

    present: int  # students seen in the last PRESENCE window
    joined_recently: int  # new students in the last RECENT_SECONDS
    answered: int  # answers to the open vote (0: none open)
    answered_recently: int  # of those, from students seen in the last RECENT_SECONDS
    door: bool
    joined: int = 0  # students who ever joined the class
    expected: int = 0  # how many the teacher expects (0: she has not said)
    # the most students who joined from one network in the last BURST_SECONDS and since the
    # last vote opened (≥ BURST_AT, else 0): a class arriving before its first vote is no burst
    burst: int = 0
    burst_network: str = ""  # that network (server.limits.key), for Classes.leave_out; never shown
    burst_since: float = 0.0  # its first join in that window
    vote: int = 0  # the open vote (0: none)
    left_out: int = 0  # students left out of the open vote (Classes.leave_out)
    aside: int = 0  # their answers to it, set aside (counted nowhere until she takes it back)
    would_set_aside: int = 0  # the answers leaving the burst out would set aside now (its network, joined
    # since the burst began and the vote opened)


def state_of(db, code: str) -> ClassState | None:
    """The class as its members follow it (no counts, no one's answers), or None."""
    row = db.execute("SELECT page, version, view, tally, door, room, lock_walk FROM classes WHERE code = ?",
                     (code,)).fetchone()
    if row is None:
        return None
    votes = db.execute("SELECT vote, page, qid, round, state, question FROM votes WHERE code = ? "
                       "ORDER BY vote", (code,)).fetchall()
    shown: dict[int, list] = {}
    for vote, choice, reason in db.execute("SELECT vote, choice, reason FROM answers a WHERE code = ? AND shown = 1 "
                                           f"AND {COUNTED} ORDER BY vote, at, student", (code,)).fetchall():
        shown.setdefault(vote, []).append((choice, reason))
    kept = tuple(Vote(v, s, qid, r, st, Asked.from_json(json.loads(q))) for v, s, qid, r, st, q in votes)
    return ClassState(code, row[0], row[1], json.loads(row[2]), kept, row[3],
                      bool(row[4]), room=bool(row[5]), shown={v: tuple(r) for v, r in shown.items()},
                      lock_walk=bool(row[6]))


def counts_of(db, code: str, votes) -> dict[int, list[int]]:
    """How many students chose each option, for each of ``votes``, in one query."""
    out = {v.vote: [0] * len(v.question.options) for v in votes}
    for vote, choice, count in db.execute(f"SELECT vote, choice, COUNT(*) FROM answers a WHERE code = ? AND {COUNTED} "
                                          "GROUP BY vote, choice", (code,)).fetchall():
        if vote in out and 0 <= choice < len(out[vote]):
            out[vote][choice] = count
    return out


def late_of(db, code: str, votes) -> dict[int, list[int]]:
    """For each of ``votes``, how many students who joined the class after it opened chose
    each option (a vote of a layout that recorded no opening time counts none late)."""
    out = {v.vote: [0] * len(v.question.options) for v in votes}
    for vote, choice, count in db.execute(
            "SELECT a.vote, a.choice, COUNT(*) FROM answers a "
            "JOIN votes v ON v.code = a.code AND v.vote = a.vote "
            "JOIN students s ON s.code = a.code AND s.student = a.student "
            f"WHERE a.code = ? AND {JOINED_DURING} AND {COUNTED} GROUP BY a.vote, a.choice", (code,)).fetchall():
        if vote in out and 0 <= choice < len(out[vote]):
            out[vote][choice] = count
    return out


def guesses_of(db, code: str, votes) -> dict[int, tuple[float, ...]]:
    """The numbers the class sent to each estimate vote among ``votes`` that is no longer
    open (while it is, no one's estimate is shown: it would anchor the others), sorted, with
    no student's id."""
    done = {v.vote for v in votes if v.question.is_estimate and v.state != "open"}
    out: dict[int, list[float]] = {v: [] for v in done}
    if done:
        for vote, number in db.execute("SELECT vote, number FROM answers a WHERE code = ? AND number IS NOT NULL "
                                       f"AND {COUNTED}", (code,)).fetchall():
            if vote in out:
                out[vote].append(float(number))
    return {v: tuple(sorted(x)) for v, x in out.items()}


def read_of(db, code: str, student: str = "") -> ClassState | None:
    """Everything a page run shows of the class: its state, every vote's counts, the class's
    estimates once their vote closed, and the reading student's own answers."""
    found = state_of(db, code)
    if found is None:
        return None
    rows = db.execute("SELECT vote, choice, number FROM answers WHERE code = ? AND student = ?",
                      (code, student)).fetchall() if student else []
    return ClassState(found.code, found.page, found.version, found.view, found.votes, found.tally, found.door,
                      counts_of(db, code, found.votes), {v: c for v, c, _ in rows}, found.room, found.shown,
                      guesses_of(db, code, found.votes), {v: x for v, _, x in rows if x is not None},
                      late_of(db, code, found.votes), lock_walk=found.lock_walk)


def pulse_of(db, code: str, present_since: float, now: float) -> Pulse | None:
    """The room now for the teacher's panel (None: no such class): the students present
    (seen since ``present_since``), how many joined in the last minute, the answers to the
    open vote and how many came from students seen in the last minute, and the door."""
    recent = now - RECENT_SECONDS
    row = db.execute("SELECT door, expected FROM classes WHERE code = ?", (code,)).fetchone()
    if row is None:
        return None
    ever = db.execute("SELECT COUNT(*) FROM students WHERE code = ?", (code,)).fetchone()[0]
    opened = db.execute("SELECT MAX(opened) FROM votes WHERE code = ?", (code,)).fetchone()[0]
    burst = None
    if opened is not None:  # before the first vote, a class arriving together is the class
        burst = db.execute("SELECT network, COUNT(*) AS n, MIN(joined) FROM students WHERE code = ? AND joined >= ? "
                           "AND network != '' GROUP BY network ORDER BY n DESC, network LIMIT 1",
                           (code, max(now - BURST_SECONDS, float(opened)))).fetchone()
    most = burst[1] if burst else 0
    present = db.execute("SELECT COUNT(*) FROM students WHERE code = ? AND seen >= ?",
                         (code, present_since)).fetchone()[0]
    joined = db.execute("SELECT COUNT(*) FROM students WHERE code = ? AND joined >= ?", (code, recent)).fetchone()[0]
    vote = db.execute("SELECT vote FROM votes WHERE code = ? AND state = 'open'", (code,)).fetchone()
    answered = fresh = left = aside = would = 0
    crowd = most >= BURST_AT
    if vote is not None:
        left = db.execute(f"SELECT COUNT(*) FROM students WHERE code = ? AND student IN ({LEFT_OUT_STUDENTS})",
                          (code, code, vote[0])).fetchone()[0]
        answered, fresh = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN s.seen >= ? THEN 1 ELSE 0 END), 0) FROM answers a "
            "JOIN students s ON s.code = a.code AND s.student = a.student "
            f"WHERE a.code = ? AND a.vote = ? AND {COUNTED}",
            (recent, code, vote[0])).fetchone()
        aside = db.execute(f"SELECT COUNT(*) FROM answers a WHERE a.code = ? AND a.vote = ? AND {ASIDE}",
                           (code, vote[0])).fetchone()[0]
        if crowd:
            would = db.execute("SELECT COUNT(*) FROM answers a "
                               "JOIN students s ON s.code = a.code AND s.student = a.student "
                               "JOIN votes v ON v.code = a.code AND v.vote = a.vote WHERE a.code = ? AND a.vote = ? "
                               "AND s.network = ? AND s.joined >= ? AND s.joined >= v.opened",
                               (code, vote[0], burst[0], float(burst[2]))).fetchone()[0]
    return Pulse(present, joined, int(answered), int(fresh), bool(row[0]), int(ever), int(row[1]),
                 int(most) if crowd else 0, burst[0] if crowd else "", float(burst[2]) if crowd else 0.0,
                 int(vote[0]) if vote is not None else 0, int(left), int(aside), int(would))


class ClassReads:
    """What reads a store's classes, each in one read (server.classes.Classes adds what
    changes them)."""

    def __init__(self, store):
        self.store = store

    def link_token_ok(self, code: str, token) -> bool:
        """Whether ``token`` is the one class ``code``'s join link carries (one read; no
        write, whatever the answer)."""
        if not isinstance(token, str) or not token:
            return False
        with self.store.reading() as db:
            row = db.execute("SELECT host FROM classes WHERE code = ?", (code,)).fetchone()
        return row is not None and hmac.compare_digest(link_token(row[0]).encode(), token.encode())

    def joined_during(self, code: str, vote: int) -> set[str]:
        """The students of class ``code`` who joined after vote ``vote`` opened (a vote of a
        layout that recorded no opening time: none)."""
        with self.store.reading() as db:
            return {s for (s,) in db.execute(
                "SELECT s.student FROM students s JOIN votes v ON v.code = s.code WHERE s.code = ? AND v.vote = ? "
                f"AND {JOINED_DURING}", (code, int(vote))).fetchall()}

    def has_seat(self, code: str, student) -> bool:
        """Whether ``student`` is one of class ``code``'s students already (a reload, a
        phone back from sleep: ``?me=``)."""
        if not answers.is_student(student):
            return False
        with self.store.reading() as db:
            return db.execute("SELECT 1 FROM students WHERE code = ? AND student = ?",
                              (code, student)).fetchone() is not None

    def version(self, code: str) -> int | None:
        """The version a student's poll watches (None: no such class)."""
        found = self.versions(code)
        return None if found is None else found[0]

    def versions(self, code: str) -> tuple[int, int, int] | None:
        """``(version, tally, room_version)`` in one read (None: no such class): what a
        poll reads."""
        with self.store.reading() as db:
            row = db.execute("SELECT version, tally, room_version FROM classes WHERE code = ?", (code,)).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def state(self, code: str) -> ClassState | None:
        """The class as its members follow it: page, view, versions, the door, its votes."""
        with self.store.reading() as db:
            return state_of(db, code)

    def read(self, code: str, student: str = "") -> ClassState | None:
        """Everything a page run shows of the class, in one read (server.class_reads)."""
        with self.store.reading() as db:
            return read_of(db, code, student)

    def shared_read(self, code: str) -> ClassState | None:
        """What every member's page run reads alike: the state and every vote's counts
        (:meth:`read` without anyone's own answers)."""
        with self.store.reading() as db:
            return read_of(db, code)

    def own(self, code: str, student: str) -> tuple[dict[int, int], dict[int, float]]:
        """One student's own answers in one read: vote → choice, and vote → the number of
        each estimate they sent."""
        if not student:
            return {}, {}
        with self.store.reading() as db:
            rows = db.execute("SELECT vote, choice, number FROM answers WHERE code = ? AND student = ?",
                              (code, student)).fetchall()
        return {v: c for v, c, _ in rows}, {v: x for v, _, x in rows if x is not None}

    def counts(self, code: str, vote: int) -> list[int]:
        """How many students chose each option of a vote."""
        return self.all_counts(code).get(int(vote), [])

    def all_counts(self, code: str) -> dict[int, list[int]]:
        """How many students chose each option, for every vote of the class, in one read
        (the teacher's summary and the handout: one query, not one a vote)."""
        with self.store.reading() as db:
            found = state_of(db, code)
            return {} if found is None else counts_of(db, code, found.votes)

    def answers_of(self, code: str) -> list[tuple[int, str, int, str, float | None, bool]]:
        """Every answer of the class: (vote, student, choice, reason, an estimate's number or
        None, whether it is set aside: its student left out of that vote) — for the teacher's
        export."""
        with self.store.reading() as db:
            return [(*r[:5], bool(r[5])) for r in db.execute(
                f"SELECT vote, student, choice, reason, number, CASE WHEN {ASIDE} THEN 1 ELSE 0 END FROM answers a "
                "WHERE code = ? ORDER BY vote, at, student", (code,)).fetchall()]

    def my_answer(self, code: str, vote: int, student: str) -> int | None:
        with self.store.reading() as db:
            row = db.execute("SELECT choice FROM answers WHERE code = ? AND vote = ? AND student = ?",
                             (code, int(vote), student)).fetchone()
        return None if row is None else row[0]

    def present(self, code: str, since: float) -> int:
        """Students seen since ``since`` (a poll writes presence at most every 15 s)."""
        with self.store.reading() as db:
            return db.execute("SELECT COUNT(*) FROM students WHERE code = ? AND seen >= ?",
                              (code, since)).fetchone()[0]

    def pulse(self, code: str, present_since: float, now: float | None = None) -> Pulse | None:
        """The teacher's view of the room now, in one read (server.class_reads.pulse_of)."""
        with self.store.reading() as db:
            return pulse_of(db, code, present_since, time.time() if now is None else now)
