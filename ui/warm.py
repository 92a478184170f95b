"""Ready when the server says so: as soon as a serving process starts (``launch.py``),
a background thread loads the model and builds the sample text's pages, in every
language, into the caches the pages read — before the first visitor, so that opening the
page shows the first chart about as fast as a step switch. The health check does not wait
for it (Streamlit answers it as soon as it serves); a page opened while the model still
loads says so (``ui.served_model.ensure_model``).

The packaged model is never converted here: a first start converts it in
``scripts/run.sh`` before the server starts (and a page converts it with its progress bar
when it is missing); a folder that cannot serve is left to the page, which says why."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import time
import urllib.request
from pathlib import Path

from attn import settings

from .i18n import LANGS, ROOT


# step 1's view before the model (ui.first_view): written here once the sample's pages are built
VIEW_MODEL = "gemma"  # the packaged model: its start (torch, transformers, the weights) takes seconds
FIRST_VISIT_WAIT = 3.0  # at most, the heavy imports wait this long for a first visitor's view
_SOURCES = ("app.py", "attn", "ui", "pages", "server", "locales", "assets")
RUNTIME_WAIT = 120.0  # seconds the thread waits for Streamlit's runtime (its caches) to exist
ANSWER_WAIT = 15.0  # then, at most, for the server to answer its health check on the loopback
QUIET_WAIT = 10.0  # at most, before each piece of the build, for the visitors' page runs to end
_log = logging.getLogger(__name__)
_state = {"ready": None, "loaded": None, "thread": None, "views": True}  # when the pages were built; the model
_view_sent = threading.Event()


def ready() -> float | None:
    """When the sample text's pages were built (time.time()), or None: not (yet)."""
    return _state["ready"]


def loaded() -> float | None:
    """When this thread had the model loaded (time.time()), or None: not (yet)."""
    return _state["loaded"]


def running() -> bool:
    """The warming thread was started in this process and has not ended."""
    return _state["thread"] is not None and _state["thread"].is_alive()


@functools.cache
def version() -> str:
    """The app's version: a hash of its source files, locales and sample texts."""
    h = hashlib.sha256()
    for part in _SOURCES:
        root = ROOT / part
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".txt", ".md"))
        for f in files:
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def view_file(lang: str) -> Path:
    """Where step 1's view in ``lang`` is kept (the cache folder)."""
    return settings.read().cache_dir / "first-view" / f"{VIEW_MODEL}-{lang}.json"


def save_view(lang: str, view: dict) -> None:
    """Step 1's view in ``lang`` (step_of, title, lead, key: [(label, value)], figure: a
    figure's dict), written whole or not at all, with its key and the time it was computed."""
    path = view_file(lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**view, "model": VIEW_MODEL, "version": version(), "computed": time.time()}),
                   encoding="utf-8")
    os.replace(tmp, path)


def view_sent() -> bool:
    """A first visitor's view was sent (ui.first_view): True the first time it is said."""
    first = not _view_sent.is_set()
    _view_sent.set()
    return first


def no_views() -> None:
    """This process serves no view before the model (launch.py --cold): nothing waits for one."""
    _state["views"] = False


def views() -> bool:
    """Whether this process serves step 1's view before its model (ui.first_view)."""
    return _state["views"]


def _wait_first_visit() -> None:
    """The heavy imports wait here, where a view is there to send, until a first visitor's is
    sent (at most FIRST_VISIT_WAIT): imported meanwhile, they would hold the interpreter while
    that page is drawn."""
    if views() and settings.read().model_id == VIEW_MODEL and any(view_file(x).exists() for x in LANGS):
        _view_sent.wait(FIRST_VISIT_WAIT)


def start(find_walk) -> threading.Thread:
    """The warming thread, started once per process; ``find_walk()`` fills the walk
    (ui.walk) once the server answers."""
    if _state["thread"] is None:
        _state["thread"] = threading.Thread(target=_warm, args=(find_walk,), daemon=True, name="atlas-warm")
        _state["thread"].start()
    return _state["thread"]


def _serving() -> bool:
    """Streamlit's runtime (whose caches the pages read) has started: the server answers
    its health check from now on, and the heavy imports below no longer delay it."""
    from streamlit.runtime import Runtime
    from streamlit.runtime.runtime import RuntimeState

    return Runtime.exists() and Runtime.instance().state != RuntimeState.INITIAL


def _answers() -> bool:
    """The server answers its health check (the heavy work waits for it: its imports
    alone would hold the interpreter while the server binds its port)."""
    from streamlit import config

    address = config.get_option("server.address") or "127.0.0.1"
    host = "127.0.0.1" if address in ("0.0.0.0", "::", "") else address
    host = f"[{host}]" if ":" in host else host
    try:
        with urllib.request.urlopen(f"http://{host}:{config.get_option('server.port')}/_stcore/health",
                                    timeout=1) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def _warm(find_walk) -> None:
    t0 = time.perf_counter()
    end = time.monotonic() + RUNTIME_WAIT
    while not _serving():
        if time.monotonic() > end:
            _log.warning("warm: Streamlit's runtime did not start; the first visitor loads the model")
            return
        time.sleep(0.05)
    end = time.monotonic() + ANSWER_WAIT
    while not _answers() and time.monotonic() < end:  # not answering on the loopback (TLS): start anyway
        time.sleep(0.1)
    _wait_first_visit()  # a first visitor's view before the model is sent without them
    t_imports = time.monotonic()
    try:  # the heavy imports (torch, transformers) only now: before, they would delay the health check
        from attn import converted

        from . import analyses, page_run, served_model, summaries
        from .i18n import DEFAULT, LANGS
        from .samples import sample_text

        find_walk()

        model_id = served_model.default_model()
        if model_id == "gemma" and not converted.is_converted():
            _log.warning("warm: the model is not converted yet; the first page converts it with its progress bar")
            return
        served_model.background.update(stage="", since=t_imports)  # a page opened meanwhile says so
        served_model.background["loading"] = model_id
        try:
            served_model.get_model(model_id)
        finally:
            served_model.background.update(loading=None, stage="")
        _state["loaded"] = time.time()
        loaded = time.perf_counter() - t0
        # the default language's first; each piece waits while a visitor's page runs, so that
        # the page a reader opened gets the CPU and builds what it needs first (the rest is
        # built after, or found built by that page)
        for lang in [DEFAULT, *(lang for lang in LANGS if lang != DEFAULT)]:
            text = sample_text(lang)
            page_run.wait_quiet(QUIET_WAIT)
            a = analyses.analysis_unseen(text, model_id)
            summaries.build_all(a, text, model_id, {}, langs=(lang,), pause=lambda: page_run.wait_quiet(QUIET_WAIT))
            if model_id == VIEW_MODEL:  # the next start's first view, before its model
                save_view(lang, summaries.first_view(a, text, model_id, lang))
        _state["ready"] = time.time()
        print(f"Attention Atlas: ready — the model ({model_id}) loaded in {loaded:.1f} s, the sample texts' "
              f"pages built in {time.perf_counter() - t0:.1f} s after the start", flush=True)
    except Exception:  # the first visitor then meets the same error on their page, said there
        _log.exception("warm: the model or the sample text's pages could not be prepared in the background")
