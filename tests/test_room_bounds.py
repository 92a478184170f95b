"""What one script cannot do to a class, at the store (server.classes, both backends): mint
students without end, lock the room, outvote it, start classes without end, find a code
by guessing it; and what the teacher sees of it. The same through the app, with client
addresses as a proxy forwards them: tests/test_class_attacks.py."""

import threading
import time

import pytest

from server.class_reads import Asked
from server import classes, limits
from server.backend import Refused
from server.classes import BUSY, DOOR, FULL, IN, UNKNOWN, Classes, NotHost
from server.store import store_at

VIEW = {"text": "A class's own text, long enough to read.", "lang": "en", "settings": {}}
QUESTION = Asked.from_json({"text": "Which?", "options": ["a", "b", "c"], "answer": 1})
SCRIPT, SCHOOL, HOME = "203.0.113.9", "198.51.100.20", "192.0.2.44"


@pytest.fixture
def room(where):
    return Classes(store_at(where))


def test_a_script_minting_230_students_from_one_address_locks_out_no_real_student(room):
    """230 new ids from one address within seconds: the first 120 get in (a lecture hall
    behind one school NAT), the rest are refused as too many from there; a real student
    on another address still gets in; the script's address then gains one every 10 s."""
    code, _ = room.create(VIEW, page="every-pair", now=0.0)
    said = [room.join(code, f"script-{i:05d}", now=i * 0.01, address=SCRIPT) for i in range(230)]
    assert said.count(IN) == limits.joins().burst == 120 and said.count(BUSY) == 110
    assert room.join(code, "a-real-student", now=5.0, address=HOME) == IN
    # 30 s after its 120th (at 1.19 s, ≈ 0.12 of a token left), the script's address has gained three more
    assert [room.join(code, f"script-late{k}", now=31.2, address=SCRIPT) for k in range(5)] == [IN] * 3 + [BUSY] * 2


def test_a_class_behind_one_school_address_gets_in_forty_within_a_minute_and_a_lecture_of_120(room):
    code, _ = room.create(VIEW, page="every-pair", now=0.0)
    assert [room.join(code, f"pupil-{i:04d}", now=i * 1.5, address=SCHOOL) for i in range(40)] == [IN] * 40
    lecture, _ = room.create(VIEW, page="every-pair", now=0.0)
    assert [room.join(lecture, f"hall-{i:04d}", now=0.1 * i, address="198.51.100.99") for i in range(120)] == [IN] * 120


def test_a_vote_takes_no_more_answers_than_the_seats_it_opened_with_plus_those_who_joined_since(room):
    """Five students seated when the vote opens, then a script's ids join (one address,
    rate-limited) and, as seats free by presence, more: the vote takes at most the five
    plus every student who joined after it opened, one answer each — and the script's
    ids, once gone, cannot answer again under new ids past what joining allows."""
    code, key = room.create(VIEW, page="every-pair", now=0.0)
    for i in range(5):
        room.join(code, f"pupil-{i:04d}", now=1.0, address=SCHOOL)
    vote = room.open_vote(code, key, "every-pair", "s1.q", QUESTION, now=2.0)
    burst = limits.joins().burst
    joined = [f"script-{i:05d}" for i in range(burst + 20) if room.join(code, f"script-{i:05d}", now=3.0,
                                                                         address=SCRIPT) == IN]
    assert len(joined) == burst
    taken = [room.answer(code, vote, s, 0, now=4.0) for s in joined]
    assert taken.count("taken") == burst  # each joined after the vote opened: each one answer
    pupils = [room.answer(code, vote, f"pupil-{i:04d}", 1, now=5.0) for i in range(5)]
    assert pupils == ["taken"] * 5
    assert room.answer(code, vote, joined[0], 1, now=5.0) == "again"
    # the script's seats lapse; its next ids join as the rate allows: never more answers than joins
    later = [f"again-{i:05d}" for i in range(30)]
    ins = [s for k, s in enumerate(later) if room.join(code, s, now=200.0 + k, address=SCRIPT) == IN]
    more = [room.answer(code, vote, s, 2, now=300.0) for s in ins]
    assert more.count("taken") == len(ins) == 22  # 197 s of refill: 19.7 tokens, then one more each 10 s
    assert sum(room.counts(code, vote)) == 5 + burst + len(ins)  # every answer is a join's (or a seat's at opening)
    with room.store.transaction() as db:  # an id that slipped in without joining (no seat, no count): refused
        db.execute("UPDATE votes SET seats = 0 WHERE code = ? AND vote = ?", (code, vote))
        db.execute("INSERT INTO students (code, student, seen, joined) VALUES (?, 'forged-0001', 500, 0)", (code,))
    assert room.answer(code, vote, "forged-0001", 0, now=501.0) == "full"


