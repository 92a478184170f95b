"""The live class's store and rules, without Streamlit: join codes, versions, the host
key, one answer per vote, bounds and expiry, two processes at once, and what a poll
decides on each tick."""

import copy
import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from server import answers, class_layout
from server.class_reads import Asked
from server import classes, codes, follow
from server.classes import FULL, IN, NO_SEAT, UNKNOWN, Classes, NotHost
from server.store import store_at

VIEW = {"text": "A class's own text, long enough to read.", "lang": "en", "settings": {"s3_w": 8}}
FIRST = class_layout.FIRST_QUESTIONS  # each step's first question, as the releases before named them
ASKED = {"text": "How much more work when the text doubles?", "options": ["2×", "4×", "8×"], "answer": 1}
QUESTION = Asked.from_json(ASKED)


@pytest.fixture
def room(where):
    """A class store on each backend (SQLite, PostgreSQL)."""
    return Classes(store_at(where))


def test_a_join_code_is_six_characters_without_i_l_o_u_and_typing_is_forgiving():
    made = {codes.new_code() for _ in range(200)}
    assert len(made) == 200  # random: no two alike in 200 (32⁶ codes)
    for code in made:
        assert len(code) == 6 and not set(code) & set("ILOU") and set(code) <= set(codes.ALPHABET)
    assert codes.normalize("7kq 2m9") == "7KQ2M9"
    assert codes.normalize("7KQ-2M9") == "7KQ2M9"
    assert codes.normalize("o1ilL0") == "011110"  # O read as 0, I and L as 1
    for bad in ("7KQ2M", "7KQ2M99", "7KQ2MU", "", None, 123456, "7KQ 2M!", "x" * 100):
        assert codes.normalize(bad) is None, bad
    assert codes.spaced("7KQ2M9") == "7KQ 2M9"


def test_every_change_raises_the_version_and_only_the_host_may_change(room):
    code, key = room.create(VIEW, page="every-pair")
    assert codes.normalize(code) == code and room.version(code) == 1
    assert room.state(code).view == VIEW and room.state(code).page == "every-pair"
    room.move(code, key, "neighbours")
    assert room.version(code) == 2 and room.state(code).page == "neighbours"
    for forged in ("", "not-the-key", key + "x", None, 12):
        with pytest.raises(NotHost):
            room.move(code, forged, "linear")
    other, other_key = room.create(VIEW, page="every-pair")
    with pytest.raises(NotHost):  # another class's key moves nothing here
        room.move(code, other_key, "linear")
    assert room.state(code).page == "neighbours" and room.version(code) == 2
    assert room.is_host(code, key) and not room.is_host(code, other_key)
    room.set_view(code, key, {**VIEW, "settings": {"s3_w": 16}})
    assert room.state(code).view["settings"] == {"s3_w": 16} and room.version(code) == 3


def test_an_answer_or_a_new_student_raises_the_tally_never_the_version_a_student_follows(room):
    """Two versions, read in one query: what a student follows (the step, the text and
    settings, a vote's state) and what only the teacher's panel shows (answers, new
    students). A student coming back (presence) raises neither."""
    code, key = room.create(VIEW, page="every-pair")
    assert room.versions(code) == (1, 0, 0)
    room.join(code, "student-aaaa")
    room.join(code, "student-bbbb")
    assert room.versions(code) == (1, 2, 0)  # two new students: the teacher's count moved, nothing else
    room.join(code, "student-aaaa")  # still here
    assert room.versions(code) == (1, 2, 0)
    vote = room.open_vote(code, key, "every-pair", "s1.q", QUESTION)
    assert room.versions(code) == (2, 2, 0)  # a vote opened: every student's page shows it
    assert room.answer(code, vote, "student-aaaa", 0) == "taken"
    assert room.answer(code, vote, "student-bbbb", 2) == "taken"
    assert room.answer(code, vote, "student-bbbb", 1) == "again"  # refused: nothing moves
    assert room.versions(code) == (2, 4, 0)
    assert room.set_state(code, key, vote, "closed") == 3 == room.version(code)
    assert room.lead(code, key, "nearly-empty", {**VIEW, "settings": {"s3_w": 4}}) == 4
    found = room.state(code)
    assert (found.page, found.view["settings"], found.version, found.tally) == ("nearly-empty", {"s3_w": 4}, 4, 4)
    assert room.versions("ZZZZZZ") is None


def test_the_store_keeps_only_the_host_keys_hash(room, where):
    code, key = room.create(VIEW, page="every-pair")
    with room.store.reading() as db:  # every value of every row of the class's tables
        raw = "".join(str(v) for table in ("classes", "students", "votes")
                      for row in db.execute(f"SELECT * FROM {table}").fetchall() for v in row)
    assert key not in raw and classes.host_hash(key) in raw
    if not where.startswith("postgresql://"):  # nor in the file's bytes, its log included
        path = Path(where)
        data = path.read_bytes() + (Path(f"{where}-wal").read_bytes() if Path(f"{where}-wal").exists() else b"")
        assert key.encode() not in data


