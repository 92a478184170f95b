"""Two replicas behind HAProxy share one room (tiny model, protocol-level readers): the
students, spread over both, send their texts; whichever replica takes each text measures
it (a lease in the store); the teacher, on one of them, sees every text on the room's
chart, and each student their own ringed."""

import asyncio
import json
import os
import time

import pytest

from harness.live_class import CLASS_CODE, between
from harness.proxy import haproxy_path, replicas_behind_proxy
from harness.readers import Reader
from server.store import store_at
from server.texts import Room

TEXTS = ["The first student's own text, about rivers and bridges in an old city.",
         "O texto da segunda aluna, sobre o mar e os barcos que voltam ao porto.",
         "三人目の学生の文章です。朝の駅と、時計を見る駅員さんの話です。",
         "The fourth text, about a garden, its bees and the long summer afternoons."]


def test_two_replicas_share_one_room_and_every_text_reaches_the_teachers_chart(tmp_path):
    if haproxy_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no haproxy in CI: scripts/test.sh installs Debian's haproxy")
        pytest.skip("no haproxy here")
    path = str(tmp_path / "room.sqlite3")
    env = {"ATLAS_ROOM_WORKER": "1", "ATLAS_STORE_PATH": path}

    async def scenario(url):
        teacher = Reader(url, "en")
        await teacher.connect()
        await teacher.run("")
        started = await teacher.run(None, click="class_start")
        code = between(started.markdown, CLASS_CODE).replace(" ", "")
        students = [Reader(url, lang, query={"class": code}) for lang in ("en", "pt", "ja", "en")]
        for s in students:
            await s.connect()
            await s.run("")
        replicas = {s.cookie("ATLAS_REPLICA") for s in students}
        for s, text in zip(students, TEXTS):
            said = await s.run(None, values={"room_text": text}, click="room_send")
            assert not said.exceptions, said.exceptions
        room = Room(store_at(path))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum(t.state == "done" for t in room.texts(code)) < len(TEXTS):
            await asyncio.sleep(0.5)
        done = [t for t in room.texts(code) if t.state == "done"]
        await teacher.run(None, values={"room_shown": True})
        view = await teacher.run(None)
        mine = await students[1].run(None)
        await asyncio.gather(*(r.close() for r in students + [teacher]))
        return replicas, done, view, mine

    with replicas_behind_proxy(2, model="tiny", timeout=300, envs=[env, env]) as (url, pids):
        replicas, done, view, mine = asyncio.run(scenario(url))
    assert replicas == {"r1", "r2"}  # the students are on both replicas
    assert len(done) == len(TEXTS)
    spec = json.loads(view.charts["room_chart_every_pair_cells"])
    xs = sorted(x for tr in spec["data"] if tr.get("mode") == "markers" for x in tr["x"])
    assert sorted({t.numbers.n for t in done}) == sorted(set(xs))  # every text's n on the teacher's chart
    ringed = [tr for tr in json.loads(mine.charts["room_chart_every_pair_cells"])["data"]
              if tr.get("marker", {}).get("line", {}).get("color") == "#000000"]
    assert len(ringed) == 1  # the student's own point, on their replica's chart
    for text in TEXTS:  # no text on a chart; a student sees only their own (in their form), nobody else's
        chart = "room_chart_every_pair_cells"
        assert text[:25] not in view.charts[chart] and text[:25] not in mine.charts[chart]
        if text != TEXTS[1]:
            assert text[:25] not in " ".join(mine.markdown)
