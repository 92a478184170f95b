"""What a page run no longer repeats among a hundred readers: the walk's st.Page objects
are made once per process and title (a copy for each run), and the converted copy's files
are looked at once every few seconds."""

from streamlit.testing.v1 import AppTest

from ui import served_model


def _nav_twice():
    import streamlit as st

    from ui import i18n, step_page

    t = i18n.Translator("en")
    first, second = step_page.nav_pages(t), step_page.nav_pages(t)
    st.session_state["distinct"] = all(a is not b for a, b in zip(first, second))
    st.session_state["same_files"] = [str(a._page) for a in first] == [str(b._page) for b in second]
    st.session_state["titles"] = [a.title for a in first]
    first[0]._can_be_called = True  # what st.navigation does to the page it returns
    st.session_state["other_untouched"] = second[0]._can_be_called is False
    again = step_page.nav_pages(t)
    st.session_state["made_once"] = step_page._page_made.cache_info().hits >= 2 * len(first)
    st.session_state["fresh_flag"] = again[0]._can_be_called is False


def test_each_run_gets_its_own_copy_of_pages_made_once():
    from ui import i18n, walk

    at = AppTest.from_function(_nav_twice).run()
    assert not at.exception
    s = at.session_state
    assert s["distinct"] and s["same_files"] and s["other_untouched"] and s["made_once"] and s["fresh_flag"]
    t = i18n.Translator("en")
    assert s["titles"] == [walk.nav_title(t, p) for p in walk.pages()]


def test_the_converted_copy_is_looked_at_once_every_few_seconds(monkeypatch):
    from attn import converted

    now = [1000.0]
    monkeypatch.setattr(served_model.time, "monotonic", lambda: now[0])
    calls = []

    def whole():
        calls.append(1)
        return True

    monkeypatch.setattr(converted, "is_converted", whole)
    monkeypatch.setattr(served_model, "_converted_ok", [None, 0.0])
    assert served_model.converted() and served_model.converted() and served_model.converted()
    assert len(calls) == 1
    now[0] += served_model.CONVERTED_SECONDS + 0.1
    assert served_model.converted() and len(calls) == 2
    # a copy found damaged is asked about on every run until it is whole again
    monkeypatch.setattr(converted, "is_converted", lambda: calls.append(0) or False)
    assert not served_model.converted() and not served_model.converted()
    assert calls.count(0) == 2


def test_a_hundred_members_at_one_version_read_the_class_once_and_each_their_own_answers(tmp_path, monkeypatch):
    """A teacher's move reruns every following student's page at once: what they all read
    alike (the state, the counts) is read once at that version and tally; a change raises
    one of them, and the next read is fresh; each student's own answers are theirs."""
    from server.class_reads import Asked
    from server.classes import Classes
    from server.store import store_at
    from ui.classroom import handle

    room = Classes(store_at(tmp_path / "s.sqlite3"))
    monkeypatch.setattr(handle, "_classes", lambda: room)
    handle.state_at.clear()
    code, key = room.create({"text": "x"}, page="every-pair")
    shared = []
    real = Classes.shared_read
    monkeypatch.setattr(Classes, "shared_read", lambda self, c: shared.append(c) or real(self, c))
    vote = room.open_vote(code, key, "every-pair", "s1.q",
                          Asked.from_json({"text": "q", "options": ["a", "b"], "answer": 0}))
    students = [f"s{i:03d}" for i in range(100)]
    for s in students[:3]:
        room.join(code, s)
    room.answer(code, vote, students[1], 1)
    got = [handle.read_from(room, code, s) for s in students]
    assert len(shared) == 1
    assert got[1].mine == {vote: 1} and got[0].mine == {} and got[0].counts[vote] == [0, 1]
    assert all(g.page == "every-pair" and g.version == room.version(code) for g in got)
    room.move(code, key, "neighbours")  # the version moves: read afresh, once
    again = [handle.read_from(room, code, s) for s in students]
    assert len(shared) == 2 and {g.page for g in again} == {"neighbours"}
    room.answer(code, vote, students[2], 0)  # the tally moves: the counts are read afresh
    assert handle.read_from(room, code, students[0]).counts[vote] == [1, 1] and len(shared) == 3
