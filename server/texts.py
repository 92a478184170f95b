"""The room as an experiment: the texts a class's students send, and the numbers kept of
each (attn.room_numbers), in the store beside the class.

A student sends one text (and may replace or withdraw it); the teacher may add texts of
her own and remove any. A text is measured on its class's model (the model of the
class's view when it was sent): it waits until a replica that offers that model takes it
(a lease in the table: ``claim``), analyses it and writes its numbers (``finish``),
renewing its lease while it works (``renew``); a replica that dies mid-analysis lets its
lease run out, and another takes the text over — at most MAX_ATTEMPTS times, then the
text is marked failed (a text that kills its process must not take every replica down).
The worker's queue is fair: classes take turns (the class served longest ago first),
within a class the client addresses take turns, and within an address the oldest text
goes first (``claim``). Every replica says which models it measures (``heartbeat``), so
that a teacher is told when no replica offers her class's model (``unserved``). Once measured, a
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
    model TEXT NOT NULL DEFAULT '', address TEXT NOT NULL DEFAULT '', claimed REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (code, owner))""",
          """CREATE TABLE IF NOT EXISTS room_workers (
    worker TEXT PRIMARY KEY, models TEXT NOT NULL, seen REAL NOT NULL)""")
VERSION = 2  # 2: each text's model, client, claim time, attempts and failure; the workers' models
UPGRADES = {2: ["ALTER TABLE room_texts ADD COLUMN model TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE room_texts ADD COLUMN address TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE room_texts ADD COLUMN claimed REAL NOT NULL DEFAULT 0",
                "ALTER TABLE room_texts ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE room_texts ADD COLUMN reason TEXT NOT NULL DEFAULT ''"]}
MAX_TEXTS = 200  # texts in one class's room
MAX_CHARS = 3000  # characters of one text (its first attn.room_numbers.ROOM_TOKENS tokens are analysed)
PREVIEW_WORDS, PREVIEW_CHARS = 8, 40  # the first words the teacher sees of a text (to know which to remove)
LEASE_SECONDS = 30.0  # a replica's hold on a text it analyses, renewed while it works; past it, another takes over
MAX_ATTEMPTS = 3  # leases that ran out on one text before it is marked failed ("crashed")
WORKER_FRESH = 60.0  # a worker that said which models it measures this recently still counts
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
    model: str = ""  # the model it is measured on (its class's when sent; "" before texts recorded one)
    reason: str = ""  # why it failed: "error" (the analysis raised), "crashed" (MAX_ATTEMPTS leases ran out)


@dataclass(frozen=True)
class Claim:
    code: str
    owner: str
    gen: int
    text: str
    lang: str
    model: str = ""


# characters a text never keeps: NUL and the other C0 controls but tab and newline (a carriage
# return becomes a newline), DEL; PostgreSQL cannot hold NUL in a text at all
_CONTROLS = {c: None for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}
# characters kept in a text but never in the teacher's preview: bidirectional controls (which
# reorder the line they sit in) and zero-width marks
_HIDDEN = {c: None for c in (0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F),
                             *range(0x2066, 0x206A), 0x2060, 0xFEFF)}


def clean(text: str) -> str:
    """A text as the app keeps it (the room's, and the page's in links and classes): line
    breaks as newlines, NUL and the other control characters but tab and newline dropped."""
    if not isinstance(text, str):
        return ""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROLS)


def preview(text: str) -> str:
    """A text's first words: PREVIEW_WORDS at most, and PREVIEW_CHARS characters at most
    (a language written without spaces is one long "word"), without the characters that
    reorder a line or hide in it."""
    words = text.translate(_HIDDEN).split()
    shown = " ".join(words[:PREVIEW_WORDS])
    cut = len(words) > PREVIEW_WORDS or len(shown) > PREVIEW_CHARS
    return shown[:PREVIEW_CHARS].rstrip() + (" …" if cut else "")


