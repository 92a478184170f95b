"""What the browser tests share (tests/test_browser.py: a reader's pages, all of the real
model's among them, so one server builds them; tests/test_browser_class.py: a class,
phones and readers at once, on the tiny model — two files, so that two test processes
share the browser's waits): headless Chromium (Debian's) driven by Playwright,
the app started on a free port by the test module that asks for it — the tiny model where
the app's plumbing is the point (``tiny_url``), the real one where its numbers are
(``url``). In CI a missing browser fails."""

import os
import signal
import time

import pytest

from helpers import ROOT, WALK
from harness.serve import POLL_MS, SERVER_LOGS, SERVER_PIDS, app_server, chromium_path, launch, wait_idle
from ui import i18n, walk

ARTIFACTS = os.path.join(ROOT, "test-artifacts")


URLS = [walk.link(p) for p in WALK]


@pytest.fixture(scope="module")
def browser():
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium in CI: the browser tests must run (install Debian's chromium)")
        pytest.skip("no Chromium here (install Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        opened = b.new_context

        def new_context(**kwargs):  # every page's script errors kept, for a failed test's report
            ctx = opened(**kwargs)
            ctx.on("page", _keep_errors)
            return ctx

        b.new_context = new_context
        yield b
        b.close()


def _keep_errors(pg) -> None:
    """Keep the page's uncaught script errors and console errors on it (``pg.errors``), and
    any request it makes outside the app's server (``pg.outside``):
    a page that goes blank with the server idle is the browser's own failure, and only
    its console says why."""
    pg.errors = []
    pg.outside = []  # requests to anywhere but the app's own server (the app makes no network calls)
    pg.on("request", lambda r: None if r.url.startswith(("http://127.0.0.1", "data:", "blob:", "about:"))
          else pg.outside.append(r.url))
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    pg.on("requestfailed", lambda r: pg.errors.append(f"request failed: {r.url} ({r.failure})"))
    pg.on("console", lambda m: pg.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)


@pytest.fixture(scope="module")
def url():
    with app_server("gemma", timeout=600) as u:
        yield u


@pytest.fixture(scope="module")
def tiny_url():
    with app_server("tiny", timeout=300, extra_env={"ATLAS_ROOM_WORKER": "1"}) as u:  # it measures the room's texts
        yield u


@pytest.fixture(scope="module")
def reader(browser):
    """One browser context for a module's single-reader tests: each test gets a page of its
    own (a Streamlit session of its own), and the context's cache keeps Streamlit's and
    Plotly's compiled code between them — a fresh context compiles them again, ≈ 2 s of the
    browser's CPU a test."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 2600}, locale="en-US")
    yield ctx
    ctx.close()


@pytest.fixture
def page(reader):
    pg = reader.new_page()
    dialogs = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    yield pg
    pg.close()


def h1(page) -> str:
    return page.locator("h1").first.inner_text().strip()


def wait_title(page, title: str, timeout: float = 300_000, idle: bool = True) -> None:
    """The page's h1 reads ``title``; then (unless the caller waits for something of its
    own and then for idle) the run has ended."""
    page.wait_for_function("t => { const h = document.querySelector('h1'); return h && h.innerText.trim() === t; }",
                           arg=title, timeout=timeout, polling=POLL_MS)
    if idle:
        wait_idle(page, timeout)


def walk(page, base: str, query: str, lang: str, timeout: float = 600_000, idle: bool = True):
    """Every page of the walk in order, as a reader moves: the first opened by its link,
    each next one by PageDown (st.switch_page: no new session, no page load — a goto per
    page cost the browser twice the CPU). Yields (index, page of the walk) once its title
    is in (and, unless ``idle`` is False, its run has ended)."""
    for i, step in enumerate(WALK):
        if i == 0:
            page.goto(f"{base}/{URLS[0]}?{query}")
        else:
            page.locator("h1").first.click()  # away from any box, as a clicker finds the page
            page.keyboard.press("PageDown")
        wait_title(page, i18n.translate(lang, step.title_key), timeout, idle=idle)
        yield i, step


SIDEBAR_TEXT = """() => { const s = document.querySelector('[data-testid="stSidebarUserContent"]');
  return s ? s.textContent.replace(/\\s+/g, ' ').slice(0, 800) : ''; }"""


def frames_sent(page, seconds: float = 3.0) -> int:
    """How many websocket frames the page sends to the app in ``seconds``: a class member's
    poll sends one a second (its fragment's tick); none means its timer is gone."""
    cdp = page.context.new_cdp_session(page)
    sent = []
    cdp.on("Network.webSocketFrameSent", lambda e: sent.append(e))
    cdp.send("Network.enable")
    page.wait_for_timeout(seconds * 1000)
    cdp.detach()
    return len(sent)


def screenshots_on_failure(name: str, *contexts, url: str | None = None) -> None:
    """After a failed class test: every open page of these browser contexts, as it stood,
    into test-artifacts/failed-NAME-K.png, for whoever reads the failure, and each page's
    script errors printed (the test's captured output), with what tells a stopped poll
    from a student who stopped following: the frames the page sends in 3 s, and its
    sidebar's text (hidden on a phone, where "exploring on your own" would be)."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    k = 0
    for ctx in contexts:
        for pg in ctx.pages:
            print(f"failed-{name}-{k}: {pg.url}", *getattr(pg, "errors", [])[-20:], sep="\n  ")
            try:
                pg.screenshot(path=os.path.join(ARTIFACTS, f"failed-{name}-{k}.png"), full_page=True, timeout=10_000)
                print(f"  frames sent in 3 s: {frames_sent(pg)}", f"  sidebar: {pg.evaluate(SIDEBAR_TEXT)}", sep="\n")
            except Exception:  # noqa: BLE001 (a page that cannot be drawn any more: the others still are)
                pass
            k += 1
    if url is not None:
        print(server_state(url))


def server_state(url: str) -> str:
    """The end of the log of the app serving ``url``, after it has written every thread's
    stack there (launch.py answers SIGUSR1 so): what its runs were doing when a page hung."""
    pid, log = SERVER_PIDS.get(url), SERVER_LOGS.get(url)
    if pid is None or log is None:
        return f"no server of ours at {url}"
    os.kill(pid, signal.SIGUSR1)
    time.sleep(2)
    with open(log, encoding="utf-8", errors="replace") as f:
        return "server log (end):\n" + f.read()[-30_000:]


def axe_violations(page) -> list:
    """axe-core's serious and critical WCAG 2 A/AA violations on the page as drawn."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa"]}})
    # axe-core ships inside the package: nothing is fetched
    return [(v["id"], [n["target"] for n in v["nodes"][:2]])
            for v in result.response["violations"] if v["impact"] in ("serious", "critical")]


MARKUP_AND_CUTS = """() => {
  const text = [...document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')]
    .map(e => e.innerText).join('\\n');
  const marks = ['**', '__', '(s)'].filter(m => text.includes(m));
  const boxes = '[data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"], [data-testid="stMetricLabel"], '
    + '[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"], [data-testid="stTable"] th, '
    + '[data-testid="stWidgetLabel"], [data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"], '
    + '[data-testid="stMetricDelta"] [data-testid="stMarkdownContainer"], button [data-testid="stMarkdownContainer"]';
  const cut = [...document.querySelectorAll(boxes)]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
    .map(e => e.innerText.slice(0, 60));
  // a slider's value drawn over its own thumb and track
  const covered = [...document.querySelectorAll('[data-testid="stSliderThumbValue"]')]
    .filter(v => v.offsetParent !== null
      && v.getBoundingClientRect().bottom > v.parentElement.getBoundingClientRect().top + 1)
    .map(v => v.innerText);
  return {marks, cut, covered};
}"""


def markup_and_cuts(page) -> dict:
    """What the reader would see wrong: literal Markdown marks or "(s)" in the rendered
    text; navigation links, metric labels and deltas, widget labels, buttons or table
    headings whose text is wider than their box (cut off); a slider's value over its thumb."""
    return page.evaluate(MARKUP_AND_CUTS)


SEND_ENABLED = ("() => { const b = document.querySelector('[class*=\"st-key-vote_send_\"] button');"
                " return b && !b.disabled; }")
