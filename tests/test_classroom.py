"""A class at once, at the protocol level (Streamlit's websocket, as a browser speaks
it; tiny model): several readers on one server each see their own text, and the same
through HAProxy with two replicas, each reader kept on its replica by a cookie; a live
class as the bench runs it, small; a replica killed mid-class; an analysis's size and
its memory given back. (The queue and the caches on their own: tests/test_work_queue.py.)"""

import asyncio
import contextlib
import gc
import os
import signal
import sys
import weakref

import pytest
import torch

from attn import budgets, loading
from harness.live_class import ANSWERED, CLASS_CODE, answer, between, class_scenario
from harness.proxy import haproxy_path, replicas_behind_proxy
from harness.readers import Reader
from harness.serve import app_server
from helpers import PAGE, PAGES
from ui import i18n

TOKENS = i18n.translate("en", "every_pair.metric_n")


def texts(k: int) -> list[str]:
    """k texts of different lengths, so each reader's token count is its own."""
    return [f"Reader {i} writes a line of their own. " * (2 + i) for i in range(k)]


async def class_of(url: str, mine: list[str], page: str = "") -> list:
    async def one(text):
        r = Reader(url, "en")
        await r.connect()
        try:
            await r.run(page)
            run = await r.run(page, text=text)
            return r, run
        finally:
            await r.close()

    return await asyncio.gather(*(one(x) for x in mine))


@pytest.fixture(scope="module")
def tiny():
    return loading.tiny(device="cpu")


@pytest.fixture(scope="module")
def server():
    """One tiny-model server for the protocol-level tests (each sends texts of its own)."""
    with app_server("tiny") as url:
        yield url


def test_readers_at_once_are_all_served_each_with_their_own_text(tiny, server):
    mine = texts(5)
    results = asyncio.run(class_of(server, mine))
    for text, (_reader, run) in zip(mine, results):
        assert run.finished and not run.exceptions
        assert run.metric(TOKENS) == i18n.fmt_int(tiny.analyze(text).n, "en")  # no cross-talk


def test_readers_waiting_for_the_model_see_their_place_in_line_and_all_are_served(tiny, server):
    """Six readers paste texts of 1,024 tokens at the same moment: one model, one queue.
    Those behind see "N ahead of you, about S s" while they wait; then each gets its own."""
    mine = [f"Reader {i} pastes a long line of their own, word after word, again and again. " * 60
            for i in range(6)]
    waiting = i18n.translate("en", "queue.waiting", ahead="§", seconds="§").split("§")

    async def at_once(url):
        readers = [Reader(url, "en") for _ in mine]
        for r in readers:
            await r.connect()
        try:
            await asyncio.gather(*(r.run("") for r in readers))  # everyone on the page first
            return await asyncio.gather(*(r.run("", text=x) for r, x in zip(readers, mine)))  # then all paste
        finally:
            for r in readers:
                await r.close()

    runs = asyncio.run(at_once(server))
    told = []
    for text, run in zip(mine, runs):
        assert run.finished and not run.exceptions
        assert run.metric(TOKENS) == i18n.fmt_int(tiny.analyze(text).n, "en")
        notes = [a for a in run.alerts if a.startswith(waiting[0])]
        told += [int(a[len(waiting[0]):].split(waiting[1])[0].replace(",", "")) for a in notes]
    assert told and min(told) >= 1  # someone waited, and was told how many came first
    assert max(told) <= len(mine) - 1


def proxied() -> None:
    if haproxy_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no haproxy in CI: scripts/test.sh installs Debian's haproxy")
        pytest.skip("no haproxy here (Debian: apt-get install --no-install-recommends haproxy)")


