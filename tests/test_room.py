"""The live class's store and rules, without Streamlit: join codes, versions, the host
key, one answer per vote, bounds and expiry, two processes at once, and what a poll
decides on each tick."""

import copy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from room import classes, codes, follow
from room.classes import Classes, ClassFull, NotHost
from room.store import store_at

VIEW = {"text": "A class's own text, long enough to read.", "lang": "en", "settings": {"s3_w": 8}}
QUESTION = {"text": "How much more work when the text doubles?", "options": ["2×", "4×", "8×"], "answer": 1}


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
    code, key = room.create(VIEW, step=1)
    assert codes.normalize(code) == code and room.version(code) == 1
    assert room.state(code).view == VIEW and room.state(code).step == 1
    room.move(code, key, 3)
    assert room.version(code) == 2 and room.state(code).step == 3
    for forged in ("", "not-the-key", key + "x", None, 12):
        with pytest.raises(NotHost):
            room.move(code, forged, 5)
    other, other_key = room.create(VIEW, step=1)
    with pytest.raises(NotHost):  # another class's key moves nothing here
        room.move(code, other_key, 5)
    assert room.state(code).step == 3 and room.version(code) == 2
    assert room.is_host(code, key) and not room.is_host(code, other_key)
    room.set_view(code, key, {**VIEW, "settings": {"s3_w": 16}})
    assert room.state(code).view["settings"] == {"s3_w": 16} and room.version(code) == 3


def test_the_store_keeps_only_the_host_keys_hash(room, where):
    code, key = room.create(VIEW, step=1)
    with room.store.reading() as db:  # every value of every row of the class's tables
        raw = "".join(str(v) for table in ("classes", "students", "votes")
                      for row in db.execute(f"SELECT * FROM {table}").fetchall() for v in row)
    assert key not in raw and classes.host_hash(key) in raw
    if not where.startswith("postgresql://"):  # nor in the file's bytes, its log included
        path = Path(where)
        data = path.read_bytes() + (Path(f"{where}-wal").read_bytes() if Path(f"{where}-wal").exists() else b"")
        assert key.encode() not in data


def test_one_answer_per_student_per_vote_and_none_once_closed(room):
    code, key = room.create(VIEW, step=1)
    students = [classes.new_student() for _ in range(3)]
    for s in students:
        assert room.join(code, s)
    vote = room.open_vote(code, key, 1, QUESTION)
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
    assert room.state(code).vote_on(1).state == "revealed"
    second = room.open_vote(code, key, 1, QUESTION)  # after discussing: round 2, its own answers
    assert room.state(code).vote_on(1).round == 2 and second != vote
    assert room.answer(code, second, students[0], 2) == "taken" and room.counts(code, second) == [0, 0, 1]
    assert room.counts(code, vote) == [1, 1, 0]  # the first vote as it was
    with pytest.raises(NotHost):
        room.set_state(code, "a student's guess", second, "revealed")


def test_a_vote_keeps_its_own_copy_of_the_question(room):
    code, key = room.create(VIEW, step=2)
    asked = copy.deepcopy(QUESTION)
    vote = room.open_vote(code, key, 2, asked)
    asked["text"] = "changed later"
    asked["options"].append("16×")  # the caller's list, changed after the vote opened
    assert room.state(code).vote_on(2).question == QUESTION
    assert room.state(code).votes[0].vote == vote


def test_a_class_holds_a_bounded_number_of_students(room, monkeypatch):
    monkeypatch.setattr(classes, "MAX_STUDENTS", 3)
    code, _ = room.create(VIEW, step=1)
    ids = [classes.new_student() for _ in range(3)]
    assert all(room.join(code, s) for s in ids)
    with pytest.raises(ClassFull):
        room.join(code, classes.new_student())
    assert room.join(code, ids[0])  # one already in may come back
    assert not room.join("ZZZZZZ", ids[0])  # no such class


def test_presence_counts_students_seen_lately(room):
    code, _ = room.create(VIEW, step=1, now=1000.0)
    room.join(code, "student-aaaa", now=1000.0)
    room.join(code, "student-bbbb", now=1040.0)
    assert room.present(code, since=1030.0) == 1 and room.present(code, since=900.0) == 2


def test_a_class_untouched_for_twelve_hours_ends_with_its_answers(room):
    code, key = room.create(VIEW, step=1, now=0.0)
    room.join(code, "student-aaaa", now=0.0)
    vote = room.open_vote(code, key, 1, QUESTION, now=10.0)
    room.answer(code, vote, "student-aaaa", 0, now=20.0)
    fresh, _ = room.create(VIEW, step=1, now=12 * 3600.0)
    assert room.expire(now=12 * 3600.0 + 21) == 1
    assert room.state(code) is None and room.version(code) is None and room.counts(code, vote) == []
    assert room.state(fresh) is not None


def test_ending_a_class_deletes_it_and_needs_the_host_key(room):
    code, key = room.create(VIEW, step=1)
    with pytest.raises(NotHost):
        room.end(code, "guess")
    room.end(code, key)
    assert room.state(code) is None


ANSWERING = textwrap.dedent("""
    import sys
    from room.classes import Classes
    from room.store import store_at
    room = Classes(store_at(sys.argv[1]))
    code, vote = sys.argv[2], int(sys.argv[3])
    said = [room.answer(code, vote, s, 0) for s in sys.argv[4:]]
    print(",".join(said))
""")


def test_two_processes_answering_at_once_keep_one_answer_per_student(room, where):
    code, key = room.create(VIEW, step=1)
    students = [f"student-{i:04d}" for i in range(40)]
    for s in students:
        room.join(code, s)
    vote = room.open_vote(code, key, 1, QUESTION)
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
