"""The store behind share links: keys, bounds, several processes (on both backends:
SQLite and PostgreSQL), a broken file (SQLite), a database out of reach (PostgreSQL)."""

import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from server.store import Store, StoreError, is_key, store_at


def test_a_view_comes_back_by_its_key_and_the_same_view_gets_the_same_key(where):
    s = store_at(where)
    view = {"text": "東京の朝 😀 <b>", "lang": "ja", "step": 3, "settings": {"s3_w": 24}}
    key = s.put(view)
    assert is_key(key) and s.put(dict(view)) == key and s.count() == 1
    assert s.get(key) == view
    assert s.get("0" * 12) is None  # never kept
    for bad in ("../etc", "ABCDEF012345", "x" * 12, "", None, 12, "0" * 13):
        assert s.get(bad) is None  # not a key of ours: never looked up


def test_least_recently_used_views_are_evicted_at_the_bounds(where):
    s = store_at(where, max_views=3)
    keys = [s.put({"text": f"text {i}"}) for i in range(3)]
    s.get(keys[0])  # used again: the oldest is now keys[1]
    s.put({"text": "text 3"})
    assert s.count() == 3 and s.get(keys[1]) is None and s.get(keys[0]) is not None
    small = store_at(where, max_bytes=300)  # the same views, now bounded in bytes
    first = small.put({"text": "a" * 200})
    second = small.put({"text": "b" * 200})
    assert small.get(first) is None and small.get(second) is not None


WRITER = textwrap.dedent("""
    import sys
    from server.store import store_at
    s = store_at(sys.argv[1])
    for i in range(150):
        s.put({"text": f"{sys.argv[2]} {i}"})
    print("done")
""")


def test_two_processes_write_at_once(where):
    store_at(where)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, where, name], stdout=subprocess.PIPE, text=True)
             for name in ("one", "two")]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs) and all("done" in o for o in outs)
    assert store_at(where).count() == 300


def test_a_corrupted_file_is_set_aside_and_a_fresh_store_made(tmp_path):
    path = tmp_path / "v.sqlite3"
    key = Store(path).put({"text": "kept"})
    path.write_bytes(b"this is not a database" * 100)
    for extra in ("-wal", "-shm"):
        p = tmp_path / f"v.sqlite3{extra}"
        if p.exists():
            p.unlink()
    s = Store(path)
    assert s.recreated and s.get(key) is None and s.count() == 0
    assert list(tmp_path.glob("v.sqlite3.corrupt-*"))  # nothing of ours deleted: set aside
    assert is_key(s.put({"text": "new"}))


# --- faults: a busy, full or read-only store is left as it is ------------------------------


def _hold(path, how: str):
    """Another process's connection holding a lock on the store: ``write`` (a writer's
    lock: readers still read) or ``all`` (an exclusive lock: nobody reads)."""
    db = sqlite3.connect(path, isolation_level=None)
    if how == "all":
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        db.execute("BEGIN EXCLUSIVE")
        db.execute("SELECT COUNT(*) FROM views").fetchone()
    else:
        db.execute("BEGIN IMMEDIATE")
    return db


def test_a_lock_held_past_the_timeout_at_start_leaves_the_links_in_place(tmp_path):
    path = tmp_path / "v.sqlite3"
    first = Store(path)
    key = first.put({"text": "kept through a lock"})
    first.close()  # its kept connection would stop another process taking the file for itself
    holder = _hold(path, "all")
    try:
        s = Store(path, timeout=0.2)
        assert s.problem == "locked" and not s.recreated
        assert not list(tmp_path.glob("*.corrupt-*"))  # nothing set aside
        with pytest.raises(StoreError) as err:
            s.get(key)
        assert err.value.reason == "locked"
    finally:
        holder.close()
    assert Store(path).get(key) == {"text": "kept through a lock"}  # the lock gone, the link is there


def test_a_failed_begin_says_locked_not_the_rollbacks_error(tmp_path):
    path = tmp_path / "v.sqlite3"
    s = Store(path, timeout=0.2)
    holder = _hold(path, "write")
    try:
        with pytest.raises(StoreError) as err:
            s.put({"text": "new"})
        assert err.value.reason == "locked" and "rollback" not in str(err.value).lower()
    finally:
        holder.close()


def test_opening_a_link_reads_even_when_its_use_cannot_be_recorded(tmp_path):
    path = tmp_path / "v.sqlite3"
    s = Store(path, timeout=0.2)
    key = s.put({"text": "read while another writes"})
    holder = _hold(path, "write")  # a writer holds the lock: the `used` update cannot happen
    try:
        assert s.get(key) == {"text": "read while another writes"}
    finally:
        holder.close()


