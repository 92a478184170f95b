"""A class on one server: N protocol-level readers at once (a benchmark, not a test).

    .venv/bin/python -m bench.classroom [--readers 30] [--steps 1,6] [--replicas 2]
                                        [--scenarios floor,open,switch,own,class] [--model gemma]
                                        [--chapters 3]

Starts the app as scripts/run.sh does (launch.py: the model loaded and the sample
texts' pages built from the start; with --replicas N: N app processes behind HAProxy,
scripts/serve.sh's layout) and waits until it says it is ready; for the floor,
bench/floor_app.py: a trivial page with one cached heatmap.
Readers speak Streamlit's websocket protocol from one asyncio process on loopback
(harness/readers.py) and draw nothing, so each figure is the server's time from the
request to the run's end. The teacher opens the three samples first (so they are
analysed), then:

  floor   N readers open the floor page at once, then all rerun it at once; with class,
          also the floor of a class that follows: N readers of the floor page, each
          polling a second, switched three times to the page a file names
  open    for each step: N fresh readers (ja/pt/en samples) open it at once, on its
          first visit since the start (what the start did not build is built while
          they wait), then N more
  switch  N readers already connected all move to the same step at once
  own     N readers each paste their own text at once, after the same texts (signed
          apart) one after another (≈ 370 tokens each; --long:
          the text area's cap each, the tokens the CPU analyses at most)
  class   a live class: a teacher starts one, N students join by its link (ja/pt/en),
          each polling as a browser does (the fragment's one-second reruns); the
          teacher moves three steps (the time from her click to each student's page on
          the new step), opens a vote that every student answers, each at a moment
          of its own within N/10 s (the time from a student's send to the teacher's
          count including it; the full-page reruns of following students the answers
          caused), closes and reveals it; meanwhile a reader outside the class views
          one step again and again, against the same views with nobody polling;
          with --chapters K, the same class again while K readers outside it each
          paste a chapter (bench/chapters.py's texts) as it starts
  room    the room: a teacher shows it on step 1, N students (an address each) send a
          text of their own (≈ 300 tokens) at once: what each send was told (taken with
          the press, kept for the poll to send again, refused) and its page run's p95;
          the time from each send to the teacher's chart
          showing it, until all N are there, a student's page view with the room shown
          against the same with it hidden, the store's bytes per text

Prints p50 / p95 / max per step and scenario, the ratio of p95 to the floor's, the
server's peak resident memory (polled from outside) and this process's own CPU time
(it shares the cores with the server).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import threading
import time

from attn.bench import matmul_gflops
from harness.live_class import LANG_CYCLE, OVERHEAD_STEP, all_run, class_scenario
from harness.readers import Reader, percentile
from harness.serve import SERVER_PIDS, app_server, process_cpu, ready_after, rss_mb
from ui.samples import sample_text
from ui.session import MAX_CHARS
from ui import walk

FLOOR_PAGES = ("one", "two", "three", "four")  # bench/floor_app.py's pages in follow mode (the first is its default)


class MemoryPoll:
    """Polls the servers' current RSS from outside, keeping the peak of their sum."""

    def __init__(self, pids: list[int], every: float = 0.2):
        self.pids, self.every, self.peak, self.stop = pids, every, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def _run(self):
        while not self.stop.is_set():
            total = 0.0
            for pid in self.pids:
                with contextlib.suppress(OSError):
                    total += rss_mb(pid)
            with self._lock:
                self.peak = max(self.peak, total)
            time.sleep(self.every)

    def reset(self) -> None:
        """The peak from now on."""
        with self._lock:
            self.peak = 0.0

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


LONG_CHARS = MAX_CHARS  # the text area's cap: the longest text a reader can paste


