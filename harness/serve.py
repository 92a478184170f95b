"""Start the app on a free port and a headless Chromium for it (the browser tests and
bench/app_latency.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pages  # noqa: F401 (importing it fills the walk: ui.walk)
from ui import walk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_PIDS: dict[str, int] = {}  # url -> pid of the app serving it
SERVER_LOGS: dict[str, str] = {}  # url -> the file its output goes to
# how often a browser test's wait_for_function checks its condition, in ms. Playwright's
# default ("raf") checks it on every animation frame, 60 times a second, and keeps the page
# drawing frames all the while: on 2 cores, beside the app and the other test process, that
# was CPU taken from the work the test waits for
POLL_MS = 100
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(cmd: list[str], url: str, *, name: str, env: dict, timeout: float, stop_wait: float = 20):
    """Start ``cmd`` (its output to a temporary log), wait until ``url`` answers its health
    check (``/_stcore/health``), yield the URL; stop the process afterwards."""
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"{name} stopped:\n" + log.read()[-3000:])
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            if time.time() > deadline:
                raise TimeoutError(f"{name} did not answer")
            time.sleep(0.3)
        SERVER_PIDS[url], SERVER_LOGS[url] = proc.pid, log.name
        yield url
    finally:
        SERVER_PIDS.pop(url, None)
        SERVER_LOGS.pop(url, None)
        proc.terminate()
        try:
            proc.wait(timeout=stop_wait)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        os.unlink(log.name)


@contextlib.contextmanager
def app_server(model: str = "gemma", timeout: float = 300, extra_env: dict | None = None, script: str = "app.py",
               port: int | None = None, warm: bool = False, plain: bool = False):
    """Yield the base URL of a running app (or another Streamlit script); stop it afterwards.
    ``warm``: started as scripts/run.sh starts it (launch.py: the model loaded and the
    sample text's pages built from the start); else ``launch.py --cold``, the model loaded
    by the first page that needs it (another script than app.py, or ``plain``: ``streamlit
    run`` as Streamlit's own convention and its hosts start an app)."""
    port = port or free_port()
    env = {"MALLOC_ARENA_MAX": "2", **os.environ, "ATLAS_MODEL": model, "PYTHONUNBUFFERED": "1",
           **(extra_env or {})}  # as scripts/run.sh starts it
    if script != "app.py" or plain:
        run = ["-m", "streamlit", "run"]
    else:
        run = ["-m", "launch"] if warm else ["-m", "launch", "--cold"]
    cmd = [sys.executable, *run, os.path.join(ROOT, script), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    with running(cmd, f"http://127.0.0.1:{port}", name="the app", env=env, timeout=timeout) as url:
        yield url


def ready_after(url: str, since: float, limit: float = 600) -> float:
    """Seconds from ``since`` (perf_counter) until the log of the app at ``url`` says it is
    ready (ui/warm.py: the model loaded and the sample texts' pages built); nan after ``limit``."""
    while time.perf_counter() - since < limit:
        with open(SERVER_LOGS[url], encoding="utf-8", errors="replace") as f:
            if "Attention Atlas: ready" in f.read():
                return time.perf_counter() - since
        time.sleep(0.1)
    return float("nan")


def process_cpu(pid: int | str) -> float:
    """The CPU time (user + sys) process ``pid`` has used so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the name: state ppid … utime stime (indexes 11, 12)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(url: str) -> float:
    """The CPU time the app serving ``url`` has used so far (nan: not one process of ours,
    e.g. replicas behind a proxy)."""
    pid = SERVER_PIDS.get(url)
    return float("nan") if pid is None else process_cpu(pid)


def rss_mb(pid: int) -> float:
    """The process's current resident memory (VmRSS), in MB (step 7's benchmark resets
    the high-water mark, so a class is measured by polling this)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb(pid: int) -> float:
    """The process's resident high-water mark (VmHWM), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def chromium_path() -> str | None:
    """Debian's chromium, or ATLAS_CHROMIUM (a path, or 'playwright' for its own build)."""
    env = os.environ.get("ATLAS_CHROMIUM")
    if env == "playwright":
        return "playwright"
    if env and os.path.exists(env):
        return env
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch(playwright):
    path = chromium_path()
    if path is None:
        raise FileNotFoundError("no Chromium: install Debian's 'chromium' package or set ATLAS_CHROMIUM")
    kwargs = {"args": CHROMIUM_ARGS, "headless": True}
    if path != "playwright":
        kwargs["executable_path"] = path
    return playwright.chromium.launch(**kwargs)


FIRST_METRIC = "() => { const m = document.querySelector('[data-testid=stMetricValue]'); return m && m.innerText; }"


def paste(page, text: str) -> str:
    """Type a text into the sidebar box (same session) and wait for the page to show
    its numbers: the first metric, step 1's token count, changes. Returns it."""
    page.wait_for_function(FIRST_METRIC, timeout=300_000, polling=POLL_MS)
    before = page.evaluate(FIRST_METRIC)
    box = page.locator('[data-testid="stSidebar"] textarea')
    box.fill(text)
    box.press("Control+Enter")
    page.wait_for_function(f"() => ({FIRST_METRIC})() && ({FIRST_METRIC})() !== {before!r}", timeout=600_000,
                           polling=POLL_MS)
    wait_idle(page, 300_000)
    return page.evaluate(FIRST_METRIC)


def wait_idle(page, timeout: float = 120_000) -> None:
    """Wait until Streamlit has finished its run: no "running" indicator, and the
    app's navigation in the sidebar, for a whole second (the indicator can blink
    off between runs)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout)
    # a quiet second counts from this call: one left over from an earlier wait would end
    # this one before the run just started had shown its indicator
    page.evaluate("() => { window.__atlasIdleSince = null; }")
    page.wait_for_function(
        """(pages) => {
            const busy = document.querySelector('[data-testid="stStatusWidget"]')
                || document.querySelector('[data-testid="stSkeleton"]')
                // the app's own navigation, not the pages/ folder list of a first run
                || document.querySelectorAll('[data-testid="stSidebarNav"] a').length !== pages;
            const now = Date.now();
            if (busy) { window.__atlasIdleSince = null; return false; }
            if (!window.__atlasIdleSince) { window.__atlasIdleSince = now; return false; }
            return now - window.__atlasIdleSince > 1000;
        }""",
        arg=len(walk.pages()),
        timeout=timeout,
        polling=200,
    )
