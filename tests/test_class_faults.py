"""A class whose store fails mid-lesson (AppTest; one teacher and students in one process
sharing a store): a vote fails closed, an answer is never lost silently, the teacher's
actions are never half done, a deleted store is made again, and no StoreError ever
reaches a page as Streamlit's error box. Each fault as the store meets it: a write lock
held by another process, a full disk, a read-only file, a store that cannot be opened,
its file deleted, PostgreSQL stopped and started."""

import contextlib
import sqlite3
from pathlib import Path

import pytest

from server import store as sharestore
from server.store import Store
from ui import i18n, keys, share
from ui.classroom import handle

pytestmark = pytest.mark.apptest

TEXT = "The teacher's own text for today's class: every student reads these same words, slowly."
WAIT = 1.0  # the store's wait for a lock in these tests (the app's is share.STORE_WAIT)
STORE_TIMEOUT = WAIT  # the store fixture's (conftest.py)


def clean(at):
    assert not at.exception, [e.value for e in at.exception]
    return at


def run(at):
    handle.versions.clear()  # a poll's tick: the versions' one-second cache starts afresh
    return clean(at.run())


def toasts(at) -> list[str]:
    return [t.value for t in at.toast]


@pytest.fixture
def klass(make_app, store, live_classes):
    """A teacher on step 3 of her own text with a vote open, and a student in Japanese."""
    teacher = make_app("tiny", "en")
    teacher.run()
    teacher.sidebar.text_area(key="text").input(TEXT).run()
    for _ in range(2):
        teacher.button(key="nav_next").click().run()
    teacher.sidebar.button(key="class_start").click().run()
    code = clean(teacher).session_state[keys.CLASS]
    student = make_app("tiny", "ja")
    student.query_params["class"] = code
    clean(student.run())
    clean(teacher.button(key="vote_open_s3_reach").click().run())
    run(student)
    vote = live_classes.state(code).vote_on("s3.reach").vote
    return teacher, student, code, vote


@contextlib.contextmanager
def write_lock(path: Path):
    """Another process's write transaction held on the file (a connection of its own)."""
    other = sqlite3.connect(path, isolation_level=None, timeout=5)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


class FullDisk:
    """A connection on a full disk: reads work, every write fails as SQLite says it then."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def execute(self, sql: str, params=()):
        if sql.lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "CREATE", "ALTER"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, params)

    def close(self):
        self.db.close()


@contextlib.contextmanager
def connections_that(monkeypatch, fault: str):
    """Every connection the store uses meets ``fault`` (none kept from before): the disk full (every write fails
    as SQLite's SQLITE_FULL does), the file read-only (opened read-only: SQLite's own
    SQLITE_READONLY on a write), or the store not opened at all (as when its folder
    cannot be read)."""
    real = Store._connect

    def faulty(self):
        if fault == "unavailable":
            raise sqlite3.OperationalError("unable to open database file")
        if fault == "readonly":
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None, timeout=WAIT)
            db.execute(f"PRAGMA busy_timeout={int(WAIT * 1000)}")
            return db
        db = real(self)
        return FullDisk(db) if fault == "full" else db

    with monkeypatch.context() as m:
        m.setattr(Store, "_connect", faulty)
        m.setattr(Store, "_kept", lambda self, inode: None)  # no connection kept from before the fault,
        m.setattr(Store, "_close", lambda self, db, inode, healthy: db.close())  # nor a faulty one for after
        yield


def numbers_shown(at) -> bool:
    return bool(at.metric) or bool([c for c in at.get("plotly_chart") if "vote_chart" not in (c.key or "")])


def test_a_class_that_cannot_be_read_shows_no_step_numbers_and_locks_the_answers_roads(klass, monkeypatch):
    """The store cannot be opened mid-vote: every member's page of the step says so, in
    their language, and stops before its numbers (it cannot know the vote is open); the
    student's share and handout stay locked; once the store is back, the page shows the
    question again (the vote is still open), never the numbers."""
    teacher, student, code, vote = klass
    with connections_that(monkeypatch, "unavailable"):
        for at, lang in ((student, "ja"), (teacher, "en")):
            run(at)
            assert at.warning and at.warning[0].value == i18n.translate(lang, "class.unreadable")
            assert not numbers_shown(at), lang
            assert toasts(at) == [i18n.translate(lang, "share.store_unavailable")]  # said once, however often asked
        assert student.sidebar.button(key="share").disabled and student.sidebar.button(key="handout_build").disabled
        assert keys.CLASS in student.session_state  # a moment's trouble does not end a class
    run(student)
    assert not student.warning and not numbers_shown(student)
    assert student.radio(key=f"vote_pick_{vote}") is not None  # the question, still open


@pytest.mark.parametrize("fault", ["locked", "full", "readonly"])
def test_an_answer_the_store_cannot_keep_stays_chosen_and_is_sent_once_it_can(klass, monkeypatch, store, fault,
                                                                             live_classes):
    """Send while the store cannot write: no error box, the choice stays selected, the
    student is told it is not sent yet and will be; once the store can write again the
    next tick of their poll sends it, and the teacher's count has it."""
    teacher, student, code, vote = klass
    student.radio(key=f"vote_pick_{vote}").set_value(1).run()
    with (write_lock(store.path) if fault == "locked" else connections_that(monkeypatch, fault)):
        clean(student.button(key=f"vote_send_{vote}").click().run())
        labels = live_classes.state(code).vote_on("s3.reach").question.labels["ja"]
        pending = i18n.translate("ja", "vote.pending", answer=labels[1])
        assert [w.value for w in student.warning] == [pending]
        assert student.radio(key=f"vote_pick_{vote}").value == 1 and student.radio(key=f"vote_pick_{vote}").disabled
        assert i18n.translate("ja", f"share.store_{fault}") in toasts(student)
        run(student)  # a tick while the fault lasts: still waiting, still said
        assert [w.value for w in student.warning] == [pending]
    assert live_classes.counts(code, vote)[1] == 0
    run(student)  # the store is back: the poll sends it
    assert i18n.translate("ja", "vote.sent", answer=labels[1]) in [m.value for m in student.markdown]
    assert live_classes.counts(code, vote) == [0, 1] + [0] * (len(labels) - 2)


