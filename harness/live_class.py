"""A live class at the protocol level: a teacher and N students as harness.readers
speaks for them (each student's poll a fragment rerun a second, as the browser's timer
sends it). Used by ``bench/classroom.py`` (timed, 30 and 100 students) and by the
class's test at a small size (what it checks: every student followed, every answer
counted, the share right as the teacher is shown it)."""

from __future__ import annotations

import asyncio
import re
import time

import pages  # noqa: F401 (importing it fills the walk: ui.walk)
from ui import i18n, keys, walk
from ui.samples import sample_text

from .readers import Reader
from .serve import cpu_seconds

LANG_CYCLE = ("ja", "pt", "en")


async def all_run(readers: list[Reader], page: str, texts: list[str] | None = None) -> tuple[list[float], int]:
    """Every reader opens ``page`` at once (each with its text of ``texts`` when given):
    their times, and how many failed."""
    async def one(i, r):
        run = await r.run(page, text=texts[i] if texts else None)
        if not run.finished or run.exceptions:
            raise RuntimeError(run.exceptions or "not finished")
        return run.seconds

    res = await asyncio.gather(*(one(i, r) for i, r in enumerate(readers)), return_exceptions=True)
    return [x for x in res if isinstance(x, float)], sum(1 for x in res if not isinstance(x, float))


CLASS_CODE = i18n.translate("en", "class.code", code="§").split("§")  # the teacher's panel: "Class code: **…**"
ANSWERED = i18n.translate("en", "vote.answered", k="§", n="§").split("§")  # "Answers so far: **k** · …"
REVEALED = i18n.translate("en", "vote.revealed", value="§", answer="§", right="§").split("§")
OVERHEAD_STEP = 2  # the step a reader outside the class views, with nobody polling and while a class polls
PAGES = walk.pages()
STEP_OF = {walk.link(p): walk.number(p) for p in PAGES}  # a page's path in the address → its number now


def between(markdown: list[str], marks: list[str], nth: int = 0) -> str | None:
    """The nth field of the first markdown block written from a template split at its
    fields (``marks``: the text around each field), or None."""
    pattern = re.compile("(.*?)".join(re.escape(m) for m in marks[:-1]) + ("(.*?)" + re.escape(marks[-1]) if marks[-1]
                                                                            else "(.*)") + r"\Z", re.S)
    for body in markdown:
        found = pattern.match(body)
        if found:
            return found.group(nth + 1)
    return None


class Tracker:
    """Every run each class member's poll or clicks made, as it ended: where each student
    is, when the teacher's count of answers moved, and which students' polls redrew their
    whole page (``full``) while a vote took answers."""

    def __init__(self, n: int):
        self.target: str | None = None
        self.move_at = 0.0
        self.arrived: dict[int, float] = {}
        self.views: list[float] = []  # the run that put a student on the new step: its page view
        self.counts: list[tuple[float, int]] = []  # (time, answers the teacher's page shows)
        self.polls = [0] * (n + 1)  # each member's polls (the teacher's last), whatever each then drew
        self.watching = False  # while a vote takes answers: a student's poll that redraws the page is counted
        self.redrawn = [0] * n  # full-page reruns each student's poll made while watching
        self.exceptions: list[str] = []

    def student(self, i: int):
        def seen(run) -> None:
            self.polls[i] += 1
            self.exceptions += run.exceptions
            if self.watching and run.full:
                self.redrawn[i] += 1
            if self.target is not None and run.page == self.target and i not in self.arrived:
                self.arrived[i] = run.ended_at
                self.views.append(run.seconds)
        return seen

    def teacher(self, run) -> None:
        self.polls[-1] += 1
        self.exceptions += run.exceptions
        k = between(run.markdown, ANSWERED)
        if k is not None:
            self.counts.append((run.ended_at, int(k.strip("*").replace(",", ""))))


