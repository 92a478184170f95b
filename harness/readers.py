"""Protocol-level readers: each talks to the app over Streamlit's own websocket as a
browser does (BackMsg / ForwardMsg protobufs) but draws nothing, so what is timed is
the server's work: from the request to the run's end (``script_finished``).

Loopback only. Used by ``bench/classroom.py`` and the concurrency tests. Through a
proxy, a reader first fetches the page over HTTP and keeps the cookies it sets (the
replica's name, for sticky sessions) for its websocket and its reconnects.

In a class a reader does what a browser does: it keeps the address the server writes
(``page_info_changed``: the class and student parameters) and sends it back on every
run and reconnect; it follows a page switch the server starts (``new_session`` names the
page it is now on); it reruns each fragment that asked for it (``auto_rerun``) at its
interval (``poll``); and it clicks buttons and picks options by their widget keys.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from urllib.parse import parse_qsl, urlencode, urlparse

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

DONE = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
FRAGMENT_DONE = ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
FRAGMENT_WAIT = 60.0  # a fragment's rerun the server never answers (it no longer holds the fragment)
ID_PREFIX = "$$ID-"  # a keyed widget's id: $$ID-<hash>-<key>


@dataclass
class Run:
    """What one run of the app sent back."""

    seconds: float
    metrics: list[tuple[str, str]] = field(default_factory=list)  # (label, value), in order
    exceptions: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # widget key → id, for the keyed widgets drawn
    options: dict[str, list[str]] = field(default_factory=dict)  # a keyed radio's options, as drawn
    alerts: list[str] = field(default_factory=list)  # info / warning / error bodies as drawn, even if removed later
    alert_times: list[float] = field(default_factory=list)  # perf_counter when each of ``alerts`` came
    progress_at: float | None = None  # perf_counter when a progress bar first came (a long text read)
    code: list[str] = field(default_factory=list)  # code blocks (a share link, a class's link)
    toasts: list[str] = field(default_factory=list)  # notices (st.toast), as drawn
    charts: dict[str, str] = field(default_factory=dict)  # a keyed chart's Plotly spec (JSON), by its key
    text_area_id: str | None = None
    finished: bool = False
    page: str = ""  # the page (its URL path) the run ended on: another after a switch the server made
    switched: bool = False  # the server moved this reader to another page during the run
    full: bool = True  # a run of the whole page, not only of a fragment
    ended_at: float = 0.0  # perf_counter at the run's end

    def metric(self, label_start: str) -> str | None:
        return next((v for k, v in self.metrics if k.startswith(label_start)), None)


class Reader:
    """One browser tab's worth of protocol: a session, its widget states, its address,
    its fragments' timers, its runs (one at a time, as a browser's)."""

    def __init__(self, base_url: str, lang: str = "en", query: dict | None = None, address: str | None = None):
        self.base = base_url.rstrip("/")
        # the client's address as a proxy on the loopback would forward it (X-Forwarded-For,
        # which the server trusts from the loopback only): many "clients" from one process
        self.address = address
        self.lang = lang
        self.query: dict[str, str] = {"lang": lang, **(query or {})}  # the address, as the server last wrote it
        self.jar = CookieJar()
        self.ws = None
        self.widgets: dict[str, str] = {}  # widget id → string value, sent on every run
        self.text_area_id: str | None = None
        self.session_id: str | None = None
        self.ids: dict[str, str] = {}  # widget key → id, for every keyed widget drawn so far
        self.options: dict[str, list[str]] = {}  # a keyed radio's options (a choice is sent as its label)
        self.page = ""  # the page this reader is on (URL path; "" the first step)
        self.page_hash = ""  # and its script's hash, as the server names it
        self.paths: dict[str, str] = {}  # page script hash → URL path, from new_session
        self.fragments: dict[str, float] = {}  # fragment id → seconds between its automatic reruns
        self._turn = asyncio.Lock()

    # --- connection ------------------------------------------------------------------

    def _forwarded(self) -> dict:
        return {"X-Forwarded-For": self.address} if self.address else {}

    def _fetch_cookies(self) -> None:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        with opener.open(urllib.request.Request(self.base + "/", headers=self._forwarded()), timeout=60) as r:
            r.read(0)

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)

    async def connect(self, *, fetch: bool = True) -> None:
        if fetch:
            await asyncio.get_running_loop().run_in_executor(None, self._fetch_cookies)
        host = urlparse(self.base).netloc
        headers = ({"Cookie": self.cookie_header()} if len(self.jar) else {}) | self._forwarded()
        protocols = ["streamlit"] + (["no-xsrf", self.session_id] if self.session_id else [])  # name, token, session
        self.ws = await websockets.connect(f"ws://{host}/_stcore/stream", subprotocols=protocols,
                                           additional_headers=headers, max_size=None, open_timeout=60,
                                           ping_interval=None)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    # --- runs ------------------------------------------------------------------------------

    async def run(self, page: str | None = "", *, text: str | None = None, click: str | None = None,
                  values: dict | None = None, fragment: str | None = None, timeout: float = 600) -> Run:
        """Ask for a run of ``page`` (its URL path; "" for the first step; None: the page
        this reader is on), with the text area holding ``text`` when given, the button
        keyed ``click`` pressed, ``values`` (widget key → int or str) set; or, with
        ``fragment``, that fragment's automatic rerun. A radio's value is sent as the label
        of its option (an int: the option at that place). Waits for the run's end (after
        any rerun or page switch the server makes) and returns what it drew."""
        async with self._turn:
            return await self._run(page, text, click, values or {}, fragment, timeout)

    async def _run(self, page, text, click, values, fragment, timeout) -> Run:
        if text is not None:
            if self.text_area_id is None:
                raise RuntimeError("run once before typing: the text area's id comes from the page")
            self.widgets[self.text_area_id] = text
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = urlencode(self.query)
        if page is None:
            rerun.page_script_hash = self.page_hash
        else:
            rerun.page_name = page
        if fragment is not None:
            rerun.fragment_id, rerun.is_auto_rerun = fragment, True
        for wid, value in self.widgets.items():
            rerun.widget_states.widgets.add(id=wid, string_value=value)
        for key, value in values.items():
            wid = self._id(key)
            if isinstance(value, bool):
                rerun.widget_states.widgets.add(id=wid, bool_value=value)
                continue
            if isinstance(value, int) and key in self.options:
                value = self.options[key][value]
            if isinstance(value, int):
                rerun.widget_states.widgets.add(id=wid, int_value=value)
            else:
                rerun.widget_states.widgets.add(id=wid, string_value=str(value))
        if click is not None:
            rerun.widget_states.widgets.add(id=self._id(click), trigger_value=True)
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        asked = self.page if page is None else page  # where this run should end, unless the server moves it
        out = Run(seconds=0.0, page=self.page, full=fragment is None)
        async with asyncio.timeout(timeout):
            while True:
                fwd = ForwardMsg.FromString(await self.ws.recv())
                kind = fwd.WhichOneof("type")
                if kind == "new_session":
                    self.session_id = self.session_id or fwd.new_session.initialize.session_id
                elif kind == "navigation":  # a run of the whole page: st.navigation's pages, the one it is on
                    self.fragments.clear()  # its fragments ask for their timers anew
                    for p in fwd.navigation.app_pages:
                        self.paths[p.page_script_hash] = "" if p.is_default else p.url_pathname
                    self.page_hash = fwd.navigation.page_script_hash
                    self.page = self.paths.get(self.page_hash, self.page)
                elif kind == "page_info_changed":
                    self.query = dict(parse_qsl(fwd.page_info_changed.query_string))
                elif kind == "auto_rerun":
                    self.fragments[fwd.auto_rerun.fragment_id] = fwd.auto_rerun.interval
                elif kind == "stop_auto_rerun":
                    for fid in fwd.stop_auto_rerun.fragment_ids:
                        self.fragments.pop(fid, None)
                elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                    self._read(fwd.delta.new_element, out)
                    came = fwd.delta.new_element.WhichOneof("type")
                    if came == "alert":
                        out.alert_times.append(time.perf_counter())
                    elif came == "progress" and out.progress_at is None:
                        out.progress_at = time.perf_counter()
                elif kind == "script_finished":
                    if fwd.script_finished == RERUN:  # a rerun the script asked for (a page switch): go on
                        out = Run(seconds=0.0, page=self.page)
                        continue
                    out.finished = fwd.script_finished in (DONE, FRAGMENT_DONE)
                    out.full = out.full and fwd.script_finished != FRAGMENT_DONE
                    break
        out.ended_at = time.perf_counter()
        out.seconds = out.ended_at - start
        out.page = self.page
        out.switched = bool(asked or page is None) and self.page != asked
        if out.text_area_id:
            self.text_area_id = out.text_area_id
        self.ids.update(out.ids)
        self.options.update(out.options)
        return out

    def _id(self, key: str) -> str:
        if key not in self.ids:
            raise KeyError(f"no widget keyed {key!r} drawn yet (seen: {sorted(self.ids)})")
        return self.ids[key]

    async def poll(self, seconds: float, on_run=None, stop: asyncio.Event | None = None) -> list[Run]:
        """For ``seconds`` (or until ``stop`` is set): rerun each fragment that asked for
        automatic reruns, every its interval, as the browser's timers do, one run at a
        time. ``on_run(run)`` sees each run as it ends. Returns the runs."""
        runs, due = [], {}
        end = time.perf_counter() + seconds
        while time.perf_counter() < end and not (stop is not None and stop.is_set()):
            now = time.perf_counter()
            for fid, every in list(self.fragments.items()):
                due.setdefault(fid, now + every)
                if now >= due[fid] and fid in self.fragments:
                    try:
                        run = await self.run(None, fragment=fid, timeout=FRAGMENT_WAIT)
                    except TimeoutError:  # the server dropped a fragment a full run just removed: no answer comes
                        self.fragments.pop(fid, None)
                        continue
                    due[fid] = time.perf_counter() + every
                    runs.append(run)
                    if on_run is not None:
                        on_run(run)
            for fid in set(due) - set(self.fragments):
                del due[fid]
            await asyncio.sleep(0.05)
        return runs

    @staticmethod
    def _read(el, out: Run) -> None:
        kind = el.WhichOneof("type")
        if kind == "metric":
            out.metrics.append((el.metric.label, el.metric.body))
        elif kind == "exception":
            out.exceptions.append(f"{el.exception.type}: {el.exception.message}")
        elif kind == "markdown":
            out.markdown.append(el.markdown.body)
        elif kind == "alert":
            out.alerts.append(el.alert.body)
        elif kind == "text_area":
            out.text_area_id = el.text_area.id
        elif kind == "code":
            out.code.append(el.code.code_text)
        elif kind == "toast":
            out.toasts.append(el.toast.body)
        elif kind == "plotly_chart" and ID_PREFIX in el.plotly_chart.id:
            out.charts[el.plotly_chart.id.split("-", 2)[-1]] = el.plotly_chart.spec
        wid = getattr(getattr(el, kind), "id", "") if kind else ""
        if isinstance(wid, str) and wid.startswith(ID_PREFIX):
            key = wid[len(ID_PREFIX):].split("-", 1)[-1]
            out.ids[key] = wid
            if kind == "radio":
                out.options[key] = list(el.radio.options)


async def timed(coros) -> list:
    """Run coroutines at once; their results (or the exception each raised)."""
    return await asyncio.gather(*coros, return_exceptions=True)


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0–100), nearest rank."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, round(p / 100 * len(s) + 0.5) - 1))
    return s[k]