def test_the_teacher_closes_the_door_and_those_in_stay(room):
    code, key = room.create(VIEW, page="every-pair", now=0.0)
    assert room.join(code, "pupil-0001", now=1.0) == IN
    before = room.versions(code)
    room.set_door(code, key, False, now=2.0)
    assert room.versions(code) == (before[0], before[1] + 1, before[2])  # her panel moved; no student's page
    assert room.join(code, "pupil-0002", now=3.0) == DOOR
    assert room.join(code, "pupil-0001", now=3.0) == IN  # already in: a reload keeps them
    assert room.state(code).door is False
    room.set_door(code, key, True, now=4.0)
    assert room.join(code, "pupil-0002", now=5.0) == IN


def test_the_teacher_sees_who_joined_and_answered_in_the_last_minute(room):
    """At 150 s: one student joined at 10 and left, one joined at 50 and is still there
    (seen at 120), one joined at 130; all three answered the open vote."""
    code, key = room.create(VIEW, page="every-pair", now=0.0)
    for student, at in (("pupil-0000", 10.0), ("pupil-0001", 50.0), ("pupil-0001", 120.0), ("pupil-0002", 130.0)):
        room.join(code, student, now=at)
    vote = room.open_vote(code, key, "every-pair", "s1.q", QUESTION, now=131.0)
    for i in range(3):
        assert room.answer(code, vote, f"pupil-{i:04d}", i, now=140.0) == "taken"
    seen = room.pulse(code, present_since=90.0, now=150.0)
    assert (seen.present, seen.joined_recently, seen.answered, seen.answered_recently, seen.door) == (2, 1, 3, 2, True)
    room.set_state(code, key, vote, "closed", now=151.0)
    assert room.pulse(code, 0.0, now=152.0).answered == 0  # no vote open
    assert room.pulse("ZZZZZZ", 0.0) is None


def test_starting_classes_in_a_loop_from_one_address_leaves_room_for_another_teacher(room, monkeypatch):
    """A loop of starts from one address gets six, then is refused for what it is (not a
    full disk); a teacher elsewhere starts hers; a class nobody joined ends after an hour
    untouched, one in use lasts."""
    made = []
    for i in range(20):
        try:
            made.append(room.create(VIEW, page="every-pair", now=float(i), address=SCRIPT))
        except Refused as exc:
            assert exc.what == "starts"
    assert len(made) == limits.STARTS.burst == 6
    mine, key = room.create(VIEW, page="every-pair", now=30.0, address=HOME)
    room.join(mine, "pupil-0001", now=31.0)
    hour = classes.EMPTY_MINUTES * 60
    assert room.expire(now=30.0 + hour + 1) == 6  # the script's empty classes end; hers, with a student, stays
    assert room.state(mine) is not None and all(room.state(c) is None for c, _ in made)
    assert room.create(VIEW, page="every-pair", now=30.0 + hour + 2, address=SCHOOL)


