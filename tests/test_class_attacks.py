"""A class under attack, through the app at the protocol level (tiny model): many
"clients" from one test process, each address sent as a proxy on the loopback forwards it
(X-Forwarded-For, which the server trusts from the loopback only). The rules themselves
are tested at the store: tests/test_room_bounds.py."""

import asyncio
import os

import pytest

from harness.live_class import CLASS_CODE, between
from harness.proxy import haproxy_path, proxy
from harness.readers import Reader
from harness.serve import app_server
from server import limits
from ui import i18n

SCRIPT, HOME, SCHOOL = "203.0.113.9", "192.0.2.44", "198.51.100.20"
BURST = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A tiny-model server with a store of its own (its limits' buckets are this module's)."""
    store = tmp_path_factory.mktemp("attacks") / "room.sqlite3"
    # 20 students at once from one address (the default 120 would need 125 sessions to show the limit)
    with app_server("tiny", extra_env={"ATLAS_STORE_PATH": str(store), "ATLAS_JOIN_BURST": str(BURST)}) as url:
        yield url


async def start_class(url: str, address: str | None) -> tuple[Reader, str | None, list[str]]:
    """A teacher presses Start a class: her reader, the class's code (None: refused) and
    the notices she was shown."""
    teacher = Reader(url, "en", address=address)
    await teacher.connect()
    await teacher.run("")
    run = await teacher.run(None, click="class_start")
    code = (between(run.markdown, CLASS_CODE) or "").replace(" ", "") or None
    return teacher, code, run.toasts


async def join(url: str, code: str, address: str, lang: str = "en") -> tuple[Reader, bool, list[str]]:
    r = Reader(url, lang, query={"class": code}, address=address)
    await r.connect()
    run = await r.run("")
    return r, bool(r.query.get("me")), run.toasts


def test_scripted_joins_from_one_address_get_a_classs_worth_in_and_lock_out_no_real_student(server):
    """BURST + 5 new sessions from one address open the class's link at once: BURST get in
    (the server's ATLAS_JOIN_BURST), the others are told too many came from their network;
    a student from another address gets in; the teacher sees who joined in the last minute."""
    async def scenario():
        teacher, code, _ = await start_class(server, HOME)
        readers, joined, told = [], 0, []
        for _ in range(0, BURST + 5, 5):
            got = await asyncio.gather(*(join(server, code, SCRIPT) for _ in range(5)))
            readers += [r for r, _, _ in got]
            joined += sum(1 for _, ok, _ in got if ok)
            told += [toasts for _, ok, toasts in got if not ok]
        real, ok, _ = await join(server, code, SCHOOL, "pt")
        panel = await teacher.run(None)
        await asyncio.gather(*(r.close() for r in readers + [real, teacher]))
        return joined, told, ok, panel

    joined, told, real_ok, panel = asyncio.run(scenario())
    assert joined == BURST
    assert told == [[i18n.translate("en", "class.busy")]] * 5
    assert real_ok
    pulse = i18n.translate("en", "class.pulse", n=str(BURST + 1), joined=str(BURST + 1))
    assert any(pulse in m for m in panel.markdown), [m for m in panel.markdown if str(BURST + 1) in m]


def test_a_loop_of_starts_from_one_address_is_refused_for_what_it_is_and_another_teacher_starts(server):
    async def scenario():
        said = []
        readers = []
        for _ in range(limits.STARTS.burst + 2):
            r, code, toasts = await start_class(server, SCRIPT)
            readers.append(r)
            said.append(code is not None or toasts)
        other, code, _ = await start_class(server, SCHOOL)
        await asyncio.gather(*(r.close() for r in readers + [other]))
        return said, code

    said, code = asyncio.run(scenario())
    assert said[:6] == [True] * 6
    assert said[6:] == [[i18n.translate("en", "class.start_limited")]] * 2  # not "the disk is full"
    assert code is not None


def test_a_home_connections_ipv6_64_is_one_client_however_many_of_its_addresses_it_uses(server):
    """30 *Start a class* from 30 addresses of one /64 start six, then are refused in words;
    BURST + 10 joins from as many addresses of another /64 get BURST in (the rest told too
    many came from their network); a student from an IPv4-mapped address joins as the IPv4
    client it is."""
    async def scenario():
        starts, readers = [], []
        for i in range(30):
            r, code, toasts = await start_class(server, f"2001:db8:aa:1::{i + 1:x}")
            readers.append(r)
            starts.append(code is not None or toasts)
        teacher, code, _ = await start_class(server, "2001:db8:bb:1::1")
        joined, told = 0, []
        for k in range(0, BURST + 10, 5):
            got = await asyncio.gather(*(join(server, code, f"2001:db8:cc:9:{k + j:x}::1") for j in range(5)))
            readers += [r for r, _, _ in got]
            joined += sum(1 for _, ok, _ in got if ok)
            told += [toasts for _, ok, toasts in got if not ok]
        mapped, ok, _ = await join(server, code, "::ffff:198.51.100.77")
        await asyncio.gather(*(r.close() for r in readers + [teacher, mapped]))
        return starts, joined, told, ok

    starts, joined, told, mapped_ok = asyncio.run(scenario())
    assert starts[:6] == [True] * 6
    assert starts[6:] == [[i18n.translate("en", "class.start_limited")]] * 24
    assert joined == BURST and told == [[i18n.translate("en", "class.busy")]] * 10
    assert mapped_ok


def test_behind_haproxy_a_forged_address_is_dropped_and_the_clients_own_counts(tmp_path):
    """HAProxy sends the client's own address (here the loopback's: no address, one
    bucket) and drops the X-Forwarded-For a client sent: seven starts each claiming
    another address are one client's seven, the seventh refused. Straight to the
    replica (which trusts the loopback, as it would its proxy), seven such claims are
    seven clients."""
    if haproxy_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no haproxy in CI: scripts/test.sh installs Debian's haproxy")
        pytest.skip("no haproxy here")
    with app_server("tiny", extra_env={"ATLAS_STORE_PATH": str(tmp_path / "room.sqlite3")}) as direct:
        with proxy([direct.removeprefix("http://")]) as proxied:
            async def starts(url):
                readers, codes = [], []
                for i in range(7):
                    r, code, _ = await start_class(url, f"10.9.0.{i + 1}")
                    readers.append(r)
                    codes.append(code)
                await asyncio.gather(*(r.close() for r in readers))
                return codes

            through = asyncio.run(starts(proxied))
            straight = asyncio.run(starts(direct))
    assert [c is not None for c in through] == [True] * 6 + [False]
    assert all(c is not None for c in straight)


def test_a_prankster_on_the_schools_network_locks_out_no_right_credential(server):
    """Teacher, students and a prankster share one school address. The prankster types 12
    wrong codes and 6 wrong teacher keys. From that address, afterwards: a code typed by
    hand waits (the bound still holds, and says so); but the class's QR link lets a new
    student in, a seated student's reload (``?me=``) takes their seat back, and the
    teacher's own link gives her the class back."""
    async def scenario():
        teacher, code, _ = await start_class(server, SCHOOL)
        slide = await teacher.run(None, click="class_slide")
        qr = next(c for c in slide.code if f"class={code}" in c and "j=" in c)
        resume = next(c for c in slide.code + (await teacher.run(None)).code if "host=" in c)
        token = qr.split("j=")[1].split("&")[0]
        key = resume.split("host=")[1].split("&")[0]
        seated, ok, _ = await join_with(server, {"class": code, "j": token}, SCHOOL)
        me = seated.query.get("me")
        await seated.close()
        pranks = []
        for i in range(12):
            r, ok_wrong, _ = await join(server, f"QQQ{i:03d}".replace("0", "Q")[:6], SCHOOL)
            pranks.append((r, ok_wrong))
        for _ in range(6):
            r, _, told = await join_with(server, {"class": code, "host": "not-the-key"}, SCHOOL)
            pranks.append((r, False))
        typed, typed_ok, typed_told = await join(server, code, SCHOOL)
        scanned, scanned_ok, _ = await join_with(server, {"class": code, "j": token}, SCHOOL)
        back, back_ok, _ = await join_with(server, {"class": code, "me": me}, SCHOOL)
        again, _, again_told = await join_with(server, {"class": code, "host": key}, SCHOOL)
        await asyncio.gather(*(r.close() for r, _ in pranks), typed.close(), scanned.close(), back.close(),
                             again.close(), teacher.close())
        return (ok, [w for _, w in pranks], typed_ok, typed_told, scanned_ok, back_ok, back.query.get("me"), me,
                again_told)

    ok, wrong, typed_ok, typed_told, scanned_ok, back_ok, back_me, me, again_told = asyncio.run(scenario())
    assert ok and not any(wrong)
    assert not typed_ok and typed_told == [i18n.translate("en", "class.slow_down")]  # the bound holds for typing
    assert scanned_ok  # the QR's link: a code that exists
    assert back_ok and back_me == me  # the same seat
    assert any(i18n.translate("en", "class.resumed", code="§").split("§")[0] in t for t in again_told), again_told


