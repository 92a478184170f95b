"""What one script cannot do to a class, at the store (room.classes, both backends): mint
students without end, lock the room, outvote it, start classes without end, find a code
by guessing it; and what the teacher sees of it. The same through the app, with client
addresses as a proxy forwards them: tests/test_class_attacks.py."""

import threading
import time

import pytest

from room import classes, limits
from room.backend import Refused
from room.classes import BUSY, DOOR, FULL, IN, UNKNOWN, Classes
from room.store import store_at

VIEW = {"text": "A class's own text, long enough to read.", "lang": "en", "settings": {}}
QUESTION = {"text": "Which?", "options": ["a", "b", "c"], "answer": 1}
SCRIPT, SCHOOL, HOME = "203.0.113.9", "198.51.100.20", "192.0.2.44"


@pytest.fixture
def room(where):
    return Classes(store_at(where), {1: "s1.q"})


def test_a_script_minting_230_students_from_one_address_locks_out_no_real_student(room):
    """230 new ids from one address within seconds: the first 120 get in (a lecture hall
    behind one school NAT), the rest are refused as too many from there; a real student
    on another address still gets in; the script's address then gains one every 10 s."""
    code, _ = room.create(VIEW, step=1, now=0.0)
    said = [room.join(code, f"script-{i:05d}", now=i * 0.01, address=SCRIPT) for i in range(230)]
    assert said.count(IN) == limits.joins().burst == 120 and said.count(BUSY) == 110
    assert room.join(code, "a-real-student", now=5.0, address=HOME) == IN
    # 30 s after its 120th (at 1.19 s, ≈ 0.12 of a token left), the script's address has gained three more
    assert [room.join(code, f"script-late{k}", now=31.2, address=SCRIPT) for k in range(5)] == [IN] * 3 + [BUSY] * 2


def test_a_class_behind_one_school_address_gets_in_forty_within_a_minute_and_a_lecture_of_120(room):
    code, _ = room.create(VIEW, step=1, now=0.0)
    assert [room.join(code, f"pupil-{i:04d}", now=i * 1.5, address=SCHOOL) for i in range(40)] == [IN] * 40
    lecture, _ = room.create(VIEW, step=1, now=0.0)
    assert [room.join(lecture, f"hall-{i:04d}", now=0.1 * i, address="198.51.100.99") for i in range(120)] == [IN] * 120


def test_a_vote_takes_no_more_answers_than_the_seats_it_opened_with_plus_those_who_joined_since(room):
    """Five students seated when the vote opens, then a script's ids join (one address,
    rate-limited) and, as seats free by presence, more: the vote takes at most the five
    plus every student who joined after it opened, one answer each — and the script's
    ids, once gone, cannot answer again under new ids past what joining allows."""
    code, key = room.create(VIEW, step=1, now=0.0)
    for i in range(5):
        room.join(code, f"pupil-{i:04d}", now=1.0, address=SCHOOL)
    vote = room.open_vote(code, key, 1, "s1.q", QUESTION, now=2.0)
    burst = limits.joins().burst
    joined = [f"script-{i:05d}" for i in range(burst + 20) if room.join(code, f"script-{i:05d}", now=3.0,
                                                                         address=SCRIPT) == IN]
    assert len(joined) == burst
    taken = [room.answer(code, vote, s, 0, now=4.0) for s in joined]
    assert taken.count("taken") == burst  # each joined after the vote opened: each one answer
    pupils = [room.answer(code, vote, f"pupil-{i:04d}", 1, now=5.0) for i in range(5)]
    assert pupils == ["taken"] * 5
    assert room.answer(code, vote, joined[0], 1, now=5.0) == "again"
    # the script's seats lapse; its next ids join as the rate allows: never more answers than joins
    later = [f"again-{i:05d}" for i in range(30)]
    ins = [s for k, s in enumerate(later) if room.join(code, s, now=200.0 + k, address=SCRIPT) == IN]
    more = [room.answer(code, vote, s, 2, now=300.0) for s in ins]
    assert more.count("taken") == len(ins) == 22  # 197 s of refill: 19.7 tokens, then one more each 10 s
    assert sum(room.counts(code, vote)) == 5 + burst + len(ins)  # every answer is a join's (or a seat's at opening)
    with room.store.transaction() as db:  # an id that slipped in without joining (no seat, no count): refused
        db.execute("UPDATE votes SET seats = 0 WHERE code = ? AND vote = ?", (code, vote))
        db.execute("INSERT INTO students (code, student, seen, joined) VALUES (?, 'forged-0001', 500, 0)", (code,))
    assert room.answer(code, vote, "forged-0001", 0, now=501.0) == "full"