def test_a_full_server_makes_room_by_fair_share_and_keeps_what_a_teacher_needs(room, monkeypatch):
    """ATLAS_MAX_CLASSES classes, none joined but one: three started from one address, two
    from another. A teacher from a fresh address starts hers: the class ended for it is the
    longest untouched empty one of the address holding the most (its teacher will be told it
    ended unused). A class with a student, one whose teacher is connected, and the only class
    of an address are kept: with nothing else left, a start is refused for what it is."""
    monkeypatch.setenv("ATLAS_MAX_CLASSES", "5")
    monkeypatch.setattr(classes, "EMPTY_MINUTES", 10**6)  # this test is about making room, not expiring
    crowd, other = "203.0.113.1", "203.0.113.2"
    made = [room.create(VIEW, page="every-pair", now=10.0 + i, address=crowd if i < 3 else other)[0]
            for i in range(5)]
    assert room.join(made[0], "pupil-0001", now=20.0) == IN  # the oldest has a student: it stays
    later = 100.0 + classes.HOST_AWAY  # no teacher of theirs seen since they started
    mine, mine_key = room.create(VIEW, page="every-pair", now=later, address=HOME)
    assert room.state(made[1]) is None and room.ended_reason(made[1]) == "unused"  # the crowd's oldest empty one
    assert all(room.state(c) is not None for c in (made[0], *made[2:], mine))
    assert room.ended_reason(made[2]) is None and room.ended_reason(mine) is None
    # the crowd's address holds two, the other address two: the crowd's empty one, then the other's oldest
    again = [room.create(VIEW, page="every-pair", now=later + 1 + i, address=f"198.51.100.{i + 1}")[0]
             for i in range(2)]
    assert room.state(made[2]) is None and room.state(made[3]) is None
    assert all(room.state(c) is not None for c in (made[0], made[4], mine, *again))
    # now each address holds one class, or its class has a student: nothing may go
    with pytest.raises(Refused) as refused:
        room.create(VIEW, page="every-pair", now=later + 10, address=SCHOOL)
    assert refused.value.what == "classes"
    assert all(room.state(c) is not None for c in (made[0], made[4], mine, *again))


def test_a_fresh_teacher_starts_after_a_flood_of_empty_classes_and_a_connected_teacher_keeps_hers(room, monkeypatch):
    """493 empty classes started from 84 addresses fill a server of 495 beside a prepared
    class (the only one of its school's address) and a teacher who is connected (her poll
    says so). Starts from fresh addresses go on, each by ending a flood's class (of the
    address holding the most); the prepared class and the connected teacher's stay."""
    monkeypatch.setenv("ATLAS_MAX_CLASSES", "495")
    monkeypatch.setattr(classes, "EMPTY_MINUTES", 10**6)
    prepared, _ = room.create(VIEW, page="every-pair", now=0.0, address=SCHOOL)
    hers, key = room.create(VIEW, page="every-pair", now=1.0, address="203.0.113.1")  # one of the flood's addresses
    flood, t = [], 100.0
    for i in range(493):
        address = f"203.0.113.{i % 84 + 1}"
        flood.append((room.create(VIEW, page="every-pair", now=t, address=address)[0], address))
        t += 0.5
    assert len(flood) + 2 == 495
    held = {a: sum(1 for _, b in flood if b == a) + (a == "203.0.113.1") for _, a in flood}
    most = max(held.values())
    assert held["203.0.113.1"] == most == 7  # hers is the oldest class of the address holding the most
    for j in range(3):
        now = t + classes.HOST_AWAY + j
        room.host_here(hers, key, now=now)  # her poll, every 15 s
        room.create(VIEW, page="every-pair", now=now, address=f"198.51.100.{j + 1}")
    ended = [(c, a) for c, a in flood if room.state(c) is None]
    assert len(ended) == 3 and all(room.ended_reason(c) == "unused" for c, _ in ended)
    assert [a for _, a in ended][0] == "203.0.113.1"  # the address holding the most, not hers: she is here
    assert all(held[a] >= most - 1 for _, a in ended)  # then those holding the most after it
    assert room.state(prepared) is not None and room.state(hers) is not None
    with pytest.raises(NotHost):
        room.host_here(hers, "not-the-key")