def own_text(i: int, long: bool = False) -> str:
    """Reader i's own text: a sample in one of the three languages, its sentences turned
    round by i and signed, so that no two readers send the same text. ``long``: the
    same, repeated up to the text area's cap (the analysis reads the CPU's budget of
    its first tokens, the most any text costs)."""
    lang = LANG_CYCLE[i % 3]
    base = sample_text(lang)
    cut = (i * 97) % max(1, len(base) // 2)
    sign = {"ja": f"（読者 {i} より）", "pt": f"(do leitor {i})", "en": f"(from reader {i})"}[lang]
    text = base[cut:] + "\n\n" + base[:cut] + " " + sign
    if long:
        text = (sign + " " + text + "\n\n") * (LONG_CHARS // len(text) + 1)
        text = text[:LONG_CHARS]
    return text


def summary_row(name: str, times: list[float], failed: int, floor_p95: float | None) -> str:
    p50, p95, top = percentile(times, 50), percentile(times, 95), max(times) if times else float("nan")
    ratio = f"{p95 / floor_p95:5.1f}×" if floor_p95 else "     "
    return f"  {name:<28} {len(times):>3} served {failed:>2} failed   p50 {p50:6.2f} s  p95 {p95:6.2f} s  " \
           f"max {top:6.2f} s  {ratio}"


async def open_all(url: str, n: int, page: str, lang_of=None) -> tuple[list[float], int]:
    """n fresh readers open ``page`` at once: their times, and how many failed."""
    async def one(i):
        r = Reader(url, (lang_of or (lambda k: LANG_CYCLE[k % 3]))(i))
        try:
            await r.connect()
            run = await r.run(page)
            if not run.finished or run.exceptions:
                raise RuntimeError(run.exceptions or "not finished")
            return run.seconds
        finally:
            await r.close()

    res = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    return [x for x in res if isinstance(x, float)], sum(1 for x in res if not isinstance(x, float))


async def connected(url: str, n: int, batch: int = 5) -> list[Reader]:
    """n readers on the first step, opened a few at a time (not timed)."""
    readers = []
    for start in range(0, n, batch):
        group = [Reader(url, LANG_CYCLE[i % 3]) for i in range(start, min(n, start + batch))]
        await asyncio.gather(*(r.connect() for r in group))
        await asyncio.gather(*(r.run("") for r in group))
        readers += group
    return readers


async def floor(url: str, n: int) -> dict:
    await open_all(url, 1, "")  # warm the cached heatmap
    out = {"open": await open_all(url, n, "")}
    readers = await connected(url, n)
    out["rerun"] = await all_run(readers, "")
    await asyncio.gather(*(r.close() for r in readers))
    return out


async def floor_follow(url: str, n: int, where: str, moves: int = 3, wait: float = 60.0) -> dict:
    """The floor of a class that follows (bench/floor_app.py with ATLAS_FLOOR_FOLLOW=where):
    n readers join a few at a time and poll each second; ``moves`` times the page named in
    ``where`` changes, as a teacher's move: the time from the change to each reader's run
    that put it on the new page."""
    from harness.live_class import Tracker, _until
    from harness.serve import cpu_seconds

    with open(where, "w", encoding="utf-8") as f:
        f.write(FLOOR_PAGES[0])
    await open_all(url, 1, "")  # warm the cached heatmap
    readers = await connected(url, n)
    track = Tracker(n)
    stop = asyncio.Event()
    polls = [asyncio.create_task(r.poll(10**6, track.student(i), stop)) for i, r in enumerate(readers)]
    out = {"follow": [], "move_cpu": []}
    try:
        await _until(lambda: all(track.polls[:-1]), wait)
        for page in FLOOR_PAGES[1:moves + 1]:
            track.target, track.arrived, track.move_at = page, {}, time.perf_counter()
            cpu = cpu_seconds(url)
            with open(where, "w", encoding="utf-8") as f:
                f.write(page)
            await _until(lambda: len(track.arrived) == n, wait)
            out["move_cpu"].append(cpu_seconds(url) - cpu)
            out["follow"].append(([t - track.move_at for t in track.arrived.values()], n - len(track.arrived)))
            settled = list(track.polls)  # every reader polls once more on the new page before the next move
            await _until(lambda settled=settled: all(p > s for p, s in zip(track.polls[:-1], settled[:-1])), wait)
        out["views"] = (track.views, 0)
    finally:
        stop.set()
        await asyncio.gather(*polls, return_exceptions=True)
        await asyncio.gather(*(r.close() for r in readers))
    if track.exceptions:
        raise RuntimeError(f"the floor's follow failed: {track.exceptions[:3]}")
    return out


async def classroom(url: str, n: int, steps: list[int], scenarios: set[str], floor_p95: float | None,
                    long: bool = False, follow_floor: float | None = None, chapters: int = 0) -> None:
    by_step = {walk.number(p): walk.link(p) for p in walk.steps()}
    teacher = [Reader(url, lang) for lang in LANG_CYCLE]
    for r in teacher:  # the teacher opens each sample: analysed once, before the class
        await r.connect()
        await r.run("")
    if "open" in scenarios:
        print(f"\n{n} readers open a step at once (ja/pt/en samples, already analysed): its first visit "
              f"since the start (what the start did not build, built once per language while they wait), then {n} "
              f"more readers")
        for s in steps:
            times, failed = await open_all(url, n, by_step[s])
            print(summary_row(f"step {s}, first visit", times, failed, floor_p95))
            times, failed = await open_all(url, n, by_step[s])
            print(summary_row(f"step {s}, built", times, failed, floor_p95))
    if "switch" in scenarios:
        print(f"\n{n} readers already connected all move to the same step at once")
        readers = await connected(url, n)
        for s in steps:
            times, failed = await all_run(readers, by_step[s])
            print(summary_row(f"step {s}", times, failed, floor_p95))
        await asyncio.gather(*(r.close() for r in readers))
    if "own" in scenarios:
        print(f"\n{n} readers each paste their own text at once (step 1)"
              + (f", each {LONG_CHARS:,} characters" if long else ""))
        readers = await connected(url, n)
        # the same texts back to back first, signed apart (no analysis found kept): one
        # reader of each language in turn, each text once the last is drawn
        t0 = time.perf_counter()
        for i, r in enumerate(readers):
            run = await r.run("", text=own_text(i, long) + " ·")
            if not run.finished or run.exceptions:
                raise RuntimeError(run.exceptions or "not finished")
        back = time.perf_counter() - t0
        texts = [own_text(i, long) for i in range(n)]
        t0 = time.perf_counter()
        times, failed = await all_run(readers, "", texts)
        whole = time.perf_counter() - t0
        print(summary_row("own texts", times, failed, None) + f"  (the whole class: {whole:.1f} s)")
        print(f"  the same {n} back to back: {back:.1f} s; p95 at once ÷ that: "
              f"{percentile(times, 95) / back:.2f} (goal ≤ 2)")
        await asyncio.gather(*(r.close() for r in readers))
    await asyncio.gather(*(r.close() for r in teacher))
    if "room" in scenarios:
        from harness.room_class import room_scenario
        from attn.settings import read

        t0 = time.perf_counter()
        texts = [own_text(i)[:1400] for i in range(n)]  # ≈ 300 tokens each
        res = await room_scenario(url, n, texts, str(read().store_path))
        print(f"\nthe room: {n} students each send a text of ≈ 300 tokens at once (the whole scenario "
              f"{time.perf_counter() - t0:.0f} s)")
        told = res["told"]
        print(summary_row("the press of Send", res["send"], 0, None))
        print(f"  sends taken with the press {told['taken']}, kept to send again {told['kept']}, refused "
              f"{told['refused']} (goal: {n} taken, none refused)")
        print(summary_row("send → on the teacher's chart", *res["point"], None) + "   (goal p95 ≤ 30 s)")
        print(f"  all {n} on the chart: {res['all']:.1f} s after the first send (goal ≤ 60 s); measured "
              f"{res['measured']} of {n}; the store holds {res['bytes_per_text'] / 1024:.1f} KB a text (goal ≤ 16 KB)")
        if res["pace"]:
            print(f"  the room's worker: a text's numbers every {statistics.median(res['pace']):.2f} s (median, one "
                  f"kept to the next); the next-to-last kept {res['next_to_last']:.1f} s after the first send")
            print(f"  from the first send: the last sent {res['sends_spread']:.1f} s later, the first text's numbers "
                  f"kept {res['first_kept']:.1f} s later")
        print(summary_row("step 1 viewed, room shown", *res["with"], None))
        print(summary_row("step 1 viewed, room hidden", *res["without"], None))
        if res["with"][0] and res["without"][0]:
            print(f"  the room: p95 {percentile(res['with'][0], 95) / percentile(res['without'][0], 95):.2f}× the "
                  f"same view without it (goal ≤ 1.5×)")
    if "class" in scenarios:
        t0 = time.perf_counter()
        res = await class_scenario(url, n)
        print_class(res, floor_p95, time.perf_counter() - t0, follow_floor)
        if res["exceptions"]:
            print(f"  exceptions on class pages: {sorted(set(res['exceptions']))[:3]}")
    if "class" in scenarios and chapters:
        from bench.chapters import chapter, step_one

        # the same class again while readers outside it paste a chapter each, at its start
        print(f"\nthe same class while {chapters} readers outside it each paste a chapter (assets/long_*.txt) "
              f"as it starts:")
        t0 = time.perf_counter()
        beside = [asyncio.create_task(step_one(url, *chapter(i, "beside a class"))) for i in range(chapters)]
        res = await class_scenario(url, n)
        print_class(res, floor_p95, time.perf_counter() - t0, follow_floor)
        done = await asyncio.gather(*beside)
        print(f"  the chapters beside it drawn after {', '.join(f'{x:.1f}' for x in done)} s")


def print_class(res: dict, floor_p95: float | None, seconds: float, follow_floor: float | None = None) -> None:
    n = res["n"]
    print(f"\na live class: a teacher and {n} students (ja/pt/en), each student's poll a fragment rerun a "
          f"second, all following")
    print(summary_row("join by link", *res["join"], floor_p95))
    for step, lat, failed in res["follow"]:
        print(summary_row(f"teacher's move → step {step}", lat, failed, None))
    every = [x for _, lat, _ in res["follow"] for x in lat]
    print(summary_row("follow, all moves", every, sum(f for _, _, f in res["follow"]), follow_floor)
          + "   (goal p95 ≤ 2 s; the ratio: to the floor's follow)")
    print(summary_row("the followed page's view", *res["views"], floor_p95))
    print(f"  the server's CPU from each move to the last student's arrival: "
          f"{', '.join(f'{c:.2f}' for c in res['move_cpu'])} s")
    print(f"  then a vote open on that step, the {n} answers arriving over {res['spread']:.0f} s:")
    print(summary_row("answer → teacher's count", *res["answer"], None) + "   (goal p95 ≤ 2 s)")
    print(f"  answers counted on the teacher's page: {res['counted']} of {n}; vote opened → last answer in: "
          f"{res['vote_open_to_all_answers']:.1f} s; full-page reruns of following students caused by the "
          f"{n} answers: {res['redrawn']} (goal 0)")
    print(f"  polls served: {res['polls']:,} in {res['poll_seconds']:.0f} s "
          f"({res['polls'] / max(res['poll_seconds'], 1e-9):.1f} a second); the whole scenario {seconds:.0f} s")
    plain, klass = res["plain"][0], res["class"][0]
    print(summary_row(f"step {OVERHEAD_STEP} viewed, nobody polling", *res["plain"], floor_p95))
    print(summary_row(f"step {OVERHEAD_STEP} viewed, {n} polling", *res["class"], floor_p95))
    if plain and klass:
        print(f"  the class's polling: p95 {percentile(klass, 95) / percentile(plain, 95):.2f}× the same view with "
              f"nobody polling, median {percentile(klass, 50) / percentile(plain, 50):.2f}× (goal p95 ≤ 1.15×)")


@contextlib.contextmanager
def servers(model: str, replicas: int, env: dict | None = None):
    """The app as scripts/run.sh starts it (launch.py: the model loaded and the sample
    texts' pages built from the start): one process, or N behind HAProxy (the layout of
    scripts/serve.sh); yielded once every process says it is ready."""
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if replicas <= 1:
            url = stack.enter_context(app_server(model, timeout=900, extra_env=env, warm=True))
            pids = [SERVER_PIDS[url]]
        else:
            from harness.proxy import replicas_behind_proxy

            url, pids = stack.enter_context(replicas_behind_proxy(replicas, model=model, envs=[env or {}] * replicas,
                                                                   warm=True))
        waits = [ready_after(u, t0) for u, pid in list(SERVER_PIDS.items()) if pid in pids]
        print(f"the app's process(es) ready {max(waits):.1f} s after the start (ui/warm.py)")
        yield url, pids


class DatabaseUse:
    """What PostgreSQL did meanwhile: transactions committed (each statement a read makes
    in autocommit is one), rows read and written, and its processes' CPU time."""

    def __init__(self, server):
        self.server = server

    def _now(self) -> tuple:
        import psycopg

        with psycopg.connect(self.server.url(), autocommit=True) as conn:
            row = conn.execute("SELECT sum(xact_commit + xact_rollback), sum(tup_returned + tup_fetched), "
                               "sum(tup_inserted + tup_updated + tup_deleted) FROM pg_stat_database").fetchone()
        cpu = 0.0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
                if b"postgres" in cmd and str(self.server.folder).encode() in cmd or self._child(pid):
                    cpu += process_cpu(pid)
        return (float(row[0] or 0), float(row[1] or 0), float(row[2] or 0), cpu, time.perf_counter())

    def _child(self, pid: str) -> bool:
        """A backend or helper of this server (their command lines do not name its folder)."""
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/stat") as f:
                parent = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{parent}/cmdline", "rb") as f:
                return str(self.server.folder).encode() in f.read()
        return False

    def __enter__(self):
        self.start = self._now()
        return self

    def __exit__(self, *exc):
        end = self._now()
        secs = end[4] - self.start[4]
        xacts, read, written, cpu = (end[i] - self.start[i] for i in range(4))
        print(f"\nPostgreSQL meanwhile ({secs:.0f} s): {xacts / secs:,.0f} transactions a second, "
              f"{read / secs:,.0f} rows read and {written / secs:,.0f} written a second, its CPU {cpu:.1f} s "
              f"({cpu / secs:.0%} of one core)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readers", type=int, default=30)
    ap.add_argument("--steps", default=",".join(str(walk.number(s)) for s in walk.steps()))
    ap.add_argument("--scenarios", default="floor,open,switch,own,class")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--model", default="gemma")
    ap.add_argument("--chapters", type=int, default=0,
                    help="with class: the class again while this many readers outside it paste a chapter each")
    ap.add_argument("--long", action="store_true", help="own texts at the text area's cap (the CPU's budget of tokens)")
    ap.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite",
                    help="the store: the SQLite file, or a throwaway PostgreSQL (ATLAS_DATABASE_URL)")
    args = ap.parse_args()
    n = max(1, min(args.readers, 100))  # bounded: loopback only, a class at most
    steps = [int(s) for s in args.steps.split(",")]
    scenarios = set(args.scenarios.split(","))
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    floor_p95 = follow_floor = None
    print(f"classroom: {n} readers, model {args.model}, {args.replicas} replica(s); this machine's matmul "
          f"{matmul_gflops('cpu'):.0f} GFLOP/s")
    if "floor" in scenarios:
        with app_server(args.model, script="bench/floor_app.py") as url:
            res = asyncio.run(floor(url, n))
        print(f"\nthe floor: a trivial page, one cached 372×372 heatmap, {n} readers")
        for name, (times, failed) in res.items():
            print(summary_row(name, times, failed, None))
        floor_p95 = max(percentile(res["open"][0], 95), percentile(res["rerun"][0], 95))
        if "class" in scenarios:
            where = os.path.join(tempfile.mkdtemp(), "page")
            with app_server(args.model, script="bench/floor_app.py", extra_env={"ATLAS_FLOOR_FOLLOW": where}) as url:
                res = asyncio.run(floor_follow(url, n, where))
            print(f"\nthe floor of a class that follows: {n} readers on that page, each polling a second (a "
                  f"fragment), each switched to the page a file names when it changes")
            for i, (lat, failed) in enumerate(res["follow"], start=2):
                print(summary_row(f"the file's move → page {i}", lat, failed, None))
            every = [x for lat, _ in res["follow"] for x in lat]
            print(summary_row("follow, all moves", every, sum(f for _, f in res["follow"]), None))
            print(summary_row("the followed page's view", *res["views"], None))
            print(f"  the server's CPU from each move to the last reader's arrival: "
                  f"{', '.join(f'{c:.2f}' for c in res['move_cpu'])} s")
            follow_floor = percentile(every, 95)
    with contextlib.ExitStack() as stack:
        env = None
        if args.database == "postgres":
            from harness.postgres import postgres_server

            pg = stack.enter_context(postgres_server())
            env = {"ATLAS_DATABASE_URL": pg.new_database()}
            print(f"store: PostgreSQL ({env['ATLAS_DATABASE_URL']})")
        url, pids = stack.enter_context(servers(args.model, args.replicas, env))
        mem = stack.enter_context(MemoryPoll(pids))
        if args.database == "postgres":
            stack.enter_context(DatabaseUse(pg))
        asyncio.run(classroom(url, n, steps, scenarios, floor_p95, args.long, follow_floor, args.chapters))
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\nservers' peak resident memory (sum over {len(pids)} process(es), polled): {mem.peak:,.0f} MB")
    print(f"this benchmark's own CPU: {cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime:.1f} s "
          f"over {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
