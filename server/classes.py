"""A live class, kept in the store beside the share links: the class's text and settings,
the teacher's page (by its id: ui.walk), its students (anonymous ids) and its votes, with two version
numbers read in one cheap query: ``version``, raised by what a student follows (the
step, the text and settings, a vote opened, closed or revealed), and ``tally``, raised
by what only the teacher's panel shows (an answer, a new student, the door). A student's
poll watches the first, so an answer never redraws a following student's page; the
teacher's count watches the second.

Every change is one transaction. What changes the class (moving it, opening, closing or
revealing a vote, the door, ending it) needs the host key, kept only by the teacher's
session; the store holds its SHA-256 and compares with ``hmac.compare_digest``.

What one script cannot do (each bound in docs/deploy.md, with what its refusal says):

* **take every seat**: a seat is held by a student seen in the last ``SEAT_SECONDS``
  (their poll writes presence every 15 s); ``MAX_STUDENTS`` seats a class. A student
  who comes back (their address keeps their id) is the same student, while a seat is
  free;
* **mint students without end**: new students come at most ``limits.joins()`` from one
  client address (the store's counters: every replica sees them), and not at all once
  the teacher closes the door;
* **outvote the room**: a vote takes at most as many answers as seats were held when it
  opened, plus the students who joined since (each one answer, each join rate-limited);
* **start classes without end**: ``limits.STARTS`` from one client (an address, an IPv6
  /64: server.limits.key); a class no student has joined ends after ``EMPTY_MINUTES``
  untouched, one in use after ``IDLE_HOURS``;
* **take every class slot**: when the server holds ``ATLAS_MAX_CLASSES`` (500), a start ends a
  class no student has ever joined and whose teacher is not connected, by fair share: of
  the networks (an IPv6 one by its site) that started more than one class, the one holding
  the most loses its longest-untouched first (its teacher is told it ended unused). A
  class with students, one whose teacher is connected, and the only class of its network
  are kept, so a class prepared before a lesson is never lost to a crowd of starts and a
  new teacher can still start; refused in words when nothing may go. A public server may
  ask for a passphrase to start one (``ATLAS_START_KEY``);
* **find a code by guessing**: a wrong code only reads (no write), and a full class
  answers a newcomer as an unknown code does.

No Streamlit here; the SQL of classes is in this module and its votes' in server.class_votes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from attn import settings

from . import codes, limits, texts
from .backend import Backend, Refused, StoreError
from .class_layout import SCHEMA, VERSION, upgrades
from .class_reads import ClassReads
from .class_votes import SEAT_SECONDS, ClassVotes, seated

MAX_STUDENTS = 200  # seats: students seen in the last SEAT_SECONDS
IDLE_HOURS = 12
EMPTY_MINUTES = 120  # a class that no student has joined ends after two hours untouched (one prepared before a lesson)
PROTECTED_HOURS = 2  # a class kept before layout 9 (no owner) made or used this recently is never ended for another
HOST_AWAY = 3 * 15.0  # a teacher whose session has not been seen for this long is not connected (follow.PRESENCE_EVERY)
STATES = ("open", "closed", "revealed")
# what join() says: the student is in; no such class; no seat free for a newcomer; no seat free
# for one of its students coming back; the door is closed; too many new students from this
# client's address just now
IN, UNKNOWN, FULL, NO_SEAT, DOOR, BUSY = "in", "unknown", "full", "no seat", "door", "busy"


class NotHost(Exception):
    """A change asked for without the class's host key (forged, stale, or a student's)."""


def host_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def owner(address: str | None) -> str:
    """Who started a class, for the fair share of a full server: the network of the address
    (server.limits.key), an IPv6 one by its site (limits.site), so that one site's many
    networks count as one; "" when there is no address."""
    if address is None:
        return ""
    client = limits.key(address)
    return limits.site(client) or client


class Classes(ClassVotes, ClassReads):
    """The classes of one store (every process using it shares them): what changes them here,
    its votes and answers in server.class_votes.ClassVotes, what reads them in
    server.class_reads.ClassReads."""

    def __init__(self, store: Backend):
        self.store = store
        store.create("classes", VERSION, SCHEMA, upgrades())
        store.create("limits", 1, limits.SCHEMA)
        store.create("room", texts.VERSION, texts.SCHEMA)

    # --- the teacher -------------------------------------------------------------------

    def create(self, view: dict, page: str, now: float | None = None, address: str | None = None,
               passphrase: str | None = None) -> tuple[str, str]:
        """A new class for ``view`` (text and settings) on ``page`` (its id): its join code and
        its host key (to keep in the teacher's session only). Refused, and nothing made:
        ``Refused("starts")`` past the classes one client ``address`` may start
        (server.limits.key; None: not limited); ``Refused("start_key")`` when the server asks
        for a passphrase (``ATLAS_START_KEY``) and ``passphrase`` is not it — checked first, and
        a wrong one costs no start, so that wrong ones from her network never refuse a teacher
        who has it (what a found passphrase buys stays bounded by the starts per client and
        ATLAS_MAX_CLASSES; the app slows the session that typed it); ``Refused("classes")`` when the
        server holds ATLAS_MAX_CLASSES and none can go. When it holds ATLAS_MAX_CLASSES, a class
        ends to make room (``ended_reason``: "unused") by :meth:`_room_for_one`."""
        now = time.time() if now is None else now
        key = secrets.token_urlsafe(32)
        payload = json.dumps(view, ensure_ascii=False, sort_keys=True)
        wanted = settings.read().start_key
        if wanted is not None and not (isinstance(passphrase, str) and hmac.compare_digest(
                passphrase.strip().encode("utf-8"), wanted.encode("utf-8"))):
            raise Refused("start_key")  # nothing written, no start taken
        with self.store.transaction() as db:
            self._expire(db, now)
            if not limits.take(db, limits.STARTS, address, now):
                raise Refused("starts")
            if db.execute("SELECT COUNT(*) FROM classes").fetchone()[0] >= settings.read().max_classes:
                self._room_for_one(db, now)
            for _ in range(20):
                code = codes.new_code()
                if db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone() is None:
                    break
            else:  # 20 collisions in a billion codes: the store is not what it seems
                raise StoreError("unavailable", "no free join code")
            db.execute("DELETE FROM ended_classes WHERE code = ?", (code,))
            db.execute("INSERT INTO classes (code, host, view, page, version, created, touched, owner, host_seen) "
                       "VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
                       (code, host_hash(key), payload, str(page), now, now, owner(address), now))
        return code, key

    def _room_for_one(self, db, now: float) -> None:
        """End one class to make room, or raise ``Refused("classes")``. It has never had a
        student and its teacher is not connected (not seen for HOST_AWAY); of those, by fair
        share: its owner (the network that started it) holds more than one class, and of
        the owners, the one holding the most loses its longest-untouched first. A class
        kept before its owner was recorded goes as before: untouched for PROTECTED_HOURS."""
        empty = "NOT EXISTS (SELECT 1 FROM students s WHERE s.code = c.code)"
        found = db.execute(
            "SELECT c.code FROM classes c JOIN (SELECT owner, COUNT(*) AS held FROM classes GROUP BY owner) o "
            f"ON o.owner = c.owner WHERE c.owner != '' AND o.held > 1 AND {empty} AND c.host_seen < ? "
            "ORDER BY o.held DESC, c.touched, c.code LIMIT 1", (now - HOST_AWAY,)).fetchone()
        if found is None:
            found = db.execute(f"SELECT c.code FROM classes c WHERE c.owner = '' AND {empty} AND c.created < ? "
                               "AND c.touched < ? ORDER BY c.touched, c.code LIMIT 1",
                               (now - PROTECTED_HOURS * 3600, now - PROTECTED_HOURS * 3600)).fetchone()
        if found is None:
            raise Refused("classes")
        self._delete(db, found[0])
        db.execute("INSERT INTO ended_classes (code, reason, at) VALUES (?, 'unused', ?) "
                   "ON CONFLICT (code) DO UPDATE SET reason = excluded.reason, at = excluded.at", (found[0], now))

    def host_here(self, code: str, key, now: float | None = None) -> None:
        """The teacher's session is connected (her poll says so every follow.PRESENCE_EVERY):
        her class is not ended to make room for another, even before a student joins."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET host_seen = ? WHERE code = ?", (now, code))

    def ended_reason(self, code: str) -> str | None:
        """Why a class ended, when its teacher could not know: "unused" (no student had
        joined it and the server needed its place), or None (ended by her, expired, or
        running)."""
        with self.store.reading() as db:
            row = db.execute("SELECT reason FROM ended_classes WHERE code = ?", (code,)).fetchone()
        return None if row is None else row[0]

    def _host(self, db, code: str, key) -> None:
        row = db.execute("SELECT host FROM classes WHERE code = ?", (code,)).fetchone()
        if row is None or not isinstance(key, str) or not hmac.compare_digest(row[0], host_hash(key)):
            raise NotHost(code)

    def _bump(self, db, code: str, now: float) -> int:
        """What a student follows moved: the version their poll watches (returned, so
        that the teacher's session knows the change it drew was its own)."""
        db.execute("UPDATE classes SET version = version + 1, touched = ? WHERE code = ?", (now, code))
        return db.execute("SELECT version FROM classes WHERE code = ?", (code,)).fetchone()[0]

    def _tally(self, db, code: str, now: float) -> None:
        """What only the teacher's panel shows moved (an answer, a new student, the door)."""
        db.execute("UPDATE classes SET tally = tally + 1, touched = ? WHERE code = ?", (now, code))

    def is_host(self, code: str, key) -> bool:
        with self.store.reading() as db:
            try:
                self._host(db, code, key)
            except NotHost:
                return False
            return True

    def lead(self, code: str, key, page: str, view: dict, now: float | None = None) -> int:
        """The teacher's page, text and settings, in one change (a student's poll never
        sees the page without its settings). Returns the version."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET page = ?, view = ? WHERE code = ?",
                       (str(page), json.dumps(view, ensure_ascii=False, sort_keys=True), code))
            return self._bump(db, code, now)

    def move(self, code: str, key, page: str, now: float | None = None) -> int:
        """The teacher's page: every following student goes there. Returns the version."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET page = ? WHERE code = ?", (str(page), code))
            return self._bump(db, code, now)

    def set_view(self, code: str, key, view: dict, now: float | None = None) -> int:
        """The class's text and settings (the teacher changed them). Returns the version."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET view = ? WHERE code = ?",
                       (json.dumps(view, ensure_ascii=False, sort_keys=True), code))
            return self._bump(db, code, now)

    def show_room(self, code: str, key, shown: bool, now: float | None = None) -> int:
        """Show the room's texts on the steps, or not (every member's page: the version)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET room = ? WHERE code = ?", (int(bool(shown)), code))
            return self._bump(db, code, now)

    def set_door(self, code: str, key, open_: bool, now: float | None = None) -> None:
        """Open or close the door: closed, no new student joins (those in stay, and come
        back after a reload)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET door = ? WHERE code = ?", (int(bool(open_)), code))
            self._tally(db, code, now)

    def set_lock_walk(self, code: str, key, on: bool, now: float | None = None) -> int:
        """Lock a student's walk to the class's step while a vote is held (or not): a page
        of another step would answer it. Returns the version (every member follows it)."""
        now = time.time() if now is None else now
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET lock_walk = ? WHERE code = ?", (int(bool(on)), code))
            return self._bump(db, code, now)

    def set_expected(self, code: str, key, expected: int, now: float | None = None) -> None:
        """How many students the teacher expects (0: she does not say); her panel says at
        once when more have joined."""
        now = time.time() if now is None else now
        expected = max(0, min(int(expected), MAX_STUDENTS))
        with self.store.transaction() as db:
            self._host(db, code, key)
            db.execute("UPDATE classes SET expected = ? WHERE code = ?", (expected, code))
            self._tally(db, code, now)

    def end(self, code: str, key) -> None:
        """End the class: its text, students, votes and answers are deleted."""
        with self.store.transaction() as db:
            self._host(db, code, key)
            self._delete(db, code)

    # --- students ----------------------------------------------------------------------

    def exists(self, code: str) -> bool:
        """Whether a class of this code is running (one read, no write)."""
        with self.store.reading() as db:
            return db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone() is not None

    def join(self, code: str, student: str, now: float | None = None, address: str | None = None) -> str:
        """A student present (joining, coming back, or still there): ``IN``; else why not —
        ``UNKNOWN`` (no such class: one read, no write), ``FULL`` (no seat free for a
        newcomer), ``NO_SEAT`` (none for one of its students coming back), ``DOOR`` (the
        teacher closed the door to new students), ``BUSY`` (too many new students from
        this client ``address`` just now: server.limits.joins())."""
        now = time.time() if now is None else now
        if not self.exists(code):
            return UNKNOWN
        with self.store.transaction() as db:
            row = db.execute("SELECT door FROM classes WHERE code = ?", (code,)).fetchone()
            if row is None:
                return UNKNOWN
            known = db.execute("SELECT seen FROM students WHERE code = ? AND student = ?", (code, student)).fetchone()
            if known is not None:
                if known[0] < now - SEAT_SECONDS and seated(db, code, now) >= MAX_STUDENTS:
                    return NO_SEAT  # back after their seat lapsed, and every seat is taken
                db.execute("UPDATE students SET seen = ? WHERE code = ? AND student = ?", (now, code, student))
                db.execute("UPDATE classes SET touched = ? WHERE code = ?", (now, code))
                return IN
            if not row[0]:
                return DOOR
            if seated(db, code, now) >= MAX_STUDENTS:
                return FULL
            if not limits.take(db, limits.joins(), address, now):
                return BUSY
            db.execute("INSERT INTO students (code, student, seen, joined, network) VALUES (?, ?, ?, ?, ?)",
                       (code, student, now, now, limits.key(address) if address else ""))
            self._tally(db, code, now)
        return IN

    # --- bounds ----------------------------------------------------------------------------

    def expire(self, now: float | None = None) -> int:
        """End every class nobody has touched for IDLE_HOURS, and every class no student
        has joined that nobody has touched for EMPTY_MINUTES; how many ended."""
        with self.store.transaction() as db:
            return self._expire(db, time.time() if now is None else now)

    def _expire(self, db, now: float) -> int:
        old = [c for (c,) in db.execute(
            "SELECT code FROM classes WHERE touched < ? OR (touched < ? AND NOT EXISTS "
            "(SELECT 1 FROM students WHERE students.code = classes.code))",
            (now - IDLE_HOURS * 3600, now - EMPTY_MINUTES * 60))]
        for code in old:
            self._delete(db, code)
        db.execute("DELETE FROM ended_classes WHERE at < ?", (now - IDLE_HOURS * 3600,))
        limits.forget_full(db, now)
        return len(old)

    @staticmethod
    def _delete(db, code: str) -> None:
        for table in ("room_texts", "left_out", "answers", "votes", "students", "classes"):
            db.execute(f"DELETE FROM {table} WHERE code = ?", (code,))