async def join_with(url: str, query: dict, address: str, lang: str = "en") -> tuple[Reader, bool, list[str]]:
    r = Reader(url, lang, query=dict(query), address=address)
    await r.connect()
    run = await r.run("")
    return r, bool(r.query.get("me")), run.toasts


def test_a_crowd_minted_on_one_address_during_a_vote_does_not_turn_its_result(server):
    """Six students from six homes are seated when the teacher opens step 1's vote: four pick
    one option, two another. Then one address mints twelve students, who all answer the
    second. Revealed, her reveal line gives the share right of the six seated, whichever
    option is right; the twelve are said apart under the chart."""
    from harness.live_class import REVEALED, answer

    async def scenario():
        teacher, code, _ = await start_class(server, HOME)
        seated = []
        for i in range(6):
            r, ok, _ = await join(server, code, f"192.0.2.{100 + i}")
            assert ok
            seated.append(r)
        await teacher.run(None, click="vote_open_s1_doubling")
        picks = {}
        for i, r in enumerate(seated):
            run = await r.run(None)
            send = next(k for k in run.ids if k.startswith("vote_send_"))
            options = r.options["vote_pick_" + send.removeprefix("vote_send_")]
            picks[i] = options[0] if i < 4 else options[1]
            await answer(r, send, picks[i])
        crowd = []
        for _ in range(12):  # an address of its own: the module's earlier tests spent SCRIPT's joins
            r, ok, _ = await join(server, code, "203.0.113.77")
            assert ok
            run = await r.run(None)
            send = next(k for k in run.ids if k.startswith("vote_send_"))
            await answer(r, send, r.options["vote_pick_" + send.removeprefix("vote_send_")][1])
            crowd.append(r)
        await teacher.run(None)
        vote = next(k for k in teacher.ids if k.startswith("vote_close_")).removeprefix("vote_close_")
        await teacher.run(None, click=f"vote_close_{vote}")
        revealed = await teacher.run(None, click=f"vote_reveal_{vote}")
        await asyncio.gather(*(r.close() for r in seated + crowd + [teacher]))
        return picks, revealed

    picks, revealed = asyncio.run(scenario())
    right = between(revealed.markdown, REVEALED, 1)
    assert right in set(picks.values())  # one of the two picked: counted over all 18 (4 or 14) it would differ
    share = sum(1 for p in picks.values() if p == right) / 6
    assert between(revealed.markdown, REVEALED, 2) == i18n.fmt_pct(share, "en", 0)
    late = i18n.translate("en", "vote.late", n="12", seated="6", split="§").split("§")[0]
    assert [m for m in revealed.markdown if late in m]


