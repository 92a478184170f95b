"""A timed fragment's tick that the browser asked for from the page it has just left
(ui.page_run.redraw_if_left): Streamlit's front end takes such a run for a switch back
and clears the page, so the tick redraws the page shown, whole — once for each page drawn,
and never for a tick from the page itself."""

from types import SimpleNamespace

import pytest

import pages  # noqa: F401 (importing it fills the walk)
from ui import page_run, walk


class FakeStreamlit:
    def __init__(self):
        self.session_state, self.query_params, self.switched = {}, {"lang": "pt", "class": "ABC123"}, []

    def switch_page(self, page, query_params=None):
        self.switched.append((page, dict(query_params or {})))


@pytest.fixture
def run(monkeypatch):
    fake = FakeStreamlit()
    monkeypatch.setattr(page_run, "st", fake)
    ctx = SimpleNamespace(fragment_ids_this_run=None, page_script_hash="")
    monkeypatch.setattr(page_run, "get_script_run_ctx", lambda: ctx)

    def as_run(page_hash: str, fragment: bool):
        ctx.page_script_hash, ctx.fragment_ids_this_run = page_hash, ["tick"] if fragment else None
    return fake, as_run


def test_a_tick_from_the_page_just_left_redraws_the_page_shown_once(run):
    fake, as_run = run
    first, second = walk.steps()[:2]
    as_run("hash-of-1", fragment=False)
    page_run.drawn(first)
    as_run("hash-of-1", fragment=True)
    page_run.redraw_if_left()  # the page's own tick
    assert fake.switched == []
    as_run("hash-of-2", fragment=False)  # the class moved: a whole run of step 2
    page_run.drawn(second)
    as_run("hash-of-2", fragment=True)
    page_run.redraw_if_left()
    as_run("hash-of-1", fragment=True)  # a tick asked for from step 1, arriving late
    page_run.redraw_if_left()
    assert fake.switched == [(second.page, {"lang": "pt", "class": "ABC123"})]
    page_run.redraw_if_left()  # the same stale tick again, before the redraw's whole run
    assert len(fake.switched) == 1
    as_run("hash-of-2", fragment=False)  # the redraw's whole run
    page_run.drawn(second)
    as_run("hash-of-1", fragment=True)  # another late tick, after another switch
    page_run.redraw_if_left()
    assert len(fake.switched) == 2


def test_a_whole_run_is_never_taken_for_a_stale_tick(run):
    fake, as_run = run
    as_run("hash-of-1", fragment=False)
    page_run.redraw_if_left()  # nothing drawn yet
    page_run.drawn(walk.steps()[0])
    as_run("hash-of-3", fragment=False)  # a whole run (a switch): it records, never redraws
    page_run.redraw_if_left()
    assert fake.switched == []


def test_every_timed_fragment_is_made_through_page_run_timed():
    """A timed fragment made with st.fragment(run_every=…) directly would miss the check:
    only ui/page_run.timed makes them — and ui/first_view's wait for the model, on a page
    with no navigation (no tick can come from a page left), drawn before torch is imported
    (page_run imports it, through the walk)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = [str(f.relative_to(root)) for d in ("ui", "pages", "server") for f in (root / d).rglob("*.py")
             if "run_every=" in f.read_text(encoding="utf-8")] + (["app.py"] if "run_every=" in (
                 root / "app.py").read_text(encoding="utf-8") else [])
    assert sorted(found) == [str(Path("ui") / "first_view.py"), str(Path("ui") / "page_run.py")], found