def test_through_haproxy_readers_land_on_both_replicas_and_stay_on_theirs(tiny):
    proxied()
    mine = texts(4)
    with replicas_behind_proxy(2, model="tiny", timeout=300) as (url, pids):
        assert len(pids) == 2

        async def scenario():
            results = await class_of(url, mine)
            replicas = [r.cookie("ATLAS_REPLICA") for r, _ in results]
            # a reader reconnects (its websocket dropped) with its cookie and session: same replica, same session
            r = Reader(url, "en")
            await r.connect()
            await r.run("")
            await r.run("", text=mine[0])
            first_session, replica = r.session_id, r.cookie("ATLAS_REPLICA")
            await r.close()
            await r.connect(fetch=False)
            again = await r.run("hubs")
            await r.close()
            return results, replicas, replica, first_session, r.session_id, again

        results, replicas, replica, first, second, again = asyncio.run(scenario())
    for text, (_r, run) in zip(mine, results):
        assert run.finished and not run.exceptions
        assert run.metric(TOKENS) == i18n.fmt_int(tiny.analyze(text).n, "en")
    assert set(replicas) == {"r1", "r2"}  # round robin: both replicas serve
    assert replica in ("r1", "r2") and first == second  # the same session, so the same replica
    assert again.finished and not again.exceptions


def _deep_size(o, seen: set) -> int:
    """Bytes of a Python object and of what its lists and tuples hold (each object once)."""
    if id(o) in seen:
        return 0
    seen.add(id(o))
    return sys.getsizeof(o) + (sum(_deep_size(x, seen) for x in o) if isinstance(o, (list, tuple)) else 0)


@pytest.mark.parametrize("text", ["A few words to measure.", "word " * 300])
def test_an_analysis_knows_its_size(tiny, text):
    """The analysis cache's budget counts what an analysis really holds: measured here
    field by field — each tensor by the storage behind it (a view of a larger buffer
    would keep all of it alive), everything else by Python's own sizes — within 10 %."""
    import dataclasses

    a = tiny.analyze(text)
    seen: set = set()
    held = sum(v.untyped_storage().nbytes() if isinstance(v, torch.Tensor) else _deep_size(v, seen)
               for v in (getattr(a, f.name) for f in dataclasses.fields(a)))
    assert 0.9 * held <= a.nbytes <= 1.1 * held


@pytest.mark.parametrize("page", PAGES)
def test_a_dropped_analysis_is_freed_though_its_reader_stays(make_app, monkeypatch, page):
    """Memory under a class: once the cache drops a text's analysis, nothing else keeps
    it alive: not its reader's widgets (they keep labels, not the analysis), nor that
    reader's finished page run (a reference cycle, collected when the cache drops an
    entry). The collector's own runs are off here, so only the app's collection frees it."""
    from ui import analyses

    monkeypatch.setenv("ATLAS_ANALYSIS_MB", "0.001")  # room for one analysis at a time
    analyses.forget_all()
    readers, gone = [], []
    gc.collect()
    gc.disable()
    try:
        for i, text in enumerate(texts(3)):
            at = make_app("tiny", "en")
            at.run()
            at.sidebar.text_area(key="text").input(text).run()
            if page != PAGE["every-pair"]:
                at.switch_page(page).run()
            assert not at.exception, [e.value for e in at.exception]
            readers.append(at)  # every reader stays, with their widgets and their last run
            gone.append(weakref.ref(analyses.cached(text, "tiny")))
            assert analyses.dropped() >= i  # each new text drops the one before
        assert [ref() is None for ref in gone] == [True, True, False]
    finally:
        gc.enable()
        analyses.forget_all()