def test_a_class_made_or_used_in_the_last_two_hours_is_never_ended_to_make_room(room, monkeypatch):
    """A teacher prepares her class; 7 minutes later a wave of starts from 80 addresses
    fills the server. Her class (and every other made in the last two hours) stays, the
    rest of the wave is refused in words, and her first student then gets in."""
    monkeypatch.setenv("ATLAS_MAX_CLASSES", "5")
    hers, _ = room.create(VIEW, page="every-pair", now=0.0, address=SCHOOL)
    refused = []
    for i in range(80):
        try:
            room.create(VIEW, page="every-pair", now=420.0 + i, address=f"203.0.113.{i + 1}")
        except Refused as exc:
            refused.append(exc.what)
    assert refused == ["classes"] * (80 - 4)  # four more fit; then nothing may go
    assert room.state(hers) is not None and room.ended_reason(hers) is None
    assert room.join(hers, "pupil-0001", now=600.0) == IN
    assert classes.EMPTY_MINUTES >= 60 * classes.PROTECTED_HOURS  # nor does it expire unjoined within them


@pytest.mark.parametrize("address, same", [
    ("2001:db8:5:7::1", "2001:db8:5:7:ffff:ffff:ffff:fffe"),  # two addresses of one /64
    ("203.0.113.9", "::ffff:203.0.113.9"),  # an IPv4 address and the IPv4-mapped IPv6 address of it
])
def test_a_client_is_its_ipv4_address_or_its_ipv6_64_in_every_bound(room, address, same):
    """Starts and joins from many addresses of one /64 (or an IPv4 address written as an
    IPv4-mapped IPv6 address) are held to one address's bound; the next /64 is a client of
    its own."""
    import ipaddress

    if ":" in same and "." not in same:
        net = ipaddress.IPv6Network("2001:db8:5:7::/64")
        many = [str(net[k * 7919 + 1]) for k in range(30)]  # 30 addresses of the one /64
    else:
        many = [address, same] * 15
    started = []
    for i, a in enumerate(many):
        try:
            started.append(room.create(VIEW, page="every-pair", now=float(i) * 0.01, address=a)[0])
        except Refused as exc:
            assert exc.what == "starts"
    assert len(started) == limits.STARTS.burst
    if ":" in same and "." not in same:
        assert room.create(VIEW, page="every-pair", now=1.0, address="2001:db8:5:8::1")  # the next /64
    code = started[0]
    burst = limits.joins().burst
    said = [room.join(code, f"minted-{i:05d}", now=2.0 + i * 0.001, address=many[i % len(many)])
            for i in range(burst + 40)]
    assert said.count(IN) == burst and said.count(BUSY) == 40


def test_a_sites_48_shares_four_clients_worth_however_many_64s_it_uses(room):
    """One /48 (65,536 /64s): starts from 40 of its /64s stop at four clients' bound; a /64
    of another /48 starts; an IPv4 client has no site."""
    starts = 0
    for k in range(40):
        try:
            room.create(VIEW, page="every-pair", now=k * 0.01, address=f"2001:db8:77:{k:x}::1")
            starts += 1
        except Refused as exc:
            assert exc.what == "starts"
    assert starts == limits.STARTS.burst * limits.SITE_FACTOR == 24
    assert room.create(VIEW, page="every-pair", now=1.0, address="2001:db8:78::1")
    assert limits.site(limits.key("203.0.113.9")) is None
    assert limits.site(limits.key("2001:db8:77:1::1")) == "2001:db8:77::/48"


def test_the_prefixes_are_settings(monkeypatch):
    from attn import settings

    monkeypatch.setenv("ATLAS_IPV6_PREFIX", "56")
    monkeypatch.setenv("ATLAS_IPV6_SITE_PREFIX", "0")
    assert limits.key("2001:db8:1:2ff::9") == "2001:db8:1:200::/56" and limits.site("2001:db8:1:200::/56") is None
    monkeypatch.setenv("ATLAS_IPV6_SITE_PREFIX", "60")  # wider than the client's own prefix cannot be
    with pytest.raises(settings.SettingError, match="ATLAS_IPV6_SITE_PREFIX"):
        settings.read()
    monkeypatch.setenv("ATLAS_IPV6_PREFIX", "200")
    with pytest.raises(settings.SettingError, match="ATLAS_IPV6_PREFIX"):
        settings.read()
    monkeypatch.delenv("ATLAS_IPV6_PREFIX")
    monkeypatch.delenv("ATLAS_IPV6_SITE_PREFIX")
    assert limits.key("fe80::1%eth0") == "fe80::/64" and limits.key("[2001:db8::1]") == "2001:db8::/64"
    assert limits.key("not an address") == "not an address" and limits.key(None) == limits.LOCAL