def test_a_wave_of_starts_from_many_addresses_never_ends_a_prepared_class(tmp_path):
    """A server that holds 4 classes (ATLAS_MAX_CLASSES): a teacher prepares hers, nobody
    in it yet; then 8 addresses start classes at once. Three fit; the other five are refused
    in words (never "the disk is full"); her class is still there, and her first student's
    link gets in."""
    store = tmp_path / "room.sqlite3"

    async def scenario(url):
        teacher, code, _ = await start_class(url, HOME)
        wave = await asyncio.gather(*(start_class(url, f"203.0.113.{100 + i}") for i in range(8)))
        first, ok, _ = await join(url, code, SCHOOL, "pt")
        panel = await teacher.run(None)
        await asyncio.gather(*(r.close() for r, _, _ in wave), teacher.close(), first.close())
        return code, [c is not None or toasts for _, c, toasts in wave], ok, panel

    with app_server("tiny", extra_env={"ATLAS_STORE_PATH": str(store), "ATLAS_MAX_CLASSES": "4"}) as url:
        code, wave, ok, panel = asyncio.run(scenario(url))
    assert code is not None
    refused = [i18n.translate("en", "class.too_many_classes")]
    assert sorted(wave, key=lambda x: x is not True) == [True] * 3 + [refused] * 5
    assert ok  # the prepared class took its first student
    pulse = i18n.translate("en", "class.pulse", n="1", joined="1")
    assert any(pulse in m for m in panel.markdown)


