"""The parts that serve a process's readers, on their own: the fair queue for the one
model (server.work_queue) and the bounded caches every session shares (server.lru)."""

import threading
import time

import pytest
import torch

from server.lru import ByteLRU, CountLRU
from server.work_queue import TicketQueue


def test_the_queue_serves_in_ticket_order_and_estimates_the_wait():
    q = TicketQueue()
    q._took["analysis"] = 0.05
    order, seen = [], {}
    first = q.take("analysis")
    q.wait(first)  # the first ticket's turn at once
    tickets = [q.take("analysis") for _ in range(4)]
    assert [q.ahead(t) for t in tickets] == [1, 2, 3, 4]
    assert q.estimate(tickets[3]) >= 3 * 0.05  # three waiting before it, plus what is left of the first

    told = [threading.Event() for _ in tickets]  # set when a worker has been told it waits

    def worker(t, i):
        def on_wait(ahead, secs):
            seen.setdefault(i, (ahead, secs))
            told[i].set()

        q.wait(t, on_wait)
        order.append(i)
        q.done(t)

    threads = [threading.Thread(target=worker, args=(t, i)) for i, t in reversed(list(enumerate(tickets)))]
    for th in threads:  # started last first: the order still follows the tickets
        th.start()
    assert all(e.wait(5) for e in told)  # every worker is waiting (no sleep: an Event each)
    assert order == []  # nobody passes the first ticket
    q.done(first)
    for th in threads:
        th.join(5)
    assert not any(th.is_alive() for th in threads)
    assert order == [0, 1, 2, 3]
    assert seen[3][0] == 4 and seen[3][1] > 0
    assert len(q) == 0


def test_an_abandoned_ticket_lets_the_next_one_in():
    q = TicketQueue()
    a, b = q.take("sweep"), q.take("analysis")
    c = q.take("handout")
    q.done(b)  # the second reader left before its turn
    # neither has started: the handout (a guessed 5 s) before the sweep (90 s)
    assert q.ahead(c) == 0 and q.ahead(a) == 1
    q.done(c)
    assert q.ahead(a) == 0
    q.done(a)
    with pytest.raises(RuntimeError):  # work that fails still lets the next one in
        q.run("analysis", lambda: (_ for _ in ()).throw(RuntimeError("work failed")))
    assert len(q) == 0 and q.run("analysis", lambda: 42) == 42 and len(q) == 0


def test_the_analysis_cache_is_bounded_in_bytes_least_recently_used_first():
    cache = ByteLRU(100, len)
    cache.put("a", "x" * 40)
    cache.put("b", "x" * 40)
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", "x" * 40)  # 120 > 100: b goes
    assert "b" not in cache and "a" in cache and "c" in cache and cache.nbytes == 80
    cache.put("huge", "x" * 500)  # larger than the budget: kept alone
    assert len(cache) == 1 and "huge" in cache
    # what was dropped is remembered (its reader is told it is read again), until kept again
    assert cache.was_dropped("b") and cache.was_dropped("a") and not cache.was_dropped("huge")
    assert not cache.was_dropped("never kept")
    cache.put("b", "x" * 40)
    assert not cache.was_dropped("b") and cache.was_dropped("huge")


def _in_thread(target, *args):
    th = threading.Thread(target=target, args=args, daemon=True)
    th.start()
    return th


def test_the_same_work_asked_by_four_readers_runs_once_and_all_get_its_result():
    """Four readers pressing step 7's Run at once: one benchmark, four results."""
    q = TicketQueue()
    release, started, ran, got = threading.Event(), threading.Event(), [], []

    def bench():
        ran.append(1)
        started.set()
        assert release.wait(10)
        return "rows"

    first = _in_thread(lambda: got.append(q.run("bench", bench, same=("cpu", (256, 512)))))
    assert started.wait(5)
    told = [threading.Event() for _ in range(3)]
    others = [_in_thread(lambda e=e: got.append(q.run("bench", bench, lambda ahead, s, e=e: e.set(),
                                                      same=("cpu", (256, 512))))) for e in told]
    assert all(e.wait(5) for e in told)  # each is told it waits (for the one run)
    assert len(q) == 1  # no ticket of their own
    release.set()
    for th in [first, *others]:
        th.join(5)
    assert not any(th.is_alive() for th in [first, *others])
    assert ran == [1] and got == ["rows"] * 4 and len(q) == 0


def test_when_the_shared_work_fails_the_one_waiting_runs_its_own():
    q = TicketQueue()
    go, started, got = threading.Event(), threading.Event(), []

    def failing():
        started.set()
        assert go.wait(10)
        raise RuntimeError("out of memory")

    first = _in_thread(lambda: pytest.raises(RuntimeError, q.run, "sweep", failing, same="text-1"))
    assert started.wait(5)
    waiting = threading.Event()
    second = _in_thread(lambda: got.append(q.run("sweep", lambda: "results", lambda a, s: waiting.set(),
                                                 same="text-1")))
    assert waiting.wait(5)
    go.set()
    first.join(5)
    second.join(5)
    assert got == ["results"] and len(q) == 0