@pytest.mark.parametrize(("message", "name", "reason"), [
    ("database or disk is full", "SQLITE_FULL", "full"),
    ("attempt to write a readonly database", "SQLITE_READONLY", "readonly"),
    ("unable to open database file", "SQLITE_CANTOPEN", "unavailable"),
    ("database is locked", "SQLITE_BUSY", "locked"),
])
def test_a_full_disk_or_a_read_only_file_is_a_reason_never_a_fresh_store(tmp_path, monkeypatch, message, name,
                                                                        reason):
    path = tmp_path / "v.sqlite3"
    key = Store(path).put({"text": "kept"})
    real = Store._connect

    def failing(self):
        exc = sqlite3.OperationalError(message)
        exc.sqlite_errorname = name
        raise exc

    monkeypatch.setattr(Store, "_connect", failing)
    s = Store(path)
    assert s.problem == reason and not s.recreated
    with pytest.raises(StoreError) as err:
        s.put({"text": "new"})
    assert err.value.reason == reason
    monkeypatch.setattr(Store, "_connect", real)
    assert not list(tmp_path.glob("*.corrupt-*")) and Store(path).get(key) == {"text": "kept"}


def test_a_folder_that_cannot_be_made_is_unavailable_not_a_crash(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    s = Store(blocker / "v.sqlite3")  # its folder would be inside a file
    assert s.problem == "unavailable"
    with pytest.raises(StoreError):
        s.put({"text": "x"})


def test_the_store_closes_the_connection_it_checks_with_at_start(tmp_path, monkeypatch):
    opened = []
    real = sqlite3.connect

    def tracking(*args, **kwargs):
        db = real(*args, **kwargs)
        opened.append(db)
        return db

    monkeypatch.setattr(sqlite3, "connect", tracking)
    s = Store(tmp_path / "v.sqlite3")
    assert opened
    kept = [db for db, _ in s._idle]
    assert len(kept) <= 1  # at most the one the tables were made with, kept for the next use
    for db in opened:
        if any(db is k for k in kept):
            continue
        with pytest.raises(sqlite3.ProgrammingError):  # closed: no statement runs on it
            db.execute("SELECT 1")


def test_eviction_keeps_the_most_recently_used_within_both_bounds(tmp_path):
    """The one-statement eviction against a count by hand: views of 100 bytes' payload
    each, bounds of 5 views and 450 bytes."""
    s = Store(tmp_path / "v.sqlite3", max_views=5, max_bytes=450)
    keys = []
    for i in range(8):
        keys.append(s.put({"t": f"{i}" * 89}))  # {"t": "…"} is 11 bytes + 89 = 100 bytes
    # 450 bytes hold four views of 100: the four most recent stay
    assert [s.get(k) is not None for k in keys] == [False] * 4 + [True] * 4


def test_a_transaction_that_fails_half_way_leaves_nothing_behind(where):
    s = store_at(where)
    kept = s.put({"text": "before"})
    with pytest.raises(RuntimeError), s.transaction() as db:
        db.execute("INSERT INTO views(key, payload, bytes, created, used) VALUES (?, ?, ?, ?, ?)",
                   ("0123456789ab", '{"text": "half"}', 16, 1.0, 1.0))
        raise RuntimeError("the writer fails before it commits")
    assert s.count() == 1 and s.get("0123456789ab") is None and s.get(kept) == {"text": "before"}


def test_postgres_out_of_reach_is_a_notice_and_the_store_comes_back_by_itself(pg_server):
    """The server stops mid-use: reading and writing raise StoreError("unavailable") (the
    app says so and goes on); started again, the pool reconnects by itself and every
    view written before the outage is there."""
    from server.pgstore import PgStore

    s = PgStore(pg_server.new_database())
    keys = [s.put({"text": f"before the outage {i}"}) for i in range(3)]
    pg_server.stop()
    try:
        for attempt in (lambda: s.get(keys[0]), lambda: s.put({"text": "during"}), s.count):
            with pytest.raises(StoreError) as caught:
                attempt()
            assert caught.value.reason == "unavailable"
    finally:
        pg_server.start()
    back = None
    for _ in range(40):  # the pool notices the server is back within a few seconds
        try:
            back = [s.get(k) for k in keys]
            break
        except StoreError:
            time.sleep(0.25)
    assert back == [{"text": f"before the outage {i}"} for i in range(3)]
    assert s.get(s.put({"text": "after"})) == {"text": "after"} and s.count() == 4


def test_postgres_unreachable_at_start_leaves_the_app_a_store_that_says_so(pg_server):
    from harness.serve import free_port
    from server.pgstore import PgStore

    s = PgStore(f"postgresql://atlas@127.0.0.1:{free_port()}/atlas")  # nothing listens there
    assert s.problem == "unavailable"
    with pytest.raises(StoreError) as caught:
        s.get("0123456789ab")
    assert caught.value.reason == "unavailable" and "cannot be reached" in str(caught.value)


def test_a_missing_database_or_a_refused_password_is_one_sentence_without_the_password(pg_server):
    import psycopg

    from server.pgstore import PgStore, explain

    missing = pg_server.url("no_such_database").replace("atlas@", "atlas:hunter2secret@")
    s = PgStore(missing)
    assert s.problem == "unavailable"
    with pytest.raises(StoreError) as caught:
        s.count()
    said = str(caught.value)
    assert "no such database" in said and "hunter2secret" not in said and ":***@" in said
    refused = psycopg.OperationalError('connection failed: connection to server at "10.0.0.5", port 5432 failed: '
                                       'FATAL:  password authentication failed for user "atlas"')
    url = "postgresql://atlas:hunter2secret@10.0.0.5:5432/atlas"
    told = explain(refused, url)
    assert told.reason == "unavailable" and "refused the user's password" in str(told)
    assert "hunter2secret" not in str(told)


def test_postgres_writers_wait_their_turn_and_a_lock_held_too_long_is_said(pg_server):
    """Writers take one advisory lock (one at a time, as SQLite's one writer): a writer
    holding it past another's wait makes that one a StoreError("locked"), and the view
    is written once the lock is free; reads never wait for it."""
    import psycopg

    from server.pgstore import WRITERS_LOCK, PgStore

    url = pg_server.new_database()
    s = PgStore(url, timeout=0.3)
    kept = s.put({"text": "before the lock"})
    with psycopg.connect(url) as other:  # another replica inside its write transaction
        other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITERS_LOCK,))
        with pytest.raises(StoreError) as caught:
            s.put({"text": "waits too long"})
        assert caught.value.reason == "locked"
        assert s.get(kept) == {"text": "before the lock"}  # reading does not wait
    assert s.get(s.put({"text": "waits too long"})) == {"text": "waits too long"}  # the lock gone: written


