"""The room as an experiment: the texts a class's students send, and the numbers kept of
each (attn.room_numbers), in the store beside the class.

A student sends one text (and may replace or withdraw it); the teacher may add texts of
her own and remove any. A text waits until some replica takes it (a lease in the table:
``claim``), analyses it and writes its numbers (``finish``); a replica that dies
mid-analysis lets its lease run out, and another takes the text over. Once measured, a
text's words are dropped: the room keeps numbers, a language and the first words (for
the teacher's list alone), never the text. Every change raises the class's
``room_version``, which the room's charts poll apart from what a student follows (so a
text sent never redraws a following student's page). Ending a class deletes its texts
(server.classes). No Streamlit here."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from attn.room_numbers import RoomNumbers

from . import limits
from .backend import Backend

SCHEMA = ("""CREATE TABLE IF NOT EXISTS room_texts (
    code TEXT NOT NULL, owner TEXT NOT NULL, lang TEXT NOT NULL, text TEXT, preview TEXT NOT NULL,
    state TEXT NOT NULL, gen INTEGER NOT NULL, leased_by TEXT, lease_until REAL NOT NULL DEFAULT 0,
    numbers TEXT, n INTEGER NOT NULL DEFAULT 0, sent REAL NOT NULL, done REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (code, owner))""",)
VERSION = 1
MAX_TEXTS = 200  # texts in one class's room
MAX_CHARS = 3000  # characters of one text (its first attn.room_numbers.ROOM_TOKENS tokens are analysed)
PREVIEW_WORDS, PREVIEW_CHARS = 8, 40  # the first words the teacher sees of a text (to know which to remove)
LEASE_SECONDS = 120.0  # a replica's hold on a text it analyses; past it, another takes the text over
LANGS = ("en", "pt", "ja", "other")
SENDS = limits.Limit("room_send", burst=60, every=10.0)  # sends (and replacements) from one address
WAITING, WORKING, DONE, FAILED = "waiting", "working", "done", "failed"


@dataclass(frozen=True)
class RoomText:
    owner: str  # a student's id, or "teacher:N" for one the teacher added
    lang: str
    state: str  # waiting / working / done / failed
    n: int
    numbers: RoomNumbers | None  # attn.room_numbers.text_numbers, once done (any layout it was kept in, upgraded)
    preview: str  # its first words: the teacher's list only
    sent: float
    done: float


@dataclass(frozen=True)
class Claim:
    code: str
    owner: str
    gen: int
    text: str
    lang: str


def preview(text: str) -> str:
    """A text's first words: PREVIEW_WORDS at most, and PREVIEW_CHARS characters at most
    (a language written without spaces is one long "word")."""
    words = text.split()
    shown = " ".join(words[:PREVIEW_WORDS])
    cut = len(words) > PREVIEW_WORDS or len(shown) > PREVIEW_CHARS
    return shown[:PREVIEW_CHARS].rstrip() + (" …" if cut else "")


def _bump(db, code: str, now: float) -> None:
    db.execute("UPDATE classes SET room_version = room_version + 1, touched = ? WHERE code = ?", (now, code))


class Room:
    """The rooms of one store (every replica using it shares them)."""

    def __init__(self, store: Backend):
        self.store = store
        store.create("room", VERSION, SCHEMA)

    def send(self, code: str, owner: str, text: str, lang: str, now: float | None = None,
             address: str | None = None) -> str:
        """A text for the room (a student's one, replacing theirs; or one the teacher
        adds): ``"taken"``, or why not — ``"empty"``, ``"long"`` (over MAX_CHARS),
        ``"unknown"`` (no such class, or ``owner`` is not its student), ``"full"``
        (MAX_TEXTS in the room), ``"busy"`` (too many sends from this client address)."""
        now = time.time() if now is None else now
        text = text.strip() if isinstance(text, str) else ""
        if not text:
            return "empty"
        if len(text) > MAX_CHARS:
            return "long"
        lang = lang if lang in LANGS else "other"
        with self.store.transaction() as db:
            if db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone() is None:
                return "unknown"
            if not owner.startswith("teacher:") and db.execute(
                    "SELECT 1 FROM students WHERE code = ? AND student = ?", (code, owner)).fetchone() is None:
                return "unknown"
            had = db.execute("SELECT gen FROM room_texts WHERE code = ? AND owner = ?", (code, owner)).fetchone()
            if had is None and db.execute("SELECT COUNT(*) FROM room_texts WHERE code = ?",
                                          (code,)).fetchone()[0] >= MAX_TEXTS:
                return "full"
            if not limits.take(db, SENDS, address, now):
                return "busy"
            gen = (had[0] if had else 0) + 1
            db.execute("INSERT INTO room_texts (code, owner, lang, text, preview, state, gen, sent) "
                       "VALUES (?, ?, ?, ?, ?, 'waiting', ?, ?) ON CONFLICT (code, owner) DO UPDATE SET "
                       "lang = excluded.lang, text = excluded.text, preview = excluded.preview, state = 'waiting', "
                       "gen = excluded.gen, leased_by = NULL, lease_until = 0, numbers = NULL, n = 0, "
                       "sent = excluded.sent, done = 0", (code, owner, lang, text, preview(text), gen, now))
            _bump(db, code, now)
        return "taken"

    def withdraw(self, code: str, owner: str, now: float | None = None) -> bool:
        """A student takes their text (and its numbers) out of the room; the teacher's
        ``remove`` does the same for any text, with her host key checked by the caller."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            gone = db.execute("DELETE FROM room_texts WHERE code = ? AND owner = ?", (code, owner)).rowcount
            if gone:
                _bump(db, code, now)
        return bool(gone)

    def pending(self, now: float | None = None) -> bool:
        """Whether some text waits for a replica (one read, no write: a replica polls this)."""
        now = time.time() if now is None else now
        with self.store.reading() as db:
            return db.execute("SELECT 1 FROM room_texts WHERE state = 'waiting' OR "
                              "(state = 'working' AND lease_until < ?) LIMIT 1", (now,)).fetchone() is not None

    def claim(self, worker: str, now: float | None = None) -> Claim | None:
        """Take the text that has waited longest (or one whose lease ran out: its replica
        died mid-analysis) for ``worker``, for LEASE_SECONDS; None when none waits."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            row = db.execute("SELECT code, owner, gen, text, lang FROM room_texts WHERE state = 'waiting' OR "
                             "(state = 'working' AND lease_until < ?) ORDER BY sent LIMIT 1", (now,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE room_texts SET state = 'working', leased_by = ?, lease_until = ? "
                       "WHERE code = ? AND owner = ?", (worker, now + LEASE_SECONDS, row[0], row[1]))
        return Claim(*row)

    def finish(self, claim: Claim, worker: str, numbers: RoomNumbers, now: float | None = None) -> bool:
        """A claimed text's numbers, kept — unless the text was replaced, withdrawn or
        taken over meanwhile (False). Its words are dropped: the room keeps numbers."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            done = db.execute("UPDATE room_texts SET state = 'done', numbers = ?, n = ?, text = NULL, done = ?, "
                              "leased_by = NULL WHERE code = ? AND owner = ? AND gen = ? AND leased_by = ?",
                              (json.dumps(numbers.to_json(), separators=(",", ":")), numbers.n, now, claim.code,
                               claim.owner, claim.gen, worker)).rowcount
            if done:
                _bump(db, claim.code, now)
        return bool(done)

    def fail(self, claim: Claim, worker: str, now: float | None = None) -> None:
        """A claimed text that could not be analysed (its words dropped too)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            if db.execute("UPDATE room_texts SET state = 'failed', text = NULL, done = ?, leased_by = NULL "
                          "WHERE code = ? AND owner = ? AND gen = ? AND leased_by = ?",
                          (now, claim.code, claim.owner, claim.gen, worker)).rowcount:
                _bump(db, claim.code, now)

    def mine(self, code: str, owner: str) -> tuple[str, int, str] | None:
        """A student's own text in the room: (state, tokens, language), or None."""
        with self.store.reading() as db:
            row = db.execute("SELECT state, n, lang FROM room_texts WHERE code = ? AND owner = ?",
                             (code, owner)).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def texts(self, code: str) -> list[RoomText]:
        """The room's texts in the order sent: numbers, language, state and preview (never
        the text itself)."""
        with self.store.reading() as db:
            rows = db.execute("SELECT owner, lang, state, n, numbers, preview, sent, done FROM room_texts "
                              "WHERE code = ? ORDER BY sent, owner", (code,)).fetchall()
        return [RoomText(o, lang, state, n, RoomNumbers.from_json(json.loads(nums)) if nums else None, pre, sent, done)
                for o, lang, state, n, nums, pre, sent, done in rows]

    def bytes_of(self, code: str) -> int:
        """What the room holds in the store for a class (its rows' text columns), in bytes."""
        with self.store.reading() as db:
            rows = db.execute("SELECT owner, lang, COALESCE(text, ''), preview, state, COALESCE(numbers, '') "
                              "FROM room_texts WHERE code = ?", (code,)).fetchall()
        return sum(len("".join(r).encode("utf-8")) + 64 for r in rows)