def test_a_new_text_then_a_rooms_text_go_before_heavy_work_still_waiting_but_after_the_work_running():
    q = TicketQueue()
    order = []
    running = q.take("sweep")
    q.wait(running)  # its turn at once: it runs
    bench = q.take("bench")
    room = q.take("room")  # a text sent to a class's room: after the readers' texts, before heavy work
    handout = q.take("handout")
    text = q.take("analysis")  # a reader's own new text
    later = q.take("analysis")
    room2 = q.take("room")
    # heavy work by what it has left: the handout (a guessed 5 s) before the benchmark (40 s)
    assert [q.ahead(t) for t in (text, later, room, room2, handout, bench)] == [1, 2, 3, 4, 5, 6]
    workers = [_in_thread(lambda t=t, name=name: (q.wait(t), order.append(name), q.done(t)))
               for t, name in ((handout, "handout"), (bench, "bench"), (room2, "room2"), (room, "room"),
                               (later, "later"), (text, "text"))]
    q.done(running)
    for th in workers:
        th.join(5)
    assert order == ["text", "later", "room", "room2", "handout", "bench"]


def test_the_wait_told_is_each_kinds_measured_rate_times_its_size(monkeypatch):
    """A fake clock: a sweep of weight 2 took 20 s (10 s a unit), an analysis of weight
    1 took 1 s. Behind a sweep of weight 3 running for 12 s and a waiting sweep of
    weight 1, a new text waits only for what is left of the running sweep: 3·10 − 12 =
    18 s, a second text 18 + 1 = 19 s; a handout (a guessed 5 s) 18 + 1 + 1 = 20 s (the
    two texts go before it), and the waiting sweep after it 20 + 5 = 25 s (heavy work
    waiting goes by what it has left: the handout's 5 s before the sweep's 10)."""
    import server.work_queue as work_queue

    now = [1000.0]
    monkeypatch.setattr(work_queue.time, "monotonic", lambda: now[0])
    q = TicketQueue()
    for kind, weight, took in (("sweep", 2, 20.0), ("analysis", 1, 1.0)):
        t = q.take(kind, weight=weight)
        q.wait(t)
        now[0] += took
        q.done(t)
    running = q.take("sweep", weight=3)
    q.wait(running)
    now[0] += 12
    waiting = q.take("sweep", weight=1)
    heavy = q.take("handout")
    text = q.take("analysis", weight=1)
    text2 = q.take("analysis", weight=1)
    assert q.estimate(heavy) == pytest.approx(20.0)
    assert q.estimate(text) == pytest.approx(18.0) and q.estimate(text2) == pytest.approx(19.0)
    assert q.estimate(waiting) == pytest.approx(25.0)  # behind the running sweep, both texts and the handout


def test_a_short_text_behind_a_long_one_read_in_pieces_is_told_the_rest_of_one_piece(monkeypatch):
    """A fake clock, 1 s a token: a long text of 100 tokens read in pieces, its last piece
    10 s (100 → 90 tokens left), 3 s into the next: a short text taken now goes at the next
    turn, and is told 10 − 3 = 7 s (not the long text's 90 − 3 = 87); a longer text would not
    go before it, and is told its 87 s and the short text's 1 s."""
    import server.work_queue as work_queue

    now = [1000.0]
    monkeypatch.setattr(work_queue.time, "monotonic", lambda: now[0])
    q = TicketQueue()
    q._took["analysis"] = 1.0
    long = q.take("analysis", weight=100)
    q.wait(long)
    q.turn(long, 100, weight=100)  # tokenized: its size told, before any piece
    now[0] += 10
    q.turn(long, 90)  # one piece read
    now[0] += 3
    short, longer = q.take("analysis", weight=1), q.take("analysis", weight=200)
    assert q.estimate(short) == pytest.approx(7.0)
    assert q.estimate(longer) == pytest.approx(87.0 + 1.0)


def test_a_shared_result_store_is_bounded_and_safe_across_threads():
    """CountLRU: what every session of a process shares (sweeps, live runs, timings)
    keeps at most its number of entries, the least recently used dropped, under a lock."""
    store = CountLRU(3)
    for k in "abc":
        store[k] = k.upper()
    assert store["a"] == "A"  # a is now the most recently used
    store["d"] = "D"
    assert "b" not in store and len(store) == 3 and store.get("b") is None
    with pytest.raises(KeyError):
        store["b"]

    big = CountLRU(50)

    def writer(i):
        for j in range(500):
            big[(i, j)] = j
            big.get((i, j - 1))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(big) == 50 and big.nbytes == 50


