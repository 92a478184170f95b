"""The room at the protocol level (bench/classroom.py --scenarios room): a teacher shows
the room on step 1; N students, following, each from an address of its own, send a text
of their own to it at once ("everyone, send now"); what each send was told (taken, kept
for the poll to send again, or refused) and its page run's time; the time from each send
to the teacher's chart showing it (her room fragment redraws every TEACHER_REFRESH
seconds), the worker's pace by the store's own times, the time until every point is there,
a student's page views with the room shown against the same with it hidden, and what the
store holds per text."""

from __future__ import annotations

import asyncio
import json
import time

from server.store import store_at
from server.texts import Room

from ui.i18n import translate

from .live_class import CLASS_CODE, LANG_CYCLE, _until, between
from .readers import Reader

VIEWS = 12


def _points(run) -> int | None:
    """How many texts the teacher's step-1 room chart shows (None: not drawn in this run)."""
    spec = run.charts.get("room_chart_every_pair_cells")
    if spec is None:
        return None
    # one point a text and a kind of layer: the texts are the distinct (x, trace) of the full layer's circles
    data = json.loads(spec)["data"]
    xs = [x for tr in data if tr.get("mode") == "markers" and tr.get("marker", {}).get("line", {}).get("color")
          != "#000000" for x, s in zip(tr["x"], tr["marker"].get("symbol", [])) if s == "circle"]
    return len(xs)


async def join_class(url: str, n: int) -> tuple[Reader, list[Reader], str]:
    """A teacher starts a class and shows the room on step 1; n students, each from an
    address of its own and in the three languages in turn, join it, five at a time."""
    teacher = Reader(url, "en")
    await teacher.connect()
    await teacher.run("")
    started = await teacher.run(None, click="class_start")
    code = (between(started.markdown, CLASS_CODE) or "").replace(" ", "")
    await teacher.run(None, values={"room_shown": True})
    students = [Reader(url, LANG_CYCLE[i % 3], query={"class": code}, address=f"10.7.{i // 250}.{i % 250 + 1}")
                for i in range(n)]
    for start in range(0, n, 5):
        group = students[start:start + 5]
        await asyncio.gather(*(r.connect() for r in group))
        await asyncio.gather(*(r.run("") for r in group))
    return teacher, students, code


async def send_at_once(students: list[Reader], texts: list[str]) -> tuple[dict[str, int], list[float]]:
    """Every student presses Send at once, each with their text: how many were told their
    text was taken, kept in their session for the poll to send again, or refused; and each
    press's page-run time."""
    told = {"taken": 0, "kept": 0, "refused": 0}
    send_times: list[float] = []

    async def send(i: int, r: Reader) -> None:
        run = await r.run(None, values={"room_text": texts[i]}, click="room_send")
        if run.exceptions:
            raise RuntimeError(run.exceptions)
        send_times.append(run.seconds)
        said = " ".join(run.toasts or [])
        lang = LANG_CYCLE[i % 3]
        told["taken" if translate(lang, "room.sent") in said
             else "kept" if translate(lang, "room.pending") in said else "refused"] += 1

    await asyncio.gather(*(send(i, r) for i, r in enumerate(students)))
    return told, send_times


async def room_scenario(url: str, n: int, texts: list[str], store_path: str, wait: float = 300.0) -> dict:
    out: dict = {"n": n}
    teacher, students, code = await join_class(url, n)
    shown: list[tuple[float, int]] = []  # (time, texts on the teacher's chart)
    stop = asyncio.Event()

    def seen(run) -> None:
        k = _points(run)
        if k is not None:
            shown.append((run.ended_at, k))

    polls = [asyncio.create_task(teacher.poll(10**6, seen, stop))]
    polls += [asyncio.create_task(r.poll(10**6, None, stop)) for r in students]
    try:
        t0 = time.perf_counter()
        out["told"], out["send"] = await send_at_once(students, texts)
        await _until(lambda: shown and shown[-1][1] >= n, wait)
        out["all"] = (shown[-1][0] - t0) if shown and shown[-1][1] >= n else float("nan")
        room = Room(store_at(store_path))
        done = sorted(room.texts(code), key=lambda t: t.done)
        wall = time.time() - time.perf_counter()  # the store's clock against this process's
        lat = []
        for j, t in enumerate(done, start=1):  # the j-th measured text is on the chart once it shows j texts
            at = next((s for s, k in shown if k >= j), None)
            if at is not None and t.state == "done":
                lat.append(at - (t.sent - wall))
        out["point"] = (lat, n - len(lat))
        # the worker's own pace, from the store's clock: one text's numbers to the next's,
        # and the second-to-last text's numbers kept, from the first send (the chart's p95 less its redraw)
        ends = [t.done for t in done if t.state == "done"]
        out["pace"] = [b - a for a, b in zip(ends, ends[1:])]
        first = min((t.sent for t in done), default=0.0)
        out["next_to_last"] = ends[-2] - first if len(ends) >= 2 else float("nan")
        out["first_kept"] = ends[0] - first if ends else float("nan")
        out["sends_spread"] = max((t.sent for t in done), default=first) - first
        out["measured"] = sum(1 for t in done if t.state == "done")
        out["bytes_per_text"] = room.bytes_of(code) / max(1, len(done))
        # a student's page views with the room shown, then with it hidden (the same student, exploring)
        viewer = students[0]
        await viewer.run(None, click="class_explore")
        out["with"] = await _views(viewer, "")
        await teacher.run(None, values={"room_shown": False})
        await asyncio.sleep(2.0)
        out["without"] = await _views(viewer, "")
    finally:
        stop.set()
        await asyncio.gather(*polls, return_exceptions=True)
    await asyncio.gather(*(r.close() for r in students + [teacher]))
    return out


async def _views(r: Reader, page: str) -> tuple[list[float], int]:
    times, failed = [], 0
    for _ in range(VIEWS):
        run = await r.run(page)
        if run.finished and not run.exceptions:
            times.append(run.seconds)
        else:
            failed += 1
    return times, failed
