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
    from ui import i18n, steps

    at = AppTest.from_function(_nav_twice).run()
    assert not at.exception
    s = at.session_state
    assert s["distinct"] and s["same_files"] and s["other_untouched"] and s["made_once"] and s["fresh_flag"]
    t = i18n.Translator("en")
    assert s["titles"] == [steps.nav_title(t, p) for p in steps.pages()]


def test_the_converted_copy_is_looked_at_once_every_few_seconds(monkeypatch):
    from attn import convert

    now = [1000.0]
    monkeypatch.setattr(served_model.time, "monotonic", lambda: now[0])
    calls = []

    def whole():
        calls.append(1)
        return True

    monkeypatch.setattr(convert, "is_converted", whole)
    monkeypatch.setattr(served_model, "_converted_ok", [None, 0.0])
    assert served_model.converted() and served_model.converted() and served_model.converted()
    assert len(calls) == 1
    now[0] += served_model.CONVERTED_SECONDS + 0.1
    assert served_model.converted() and len(calls) == 2
    # a copy found damaged is asked about on every run until it is whole again
    monkeypatch.setattr(convert, "is_converted", lambda: calls.append(0) or False)
    assert not served_model.converted() and not served_model.converted()
    assert calls.count(0) == 2