def test_one_answer_per_student_per_vote_and_none_once_closed(room):
    code, key = room.create(VIEW, page="every-pair")
    students = [answers.new_student() for _ in range(3)]
    for s in students:
        assert room.join(code, s) == IN
    vote = room.open_vote(code, key, "every-pair", "s1.q", QUESTION)
    # the open question opened again (a click a rerun replays, a second tab): the same vote, no round 2
    assert room.open_vote(code, key, "every-pair", "s1.q", QUESTION) == vote
    assert room.state(code).vote_on("s1.q").round == 1
    assert room.answer(code, vote, students[0], 1) == "taken"
    assert room.answer(code, vote, students[0], 2) == "again"  # no second answer, no change
    assert room.answer(code, vote, students[1], 0) == "taken"
    assert room.answer(code, vote, "never-joined-1", 0) == "unknown"
    assert room.answer(code, vote, students[2], 7) == "unknown"  # no such option
    assert room.counts(code, vote) == [1, 1, 0]
    room.set_state(code, key, vote, "closed")
    assert room.answer(code, vote, students[2], 1) == "closed"
    assert room.counts(code, vote) == [1, 1, 0] and room.my_answer(code, vote, students[0]) == 1
    room.set_state(code, key, vote, "revealed")
    assert room.state(code).vote_on("s1.q").state == "revealed"
    second = room.open_vote(code, key, "every-pair", "s1.q", QUESTION)  # after discussing: round 2, its own answers
    assert room.state(code).vote_on("s1.q").round == 2 and second != vote
    assert room.answer(code, second, students[0], 2) == "taken" and room.counts(code, second) == [0, 0, 1]
    assert room.counts(code, vote) == [1, 1, 0]  # the first vote as it was
    with pytest.raises(NotHost):
        room.set_state(code, "a student's guess", second, "revealed")


def test_a_vote_holds_its_steps_page_from_open_to_reveal_and_a_revealed_question_stays_revealed(room):
    """What a member's page of a step may not show: the latest vote on each of its questions
    while it is open, or closed and not yet revealed (the discussion, a second vote); once a
    question is revealed, a second vote on it holds the page only while it is open."""
    code, key = room.create(VIEW, page="every-pair")
    held = lambda page=None: [(v.qid, v.round, v.state) for v in room.state(code).unrevealed(page)]  # noqa: E731
    assert held() == [] and held("every-pair") == []
    first = room.open_vote(code, key, "every-pair", "s1.q", QUESTION)
    assert held("every-pair") == [("s1.q", 1, "open")] and held() == held("every-pair") and held("nearly-empty") == []
    room.set_state(code, key, first, "closed")
    assert held("every-pair") == [("s1.q", 1, "closed")]  # closed for the discussion: still held
    again = room.open_vote(code, key, "every-pair", "s1.q", QUESTION)
    assert held("every-pair") == [("s1.q", 2, "open")]
    room.set_state(code, key, again, "closed")
    assert held("every-pair") == [("s1.q", 2, "closed")]
    other = room.open_vote(code, key, "nearly-empty", "s2.q", QUESTION)  # the teacher moved on without revealing
    assert held("every-pair") == [("s1.q", 2, "closed")] and held("nearly-empty") == [("s2.q", 1, "open")]
    assert len(held()) == 2
    room.set_state(code, key, again, "revealed")
    assert held("every-pair") == [] and held() == [("s2.q", 1, "open")]
    room.set_state(code, key, other, "revealed")
    late = room.open_vote(code, key, "nearly-empty", "s2.q", QUESTION)  # a second vote after the reveal
    assert held("nearly-empty") == [("s2.q", 2, "open")]
    room.set_state(code, key, late, "closed")
    assert held() == []  # its answer is known already


def test_a_vote_keeps_its_own_copy_of_the_question(room):
    code, key = room.create(VIEW, page="nearly-empty")
    asked = Asked.from_json(copy.deepcopy(ASKED))
    vote = room.open_vote(code, key, "nearly-empty", "s2.q", asked)
    asked.text["en"] = "changed later"  # the caller's words, changed after the vote opened
    assert room.state(code).vote_on("s2.q").question == QUESTION
    assert room.state(code).votes[0].vote == vote


def test_seats_follow_presence_and_a_student_comes_back_as_themselves_while_there_is_room(room, monkeypatch):
    """A seat is held by a student seen in the last 3 minutes: one who left gives theirs
    up, comes back as the same student while a seat is free, and is told the class is
    full when none is."""
    monkeypatch.setattr(classes, "MAX_STUDENTS", 3)
    code, _ = room.create(VIEW, page="every-pair", now=0.0)
    ids = [f"student-{i:04d}" for i in range(3)]
    assert [room.join(code, s, now=0.0) for s in ids] == [IN] * 3
    assert room.join(code, "student-late", now=10.0) == FULL  # three seats held
    assert room.join(code, ids[0], now=10.0) == IN  # one already in is still in
    for s in ids[:2]:
        room.join(code, s, now=170.0)  # two stay (their polls write presence)
    assert room.join(code, "student-late", now=200.0) == IN  # ids[2], unseen for 200 s, gave up its seat
    assert room.join(code, ids[2], now=201.0) == NO_SEAT  # back, and every seat taken
    room.join(code, ids[0], now=340.0)
    room.join(code, "student-late", now=340.0)
    assert room.join(code, ids[2], now=400.0) == IN  # ids[1] left at 170: a seat for the one coming back
    assert room.join("ZZZZZZ", ids[0]) == UNKNOWN  # no such class


def test_presence_counts_students_seen_lately(room):
    code, _ = room.create(VIEW, page="every-pair", now=1000.0)
    room.join(code, "student-aaaa", now=1000.0)
    room.join(code, "student-bbbb", now=1040.0)
    assert room.present(code, since=1030.0) == 1 and room.present(code, since=900.0) == 2