def test_an_answer_still_waiting_when_the_vote_closes_is_said_to_be_lost(klass, store, live_classes):
    teacher, student, code, vote = klass
    student.radio(key=f"vote_pick_{vote}").set_value(0).run()
    with write_lock(store.path):
        clean(student.button(key=f"vote_send_{vote}").click().run())
    clean(teacher.button(key=f"vote_close_{vote}").click().run())  # the teacher closes first
    run(student)
    run(student)
    assert i18n.translate("ja", "vote.lost_closed") in toasts(student)
    assert keys.PENDING not in student.session_state and sum(live_classes.counts(code, vote)) == 0


def test_the_teachers_actions_with_the_store_locked_say_so_and_are_never_half_done(klass, store, live_classes):
    teacher, student, code, vote = klass
    with write_lock(store.path):
        clean(teacher.button(key=f"vote_close_{vote}").click().run())
        assert i18n.translate("en", "share.store_locked") in toasts(teacher)
        clean(teacher.button(key="nav_next").click().run())  # her page moves; the class cannot yet
    found = live_classes.state(code)
    assert found.vote_on("s3.reach").state == "open" and found.page == "neighbours"  # nothing half done
    run(teacher)  # the store is back: her next run leads the class again
    assert live_classes.state(code).page == "hubs"
    run(student)
    assert student.title[0].value == i18n.translate("ja", "hubs.title")


def test_a_deleted_store_is_made_again_and_its_classes_members_are_told_once(klass, store, live_classes):
    """The store's file deleted mid-class (with its -wal and -shm): the class is gone, its
    members are told so once, in their language, and their pages work on; a new class
    starts at once, no restart."""
    teacher, student, code, vote = klass
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store.path}{suffix}").unlink(missing_ok=True)
    run(student)
    assert toasts(student) == [i18n.translate("ja", "class.ended")] and keys.CLASS not in student.session_state
    assert student.metric  # the step's numbers: no class, no vote
    run(student)
    assert not toasts(student)  # told once
    run(teacher)
    assert keys.CLASS not in teacher.session_state and i18n.translate("en", "class.ended") in toasts(teacher)
    run(teacher)  # her sidebar without the class
    clean(teacher.sidebar.button(key="class_start").click().run())
    assert keys.CLASS in teacher.session_state and live_classes.state(teacher.session_state[keys.CLASS])


