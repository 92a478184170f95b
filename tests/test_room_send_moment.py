"""A class's Send moment, through the app at the protocol level (tiny model, on each
backend): "everyone, send your text now" — 100 students, each from an address of its own
(forwarded as a proxy on the loopback would), press Send at once. Every text is kept with
that one press: taken by the store, or kept in the student's session and sent again by
their poll; none is refused, and every one reaches the store — also when another process
holds the store's write lock through the whole moment, longer than a page run waits.

The time each press takes is measured in bench/classroom.py --scenarios room, not here."""

import asyncio
import threading
import time


from harness.room_class import join_class, send_at_once
from harness.serve import app_server
from server.store import store_at
from server.texts import Room
from ui.share import STORE_WAIT

STUDENTS = 100
ARRIVE = 120.0  # seconds for the kept texts to be sent again by the students' polls
HOLD = STORE_WAIT + 4.0  # another process's write, longer than a send waits for it


def hold_the_lock(where: str, held: threading.Event, release: threading.Event) -> None:
    """Another process's long write: the store's writers' lock (SQLite's BEGIN IMMEDIATE,
    PostgreSQL's writers' advisory lock) taken and kept until ``release``."""
    with store_at(where).transaction():
        held.set()
        release.wait(HOLD)


def test_a_class_of_100_sends_at_once_and_every_text_is_kept_with_one_press(where):
    """Twice in one class: first every student sends while another process holds the
    store's write lock through the whole moment (every press waits its STORE_WAIT, then
    keeps its text for the poll), then, the lock free, every student replaces their text
    at once."""
    env = {"ATLAS_ROOM_WORKER": "0",  # the texts wait unmeasured: the store's writes are what is tried
           **({"ATLAS_DATABASE_URL": where} if where.startswith("postgres") else {"ATLAS_STORE_PATH": where})}
    first = [f"Student {i} writes a sentence of their own for the room, number {i}." for i in range(STUDENTS)]
    again = [f"Again, student {i} sends a second sentence to take the place of the first." for i in range(STUDENTS)]

    async def scenario():
        teacher, students, code = await join_class(url, STUDENTS)
        stop = asyncio.Event()
        polls = [asyncio.create_task(r.poll(10**6, None, stop)) for r in students]
        held, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=hold_the_lock, args=(where, held, release))
        room = Room(store_at(where))

        async def arrived(texts) -> list:
            end = time.monotonic() + ARRIVE
            while time.monotonic() < end:
                kept = room.texts(code)
                if len(kept) == STUDENTS and all(t.preview.startswith(texts[0][:5]) for t in kept):
                    break
                await asyncio.sleep(1.0)
            return room.texts(code)

        try:
            holder.start()
            assert held.wait(10)
            told_locked, _ = await send_at_once(students, first)
            release.set()
            kept_locked = await arrived(first)
            told_free, _ = await send_at_once(students, again)
            return told_locked, kept_locked, told_free, await arrived(again)
        finally:
            release.set()
            if holder.is_alive():
                holder.join()
            stop.set()
            await asyncio.gather(*polls, return_exceptions=True)
            await asyncio.gather(*(r.close() for r in students + [teacher]))

    with app_server("tiny", extra_env=env) as url:
        told_locked, kept_locked, told_free, kept_free = asyncio.run(scenario())
    for told, kept, texts in ((told_locked, kept_locked, first), (told_free, kept_free, again)):
        assert told["refused"] == 0, told
        assert told["taken"] + told["kept"] == STUDENTS, told
        assert len(kept) == STUDENTS, (told, len(kept))
        assert {t.state for t in kept} == {"waiting"}, {t.state for t in kept}
        # each student's own text of this round, every one of them
        assert {" ".join(t.preview.split()[:3]) for t in kept} == {" ".join(x.split()[:3]) for x in texts}
    assert told_locked["kept"] > 0, told_locked  # every press waited its STORE_WAIT behind the other process