def test_a_class_untouched_for_twelve_hours_ends_with_its_answers(room):
    code, key = room.create(VIEW, page="every-pair", now=0.0)
    room.join(code, "student-aaaa", now=0.0)
    vote = room.open_vote(code, key, "every-pair", "s1.q", QUESTION, now=10.0)
    room.answer(code, vote, "student-aaaa", 0, now=20.0)
    fresh, _ = room.create(VIEW, page="every-pair", now=12 * 3600.0)
    assert room.expire(now=12 * 3600.0 + 21) == 1
    assert room.state(code) is None and room.version(code) is None and room.counts(code, vote) == []
    assert room.state(fresh) is not None


def test_ending_a_class_deletes_it_and_needs_the_host_key(room):
    code, key = room.create(VIEW, page="every-pair")
    with pytest.raises(NotHost):
        room.end(code, "guess")
    room.end(code, key)
    assert room.state(code) is None


ANSWERING = textwrap.dedent("""
    import sys
    from server.classes import Classes
    from server.store import store_at
    room = Classes(store_at(sys.argv[1]))
    code, vote = sys.argv[2], int(sys.argv[3])
    said = [room.answer(code, vote, s, 0) for s in sys.argv[4:]]
    print(",".join(said))
""")


def test_two_processes_answering_at_once_keep_one_answer_per_student(room, where):
    code, key = room.create(VIEW, page="every-pair")
    students = [f"student-{i:04d}" for i in range(40)]
    for s in students:
        room.join(code, s)
    vote = room.open_vote(code, key, "every-pair", "s1.q", QUESTION)
    procs = [subprocess.Popen([sys.executable, "-c", ANSWERING, where, code, str(vote),
                               *students], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].strip().split(",") for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for i in range(len(students)):  # each student's answer taken by exactly one of the two
        assert sorted((outs[0][i], outs[1][i])) == ["again", "taken"]
    assert room.counts(code, vote) == [40, 0, 0]


def test_the_poll_moves_a_following_student_to_the_teachers_step_and_nothing_else():
    student = follow.Seat(teacher=False, following=True, page=2, seen_version=5)
    assert follow.decide(5, 3, student) == (follow.STAY, None)  # nothing changed since the last drawing
    assert follow.decide(6, 3, student) == (follow.MOVE, 3)
    assert follow.decide(6, 2, student) == (follow.REFRESH, None)  # same step: a vote or a count moved
    exploring = follow.Seat(teacher=False, following=False, page=2, seen_version=5)
    assert follow.decide(6, 3, exploring) == (follow.STAY, None)
    teacher = follow.Seat(teacher=True, following=False, page=3, seen_version=5)
    assert follow.decide(6, 3, teacher) == (follow.REFRESH, None)
    assert follow.decide(None, None, student) == (follow.GONE, None)
    assert follow.presence_due(None, 0.0) and not follow.presence_due(100.0, 114.9)
    assert follow.presence_due(100.0, 115.0)


# The classes' tables exactly as the release before wrote them (layout 1: a vote named
# only its step), kept here as text: a store it wrote must open with nothing lost.
RELEASE_1 = (
    """CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, host TEXT NOT NULL, view TEXT NOT NULL, step INTEGER NOT NULL,
        version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS students (
        code TEXT NOT NULL, student TEXT NOT NULL, seen REAL NOT NULL, PRIMARY KEY (code, student))""",
    """CREATE TABLE IF NOT EXISTS votes (
        code TEXT NOT NULL, vote INTEGER NOT NULL, step INTEGER NOT NULL, round INTEGER NOT NULL,
        state TEXT NOT NULL, question TEXT NOT NULL, PRIMARY KEY (code, vote))""",
    """CREATE TABLE IF NOT EXISTS answers (
        code TEXT NOT NULL, vote INTEGER NOT NULL, student TEXT NOT NULL, choice INTEGER NOT NULL,
        at REAL NOT NULL, PRIMARY KEY (code, vote, student))""",
)
# ... and as the release before this one wrote them (layout 2: a vote names its question;
# one version a class, raised by every change and every answer)
RELEASE_2 = (
    """CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, host TEXT NOT NULL, view TEXT NOT NULL, step INTEGER NOT NULL,
        version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS students (
        code TEXT NOT NULL, student TEXT NOT NULL, seen REAL NOT NULL, PRIMARY KEY (code, student))""",
    """CREATE TABLE IF NOT EXISTS votes (
        code TEXT NOT NULL, vote INTEGER NOT NULL, step INTEGER NOT NULL, round INTEGER NOT NULL,
        state TEXT NOT NULL, question TEXT NOT NULL, qid TEXT NOT NULL, PRIMARY KEY (code, vote))""",
    """CREATE TABLE IF NOT EXISTS answers (
        code TEXT NOT NULL, vote INTEGER NOT NULL, student TEXT NOT NULL, choice INTEGER NOT NULL,
        at REAL NOT NULL, PRIMARY KEY (code, vote, student))""",
)
# ... and as the release of layout 3 wrote them (two more versions, the door, the room, seats)
RELEASE_3 = (
    """CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, host TEXT NOT NULL, view TEXT NOT NULL, step INTEGER NOT NULL,
        version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL, tally INTEGER NOT NULL DEFAULT 0,
        door INTEGER NOT NULL DEFAULT 1, room INTEGER NOT NULL DEFAULT 0, room_version INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS students (
        code TEXT NOT NULL, student TEXT NOT NULL, seen REAL NOT NULL, joined REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (code, student))""",
    """CREATE TABLE IF NOT EXISTS votes (
        code TEXT NOT NULL, vote INTEGER NOT NULL, step INTEGER NOT NULL, round INTEGER NOT NULL,
        state TEXT NOT NULL, question TEXT NOT NULL, qid TEXT NOT NULL, seats INTEGER NOT NULL DEFAULT 0,
        opened REAL NOT NULL DEFAULT 0, PRIMARY KEY (code, vote))""",
    """CREATE TABLE IF NOT EXISTS answers (
        code TEXT NOT NULL, vote INTEGER NOT NULL, student TEXT NOT NULL, choice INTEGER NOT NULL,
        at REAL NOT NULL, PRIMARY KEY (code, vote, student))""",
)
# ... and as the release of layout 4 wrote them (why a class ended, for its teacher): the release
# before pages were named by their ids
RELEASE_4 = RELEASE_3 + ("""CREATE TABLE IF NOT EXISTS ended_classes (
        code TEXT PRIMARY KEY, reason TEXT NOT NULL, at REAL NOT NULL)""",)
# ... and as the release of layout 5 wrote them (pages named by their ids): the release before
# an answer could carry a reason
RELEASE_5 = (
    """CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, host TEXT NOT NULL, view TEXT NOT NULL,
        version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL, tally INTEGER NOT NULL DEFAULT 0,
        door INTEGER NOT NULL DEFAULT 1, room INTEGER NOT NULL DEFAULT 0, room_version INTEGER NOT NULL DEFAULT 0,
        page TEXT NOT NULL DEFAULT '')""",
    RELEASE_3[1],
    """CREATE TABLE IF NOT EXISTS votes (
        code TEXT NOT NULL, vote INTEGER NOT NULL, round INTEGER NOT NULL,
        state TEXT NOT NULL, question TEXT NOT NULL, qid TEXT NOT NULL, seats INTEGER NOT NULL DEFAULT 0,
        opened REAL NOT NULL DEFAULT 0, page TEXT NOT NULL DEFAULT '', PRIMARY KEY (code, vote))""",
    RELEASE_3[3],
    RELEASE_4[4],
)
OLD_KEY = "a-host-key-the-teachers-session-kept"


def _write_release(where, layout: int = 1) -> str:
    """A store as an earlier release left it mid-class (``layout`` 1 to 5): a share link,
    a class at step 3 with three students, step 3's question voted twice (closed, then
    revealed) and step 1's open; returns the share link's key."""
    import json as json_lib

    store = store_at(where)
    link = store.put(VIEW)
    question = json_lib.dumps(ASKED)  # as an earlier release wrote it
    with store.transaction() as db:
        for statement in (RELEASE_1, RELEASE_2, RELEASE_3, RELEASE_4, RELEASE_5)[layout - 1]:
            db.execute(statement)
        db.execute("INSERT INTO atlas_schema VALUES ('classes', ?) ON CONFLICT(part) DO UPDATE SET version = ?",
                   (layout, layout))
        by_id = layout >= 5  # a page by its id, not its number
        db.execute(f"INSERT INTO classes (code, host, view, {'page' if by_id else 'step'}, version, created, touched) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)",
                   ("7KQ2M9", classes.host_hash(OLD_KEY), json_lib.dumps(VIEW),
                    class_layout.NUMBERED_PAGES[3] if by_id else 3, 9, 100.0, 1e9 + 0.25))
        for s in ("ana-0001", "bea-0002", "caio-003"):
            db.execute("INSERT INTO students (code, student, seen) VALUES (?, ?, ?)", ("7KQ2M9", s, 1e9))
        for vote, step, rnd, state in ((1, 3, 1, "closed"), (2, 3, 2, "revealed"), (3, 1, 1, "open")):
            row = ("7KQ2M9", vote, class_layout.NUMBERED_PAGES[step] if by_id else step, rnd, state, question) + (
                () if layout == 1 else (FIRST[step],))
            columns = f"code, vote, {'page' if by_id else 'step'}, round, state, question" + (
                "" if layout == 1 else ", qid")
            db.execute(f"INSERT INTO votes ({columns}) VALUES ({', '.join('?' * len(row))})", row)
        for vote, student, choice in ((1, "ana-0001", 0), (1, "bea-0002", 1), (2, "ana-0001", 1), (2, "bea-0002", 1),
                                      (2, "caio-003", 2), (3, "ana-0001", 2)):
            db.execute("INSERT INTO answers VALUES (?, ?, ?, ?, ?)", ("7KQ2M9", vote, student, choice, 1e9))
    return link


def _check_release_kept(room: Classes, link: str) -> None:
    found = room.state("7KQ2M9")  # step 3 and step 1 then: the same pages, by their ids now
    assert found.page == "neighbours" and found.version == 9 and found.view == VIEW and found.tally == 0
    assert [(v.vote, v.page, v.qid, v.round, v.state) for v in found.votes] == [
        (1, "neighbours", "s3.reach", 1, "closed"), (2, "neighbours", "s3.reach", 2, "revealed"),
        (3, "every-pair", "s1.doubling", 1, "open")]
    assert all(v.question == QUESTION for v in found.votes)
    assert room.all_counts("7KQ2M9") == {1: [1, 1, 0], 2: [0, 2, 1], 3: [0, 0, 1]}
    assert room.is_host("7KQ2M9", OLD_KEY) and not room.is_host("7KQ2M9", OLD_KEY + "x")
    assert room.my_answer("7KQ2M9", 3, "ana-0001") == 2
    assert room.store.get(link) == VIEW
    with room.store.reading() as db:  # the seconds kept to the quarter (PostgreSQL: DOUBLE PRECISION)
        assert db.execute("SELECT touched FROM classes WHERE code = '7KQ2M9'").fetchone()[0] == 1e9 + 0.25


@pytest.mark.parametrize("layout", [1, 2, 3, 4, 5])
def test_a_store_written_by_an_earlier_release_opens_with_nothing_lost(where, layout):
    """Layout 1 to 5 (5: the release before an answer had a reason) → today's once, in one transaction,
    on both backends: every link, class,
    vote (named by its step's first question where layout 1 named none), round, state,
    answer and host key as it was, the tally at 0; the class goes on (an answer to its
    open vote raises the tally, a third round on the question voted twice); opening it
    again upgrades nothing."""
    link = _write_release(where, layout)
    room = Classes(store_at(where))
    assert room.store.version_of("classes") == class_layout.VERSION
    _check_release_kept(room, link)
    assert room.answer("7KQ2M9", 3, "bea-0002", 0, reason="the grid is a square") == "taken"
    assert room.versions("7KQ2M9") == (9, 1, 0)
    # the answers kept before have no reason; the one written now is there, shown to no one
    assert room.reasons("7KQ2M9", OLD_KEY, 3) == [("bea-0002", 0, "the grid is a square", False)]
    assert room.reasons("7KQ2M9", OLD_KEY, 1) == [] and room.state("7KQ2M9").shown == {}
    assert room.answer("7KQ2M9", 2, "bea-0002", 0) == "closed"
    assert room.open_vote("7KQ2M9", OLD_KEY, "neighbours", "s3.reach", QUESTION) == 4  # the open vote closes first
    assert room.state("7KQ2M9").vote_on("s3.reach").round == 3 and room.state("7KQ2M9").votes[2].state == "closed"
    again = Classes(store_at(where))  # a second start: nothing run twice
    layout = class_layout
    assert again.store.create("classes", layout.VERSION, layout.SCHEMA, layout.upgrades()) == layout.VERSION
    assert [v.qid for v in again.state("7KQ2M9").votes] == ["s3.reach", "s3.reach", "s1.doubling", "s3.reach"]
    assert again.state("7KQ2M9").page == "neighbours"


UPGRADING = textwrap.dedent("""
    import sys
    from server.classes import Classes
    from server.store import store_at
    room = Classes(store_at(sys.argv[1]))
    print(room.store.version_of("classes"))
""")


def test_two_processes_opening_the_release_befores_store_at_once_upgrade_it_once(where):
    link = _write_release(where, 2)
    procs = [subprocess.Popen([sys.executable, "-c", UPGRADING, where], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-800:] for _, err in outs]
    assert [out.strip() for out, _ in outs] == [str(class_layout.VERSION)] * 2
    _check_release_kept(Classes(store_at(where)), link)


def test_a_store_of_a_newer_release_is_refused_and_left_as_it_is(where):
    from server.store import StoreError

    store = store_at(where)
    Classes(store)
    with store.transaction() as db:
        db.execute("UPDATE atlas_schema SET version = ? WHERE part = 'classes'", (class_layout.VERSION + 1,))
    with pytest.raises(StoreError, match="newer release"):
        Classes(store_at(where))
    assert store.version_of("classes") == class_layout.VERSION + 1


def _seated(room, n=3):
    code, key = room.create(VIEW, page="every-pair")
    students = [f"student-{i:03d}" for i in range(n)]
    for student in students:
        assert room.join(code, student) == IN
    return code, key, students


def test_a_reason_goes_with_the_first_vote_and_no_student_sees_it_until_the_teacher_shows_it(room):
    code, key, (ana, bea, caio) = _seated(room)
    first = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION)
    # plain text on one line: line breaks and control characters become spaces
    assert room.answer(code, first, ana, 1, reason="  each row\nhas n cells\x00 ") == "taken"
    assert room.answer(code, first, bea, 0, reason="x" * (answers.MAX_REASON + 1)) == "unknown"  # too long
    assert room.my_answer(code, first, bea) is None  # nothing taken with it
    assert room.answer(code, first, bea, 0, reason="é" * answers.MAX_REASON) == "taken"
    assert room.answer(code, first, caio, 2) == "taken"  # a reason is optional
    before = room.version(code)
    assert room.state(code).shown == {} and room.read(code, ana).shown == {}  # nothing shown yet
    assert room.reasons(code, key, first) == [(ana, 1, "each row has n cells", False),
                                              (bea, 0, "é" * answers.MAX_REASON, False)]
    for forged in ("", key + "x", None):
        with pytest.raises(NotHost):
            room.reasons(code, forged, first)
        with pytest.raises(NotHost):
            room.show_reason(code, forged, first, ana, True)
    # the teacher shows one: every member's page reads it (the version moves), and only it
    assert room.show_reason(code, key, first, ana, True) == before + 1
    assert room.state(code).shown == {first: ((1, "each row has n cells"),)}
    assert room.read(code, caio).shown == room.state(code).shown
    room.show_reason(code, key, first, caio, True)  # no reason written: nothing to show
    assert room.state(code).shown == {first: ((1, "each row has n cells"),)}
    room.show_reason(code, key, first, ana, False)  # taken back
    assert room.state(code).shown == {}
    # the second vote after the discussion takes answers, not reasons
    room.set_state(code, key, first, "closed")
    second = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION)
    assert second != first and room.state(code).votes[-1].round == 2
    assert room.answer(code, second, ana, 1, reason="still n²") == "unknown"
    assert room.answer(code, second, ana, 1) == "taken"
    for bad in (None, 3, b"bytes"):
        assert room.answer(code, second, bea, 1, reason=bad) == "unknown"
    room.end(code, key)  # the reasons end with the class
    with room.store.reading() as db:
        assert db.execute("SELECT COUNT(*) FROM answers WHERE code = ?", (code,)).fetchone()[0] == 0


