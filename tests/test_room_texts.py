"""The room's texts in the store (server.texts, both backends): one a student, replaced or
withdrawn; bounded; taken by one replica at a time and taken over when its lease runs
out; their words dropped once measured; a version of their own, so that a text never
moves what a student follows; gone with the class."""

import json

import pytest

from attn.room_numbers import KeptShare, RoomNumbers, UsefulPoint

from server.classes import Classes
from server.store import store_at
from server.texts import LEASE_SECONDS, MAX_CHARS, Room

VIEW = {"text": "The class's text.", "lang": "en", "settings": {}}
NUMBERS = RoomNumbers(n=12, causal=True, layers=1, layer_types=("full",), window=0, p=0.9,
                      useful=((UsefulPoint(12, 2.0, 0.3, 0.5),),), kept={4: KeptShare(0.4, (0.4,))}, sink=(0.2,),
                      sink_mean=0.2, hub_window=8, hubs=(0,), kept_window=0.5, kept_window_hubs=0.6, error_layer=0,
                      error_window=16, errors={"own": 1e-7})


@pytest.fixture
def rooms(where):
    store = store_at(where)
    klass = Classes(store)
    code, key = klass.create(VIEW, page="every-pair", now=0.0)
    for s in ("pupil-0001", "pupil-0002"):
        klass.join(code, s, now=1.0)
    return klass, Room(store), code, key


def test_one_text_a_student_replaced_or_withdrawn_and_bounded(rooms, monkeypatch):
    klass, room, code, key = rooms
    before = klass.versions(code)
    assert room.send(code, "pupil-0001", "  Meu texto de hoje, curto.  ", "pt", now=2.0) == "taken"
    after = klass.versions(code)
    assert after[:2] == before[:2] and after[2] == before[2] + 1  # the room's version only
    assert room.send(code, "pupil-0001", "My text, replaced.", "en", now=3.0) == "taken"
    found = room.texts(code)
    assert [(t.owner, t.lang, t.state, t.preview) for t in found] == [("pupil-0001", "en", "waiting",
                                                                        "My text, replaced.")]
    assert room.mine(code, "pupil-0001") == ("waiting", 0, "en")
    assert room.send(code, "pupil-0002", "", "en") == "empty"
    assert room.send(code, "pupil-0002", "x" * (MAX_CHARS + 1), "en") == "long"
    assert room.send(code, "not-a-student", "Hello.", "en") == "unknown"
    assert room.send("ZZZZZZ", "pupil-0002", "Hello.", "en") == "unknown"
    assert room.send(code, "teacher:abc", "The teacher's own.", "xx") == "taken"  # a language we do not name: other
    assert {t.owner: t.lang for t in room.texts(code)}["teacher:abc"] == "other"
    import server.texts as texts_module

    monkeypatch.setattr(texts_module, "MAX_TEXTS", 2)
    assert room.send(code, "pupil-0002", "One too many.", "en") == "full"
    assert room.send(code, "pupil-0001", "Replacing is not one more.", "en") == "taken"
    assert room.withdraw(code, "pupil-0001") and not room.withdraw(code, "pupil-0001")
    assert [t.owner for t in room.texts(code)] == ["teacher:abc"]


def test_sends_from_one_address_are_limited_so_a_script_cannot_keep_the_replicas_busy(rooms):
    """Every send (a replacement too) is a text to measure: 60 at once from one address
    (a class behind one NAT), then one every 10 s."""
    from server.texts import SENDS

    klass, room, code, key = rooms
    said = [room.send(code, "pupil-0001", f"Replacement number {i}.", "en", now=10.0 + i * 0.01,
                      address="203.0.113.9") for i in range(SENDS.burst + 5)]
    assert said.count("taken") == SENDS.burst and said[-5:] == ["busy"] * 5
    assert room.send(code, "pupil-0002", "From another address.", "en", now=11.0, address="192.0.2.7") == "taken"
    assert room.send(code, "pupil-0001", "Ten seconds later.", "en", now=10.6 + SENDS.every,
                     address="203.0.113.9") == "taken"