def test_wrong_codes_typed_again_and_again_are_slowed_and_a_full_class_answers_as_no_class(
        make_app, klass, monkeypatch):
    from server import classes as class_rules

    import time
    from types import SimpleNamespace

    from ui.classroom import membership

    waits = []  # each answer's wait, kept instead of slept (they add up to 55 s)
    monkeypatch.setattr(membership, "time", SimpleNamespace(time=time.time, sleep=waits.append))
    teacher, student, code, vote = klass
    guesser = make_app("tiny", "pt")
    guesser.run()
    wrong = [f"ZZZ{i:03d}".replace("0", "A").replace("1", "B") for i in range(12)]
    for c in wrong:
        guesser.sidebar.text_input(key="class_code_typed").input(c).run()
        clean(guesser.sidebar.button(key="class_join").click().run())
    said = toasts(guesser)
    assert said[-1] == i18n.translate("pt", "class.slow_down")
    # the address's burst of 10 wrong codes reaches the store (no time passes for a token to
    # come back), the last 2 are refused before it; of the 10, 3 free, then 1, 2, 4, at most 8 s
    assert waits == [1, 2, 4, 8, 8, 8, 8]
    handle.guesses.clear()  # the same machine's sessions (no address) share a count: the newcomer's afresh
    monkeypatch.setattr(class_rules, "MAX_STUDENTS", 1)  # the student in Japanese holds the one seat
    newcomer = make_app("tiny", "en")
    newcomer.query_params["class"] = code
    clean(newcomer.run())
    assert toasts(newcomer) == [i18n.translate("en", "class.unknown")]  # as an unknown code would
    assert keys.CLASS not in newcomer.session_state


def test_with_postgresql_stopped_mid_vote_pages_fail_closed_fast_and_the_answer_is_sent_once_it_is_back(
        make_app, pg_server, monkeypatch):
    """The class on PostgreSQL; the server stops mid-vote, just as a student presses Send:
    their page says so within seconds (never the 46 s of a pool and a probe per call),
    shows no numbers, and keeps their answer; PostgreSQL starts again and a tick of their
    poll sends it."""
    import time

    from server import pgstore

    from server.classes import Classes
    from ui.classroom import reset_caches

    pg = sharestore.store_at(pg_server.new_database(), timeout=WAIT)
    monkeypatch.setattr(share, "store", lambda: pg)
    reset_caches()
    live_classes = Classes(pg)
    try:
        teacher = make_app("tiny", "en")
        teacher.run()
        teacher.sidebar.button(key="class_start").click().run()
        code = clean(teacher).session_state[keys.CLASS]
        student = make_app("tiny", "pt")
        student.query_params["class"] = code
        clean(student.run())
        clean(teacher.button(key="vote_open_s1_doubling").click().run())
        run(student)
        vote = live_classes.state(code).vote_on("s1.doubling").vote
        student.radio(key=f"vote_pick_{vote}").set_value(2).run()
        pg_server.stop()
        t0 = time.perf_counter()
        clean(student.button(key=f"vote_send_{vote}").click().run())  # pressed on the page drawn before
        assert time.perf_counter() - t0 < 10  # said within seconds, not a pool's wait and a probe per call
        assert student.session_state[keys.PENDING]["choice"] == 2
        assert not numbers_shown(student) and i18n.translate("pt", "share.store_unavailable") in toasts(student)
        assert [w.value for w in student.warning] == [i18n.translate("pt", "class.unreadable"),
                                                      i18n.translate("pt", "vote.pending_alone")]
        t0 = time.perf_counter()
        run(student)
        assert time.perf_counter() - t0 < 5  # the store's pause: later uses told at once
        pg_server.start()
        pg._down_until = 0.0  # the store's own pause before trying the pool again, over at once
        deadline = time.monotonic() + 30
        while keys.PENDING in student.session_state and time.monotonic() < deadline:
            run(student)
        assert live_classes.counts(code, vote)[2] == 1
    finally:
        reset_caches()
        pgstore.close_all()


def test_a_store_error_is_never_an_error_box_on_any_class_action(klass, monkeypatch, live_classes):
    """Every class action a page can take, with the store failing each time: notices only."""
    teacher, student, code, vote = klass
    with connections_that(monkeypatch, "unavailable"):
        for at, key in ((teacher, f"vote_close_{vote}"), (teacher, "class_door_close"), (teacher, "class_end"),
                        (student, "class_explore")):
            with contextlib.suppress(Exception):
                at.button(key=key).click()
            clean(at.run())
    assert keys.CLASS in teacher.session_state  # not ended by half: the store said nothing was done
    found = live_classes.state(code)
    assert found is not None and found.vote_on("s3.reach").state == "open" and found.door