def test_a_kept_connection_serves_the_next_uses_and_never_outlives_its_file(tmp_path, monkeypatch):
    """Page runs reuse the store's connections (each run is a thread of its own, and
    opening one costs more than most reads); one is never reused across a file that was
    deleted under the app: the next use opens the new file."""
    path = tmp_path / "v.sqlite3"
    s = Store(path)
    key = s.put({"text": "first"})
    opened = []
    real = Store._connect
    monkeypatch.setattr(Store, "_connect", lambda self: opened.append(1) or real(self))
    for _ in range(20):
        assert s.get(key) == {"text": "first"}
    s.put({"text": "second"})
    assert opened == []  # every read and the write on the kept connection
    path.unlink()  # deleted while the app runs (its -wal and -shm too, as an operator would)
    for extra in tmp_path.glob("v.sqlite3-*"):
        extra.unlink()
    assert s.get(key) is None  # made again in place: the new file holds nothing of the old
    assert opened  # a new connection, on the new file
    assert s.remade == 1


def test_a_crowd_of_links_from_a_few_addresses_evicts_its_own_not_a_teachers_one_link(where):
    """Fair share: a teacher's one link nobody opened yet, then six addresses making 30
    links each into a store that holds 20. Her link stays; each address keeps its own most
    recent (3 or 4 of them), never an older one of its own before a newer one."""
    s = store_at(where, max_views=20)
    hers = s.put({"text": "the teacher's prepared text"}, address="198.51.100.20")
    made = {f"203.0.113.{a}": [] for a in range(1, 7)}
    for i in range(30):
        for address, keys in made.items():
            keys.append(s.put({"text": f"{address} {i}"}, address=address))
    assert s.get(hers) == {"text": "the teacher's prepared text"}
    assert s.count() == 20
    for address, keys in made.items():
        alive = [s.get(k) is not None for k in keys]
        n = sum(alive)
        assert n in (3, 4) and alive == [False] * (30 - n) + [True] * n, (address, alive)