def test_reasons_from_one_address_are_rate_limited_and_a_refused_one_takes_no_answer(room, monkeypatch):
    from server import limits

    monkeypatch.setattr(limits, "reasons", lambda: limits.Limit("reason", burst=2, every=1000.0))
    code, key, students = _seated(room, 4)
    vote = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION)
    here, there = "198.51.100.7", "203.0.113.9"
    assert [room.answer(code, vote, s, 1, reason="n² cells", address=here, now=1e9) for s in students[:3]] == [
        "taken", "taken", "busy"]
    assert room.my_answer(code, vote, students[2]) is None
    assert room.answer(code, vote, students[2], 1, address=here, now=1e9) == "taken"  # without a reason: counted
    assert room.answer(code, vote, students[3], 1, reason="another network", address=there, now=1e9) == "taken"


def test_the_votes_csv_holds_each_options_reasons_and_no_cell_a_spreadsheet_runs():
    import csv
    import io

    from server import exports
    from server.class_reads import ClassState, Vote

    q = Asked.from_json({"text": "?", "options": ["2", "4", "-8"], "answer": 1})
    found = ClassState("7KQ2M9", "every-pair", 3, VIEW, (Vote(1, "every-pair", "s1.doubling", 1, "closed", q),),
                       counts={1: [1, 3, 0]})
    answers = [(1, "a", 1, "=HYPERLINK(\"http://x\")"), (1, "b", 1, "it is a square"), (1, "c", 1, "+1 per token"),
               (1, "d", 0, "@SUM(A1)"), (1, "e", 1, "")]
    rows = list(csv.DictReader(io.StringIO(exports.votes_csv(found, answers))))
    assert [r["reasons"] for r in rows] == [
        "'@SUM(A1)", "'=HYPERLINK(\"http://x\")\nit is a square\n'+1 per token", ""]
    assert rows[2]["option"] == "'-8"  # any text cell, not only a reason
    assert [r["count"] for r in rows] == ["1", "3", "0"] and "a" not in {v for r in rows for v in r.values()}
    for cell in ("=1+1", "+1", "-1", "@x", "\tx", "\rx"):
        assert exports.neutral(cell) == "'" + cell
    assert exports.neutral("a=1") == "a=1" and exports.neutral(-1) == -1


