"""The analyses' memory budget (ATLAS_ANALYSIS_MB, ui.analyses): it counts the analyses
kept and those other readers' page runs are reading (ui.page_run.reads), not only those
kept; a new text's run stands aside (shorter work goes meanwhile) until the memory it needs
is free; an analysis dropped to make room and read again gives the same numbers. On the
tiny model, through the app's own analysis work and one queue."""

import gc
import threading
import time

import pytest
import torch

from attn import loading, spill
from attn.spill import LayerFile
from server.lru import ByteLRU
from server.work_queue import TicketQueue
from ui import analyses, page_run

LONG = ["A long chapter one reader pastes, sentence after sentence. " * 12,
        "Another reader's long chapter, word after word, line after line. " * 12]
SHORT = "Five short words, no more."


def dense(x) -> torch.Tensor:
    """An analysis' q, k or v as one tensor, kept in memory or in a file (attn.spill)."""
    return x.dense() if isinstance(x, LayerFile) else x.clone()


@pytest.fixture
def app_work(monkeypatch):
    """The app's analysis work on the tiny model, with a cache and live set of its own."""
    tiny = loading.tiny(device="cpu")
    # these are about analyses held in memory: none goes to a file under budgets of a text or
    # two (attn.spill; tests/test_spill.py is about those that do)
    monkeypatch.setattr(spill, "SHARE", 1.0)
    kept = ByteLRU(10**12, lambda a: a.nbytes)
    monkeypatch.setattr(analyses, "get_model", lambda model_id: tiny)
    monkeypatch.setattr(analyses, "_analyses", lambda: kept)
    monkeypatch.setattr(analyses, "ASIDE", 0.05)
    q = TicketQueue()

    def run(text, reading=None):  # as get_analysis runs it: a second reader of the same text shares the run
        return q.run("analysis", analyses._analysis_work(text, "tiny", reading), same=("tiny", text),
                     weight=len(text), pieces=True)

    return tiny, kept, run


def test_an_analysis_dropped_to_make_room_is_read_again_with_the_same_numbers(app_work, monkeypatch):
    tiny, kept, run = app_work
    one = tiny.arch.analysis_bytes(tiny.encode(LONG[0])[0].__len__())
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(1.5 * one / 2**20))  # room for one long text
    first = run(LONG[0])
    q0, k0, v0 = (dense(x) for x in (first.q, first.k, first.v))
    del first
    run(LONG[1])  # the first is dropped to make room for it
    assert kept.was_dropped(("tiny", LONG[0])) and ("tiny", LONG[0]) not in kept
    gc.collect()
    again = run(LONG[0])
    assert torch.equal(dense(again.q), q0) and torch.equal(dense(again.k), k0) and torch.equal(dense(again.v), v0)


def test_a_new_text_waits_while_other_pages_read_analyses_past_the_budget_and_short_work_goes_meanwhile(
        app_work, monkeypatch):
    tiny, kept, run = app_work
    n = len(tiny.encode(LONG[0])[0])
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(1.5 * tiny.arch.analysis_bytes(n) / 2**20))
    reading_page, page_ends = threading.Event(), threading.Event()

    def page():  # another reader's page run, reading the first long text until it ends
        page_run.run_started()
        try:
            a = run(LONG[0])
            page_run.reads(a, a.nbytes)
            reading_page.set()
            page_ends.wait(20)
        finally:
            page_run.run_ended()

    other = threading.Thread(target=page, daemon=True)
    other.start()
    assert reading_page.wait(20)
    reading, got = analyses.Reading(), {}
    second = threading.Thread(target=lambda: got.setdefault("long", run(LONG[1], reading)), daemon=True)
    second.start()
    end = time.monotonic() + 10
    while not reading.for_memory and time.monotonic() < end:
        time.sleep(0.01)
    assert reading.for_memory and "long" not in got  # it stands aside: the memory is in use
    assert run(SHORT).n == len(tiny.encode(SHORT)[0])  # a short text fits beside it, and goes
    time.sleep(0.3)
    assert "long" not in got and ("tiny", LONG[0]) not in kept  # the kept copy was let go; the page still reads it
    page_ends.set()  # the other page ends
    second.join(10)
    assert not second.is_alive() and got["long"].n == len(tiny.encode(LONG[1])[0]) and not reading.for_memory


def test_a_page_that_reads_one_text_and_asks_for_another_never_waits_on_itself(app_work, monkeypatch):
    tiny, kept, run = app_work
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "0.001")  # smaller than any analysis
    page_run.run_started()
    try:
        a = run(LONG[0])
        page_run.reads(a, a.nbytes)
        t0 = time.monotonic()
        assert run(LONG[1]).n == len(tiny.encode(LONG[1])[0])
        assert time.monotonic() - t0 < analyses.MEMORY_WAIT / 10
    finally:
        page_run.run_ended()