def test_a_view_older_than_a_day_that_nobody_opened_goes_before_a_recent_one(tmp_path, monkeypatch):
    """Made more than KEEP_HOURS ago and never opened: it goes first, whoever made it."""
    from server import backend

    s = Store(tmp_path / "v.sqlite3", max_views=2)
    clock = [1_000_000.0]
    monkeypatch.setattr(backend.time, "time", lambda: clock[0])
    old = s.put({"text": "old"}, address="192.0.2.1")
    clock[0] += (backend.KEEP_HOURS + 1) * 3600
    newer = [s.put({"text": f"new {i}"}, address="203.0.113.9") for i in range(2)]
    assert s.get(old) is None and all(s.get(k) is not None for k in newer)


def test_links_kept_by_the_release_before_open_after_the_upgrade_on_both_backends(where):
    """The views as layout 2 wrote them (no client): upgraded once to layout 4, every link
    opens as it was, and new links are made and evicted beside them."""
    from server import backend

    s = store_at(where)
    with s.transaction() as db:
        db.execute("DROP TABLE views")
        db.execute("""CREATE TABLE views (
            key TEXT PRIMARY KEY, payload TEXT NOT NULL, bytes INTEGER NOT NULL, created REAL NOT NULL,
            used REAL NOT NULL, maker TEXT NOT NULL DEFAULT '', kept INTEGER NOT NULL DEFAULT 0)""")
        db.execute("INSERT INTO views(key, payload, bytes, created, used, maker, kept) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   ("0123456789ab", '{"text": "kept before"}', 23, 1.0, 1.0, "someone", 1))
        db.execute("UPDATE atlas_schema SET version = 2 WHERE part = 'views'")
    again = store_at(where, max_views=3)
    assert again.version_of("views") == backend.VIEWS_VERSION == 4
    assert again.get("0123456789ab") == {"text": "kept before"}
    made = [again.put({"text": f"new {i}"}, address="203.0.113.9") for i in range(4)]
    assert again.get("0123456789ab") == {"text": "kept before"} and again.get(made[0]) is None


def test_a_flood_of_links_from_many_addresses_evicts_no_classs_link_nor_one_opened_by_another(where):
    """A store of 200 links: the teacher makes three — one a class is started from (kept),
    one a student opens (kept), one only made — then 250 addresses make one each. Every
    merely recent link goes before a kept one: both kept links stay. The flood's links go
    by fair share, the teacher's only-made one with them (one link each: a tie)."""
    s = store_at(where, max_views=200)
    teacher = "198.51.100.20"
    started = s.put({"text": "the class's text"}, address=teacher, maker="her")
    s.keep(started)  # a class was started from it
    opened = s.put({"text": "a link she sent"}, address=teacher, maker="her")
    assert s.get(opened, reader="a student") is not None  # someone else opened it: kept
    s.put({"text": "only made"}, address=teacher, maker="her")
    for i in range(250):
        s.put({"text": f"flood {i}"}, address=f"10.{i // 250}.{i % 250}.1", maker=f"bot{i}")
    assert s.count() == 200
    assert s.get(started) == {"text": "the class's text"} and s.get(opened) == {"text": "a link she sent"}


def test_a_flood_from_one_ipv6_site_counts_as_one_site_and_holds_under_its_share_of_the_bytes(where):
    """260 /64s of one /48 make one link each into a store of 100 links: the site's links
    share SITE_FACTOR clients' fair share, so a teacher's one link, made first and never
    opened, outlives them; and the site never holds more than its share of the bytes."""
    from server import backend, limits

    s = store_at(where, max_views=100, max_bytes=40_000)
    hers = s.put({"text": "the teacher's one link"}, address="198.51.100.20", maker="her")
    site = [s.put({"text": f"site {i} " + "x" * 100}, address=limits.key(f"2001:db8:77:{i:x}::1"), maker=f"b{i}")
            for i in range(260)]
    assert s.get(hers) == {"text": "the teacher's one link"}
    with s.reading() as db:
        held = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM views WHERE site = ?",
                          ("2001:db8:77::/48",)).fetchone()[0]
    assert 0 < held <= 40_000 // backend.SITE_SHARE
    assert sum(s.get(k) is not None for k in site) >= 1


def test_when_only_kept_links_are_left_a_new_link_is_refused_in_words(where):
    from server.backend import Refused

    s = store_at(where, max_views=3)
    for i in range(3):
        k = s.put({"text": f"kept {i}"}, address="198.51.100.20", maker="her")
        s.keep(k)
    with pytest.raises(Refused) as refused:
        s.put({"text": "one more"}, address="203.0.113.5", maker="someone")
    assert refused.value.what == "full"
    assert s.count() == 3