ESTIMATE = Asked.from_json({"text": "How many cells on a text twice as long?", "kind": "estimate", "value": 100.0,
                            "options": list(answers.ESTIMATE_OPTIONS), "answer": 1})


def test_an_estimate_is_a_positive_number_right_within_a_factor_of_1_5_and_hidden_until_its_vote_closes(room):
    """The rule by hand: 100 measured, so 66.67 … 150 count as right, both ends included;
    the class's numbers are read by no one while the vote is open, then by every member,
    sorted and without ids; each student reads their own."""
    code, key, (ana, bea, caio, dora, edu) = _seated(room, 5)
    vote = room.open_vote(code, key, "every-pair", "s1.cells_estimate", ESTIMATE)
    for bad in (None, 0, -5, float("nan"), float("inf"), "150", True, answers.MAX_ESTIMATE * 2):
        assert room.answer(code, vote, ana, None, number=bad) == "unknown", bad
    assert room.answer(code, vote, ana, 0, number=150) == "taken"  # its choice is worked out, not read
    assert room.answer(code, vote, bea, None, number=150.01) == "taken"
    assert room.answer(code, vote, caio, None, number=100 / 1.5) == "taken"
    assert room.answer(code, vote, dora, None, number=66.6) == "taken"
    assert room.answer(code, vote, edu, None, number=3.5, reason="why") == "unknown"  # no reason with an estimate
    assert room.answer(code, vote, ana, None, number=120) == "again"
    assert room.read(code, ana).guesses == {} and room.read(code).guesses == {}  # open: no one's numbers
    assert room.own(code, ana) == ({vote: 1}, {vote: 150.0})
    assert room.own(code, bea) == ({vote: 0}, {vote: 150.01})
    room.set_state(code, key, vote, "closed")
    read = room.read(code, dora)
    assert read.guesses == {vote: (66.6, 100 / 1.5, 150.0, 150.01)}
    assert read.counts[vote] == [2, 2]  # off: 150.01 and 66.6; within: 150 and 66.67
    assert read.mine_numbers == {vote: 66.6} and read.mine == {vote: 0}
    import csv
    import io

    from server import exports

    rows = list(csv.DictReader(io.StringIO(exports.votes_csv(read, room.answers_of(code)))))
    assert [(r["option"], r["count"], r["measured_answer"], r["estimates"]) for r in rows] == [
        ("off", "2", "0", "150.01\n66.6"), ("within", "2", "1", f"150.0\n{100 / 1.5!r}")]  # in the order sent
    options = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION)
    assert room.answer(code, options, ana, 1, number=4.0) == "unknown"  # a number on an options vote
    assert room.answer(code, options, ana, 1) == "taken"