def test_a_text_alone_is_read_whatever_its_size(app_work, monkeypatch):
    tiny, kept, run = app_work
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "0.001")  # smaller than any analysis
    assert analyses.held_bytes() == 0
    assert run(LONG[0]).n == len(tiny.encode(LONG[0])[0])


def test_a_page_asking_again_for_its_own_text_after_the_cache_let_it_go_gets_what_it_reads(app_work, monkeypatch):
    tiny, kept, run = app_work
    n = len(tiny.encode(LONG[0])[0])
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(1.5 * tiny.arch.analysis_bytes(n) / 2**20))
    runs = []
    analyze = tiny.analyze
    monkeypatch.setattr(tiny, "analyze", lambda *a, **k: runs.append(a[0]) or analyze(*a, **k))
    page_run.run_started()
    try:
        first = analyses.get_analysis(LONG[0], "tiny")  # the page reads it (a step's grid) …
        kept.shrink(0)  # … and the cache lets it go, to make room for another reader's text
        assert analyses.cached(LONG[0], "tiny") is None
        again = analyses.get_analysis(LONG[0], "tiny")  # the same page's row of that grid
        kept.put(("tiny", LONG[0]), tiny.analyze(LONG[0]))  # another reader's page read it again since
        third = analyses.get_analysis(LONG[0], "tiny")
    finally:
        page_run.run_ended()
    assert again is first and third is first  # what it reads: never a second copy held by one page
    assert runs == [LONG[0], LONG[0]]  # the model ran for the other reader only
    assert analyses.held_bytes() == kept.nbytes  # the page ended: only the copy kept for the others


def test_two_pages_each_reading_a_text_and_asking_for_another_do_not_wait_for_each_other(app_work, monkeypatch):
    tiny, kept, run = app_work
    n = len(tiny.encode(LONG[0])[0])
    monkeypatch.setattr(analyses, "MEMORY_WAIT", 30.0)
    both_read, go, took = threading.Barrier(3, timeout=20), threading.Barrier(3, timeout=20), {}

    def page(mine: str, other: str) -> None:
        page_run.run_started()
        try:
            a = run(mine)
            page_run.reads(a, a.nbytes)
            both_read.wait()  # each page now holds one long text …
            go.wait()  # … past the budget together
            t0 = time.monotonic()
            run(other)
            took[mine] = time.monotonic() - t0
        finally:
            page_run.run_ended()

    pages = [threading.Thread(target=page, args=(LONG[i], LONG[1 - i] + " (again)"), daemon=True) for i in (0, 1)]
    for p in pages:
        p.start()
    both_read.wait()
    kept.shrink(0)
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(1.5 * tiny.arch.analysis_bytes(n) / 2**20))
    go.wait()
    for p in pages:
        p.join(40)
    assert len(took) == 2 and max(took.values()) < analyses.MEMORY_WAIT / 3, took


def test_a_page_that_waits_on_another_readers_run_of_the_same_text_does_not_hold_that_run_back(
        app_work, monkeypatch):
    """Page X reads one long text and asks for a second that page Y's run is reading: X waits
    on Y's run, so what X holds is not counted against that run (counted, the run would stand
    aside for X's memory while X waits for it: both until MEMORY_WAIT)."""
    tiny, kept, run = app_work
    n = len(tiny.encode(LONG[0])[0])
    monkeypatch.setenv("ATLAS_ANALYSIS_MB", str(1.5 * tiny.arch.analysis_bytes(n) / 2**20))
    monkeypatch.setattr(analyses, "MEMORY_WAIT", 30.0)
    x_reads, y_reading, took = threading.Event(), analyses.Reading(), {}

    def page_x():
        page_run.run_started()
        try:
            a = run(LONG[0])
            page_run.reads(a, a.nbytes)
            x_reads.set()
            end = time.monotonic() + 10
            while not y_reading.for_memory and time.monotonic() < end:  # Y's run stands aside for X's text
                time.sleep(0.01)
            t0 = time.monotonic()
            took["x"] = (run(LONG[1]), time.monotonic() - t0)  # … and X asks for Y's text: it shares Y's run
        finally:
            page_run.run_ended()

    def page_y():
        page_run.run_started()
        try:
            x_reads.wait(20)
            t0 = time.monotonic()
            took["y"] = (run(LONG[1], y_reading), time.monotonic() - t0)
        finally:
            page_run.run_ended()

    pages = [threading.Thread(target=page_x, daemon=True), threading.Thread(target=page_y, daemon=True)]
    for p in pages:
        p.start()
    for p in pages:
        p.join(40)
    assert set(took) == {"x", "y"} and took["x"][0] is took["y"][0]  # one run, shared
    assert max(s for _, s in took.values()) < analyses.MEMORY_WAIT / 3, took
