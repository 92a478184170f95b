"""The classes' tables in the store: their layout now (``SCHEMA``, ``VERSION``) and the
statements that moved every earlier layout to the next (``upgrades``), which server.store
runs once, in one transaction, on SQLite and on PostgreSQL alike. The SQL of what a class
does is in server.classes."""

from __future__ import annotations

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, host TEXT NOT NULL, view TEXT NOT NULL,
        version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL, tally INTEGER NOT NULL DEFAULT 0,
        door INTEGER NOT NULL DEFAULT 1, room INTEGER NOT NULL DEFAULT 0, room_version INTEGER NOT NULL DEFAULT 0,
        page TEXT NOT NULL DEFAULT '', expected INTEGER NOT NULL DEFAULT 0, lock_walk INTEGER NOT NULL DEFAULT 0,
        owner TEXT NOT NULL DEFAULT '', host_seen REAL NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS students (
        code TEXT NOT NULL, student TEXT NOT NULL, seen REAL NOT NULL, joined REAL NOT NULL DEFAULT 0,
        network TEXT NOT NULL DEFAULT '', PRIMARY KEY (code, student))""",
    """CREATE TABLE IF NOT EXISTS votes (
        code TEXT NOT NULL, vote INTEGER NOT NULL, round INTEGER NOT NULL,
        state TEXT NOT NULL, question TEXT NOT NULL, qid TEXT NOT NULL, seats INTEGER NOT NULL DEFAULT 0,
        opened REAL NOT NULL DEFAULT 0, page TEXT NOT NULL DEFAULT '', PRIMARY KEY (code, vote))""",
    """CREATE TABLE IF NOT EXISTS answers (
        code TEXT NOT NULL, vote INTEGER NOT NULL, student TEXT NOT NULL, choice INTEGER NOT NULL,
        at REAL NOT NULL, reason TEXT NOT NULL DEFAULT '', shown INTEGER NOT NULL DEFAULT 0, number REAL,
        PRIMARY KEY (code, vote, student))""",
    # the students a teacher left out of one vote: those of ``network`` who joined at or after
    # ``since`` (a burst from one network, server.class_reads.Pulse)
    """CREATE TABLE IF NOT EXISTS left_out (
        code TEXT NOT NULL, vote INTEGER NOT NULL, network TEXT NOT NULL, since REAL NOT NULL,
        PRIMARY KEY (code, vote, network))""",
    # why a class ended when its teacher could not know (made room for another: "unused"),
    # kept IDLE_HOURS so that she is told if she comes back
    """CREATE TABLE IF NOT EXISTS ended_classes (
        code TEXT PRIMARY KEY, reason TEXT NOT NULL, at REAL NOT NULL)""",
)
VERSION = 9  # the layout of these tables (server.store records it; ``upgrades`` moves an older one on)
# What the layouts before 5 (and the share links made before them) numbered the pages by: a
# page's place in the walk then. History, never changed: a page is named by its id now.
NUMBERED_PAGES = {1: "every-pair", 2: "nearly-empty", 3: "neighbours", 4: "hubs", 5: "linear", 6: "honest-catch",
                  7: "payoff", 8: "closing", 9: "playground"}
# the question each step asked before a step could ask several (layout 1 named none): history too
FIRST_QUESTIONS = {1: "s1.doubling", 2: "s2.cells", 3: "s3.reach", 4: "s4.hops", 5: "s5.order", 6: "s6.closest",
                   7: "s7.ratio"}

def _page_of_step(table: str) -> list:
    """Layout 5's upgrade of one table: its ``step`` number becomes its page's id."""
    cases = " ".join(f"WHEN {number} THEN '{page}'" for number, page in NUMBERED_PAGES.items())
    return [f"ALTER TABLE {table} ADD COLUMN page TEXT NOT NULL DEFAULT ''",
            f"UPDATE {table} SET page = CASE step {cases} ELSE '' END",
            f"ALTER TABLE {table} DROP COLUMN step"]


def upgrades() -> dict[int, list]:
    """The statements that move the classes' tables from each layout to the next, run
    once by server.store's ``create``. 2: a vote names its question; the votes of a store
    written before take their step's first question (FIRST_QUESTIONS).
    3: a second version, ``tally``, for what only the teacher's panel shows; the door; when
    each student joined; the seats a vote opened with (a vote of layout 2 bounds its answers
    by the students who ever joined); whether the room's texts are shown, and a third
    version, ``room_version``, that the room's charts poll (server.texts). 4: why a class
    ended, kept for its teacher (``ended_classes``: made by ``SCHEMA``). 5: a class and a
    vote name their page by its id, never by its number (NUMBERED_PAGES). 6: peer
    instruction — an answer's written reason, whether the teacher shows it to the class,
    and a number (an estimate's answer); an answer kept before has no reason, shown to no
    one. 7: the network (server.limits.key of the address) each student joined from, so that
    a burst of joins from one network is counted on the teacher's panel, and how many
    students the teacher expects (0: she has not said), and whether she locks the walk to the
    class's step while a vote is held (off); a student kept before has no network. 8: the
    students a teacher left out of a vote (``left_out``: made by ``SCHEMA``). 9: who started
    a class (``owner``: the network of her address, an IPv6 one by its site) and when her
    session was last seen (``host_seen``), so that a full server makes room by fair share; a
    class kept before has neither, and makes room only as before."""
    return {2: ["ALTER TABLE votes ADD COLUMN qid TEXT NOT NULL DEFAULT ''",
                *(("UPDATE votes SET qid = ? WHERE step = ?", (qid, step)) for step, qid in FIRST_QUESTIONS.items())],
            3: ["ALTER TABLE classes ADD COLUMN tally INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE classes ADD COLUMN door INTEGER NOT NULL DEFAULT 1",
                "ALTER TABLE classes ADD COLUMN room INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE classes ADD COLUMN room_version INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE students ADD COLUMN joined REAL NOT NULL DEFAULT 0",
                "ALTER TABLE votes ADD COLUMN seats INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE votes ADD COLUMN opened REAL NOT NULL DEFAULT 0"],
            4: [],
            5: [*_page_of_step("classes"), *_page_of_step("votes")],
            6: ["ALTER TABLE answers ADD COLUMN reason TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE answers ADD COLUMN shown INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE answers ADD COLUMN number REAL"],
            7: ["ALTER TABLE students ADD COLUMN network TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE classes ADD COLUMN expected INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE classes ADD COLUMN lock_walk INTEGER NOT NULL DEFAULT 0"],
            8: [],
            9: ["ALTER TABLE classes ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE classes ADD COLUMN host_seen REAL NOT NULL DEFAULT 0"]}
