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


# --- each class on its model; a fair queue; a bounded lease; texts a store can hold ---------


def test_each_text_waits_for_a_replica_that_offers_its_classs_model(where):
    """Two classes on two models: a replica measures only the texts of the models it
    offers, each claim names the model to measure on, and a teacher whose model no
    replica offers now is told so (the workers say which models they measure)."""
    store = store_at(where)
    klass, room = Classes(store), Room(store)
    codes = {}
    for model in ("tiny", "/models/encoder"):
        code, _ = klass.create({**VIEW, "model": model}, page="every-pair", now=0.0)
        klass.join(code, "pupil-0001", now=1.0)
        assert room.send(code, "pupil-0001", f"A text for the class on {model}.", "en", now=2.0) == "taken"
        codes[model] = code
    assert {t.model for c in codes.values() for t in room.texts(c)} == {"tiny", "/models/encoder"}
    room.heartbeat("replica-tiny", ["tiny"], now=3.0)
    assert room.unserved(codes["/models/encoder"], now=4.0) == ["/models/encoder"]
    assert room.unserved(codes["tiny"], now=4.0) == []
    first = room.claim("replica-tiny", ["tiny"], now=4.0)
    assert (first.code, first.model) == (codes["tiny"], "tiny")
    assert room.claim("replica-tiny", ["tiny"], now=5.0) is None  # the encoder's text is not its to measure
    assert room.pending(["tiny"], now=5.0) is False and room.pending(["/models/encoder"], now=5.0) is True
    room.heartbeat("replica-both", ["tiny", "/models/encoder"], now=6.0)
    assert room.unserved(codes["/models/encoder"], now=7.0) == []
    other = room.claim("replica-both", ["tiny", "/models/encoder"], now=7.0)
    assert (other.code, other.model) == (codes["/models/encoder"], "/models/encoder")
    assert room.finish(first, "replica-tiny", NUMBERS, now=8.0)
    assert room.unserved(codes["tiny"], now=6.0 + 200) == []  # nothing of the tiny class waits any more
    # a worker not heard from for a minute no longer counts
    room.send(codes["tiny"], "pupil-0001", "Sent again, later.", "en", now=300.0)
    assert room.unserved(codes["tiny"], now=300.0) == ["tiny"]


def test_one_addresss_flood_does_not_hold_up_another_classs_text(where):
    """One address sends 60 texts to one class (a script with minted students); then a
    teacher's text arrives in another class: it is the second text measured, not the
    61st. Within a class, addresses take turns the same way."""
    from server.answers import new_student

    store = store_at(where)
    klass, room = Classes(store), Room(store)
    flooded, _ = klass.create(VIEW, page="every-pair", now=0.0)
    other, _ = klass.create(VIEW, page="every-pair", now=0.0)
    minted = [new_student() for _ in range(60)]
    for s in minted:
        klass.join(flooded, s, now=1.0)
    for i, s in enumerate(minted):
        assert room.send(flooded, s, f"Flood text {i}.", "en", now=2.0 + i * 0.01, address="203.0.113.5") == "taken"
    klass.join(flooded, "pupil-late", now=3.0)
    assert room.send(flooded, "pupil-late", "A real student's text.", "pt", now=3.0, address="192.0.2.44") == "taken"
    assert room.send(other, "teacher:abc", "The other teacher's own text.", "en", now=4.0,
                     address="198.51.100.7") == "taken"
    order = []
    for k in range(5):
        claim = room.claim("replica", now=10.0 + k)
        order.append((claim.code, claim.owner))
    assert order[0] == (flooded, minted[0])  # the oldest text first
    assert order[1] == (other, "teacher:abc")  # then the other class's: classes take turns
    assert order[2] == (flooded, "pupil-late")  # then, within the flooded class, the other address
    assert order[3:] == [(flooded, minted[1]), (flooded, minted[2])]


def test_a_lease_is_renewed_while_measuring_and_a_text_that_keeps_killing_replicas_fails(rooms):
    from server.texts import MAX_ATTEMPTS

    klass, room, code, key = rooms
    room.send(code, "pupil-0001", "A text that takes long, then one that kills.", "en", now=0.0)
    working = room.claim("replica-a", now=1.0)
    assert room.renew(working, "replica-a", now=1.0 + 0.8 * LEASE_SECONDS)  # still at it
    assert room.claim("replica-b", now=1.0 + 1.5 * LEASE_SECONDS) is None  # renewed: not taken over
    assert room.finish(working, "replica-a", NUMBERS, now=1.0 + 1.6 * LEASE_SECONDS)
    room.send(code, "pupil-0002", "A text whose measuring kills its process.", "en", now=100.0)
    t, taken = 101.0, []
    while (claim := room.claim(f"replica-{len(taken)}", now=t)) is not None:
        taken.append(claim)
        t += LEASE_SECONDS + 1  # its process died: the lease runs out
    assert len(taken) == MAX_ATTEMPTS
    assert not room.renew(taken[0], "replica-0", now=t)  # the first holder no longer holds it
    found = {x.owner: x for x in room.texts(code)}["pupil-0002"]
    assert (found.state, found.reason) == ("failed", "crashed")
    with room.store.reading() as db:  # its words are gone with it
        assert db.execute("SELECT text FROM room_texts WHERE owner = 'pupil-0002'").fetchone()[0] is None


def test_control_characters_never_reach_the_store_and_reordering_ones_never_the_preview(rooms):
    """A text with NUL (which PostgreSQL cannot hold) and other control characters is kept
    without them; bidirectional controls and zero-width marks stay in the text measured
    but never in the teacher's preview."""
    klass, room, code, key = rooms
    sent = "Olá\x00 mundo\x07,\r\nsegunda linha \u202eevil\u202c and\u200b hidden\u2066 marks."
    assert room.send(code, "pupil-0001", sent, "pt", now=2.0) == "taken"
    claim = room.claim("replica", now=3.0)
    assert claim.text == "Olá mundo,\nsegunda linha \u202eevil\u202c and\u200b hidden\u2066 marks."
    preview = room.texts(code)[0].preview
    assert not any(c in preview for c in "\x00\x07\u202e\u202c\u200b\u2066")
    assert preview.startswith("Olá mundo, segunda linha evil and hidden")
    assert room.send(code, "pupil-0002", "\x00\x01\x02 \t", "en", now=4.0) == "empty"  # nothing left to measure