def test_a_short_text_taken_while_a_long_one_runs_in_pieces_goes_at_the_next_piece():
    """A long text read in ten pieces (100 tokens at 1 s a token, as measured); a short
    text (1 token) taken during its third piece runs right after that piece, then the long
    one goes on where it was, and finishes."""
    q = TicketQueue()
    q._took["analysis"] = 1.0
    log = []

    def long_work(turn):
        for i in range(10):
            log.append(f"long {i}")
            if i == 2:
                _in_thread(lambda: q.run("analysis", lambda: log.append("short"), weight=1))
                assert _until(lambda: len(q) == 2)  # the short text holds its ticket
            turn(100 - 10 * (i + 1))
        return "read"

    assert q.run("analysis", long_work, weight=100, pieces=True) == "read"
    assert _until(lambda: "short" in log)
    assert log == ["long 0", "long 1", "long 2", "short"] + [f"long {i}" for i in range(3, 10)]
    assert len(q) == 0


def test_a_long_text_behind_a_stream_of_short_ones_is_not_starved(monkeypatch):
    """A fake clock: a long text of 100 s waits while short texts (1 s) keep coming; each
    new short text goes first until the long one has waited about as long as it has left
    to run (100 − 1 = 99 s, AGING = 1), then the long one goes before every later one."""
    import server.work_queue as work_queue

    now = [0.0]
    monkeypatch.setattr(work_queue.time, "monotonic", lambda: now[0])
    q = TicketQueue()
    q._took["analysis"] = 1.0
    long = q.take("analysis", weight=100)
    for at, long_first in ((10.0, False), (60.0, False), (98.0, False), (100.0, True), (150.0, True)):
        now[0] = at
        short = q.take("analysis", weight=1)
        assert (q.ahead(long) == 0) is long_first, at
        q.done(short)


def test_no_ticket_goes_before_an_earlier_one_of_its_tier_with_less_left():
    """Brute force on random lines: tickets of random sizes taken at random moments, some
    of them already part done; in the order served, no ticket comes before one of its tier
    that was taken earlier and has no more left (that one is both older and shorter)."""
    import random

    import server.work_queue as work_queue

    rng = random.Random(7)
    for _ in range(200):
        q = TicketQueue()
        q._took.update(analysis=1.0, room=2.0)
        clock, tickets = 0.0, []
        for _ in range(rng.randint(2, 9)):
            clock += rng.uniform(0, 30)
            t = q.take(rng.choice(["analysis", "analysis", "room"]), weight=rng.uniform(1, 200))
            t.taken = clock
            if rng.random() < 0.3:
                t.left = rng.uniform(0, t.weight)
            tickets.append(t)
        real = work_queue.time.monotonic
        at = clock + rng.uniform(0, 100)
        work_queue.time.monotonic = lambda at=at: at
        try:
            order = sorted(tickets, key=q.ahead)
        finally:
            work_queue.time.monotonic = real
        for i, b in enumerate(order):
            for a in order[i + 1:]:
                older_and_shorter = a.tier == b.tier and a.taken < b.taken and a.to_do <= b.to_do
                assert not older_and_shorter, (a, b)


def _until(ok, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_a_short_text_sent_while_a_long_one_is_read_is_read_between_its_chunks(monkeypatch):
    """The app's analysis work (ui.analyses) on the tiny model, through one queue: a long
    text read 64 tokens at a time; a short text sent while its first chunks are read is
    read before the long one's next chunk, and the long one then goes on. Each analysis
    is the same as the one its text gets alone, read whole."""
    from attn import loading
    from attn import model as model_module
    from ui import analyses

    tiny = loading.tiny(device="cpu")
    monkeypatch.setattr(analyses, "get_model", lambda model_id: tiny)
    kept = ByteLRU(10**9, lambda a: a.nbytes)
    monkeypatch.setattr(analyses, "_analyses", lambda: kept)
    long_text, short_text = "A long chapter, read a chunk at a time. " * 20, "Five short words here."
    monkeypatch.setattr(model_module, "CHUNK", 10**9)
    alone = {t: tiny.analyze(t) for t in (long_text, short_text)}
    monkeypatch.setattr(model_module, "CHUNK", 64)
    q, order, sent = TicketQueue(), [], threading.Event()
    q._took["analysis"] = 0.01
    reading = analyses.Reading()

    def progress(done, tokens):
        order.append(("long", done))
        if done >= 128 and not sent.is_set():  # two chunks read: the short text is sent now
            sent.set()
            _in_thread(lambda: order.append(("short", q.run("analysis", analyses._analysis_work(short_text, "tiny"),
                                                            weight=5, pieces=True).n)))
            assert _until(lambda: len(q) == 2)

    got = q.run("analysis", analyses._analysis_work(long_text, "tiny", reading, progress), weight=200, pieces=True)
    assert _until(lambda: any(o[0] == "short" for o in order))
    first_short = [i for i, o in enumerate(order) if o[0] == "short"][0]
    # read after the long text's second chunk ended, and before its third one began
    assert order[first_short - 1] == ("long", 128) and order[first_short + 1][1] > 128
    assert order[first_short][1] == alone[short_text].n
    assert reading.done == reading.tokens == alone[long_text].n and reading.paused > 0
    for name in ("q", "k", "v"):
        assert torch.allclose(getattr(got, name), getattr(alone[long_text], name), atol=2e-5)