def test_the_server_cuts_a_text_past_the_cap_whatever_the_browser_sends(server):
    """A reader's websocket sends 50,000 characters more than the text area takes: the
    server reads the text area's cap only (the tiny model reads one token a character,
    after its first token: the truncation says MAX_CHARS + 1 tokens, not 50,000 more)."""
    from ui.session import MAX_CHARS

    async def send_long(url):
        r = Reader(url, "en")
        await r.connect()
        try:
            await r.run("")
            return await r.run("", text="a" * (MAX_CHARS + 50_000))
        finally:
            await r.close()

    run = asyncio.run(send_long(server))
    assert run.finished and not run.exceptions
    used = i18n.fmt_int(budgets.token_budget("cpu"), "en")  # the server's whole budget
    said = i18n.translate("en", "common.truncated", used=used, total=i18n.fmt_int(MAX_CHARS + 1, "en"))
    assert said in run.markdown, [m for m in run.markdown if used in m]


def test_the_benchs_class_scenario_at_five_students_follows_counts_and_reveals(server, tiny):
    """bench/classroom.py's class, small: a teacher and five students speaking the
    protocol as browsers do (each student's poll a fragment rerun a second, the page
    switches the server starts followed, the class and student in every address). Every
    student lands on each of the teacher's steps, every answer reaches her count, and the
    share right she is shown is the share of the students' own picks that match the
    answer she reveals; the answers redraw no following student's page. Timings are the
    bench's; here only that all happened in time."""
    res = asyncio.run(class_scenario(server, 5, moves=2, wait=60))
    assert not res["exceptions"] and not res.get("poll_errors")
    assert res["join"][1] == 0 and len(set(res["ids"])) == 5 and all(res["ids"])  # five students, five ids
    assert [failed for _, _, failed in res["follow"]] == [0, 0]
    assert [step for step, _, _ in res["follow"]] == [2, 3]
    assert res["answer"][1] == 0 and res["counted"] == 5 and len(res["chose"]) == 5
    # the vote is step 3's reach: L layers of a causal window of 3 (its defaults, L = min(4, layers)) reach
    # L·(3 − 1) + 1 tokens of the 64 it draws — worked out here, not read off the app's own reveal
    assert res["right_label"] == str(min(2 * min(4, tiny.n_layers) + 1, 64))
    right = sum(1 for label in res["chose"].values() if label == res["right_label"]) / 5
    assert res["right_shown"] == i18n.Translator("en").pct(right, 0)
    assert res["following"] == 5  # the class and student id still in each address after every switch
    assert res["plain"][1] == 0 and res["class"][1] == 0
    assert res["polls"] > 5  # the students did poll
    assert res["redrawn"] == 0  # the answers moved the teacher's count and redrew no student's page