def _model_of(view: str) -> str:
    """The model a class's view names ("" when it names none, or cannot be read)."""
    try:
        model = json.loads(view).get("model")
    except (ValueError, AttributeError):
        return ""
    return model if isinstance(model, str) else ""


def _models_clause(models, prefix: str = "") -> tuple[str, tuple]:
    """SQL keeping the texts of ``models`` (and those of an older release, with none
    recorded); none when ``models`` is None."""
    if models is None:
        return "", ()
    models = tuple(models)
    marks = ", ".join("?" for _ in models)
    return f" AND ({prefix}model = ''" + (f" OR {prefix}model IN ({marks})" if models else "") + ")", models


def _bump(db, code: str, now: float) -> None:
    db.execute("UPDATE classes SET room_version = room_version + 1, touched = ? WHERE code = ?", (now, code))


class Room:
    """The rooms of one store (every replica using it shares them)."""

    def __init__(self, store: Backend):
        self.store = store
        store.create("room", VERSION, SCHEMA, UPGRADES)

    def send(self, code: str, owner: str, text: str, lang: str, now: float | None = None,
             address: str | None = None) -> str:
        """A text for the room (a student's one, replacing theirs; or one the teacher
        adds), to be measured on the class's model: ``"taken"``, or why not — ``"empty"``
        (nothing left once cleaned: ``clean``), ``"long"`` (over MAX_CHARS), ``"unknown"``
        (no such class, or ``owner`` is not its student), ``"full"`` (MAX_TEXTS in the
        room), ``"busy"`` (too many sends from this client address)."""
        now = time.time() if now is None else now
        text = clean(text).strip()
        if not text:
            return "empty"
        if len(text) > MAX_CHARS:
            return "long"
        lang = lang if lang in LANGS else "other"
        client = limits.key(address) if address else ""
        with self.store.transaction() as db:
            found = db.execute("SELECT view FROM classes WHERE code = ?", (code,)).fetchone()
            if found is None:
                return "unknown"
            model = _model_of(found[0])
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
            db.execute("INSERT INTO room_texts (code, owner, lang, text, preview, state, gen, sent, model, address) "
                       "VALUES (?, ?, ?, ?, ?, 'waiting', ?, ?, ?, ?) ON CONFLICT (code, owner) DO UPDATE SET "
                       "lang = excluded.lang, text = excluded.text, preview = excluded.preview, state = 'waiting', "
                       "gen = excluded.gen, leased_by = NULL, lease_until = 0, numbers = NULL, n = 0, "
                       "sent = excluded.sent, done = 0, model = excluded.model, address = excluded.address, "
                       "attempts = 0, reason = ''",
                       (code, owner, lang, text, preview(text), gen, now, model, client))
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

    def pending(self, models=None, now: float | None = None) -> bool:
        """Whether some text waits for a replica (of ``models``, the ones it measures: any
        when None) — one read, no write: a replica polls this."""
        now = time.time() if now is None else now
        which, params = _models_clause(models)
        with self.store.reading() as db:
            return db.execute("SELECT 1 FROM room_texts WHERE (state = 'waiting' OR "
                              f"(state = 'working' AND lease_until < ?)){which} LIMIT 1",
                              (now, *params)).fetchone() is not None

    def claim(self, worker: str, models=None, now: float | None = None) -> Claim | None:
        """Take a waiting text of one of ``models`` (the ones this replica measures; any
        when None) — or one whose lease ran out (its replica died mid-analysis) — for
        ``worker``, for LEASE_SECONDS; None when none waits. Fair: the class served
        longest ago first, within it the client address served longest ago, then the
        oldest text. A text whose lease ran out MAX_ATTEMPTS times is marked failed
        ("crashed") instead, and the next is taken."""
        now = time.time() if now is None else now
        which, params = _models_clause(models, "t.")
        with self.store.transaction() as db:
            while True:
                row = db.execute(
                    "SELECT t.code, t.owner, t.gen, t.text, t.lang, t.model, t.attempts FROM room_texts t "
                    "WHERE (t.state = 'waiting' OR (t.state = 'working' AND t.lease_until < ?))" + which +
                    " ORDER BY (SELECT MAX(c.claimed) FROM room_texts c WHERE c.code = t.code), "
                    "(SELECT MAX(a.claimed) FROM room_texts a WHERE a.code = t.code AND a.address = t.address), "
                    "t.sent, t.owner LIMIT 1", (now, *params)).fetchone()
                if row is None:
                    return None
                code, owner, gen, text, lang, model, attempts = row
                if attempts >= MAX_ATTEMPTS:  # every replica that took it died: never again
                    db.execute("UPDATE room_texts SET state = 'failed', reason = 'crashed', text = NULL, done = ?, "
                               "leased_by = NULL WHERE code = ? AND owner = ?", (now, code, owner))
                    _bump(db, code, now)
                    continue
                db.execute("UPDATE room_texts SET state = 'working', leased_by = ?, lease_until = ?, claimed = ?, "
                           "attempts = attempts + 1 WHERE code = ? AND owner = ?",
                           (worker, now + LEASE_SECONDS, now, code, owner))
                return Claim(code, owner, gen, text, lang, model)

    def renew(self, claim: Claim, worker: str, now: float | None = None) -> bool:
        """Hold a claimed text LEASE_SECONDS more (the worker is still at it); False when it
        is no longer this worker's (replaced, withdrawn, taken over)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            return bool(db.execute("UPDATE room_texts SET lease_until = ? WHERE code = ? AND owner = ? AND gen = ? "
                                   "AND leased_by = ? AND state = 'working'",
                                   (now + LEASE_SECONDS, claim.code, claim.owner, claim.gen, worker)).rowcount)

    def heartbeat(self, worker: str, models, now: float | None = None) -> None:
        """A replica's worker says which models it measures (its offered models), and
        forgets the workers not heard from for long."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            db.execute("INSERT INTO room_workers (worker, models, seen) VALUES (?, ?, ?) ON CONFLICT (worker) "
                       "DO UPDATE SET models = excluded.models, seen = excluded.seen",
                       (worker, json.dumps(sorted(models)), now))
            db.execute("DELETE FROM room_workers WHERE seen < ?", (now - 10 * WORKER_FRESH,))

    def unserved(self, code: str, now: float | None = None) -> list[str]:
        """The models of a class's waiting texts that no worker heard from lately measures:
        those texts wait for nothing (a teacher is told)."""
        now = time.time() if now is None else now
        with self.store.reading() as db:
            waiting = {m for (m,) in db.execute("SELECT DISTINCT model FROM room_texts WHERE code = ? AND "
                                                "state IN ('waiting', 'working')", (code,)).fetchall()}
            offered = set()
            for (models,) in db.execute("SELECT models FROM room_workers WHERE seen >= ?",
                                        (now - WORKER_FRESH,)).fetchall():
                offered.update(json.loads(models))
        if offered:
            offered.add("")  # a text of an older release (no model recorded) is measured by any worker
        return sorted(m for m in waiting if m not in offered)

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
            if db.execute("UPDATE room_texts SET state = 'failed', reason = 'error', text = NULL, done = ?, "
                          "leased_by = NULL "
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
            rows = db.execute("SELECT owner, lang, state, n, numbers, preview, sent, done, model, reason "
                              "FROM room_texts WHERE code = ? ORDER BY sent, owner", (code,)).fetchall()
        return [RoomText(o, lang, state, n, RoomNumbers.from_json(json.loads(nums)) if nums else None, pre, sent, done,
                         model, reason)
                for o, lang, state, n, nums, pre, sent, done, model, reason in rows]

    def bytes_of(self, code: str) -> int:
        """What the room holds in the store for a class (its rows' text columns), in bytes."""
        with self.store.reading() as db:
            rows = db.execute("SELECT owner, lang, COALESCE(text, ''), preview, state, COALESCE(numbers, '') "
                              "FROM room_texts WHERE code = ?", (code,)).fetchall()
        return sum(len("".join(r).encode("utf-8")) + 64 for r in rows)