def test_leave_out_behind_one_school_address_keeps_every_seated_answer(tmp_path):
    """Through the app: a class of 30 behind the school's one address is seated, the teacher
    opens step 1's vote at once, and 12 students join from that address seconds later (the
    class's own joins still within the last 20 s). Her panel offers to leave the burst out;
    pressed, every seated student still answers (30 of 30 counted) and the burst's students
    are refused this vote."""
    from harness.live_class import answer
    from server.classes import Classes
    from server.store import store_at

    store = tmp_path / "room.sqlite3"

    async def scenario(url):
        teacher, code, _ = await start_class(url, HOME)
        seated = []
        for _ in range(30):
            r, ok, _ = await join(url, code, SCHOOL)
            assert ok
            seated.append(r)
        await teacher.run(None, click="vote_open_s1_doubling")
        crowd = []
        for _ in range(12):
            r, ok, _ = await join(url, code, SCHOOL)
            assert ok
            crowd.append(r)
        panel = await teacher.run(None)
        offered = "class_leave_out" in panel.ids
        await teacher.run(None, click="class_leave_out")
        for r in seated:
            run = await r.run(None)
            send = next(k for k in run.ids if k.startswith("vote_send_"))
            await answer(r, send, r.options["vote_pick_" + send.removeprefix("vote_send_")][0])
        refused = []
        for r in crowd:
            run = await r.run(None)
            send = next(k for k in run.ids if k.startswith("vote_send_"))
            sent = await answer(r, send, r.options["vote_pick_" + send.removeprefix("vote_send_")][1])
            refused.append(i18n.translate("en", "vote.refused_left_out") in sent.toasts)
        await asyncio.gather(*(r.close() for r in seated + crowd + [teacher]))
        return code, offered, refused

    with app_server("tiny", extra_env={"ATLAS_STORE_PATH": str(store)}) as url:
        code, offered, refused = asyncio.run(scenario(url))
        found = Classes(store_at(str(store))).read(code)
    assert offered
    vote = next(v.vote for v in found.votes if v.qid == "s1.doubling")
    assert found.counts[vote][0] == 30 and sum(found.counts[vote]) == 30  # 30 of 30 seated answers kept
    assert all(refused), refused  # the burst's students may not answer this vote