def test_a_text_is_measured_once_its_words_dropped_and_a_stale_claim_keeps_nothing(rooms):
    klass, room, code, key = rooms
    room.send(code, "pupil-0001", "The first text sent.", "en", now=2.0)
    room.send(code, "pupil-0002", "The second text sent.", "en", now=3.0)
    assert room.pending(now=4.0)
    a = room.claim("replica-a", now=4.0)
    b = room.claim("replica-b", now=4.0)
    assert (a.owner, a.text, b.owner) == ("pupil-0001", "The first text sent.", "pupil-0002")  # the longest waiting
    assert room.claim("replica-c", now=5.0) is None and not room.pending(now=5.0)
    room.send(code, "pupil-0002", "Replaced while it was measured.", "en", now=6.0)
    assert not room.finish(b, "replica-b", NUMBERS, now=7.0)  # measured the old words: nothing kept
    assert room.finish(a, "replica-a", NUMBERS, now=7.0)
    texts = {t.owner: t for t in room.texts(code)}
    first = texts["pupil-0001"]
    assert first.state == "done" and first.numbers == NUMBERS and first.n == 12
    with room.store.reading() as db:  # the words of a measured text are gone from the store
        assert db.execute("SELECT text FROM room_texts WHERE owner = 'pupil-0001'").fetchone()[0] is None
    c = room.claim("replica-c", now=8.0)
    assert c.text == "Replaced while it was measured."
    room.fail(c, "replica-c", now=9.0)
    assert {t.owner: t.state for t in room.texts(code)}["pupil-0002"] == "failed"


def test_a_replica_that_dies_mid_analysis_has_its_text_taken_over(rooms):
    klass, room, code, key = rooms
    room.send(code, "pupil-0001", "A text whose replica dies.", "en", now=2.0)
    dead = room.claim("replica-a", now=3.0)
    assert room.claim("replica-b", now=3.0 + LEASE_SECONDS - 1) is None  # its lease still holds
    taken = room.claim("replica-b", now=3.0 + LEASE_SECONDS + 1)
    assert taken.owner == dead.owner and taken.gen == dead.gen
    assert not room.finish(dead, "replica-a", NUMBERS)  # the dead one's late answer keeps nothing
    assert room.finish(taken, "replica-b", NUMBERS)


def test_a_preview_is_a_texts_first_words_in_any_script():
    from server.texts import preview

    assert preview("One two three.") == "One two three."
    assert preview("a b c d e f g h i j") == "a b c d e f g h …"  # eight words
    assert preview("朝の市場では、魚を並べる音と、値段を呼ぶ声が重なります。" * 3) == (
        "朝の市場では、魚を並べる音と、値段を呼ぶ声が重なります。朝の市場では、魚を並べる …")  # 40 characters


def test_ending_the_class_ends_its_room(rooms):
    klass, room, code, key = rooms
    room.send(code, "pupil-0001", "Gone with the class.", "en")
    klass.end(code, key)
    assert room.texts(code) == []


def test_a_measured_text_keeps_a_few_kilobytes(rooms, tiny_numbers):
    """What the store holds of a measured text — its numbers, language and first words —
    stays under 16 KB on the tiny model's 512 tokens (docs/performance.md gives the real
    model's)."""
    klass, room, code, key = rooms
    room.send(code, "pupil-0001", "Words " * 400, "en")
    claim = room.claim("replica-a")
    assert room.finish(claim, "replica-a", tiny_numbers)
    assert room.bytes_of(code) <= 16 * 1024
    assert len(json.dumps(tiny_numbers.to_json())) > 500  # it holds the numbers, not a stub


@pytest.fixture(scope="module")
def tiny_numbers():
    from attn import loading
    from attn import room_numbers

    a = loading.tiny(device="cpu").analyze("Words " * 400, max_tokens=room_numbers.ROOM_TOKENS)
    return room_numbers.text_numbers(a)