async def answer(r: Reader, send: str, choice):
    """A student answers as a browser does: picks an option (a run: Send is enabled once
    an option is picked), then presses Send (its option sent again with it). ``choice``:
    the option's label, or its place."""
    pick = "vote_pick_" + send.removeprefix("vote_send_")
    await r.run(None, values={pick: choice})
    return await r.run(None, values={pick: choice}, click=send)


async def _until(check, timeout: float, every: float = 0.05) -> bool:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if check():
            return True
        await asyncio.sleep(every)
    return check()


VIEWS = 12  # page views timed by a reader outside the class, with nobody polling and during the vote


async def page_views(reader: Reader, page: str, k: int = VIEWS) -> tuple[list[float], int]:
    """One reader views ``page`` k times in a row (a rerun each): its times, how many failed."""
    times, failed = [], 0
    for _ in range(k):
        run = await reader.run(page)
        if run.finished and not run.exceptions:
            times.append(run.seconds)
        else:
            failed += 1
    return times, failed


async def class_scenario(url: str, n: int, moves: int = 3, wait: float = 60.0, text: str | None = None,
                         spread: float | None = None) -> dict:
    """A live class of n students at the protocol level (see the module's doc): the
    teacher moves ``moves`` steps with every student following; then she opens a vote
    and the students answer, each at a moment of its own within ``spread`` seconds (a
    room does not answer at once), all still following and polling. Returns the
    figures, and what the tests check: every student followed each move, every answer
    was counted, no answer redrew a following student's page, the share right the
    teacher is shown. Meanwhile a reader outside the class views one page again and
    again: the same views with nobody polling, before the class, are the reference."""
    out: dict = {"n": n, "failed": 0}
    text = text or sample_text("en")
    spread = n * 0.1 if spread is None else spread
    out["spread"] = spread
    link = walk.link(walk.steps()[OVERHEAD_STEP - 1])
    outside = Reader(url, "en")  # the page views timed with nobody polling, then during the vote
    await outside.connect()
    await outside.run("")
    await outside.run("", text=text)
    await page_views(outside, link, 3)  # its charts built and cached once, before anything is timed
    out["plain"] = await page_views(outside, link)

    teacher = Reader(url, "en")
    await teacher.connect()
    await teacher.run("")
    await teacher.run("", text=text)
    started = await teacher.run(None, click="class_start")
    code = (between(started.markdown, CLASS_CODE) or "").replace(" ", "")
    if len(code) != 6:
        raise RuntimeError(f"no class code on the teacher's page: {started.markdown[:5]}")
    out["code"] = code
    students = [Reader(url, LANG_CYCLE[i % 3], query={"class": code}) for i in range(n)]
    joins = []
    for start in range(0, n, 5):  # students arrive a few at a time, as a room does
        group = students[start:start + 5]
        await asyncio.gather(*(r.connect() for r in group))
        runs = await asyncio.gather(*(r.run("") for r in group))
        joins += [r.seconds for r in runs if r.finished and not r.exceptions]
    out["join"] = (joins, n - len(joins))
    out["ids"] = [r.query.get("me") for r in students]

    track = Tracker(n)
    stop = asyncio.Event()
    polls = [asyncio.create_task(r.poll(10**6, track.student(i), stop)) for i, r in enumerate(students)]
    polls.append(asyncio.create_task(teacher.poll(10**6, track.teacher, stop)))
    polling_since = time.perf_counter()
    try:
        await _until(lambda: all(track.polls), wait)  # every member polling (no fixed sleep)
        out["follow"], out["move_cpu"] = [], []
        for _ in range(moves):
            here = next(i for i, p in enumerate(PAGES) if walk.link(p) == teacher.page)
            track.target, track.arrived, track.move_at = walk.link(PAGES[here + 1]), {}, time.perf_counter()
            cpu = cpu_seconds(url)
            await teacher.run(None, click="nav_next")
            await _until(lambda: len(track.arrived) == n, wait)
            out["move_cpu"].append(cpu_seconds(url) - cpu)  # the server's CPU from the click to the last arrival
            lat = [t - track.move_at for t in track.arrived.values()]
            out["follow"].append((STEP_OF.get(teacher.page), lat, n - len(lat)))
            settled = list(track.polls)  # every member polls once more on the new step before the next move
            await _until(lambda settled=settled: all(p > s for p, s in zip(track.polls, settled)), wait)
        track.target = None
        out["views"] = (track.views, 0)

        qid = next(p for p in PAGES if walk.link(p) == teacher.page).questions[0]  # the step's first question
        opened = await teacher.run(None, click=f"vote_open_{keys.slug(qid)}")
        if opened.exceptions:
            raise RuntimeError(opened.exceptions)
        t_open = time.perf_counter()
        sent: dict[int, float] = {}
        acked: dict[int, float] = {}
        chose: dict[int, str] = {}
        # the vote reaches every phone (their pages redraw for it), then answers arrive
        await _until(lambda: all(any(k.startswith("vote_send_") for k in r.ids) for r in students), wait)
        settled = list(track.polls)
        await _until(lambda: all(p > s for p, s in zip(track.polls, settled)), wait)
        track.watching = True

        async def answers(i: int, r: Reader) -> None:
            await asyncio.sleep(spread * ((i * 37) % max(n, 1)) / max(n, 1))  # each at a moment of its own
            send = next(k for k in r.ids if k.startswith("vote_send_"))
            pick = "vote_pick_" + send.removeprefix("vote_send_")
            options = r.options[pick]
            chose[i] = options[(i * 7) % len(options)]
            sent[i] = time.perf_counter()
            run = await answer(r, send, chose[i])
            if run.finished and not run.exceptions:
                acked[i] = run.ended_at

        async def views_meanwhile():
            out["class"] = await page_views(outside, link)

        await asyncio.gather(views_meanwhile(), *(answers(i, r) for i, r in enumerate(students)))
        await _until(lambda: track.counts and track.counts[-1][1] >= len(acked) and track.counts[-1][0] > max(
            acked.values(), default=0), wait)
        settled = list(track.polls)  # every student polls once more after the last answer
        await _until(lambda: all(p > s for p, s in zip(track.polls[:-1], settled[:-1])), wait)
        track.watching = False
        out["redrawn"] = sum(track.redrawn)  # full-page reruns of following students while answers came in
        order = sorted(acked, key=acked.get)
        lat = []
        for j, i in enumerate(order, start=1):
            shown = next((t for t, k in track.counts if k >= j and t >= acked[i] - 1e-3), None)
            if shown is not None:
                lat.append(shown - sent[i])
        out["answer"] = (lat, n - len(lat))
        out["counted"] = track.counts[-1][1] if track.counts else 0
        out["vote_open_to_all_answers"] = (max(acked.values()) - t_open) if acked else float("nan")

        vote = next(k for k in teacher.ids if k.startswith("vote_close_")).removeprefix("vote_close_")
        await teacher.run(None, click=f"vote_close_{vote}")
        revealed = await teacher.run(None, click=f"vote_reveal_{vote}")
        right_label = between(revealed.markdown, REVEALED, 1)
        out["chose"], out["right_label"] = chose, right_label
        out["right_shown"] = between(revealed.markdown, REVEALED, 2)
    finally:
        stop.set()
        for res in await asyncio.gather(*polls, return_exceptions=True):
            if isinstance(res, BaseException):
                out.setdefault("poll_errors", []).append(repr(res))
    out["polls"], out["poll_seconds"] = sum(track.polls), time.perf_counter() - polling_since
    out["exceptions"] = track.exceptions
    out["following"] = sum(1 for r in students if r.query.get("class") == code and r.query.get("me"))
    await asyncio.gather(*(r.close() for r in students + [teacher, outside]))
    return out