def test_the_teacher_closes_the_door_and_those_in_stay(room):
    code, key = room.create(VIEW, step=1, now=0.0)
    assert room.join(code, "pupil-0001", now=1.0) == IN
    before = room.versions(code)
    room.set_door(code, key, False, now=2.0)
    assert room.versions(code) == (before[0], before[1] + 1, before[2])  # her panel moved; no student's page
    assert room.join(code, "pupil-0002", now=3.0) == DOOR
    assert room.join(code, "pupil-0001", now=3.0) == IN  # already in: a reload keeps them
    assert room.state(code).door is False
    room.set_door(code, key, True, now=4.0)
    assert room.join(code, "pupil-0002", now=5.0) == IN


def test_the_teacher_sees_who_joined_and_answered_in_the_last_minute(room):
    """At 150 s: one student joined at 10 and left, one joined at 50 and is still there
    (seen at 120), one joined at 130; all three answered the open vote."""
    code, key = room.create(VIEW, step=1, now=0.0)
    for student, at in (("pupil-0000", 10.0), ("pupil-0001", 50.0), ("pupil-0001", 120.0), ("pupil-0002", 130.0)):
        room.join(code, student, now=at)
    vote = room.open_vote(code, key, 1, "s1.q", QUESTION, now=131.0)
    for i in range(3):
        assert room.answer(code, vote, f"pupil-{i:04d}", i, now=140.0) == "taken"
    seen = room.pulse(code, present_since=90.0, now=150.0)
    assert (seen.present, seen.joined_recently, seen.answered, seen.answered_recently, seen.door) == (2, 1, 3, 2, True)
    room.set_state(code, key, vote, "closed", now=151.0)
    assert room.pulse(code, 0.0, now=152.0).answered == 0  # no vote open
    assert room.pulse("ZZZZZZ", 0.0) is None


def test_starting_classes_in_a_loop_from_one_address_leaves_room_for_another_teacher(room, monkeypatch):
    """A loop of starts from one address gets six, then is refused for what it is (not a
    full disk); a teacher elsewhere starts hers; with the server's classes all taken the
    refusal says so; a class nobody joined ends after an hour untouched, one in use lasts."""
    made = []
    for i in range(20):
        try:
            made.append(room.create(VIEW, step=1, now=float(i), address=SCRIPT))
        except Refused as exc:
            assert exc.what == "starts"
    assert len(made) == limits.STARTS.burst == 6
    mine, key = room.create(VIEW, step=1, now=30.0, address=HOME)
    room.join(mine, "pupil-0001", now=31.0)
    monkeypatch.setattr(classes, "MAX_CLASSES", 7)
    with pytest.raises(Refused) as refused:
        room.create(VIEW, step=1, now=40.0, address=SCHOOL)
    assert refused.value.what == "classes"
    hour = classes.EMPTY_MINUTES * 60
    assert room.expire(now=30.0 + hour + 1) == 6  # the script's empty classes end; hers, with a student, stays
    assert room.state(mine) is not None and all(room.state(c) is None for c, _ in made)
    assert room.create(VIEW, step=1, now=30.0 + hour + 2, address=SCHOOL)


def test_a_wrong_code_only_reads_even_while_another_process_writes(where):
    """Guessing codes costs the store no write: with a writer holding the lock, a wrong
    code is answered at once; the right one waits its turn (and gets in)."""
    room = Classes(store_at(where), {1: "s1.q"})
    code, _ = room.create(VIEW, step=1)
    holding, release = threading.Event(), threading.Event()

    def writer():
        with room.store.transaction() as db:
            db.execute("UPDATE classes SET touched = touched WHERE code = ?", (code,))
            holding.set()
            release.wait(10)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    assert holding.wait(10)
    t0 = time.perf_counter()
    assert room.join("ZZZZZZ", "guesser-001") == UNKNOWN
    assert time.perf_counter() - t0 < 0.5
    release.set()
    th.join(10)
    assert room.join(code, "pupil-0001") == IN


def test_a_full_class_and_an_unknown_code_are_one_answer_to_a_newcomer(room, monkeypatch):
    """join() tells them apart (the app says both the same way to a newcomer): a guesser
    cannot learn that a code exists from a full class."""
    monkeypatch.setattr(classes, "MAX_STUDENTS", 1)
    code, _ = room.create(VIEW, step=1, now=0.0)
    assert room.join(code, "pupil-0001", now=1.0) == IN
    assert room.join(code, "pupil-0002", now=2.0) == FULL and room.join("ZZZZZZ", "pupil-0002") == UNKNOWN