def test_the_shares_csv_holds_each_questions_first_second_and_matched_share(room):
    from server import exports

    code, key, (ana, bea, caio) = _seated(room)
    first = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION)
    for s, c in zip((ana, bea, caio), (1, 0, 0)):
        room.answer(code, first, s, c)
    room.set_state(code, key, first, "closed")
    second = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION)
    for s, c in zip((ana, bea, caio), (1, 1, 0)):
        room.answer(code, second, s, c)
    room.set_state(code, key, second, "revealed")
    matched = room.open_vote(code, key, "every-pair", "s1.tripling",
                             dataclasses.replace(QUESTION, matches="s1.doubling"))
    room.answer(code, matched, ana, 1)
    estimate = room.open_vote(code, key, "every-pair", "s1.cells_estimate", ESTIMATE)
    for s, x in zip((ana, bea), (90, 400)):
        room.answer(code, estimate, s, None, number=x)
    room.set_state(code, key, estimate, "closed")
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(exports.shares_csv(room.read(code)))))
    assert [list(r.values()) for r in rows] == [
        ["s1.doubling", "every-pair", "0.3333", "3", "0", "0.6667", "3", "0", "s1.tripling", "1.0", "1", "0"],
        ["s1.cells_estimate", "every-pair", "0.5", "2", "0", "", "", "", "", "", "", ""]]


