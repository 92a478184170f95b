"""Fixtures shared by the tests (helpers they import live in helpers.py)."""

import os
import tempfile

import pytest
import streamlit  # noqa: F401 (first, as app.py imports it: its Plotly theme is then replaced by ui.figures')

import pages  # noqa: F401 (importing it fills the walk: ui.walk)
from browser_parts import browser, page, reader, tiny_url, url  # noqa: F401 (the browser tests' fixtures, one server a module)
from harness import model_folders
from helpers import APP, DEVICES

pytest_plugins = ["cpu_share"]  # the CPU each test file costs, printed at the end of a run

# No FlexAttention compile in the background of the test process (or of the servers the
# tests start): a call would otherwise switch kernels by timing. Tests that want the
# warm-up set it back on.
os.environ["ATLAS_FLEX_WARMUP"] = "0"
# the texts of a class's room measured by the tests themselves (ui.room_work.work_once), never
# by a thread of the test process racing them; a server a test starts for the room sets it back
os.environ["ATLAS_ROOM_WORKER"] = "0"
# a long text's other pages not built in the background of the test process (a test that
# wants it sets it back)
os.environ["ATLAS_BUILD_AHEAD"] = "0"
# the app's pages read the tiny model's samples at 1,024 tokens, not the CPU's budget of
# 32,768 (the test command's time); the long-text tests give their own lengths, and the
# budget's own tests unset it
os.environ.setdefault("ATLAS_MAX_TOKENS", "1024")
# step 7's live benchmark at small sizes: the same methods and ratios, without the
# dense float64 reference at 4,096 tokens (512 MB) in every test that presses Run
os.environ["ATLAS_LIVE_MAX_N"] = "1024"
# share links and classes in a store of the test run's own, never the cache folder's real
# file (the servers the tests start inherit it; a test that wants its own sets another)
if "ATLAS_STORE_PATH" not in os.environ:
    os.environ["ATLAS_STORE_PATH"] = os.path.join(tempfile.mkdtemp(prefix="atlas-tests-"), "room.sqlite3")


# two test processes (scripts/test.sh runs pytest-xdist) on a machine's cores: one torch
# thread each, so that neither makes the other's threads wait for a core
if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    torch.set_num_threads(1)
    # and one each in the servers they start (ATLAS_TORCH_THREADS, as a replica takes its
    # share of the cores): two threads of a server cost 30–40 % more CPU for the same pages
    # (tiny model, summaries.build_all), CPU the browser and the other test process need
    # (docs/performance.md, "The test command after stop 74")
    os.environ.setdefault("ATLAS_TORCH_THREADS", "1")

# every model family the tests build a folder of, imported before anything compiles (each
# registers pytree nodes, whose count dynamo guards: harness.model_folders.import_families)
model_folders.import_families()


@pytest.fixture
def unmeasured():
    """Step 7's live benchmark and the model swaps unmeasured for this test, whatever ran
    before it (their results are kept for every reader of the process), and left so."""
    from ui import live_bench, model_swaps

    live_bench.forget_all()
    model_swaps.forget_all()
    yield
    live_bench.forget_all()
    model_swaps.forget_all()


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture
def make_app(monkeypatch):
    """AppTest of app.py as the server runs it: st.navigation in app.py drawing the
    sidebar on every page. (AppTest would otherwise re-detect the pages/ folder on
    every run and run a page file alone, skipping app.py: the same switch as
    ui/boot.through_app, kept off after each PagesManager is made.)"""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)

    def make(model: str = "tiny", lang: str | None = None, timeout: float = 180):
        monkeypatch.setenv("ATLAS_MODEL", model)
        at = AppTest.from_file(APP, default_timeout=timeout)
        if lang:
            at.query_params["lang"] = lang
        return at

    return make


@pytest.fixture
def store(tmp_path, monkeypatch, request):
    """A store of the test's own (no other test's links, classes or rooms), as every session
    of the process sees it, with what the process had read of another forgotten before and
    after (ui.classroom.reset_caches). A test module's ``STORE_TIMEOUT`` sets how long a
    write waits for the file's lock."""
    from server.store import Store
    from ui import share
    from ui.classroom import reset_caches

    timeout = getattr(request.module, "STORE_TIMEOUT", None)
    mine = Store(tmp_path / "room.sqlite3", **({"timeout": timeout} if timeout is not None else {}))
    monkeypatch.setattr(share, "store", lambda: mine)
    reset_caches()
    yield mine
    reset_caches()


@pytest.fixture
def live_classes(store):
    """The live classes of the test's store, as the app's sessions read and write them."""
    from server.classes import Classes

    return Classes(store)


@pytest.fixture(scope="session")
def pg_server():
    """One throwaway PostgreSQL server for the session (harness/postgres.py); each test
    takes a fresh database on it. In CI a missing PostgreSQL fails: scripts/test.sh
    installs Debian's postgresql."""
    from harness import postgres

    if not postgres.available():
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL in CI: scripts/test.sh installs Debian's postgresql")
        pytest.skip("no PostgreSQL here (Debian: apt-get install --no-install-recommends postgresql)")
    with postgres.postgres_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def where(request, tmp_path):
    """Where a store lives, for each backend: an SQLite file, or a fresh PostgreSQL
    database (server.store.store_at opens either, in this process or another)."""
    if request.param == "sqlite":
        yield str(tmp_path / "room.sqlite3")
        return
    from server import pgstore

    yield request.getfixturevalue("pg_server").new_database()
    pgstore.close_all()


@pytest.fixture
def fresh_caches():
    """Every process-wide cache (the model, analyses, summaries, figures) empty for this
    test, and emptied after it: what a stand-in model loaded must not serve later tests."""
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


# The test command runs two processes, each taking whole files as it frees up (xdist's
# --dist loadfile, in collection order). The longest files go first, so that they start on
# different processes and the rest fill in around them (by their wall time in the last
# fresh-clone run: docs/performance.md); a file not named keeps its place after them.
LONGEST_FIRST = ("test_browser_class.py", "test_browser.py", "test_room_send_moment.py", "test_app.py",
                 "test_real_model.py", "test_classroom.py")


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items[:] = [item for _, item in sorted(enumerate(items), key=lambda x: (rank(x[1]), x[0]))]