def test_wrong_codes_and_links_count_a_64_as_one_client(where):
    """A guesser on one /64 gets one address's wrong codes, its /48 four clients' worth; links
    and their bytes from one /64 are one client's."""
    guesses = limits.Guesses(burst=3, every=1000.0)
    for k in range(3):
        assert guesses.allowed(f"2001:db8:9:1::{k + 1:x}", now=0.0)
        guesses.missed(f"2001:db8:9:1::{k + 1:x}", now=0.0)
    assert not guesses.allowed("2001:db8:9:1::ff", now=0.0)
    tried = 0
    for k in range(2, 40):
        if guesses.allowed(f"2001:db8:9:{k:x}::1", now=0.0):
            guesses.missed(f"2001:db8:9:{k:x}::1", now=0.0)
            tried += 1
    assert tried == 3 * limits.SITE_FACTOR - 3  # the site's bucket, less the first /64's three
    store = store_at(where)
    made = 0
    for i in range(limits.LINKS.burst + 10):
        try:
            store.put({"text": f"link {i}"}, address=f"2001:db8:9:1::{i + 1:x}")
            made += 1
        except Refused as exc:
            assert exc.what == "links"
    assert made == limits.LINKS.burst


def test_a_passphrase_guards_starting_and_wrong_ones_never_refuse_the_right_one_from_the_same_network(
        room, monkeypatch):
    """A wrong passphrase starts nothing and costs no start; after any number of them from
    one address, the right one from that address starts a class; with the passphrase, the
    starts per client still bound what it buys."""
    monkeypatch.setenv("ATLAS_START_KEY", "blue heron")
    said = []
    for _ in range(3 * limits.STARTS.burst):
        try:
            room.create(VIEW, page="every-pair", now=0.0, address=SCRIPT, passphrase="guess")
        except Refused as exc:
            said.append(exc.what)
    assert said == ["start_key"] * (3 * limits.STARTS.burst)
    with pytest.raises(Refused):  # no key at all
        room.create(VIEW, page="every-pair", now=0.0, address=SCRIPT)
    made = []
    for _ in range(limits.STARTS.burst + 1):
        try:
            made.append(room.create(VIEW, page="every-pair", now=0.0, address=SCRIPT, passphrase=" blue heron "))
        except Refused as exc:
            made.append(exc.what)
    assert [m for m in made if m == "starts"] == ["starts"] and len(made) == limits.STARTS.burst + 1
    with room.store.reading() as db:
        assert db.execute("SELECT COUNT(*) FROM classes").fetchone()[0] == limits.STARTS.burst


def test_a_wrong_code_only_reads_even_while_another_process_writes(where):
    """Guessing codes costs the store no write: with a writer holding the lock, a wrong
    code is answered at once; the right one waits its turn (and gets in)."""
    room = Classes(store_at(where))
    code, _ = room.create(VIEW, page="every-pair")
    holding, release = threading.Event(), threading.Event()

    def writer():
        with room.store.transaction() as db:
            db.execute("UPDATE classes SET touched = touched WHERE code = ?", (code,))
            holding.set()
            release.wait(10)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    assert holding.wait(10)
    t0 = time.perf_counter()
    assert room.join("ZZZZZZ", "guesser-001") == UNKNOWN
    assert time.perf_counter() - t0 < 0.5
    release.set()
    th.join(10)
    assert room.join(code, "pupil-0001") == IN


def test_a_full_class_and_an_unknown_code_are_one_answer_to_a_newcomer(room, monkeypatch):
    """join() tells them apart (the app says both the same way to a newcomer): a guesser
    cannot learn that a code exists from a full class."""
    monkeypatch.setattr(classes, "MAX_STUDENTS", 1)
    code, _ = room.create(VIEW, page="every-pair", now=0.0)
    assert room.join(code, "pupil-0001", now=1.0) == IN
    assert room.join(code, "pupil-0002", now=2.0) == FULL and room.join("ZZZZZZ", "pupil-0002") == UNKNOWN