def test_a_classs_link_token_and_its_seats_are_credentials_only_the_right_ones_pass(room):
    """What lets a student in whatever wrong codes came from their network: the join link's
    token (made from the stored host hash; only the teacher's session can make it) and a
    seat the class already has. Each is one read, and a wrong one is refused."""
    import hashlib

    from server.class_reads import link_token
    from server.classes import host_hash

    code, key = room.create({"text": "x"}, "every-pair")
    other, other_key = room.create({"text": "y"}, "every-pair")
    token = link_token(host_hash(key))
    # by hand: the token is the first 24 hex digits of SHA-256("join:" + SHA-256(key))
    assert token == hashlib.sha256(("join:" + hashlib.sha256(key.encode()).hexdigest()).encode()).hexdigest()[:24]
    assert room.link_token_ok(code, token)
    assert not room.link_token_ok(other, token)  # another class's token
    assert not room.link_token_ok(code, token[:-1] + ("0" if token[-1] != "0" else "1"))
    assert not room.link_token_ok(code, None) and not room.link_token_ok(code, "")
    assert not room.link_token_ok("ZZZZZZ", token)
    student = answers.new_student()
    assert not room.has_seat(code, student)
    assert room.join(code, student) == IN
    assert room.has_seat(code, student) and not room.has_seat(other, student)
    assert not room.has_seat(code, "../x") and not room.has_seat(code, None)


@pytest.mark.parametrize("text, lang, expected", [
    ("1,5", "pt", 1.5), ("2.098.176", "pt", 2098176.0), ("1.000,5", "pt", 1000.5), ("1.5", "pt", None),
    ("1.5", "en", 1.5), ("2,098,176", "en", 2098176.0), ("1,5", "en", None), ("1,000.5", "en", 1000.5),
    ("１．５", "ja", 1.5), ("１，０００", "ja", 1000.0), (" 12 ", "en", 12.0), ("1 000", "pt", 1000.0),
    ("1e6", "pt", 1e6), ("2.5E-3", "ja", 0.0025), ("1e-300", "en", 1e-300),
    ("0", "en", None), ("-3", "en", None), ("abc", "en", None), ("nan", "en", None), ("inf", "pt", None),
    ("1e400", "en", None), ("", "en", None), (None, "en", None),
])
def test_an_estimate_is_read_as_a_reader_of_its_language_writes_numbers(text, lang, expected):
    """Each expected value by hand: a pt reader's comma is the decimal mark and a dot groups
    thousands; an en reader's the other way round; full-width digits read as digits; a
    number that is not positive and finite, or not one in the language's form, is None."""
    assert answers.read_number(text, lang) == expected


def test_a_crowd_that_joins_while_a_vote_is_open_is_counted_apart_from_the_class_seated_when_it_opened(room):
    """Thirty students seated, 18 of them right; then one address's 130 students join while
    the vote is open and 123 of them answer the first option. The vote's result (chart,
    summary, CSV) is the seated class's: 18 of 30 right, 60 %; the 123 stand apart, by
    option, in the CSV's own column."""
    import csv
    import io

    from server import exports

    code, key = room.create(VIEW, page="every-pair", now=0.0)
    seated = [f"pupil-{i:04d}" for i in range(30)]
    for s in seated:
        assert room.join(code, s, now=10.0) == IN
    vote = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION, now=20.0)
    right = QUESTION.answer
    for i, s in enumerate(seated):  # 18 right, 12 on the first wrong option
        assert room.answer(code, vote, s, right if i < 18 else (right + 1) % 3, now=30.0) == "taken"
    crowd = [f"mint-{i:05d}" for i in range(130)]
    for s in crowd:
        assert room.join(code, s, now=40.0) == IN
    for s in crowd[:123]:
        assert room.answer(code, vote, s, (right + 1) % 3, now=50.0) == "taken"
    room.set_state(code, key, vote, "revealed", now=60.0)
    found = room.read(code)
    assert sum(found.counts[vote]) == 153  # every answer kept …
    assert found.seated(vote)[right] == 18 and sum(found.seated(vote)) == 30  # … the result is the class's
    assert found.late[vote][(right + 1) % 3] == 123 and sum(found.late[vote]) == 123
    shares = list(csv.DictReader(io.StringIO(exports.shares_csv(found))))
    assert (shares[0]["first_right"], shares[0]["first_answered"], shares[0]["first_joined_during"]) == ("0.6", "30",
                                                                                                          "123")
    rows = list(csv.DictReader(io.StringIO(exports.votes_csv(found, room.answers_of(code)))))
    assert [(r["count"], r["joined_during_vote"]) for r in rows] == [
        (str(18 if i == right else 12 if i == (right + 1) % 3 else 0), str(123 if i == (right + 1) % 3 else 0))
        for i in range(3)]


