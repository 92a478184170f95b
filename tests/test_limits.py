"""The limits every replica sees (server.limits): token buckets kept in the shared store,
per client address, on both backends; and the wrong-code counter of one process."""

import subprocess
import sys
import textwrap

from server import limits
from server.store import store_at

BURST3 = limits.Limit("test", burst=3, every=10.0)  # three at once, then one every 10 s


def test_a_bucket_gives_its_burst_then_one_use_every_so_often_per_address(where):
    store = store_at(where)
    took = []
    with store.transaction() as db:
        for now in (0.0, 0.1, 0.2, 0.3, 9.0):
            took.append(limits.take(db, BURST3, "10.0.0.7", now))
    assert took == [True, True, True, False, False]  # three at once; at 9 s the fourth is not back yet
    with store.transaction() as db:
        assert limits.take(db, BURST3, "10.0.0.7", 10.3)  # 10 s after the third: one more
        assert not limits.take(db, BURST3, "10.0.0.7", 10.4)
        assert limits.take(db, BURST3, "10.0.0.8", 10.4)  # another client has a bucket of its own
        assert limits.take(db, BURST3, limits.key(None), 10.4)  # so has the server's own machine
        assert all(limits.take(db, BURST3, None, 10.4) for _ in range(10))  # no client (a tool): no limit
        assert not limits.take(db, BURST3, "10.0.0.7", 1000.0, cost=4)  # more than the bucket ever holds
        assert limits.take(db, BURST3, "10.0.0.7", 1000.0, cost=3)  # refilled, but never past its burst


TAKING = textwrap.dedent("""
    import sys
    from server import limits
    from server.store import store_at
    store = store_at(sys.argv[1])
    limit = limits.Limit("test", burst=25, every=3600.0)
    got = 0
    for _ in range(40):
        with store.transaction() as db:
            got += limits.take(db, limit, "10.0.0.9", 100.0)
    print(got)
""")


def test_two_processes_share_one_bucket_never_twice_its_allowance(where):
    """Two replicas taking from one client's bucket at once: 25 in all, not 25 each."""
    store = store_at(where)
    with store.transaction() as db:
        db.execute("SELECT 1")
    procs = [subprocess.Popen([sys.executable, "-c", TAKING, where], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-600:] for _, err in outs]
    assert sum(int(out) for out, _ in outs) == 25


def test_full_buckets_are_forgotten(where):
    store = store_at(where)
    with store.transaction() as db:
        limits.take(db, limits.STARTS, "10.0.0.1", 0.0)
        limits.take(db, limits.joins(), "10.0.0.2", 0.0)
        limits.forget_full(db, limits.STARTS.burst * limits.STARTS.every - 1)
        rows = db.execute("SELECT what FROM limits ORDER BY what").fetchall()
    assert [r[0] for r in rows] == ["start"]  # the joins' bucket had refilled (120 × 10 s < 6 × 300 s)


def test_wrong_codes_are_limited_per_client_in_this_process():
    guesses = limits.Guesses(burst=3, every=5.0)
    for _ in range(3):
        assert guesses.allowed("10.0.0.3", 0.0)
        guesses.missed("10.0.0.3", 0.0)
    assert not guesses.allowed("10.0.0.3", 4.9)
    assert guesses.allowed("10.0.0.3", 5.0) and guesses.allowed("10.0.0.4", 0.0)
    small = limits.Guesses(burst=1, every=60.0, clients=2)
    for address in ("a", "b", "c"):
        small.missed(address, 0.0)
    assert small.allowed("a", 1.0) and not small.allowed("c", 1.0)  # the least recently seen forgotten