@pytest.mark.parametrize("machines", ["one machine, SQLite", "two machines, PostgreSQL"])
def test_a_replica_killed_mid_class_its_students_reconnect_to_the_other_still_in_the_class_with_their_answers(
        tiny, machines, request, tmp_path):
    """Two replicas behind HAProxy — on one machine sharing its SQLite file, or as on two
    machines (each its own cache folder, so its own SQLite file unused) on one PostgreSQL.
    A share link made through one replica opens on the other. A teacher and four students
    spread over both; a vote is open and some have answered when the replica serving
    none of the teacher's work is killed: its students reconnect (HAProxy sends them to
    the other), their addresses bring them back into the class as the same students,
    their answers are still theirs (a second answer is not offered), the others can
    still answer, and the teacher's count ends at four."""
    proxied()
    sent = i18n.translate("en", "vote.sent", answer="§").split("§")
    envs = None
    if machines.endswith("PostgreSQL"):
        database = request.getfixturevalue("pg_server").new_database()
        envs = [{"ATLAS_CACHE_DIR": str(tmp_path / f"machine-{i}"), "ATLAS_DATABASE_URL": database} for i in (1, 2)]
    linked = "A text shared through one replica and opened on the other. " * 3

    async def shared_across(url):
        maker = Reader(url, "en")
        await maker.connect()
        await maker.run("")
        await maker.run("", text=linked)
        made = await maker.run(None, click="share")
        link = next(c for c in made.code if "?s=" in c)
        key = link.split("?s=")[1]
        for _ in range(6):  # a reader on the other replica (round robin: one of the next two)
            other = Reader(url, "en", query={"s": key})
            await other.connect()
            if other.cookie("ATLAS_REPLICA") != maker.cookie("ATLAS_REPLICA"):
                opened = await other.run("")
                await other.close()
                await maker.close()
                return opened
            await other.close()
        raise AssertionError("no reader landed on the other replica")

    async def scenario(url, pids):
        opened = await shared_across(url)
        assert opened.metric(TOKENS) == i18n.fmt_int(tiny.analyze(linked).n, "en")  # the link's text, there
        teacher = Reader(url, "en")
        await teacher.connect()
        await teacher.run("")
        started = await teacher.run(None, click="class_start")
        code = between(started.markdown, CLASS_CODE).replace(" ", "")
        students = [Reader(url, "en", query={"class": code}) for _ in range(4)]
        for s in students:
            await s.connect()
            await s.run("")
        where = [s.cookie("ATLAS_REPLICA") for s in students]
        mine = teacher.cookie("ATLAS_REPLICA")
        doomed = "r2" if mine == "r1" else "r1"
        assert doomed in where and mine in where  # students on both replicas
        await teacher.run(None, click="vote_open_s1_doubling")
        for s in students:
            await s.run(None)  # a tick: the vote is open on their page
        ids = [s.query.get("me") for s in students]
        # the students on the doomed replica answer; one on the teacher's waits
        answered = [i for i, w in enumerate(where) if w == doomed] + [where.index(mine)]
        for i in answered:
            s = students[i]
            send = next(k for k in s.ids if k.startswith("vote_send_"))
            await answer(s, send, 0)
        os.kill(pids[int(doomed[1]) - 1], signal.SIGKILL)
        again = []
        for i, s in enumerate(students):
            if where[i] != doomed:
                continue
            with contextlib.suppress(Exception):
                await s.close()
            s.ws = None
            for _ in range(20):  # as a browser retries while HAProxy notices the replica is gone
                try:
                    await s.connect()
                    again.append((i, await s.run(None)))
                    break
                except Exception:
                    await asyncio.sleep(0.5)
        rest = [i for i in range(4) if i not in answered]
        for i in rest:
            s = students[i]
            send = next(k for k in s.ids if k.startswith("vote_send_"))
            await answer(s, send, 1)
        count = between((await teacher.run(None)).markdown, ANSWERED)
        for s in students + [teacher]:
            await s.close()
        return code, doomed, where, ids, again, students, count

    with replicas_behind_proxy(2, model="tiny", timeout=300, envs=envs) as (url, pids):
        code, doomed, where, ids, again, students, count = asyncio.run(scenario(url, pids))
    assert again and len(again) == where.count(doomed)
    for i, run in again:
        s = students[i]
        assert run.finished and not run.exceptions
        assert s.cookie("ATLAS_REPLICA") != doomed  # now on the other replica
        assert s.query.get("class") == code and s.query.get("me") == ids[i]  # the same student, in the class
        assert any(m.startswith(sent[0]) for m in run.markdown)  # their answer is still theirs
        assert not any(k.startswith("vote_send_") for k in run.ids)  # no second answer offered
    assert count == "4"  # the teacher counts every answer, from both replicas, before and after


@pytest.mark.parametrize("x,lang,shown", [
    (1e-300, "en", "1.00 × 10⁻³⁰⁰"),  # never the 0 no one sent
    (0.00002, "pt", "2,00 × 10⁻⁵"),
    (0.000123, "en", "0.000123"),  # three significant digits in six decimals: as written
    (6.5, "en", "6.5"), (0.722, "pt", "0,722"), (2098176.0, "pt", "2.098.176"),
])
def test_an_estimate_is_echoed_as_a_number_the_student_would_recognise(x, lang, shown):
    from ui.classroom import estimates
    from ui.i18n import Translator

    assert estimates.number_text(Translator(lang), x) == shown