def test_the_teacher_leaves_a_burst_out_of_the_open_vote_and_the_class_on_the_same_network_keeps_its_answers(room):
    """A class of 30 behind the school's one address, seated 10 s before the vote opens (the
    normal flow), 18 of them right; 40 students join from that address within 20 s of the
    class's own joins, while the vote is open, and 35 answer. The panel counts the burst from
    the vote's opening and says before she presses that 35 answers would be set aside;
    leaving the burst out keeps 30 of 30 seated answers (one of them still answers after),
    sets the 35 aside (kept, marked, in the CSV; counted nowhere), refuses the burst's next
    one, and can be undone while the vote is open; the next vote takes the burst's answers
    again, and only the host key can do it."""
    import csv
    import io

    from server import exports

    school = "198.51.100.7"
    code, key = room.create(VIEW, page="every-pair", now=0.0)
    seated = [f"pupil-{i:04d}" for i in range(30)]
    for s in seated:
        assert room.join(code, s, now=10.0, address=school) == IN
    assert room.pulse(code, 0.0, now=12.0).burst == 0  # a class arriving before its first vote is no burst
    vote = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION, now=20.0)
    right, wrong = QUESTION.answer, (QUESTION.answer + 1) % 3
    for i, s in enumerate(seated[:29]):  # 18 right, 11 wrong; the last one answers later
        assert room.answer(code, vote, s, right if i < 18 else wrong, now=21.0) == "taken"
    crowd = [f"mint-{i:05d}" for i in range(40)]
    for i, s in enumerate(crowd):
        assert room.join(code, s, now=22.0 + i * 0.25, address=school) == IN
    for s in crowd[:35]:
        assert room.answer(code, vote, s, wrong, now=33.0) == "taken"
    now = room.pulse(code, 0.0, now=34.0)  # the seated 30 joined 24 s ago: outside the window anyway
    assert (now.burst, now.vote, now.left_out, now.burst_since, now.would_set_aside) == (40, vote, 0, 22.0, 35)
    with pytest.raises(NotHost):
        room.leave_out(code, "not-the-key", vote, now.burst_network, now.burst_since)
    # even asked to leave out from before the vote opened, no seated student is touched
    assert room.leave_out(code, key, vote, now.burst_network, 0.0, now=35.0) == 40
    assert room.answer(code, vote, crowd[36], wrong, now=36.0) == "left_out"
    assert room.answer(code, vote, seated[29], right, now=36.0) == "taken"  # sat down before: not left out
    found = room.read(code)
    assert found.counts[vote][right] == 19 and found.counts[vote][wrong] == 11 and sum(found.counts[vote]) == 30
    assert sum(found.late.get(vote, [0])) == 0
    after = room.pulse(code, 0.0, now=37.0)
    assert (after.left_out, after.aside, after.answered) == (40, 35, 30)
    rows = list(csv.DictReader(io.StringIO(exports.votes_csv(found, room.answers_of(code)))))
    assert [int(r["left_out"]) for r in rows] == [35 if i == wrong else 0 for i in range(3)]
    assert [int(r["count"]) for r in rows] == found.counts[vote]
    # taken back while open: the 35 count again, and the burst may answer
    with pytest.raises(NotHost):
        room.take_back_left_out(code, "not-the-key", vote)
    assert room.take_back_left_out(code, key, vote, now=38.0)
    assert sum(room.read(code).counts[vote]) == 30 + 35
    assert room.answer(code, vote, crowd[36], wrong, now=39.0) == "taken"
    assert room.leave_out(code, key, vote, now.burst_network, now.burst_since, now=40.0) == 40  # and out again
    assert sum(room.read(code).counts[vote]) == 30
    room.set_state(code, key, vote, "closed", now=60.0)
    assert not room.take_back_left_out(code, key, vote, now=61.0)  # closed: no undo
    assert sum(room.read(code).counts[vote]) == 30
    nxt = room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION, now=70.0)
    assert room.answer(code, nxt, crowd[37], wrong, now=80.0) == "taken"  # this vote only
    assert room.leave_out(code, key, vote, now.burst_network, now.burst_since) == 0  # a closed vote: nothing


def test_the_teachers_pulse_counts_a_burst_from_one_network_and_more_students_than_she_expects(room):
    """Twelve students join from one network within 20 s, three from three others: the
    pulse names the burst (12); with 10 expected, 15 joined is more than she expects; the
    same twelve spread over minutes are no burst."""
    code, key = room.create(VIEW, page="every-pair", now=0.0)
    room.set_expected(code, key, 10, now=1.0)
    room.open_vote(code, key, "every-pair", "s1.doubling", QUESTION, now=50.0)  # bursts count from a vote on
    for i in range(12):
        assert room.join(code, f"crowd-{i:04d}", now=100.0 + i, address="198.51.100.20") == IN
    for i in range(3):
        assert room.join(code, f"home-{i:05d}", now=105.0, address=f"203.0.113.{i + 1}") == IN
    now = room.pulse(code, 0.0, now=112.0)
    assert (now.burst, now.joined, now.expected) == (12, 15, 10)
    later = room.pulse(code, 0.0, now=200.0)  # the window has passed
    assert later.burst == 0 and later.joined == 15
    other, other_key = room.create(VIEW, page="every-pair", now=0.0)
    room.open_vote(other, other_key, "every-pair", "s1.doubling", QUESTION, now=50.0)
    for i in range(12):  # one a minute from one network: a class arriving, no burst
        room.join(other, f"slow-{i:04d}", now=300.0 + 60 * i, address="198.51.100.20")
    assert room.pulse(other, 0.0, now=300.0 + 60 * 11).burst == 0
    with pytest.raises(NotHost):
        room.set_expected(code, "not-the-key", 3)
