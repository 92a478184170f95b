"""Protocol-level readers: each talks to the app over Streamlit's own websocket as a
browser does (BackMsg / ForwardMsg protobufs) but draws nothing, so what is timed is
the server's work: from the request to the run's end (``script_finished``).

Loopback only. Used by ``bench/classroom.py`` and the concurrency tests. Through a
proxy, a reader first fetches the page over HTTP and keeps the cookies it sets (the
replica's name, for sticky sessions) for its websocket and its reconnects.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from urllib.parse import urlparse

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

DONE = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN


@dataclass
class Run:
    """What one run of the app sent back."""

    seconds: float
    metrics: list[tuple[str, str]] = field(default_factory=list)  # (label, value), in order
    exceptions: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)  # info / warning / error bodies as drawn, even if removed later
    text_area_id: str | None = None
    finished: bool = False

    def metric(self, label_start: str) -> str | None:
        return next((v for k, v in self.metrics if k.startswith(label_start)), None)


class Reader:
    """One browser tab's worth of protocol: a session, its widget states, its runs."""

    def __init__(self, base_url: str, lang: str = "en"):
        self.base = base_url.rstrip("/")
        self.lang = lang
        self.jar = CookieJar()
        self.ws = None
        self.widgets: dict[str, str] = {}  # widget id → string value, sent on every run
        self.text_area_id: str | None = None
        self.session_id: str | None = None

    # --- connection ------------------------------------------------------------------

    def _fetch_cookies(self) -> None:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        with opener.open(self.base + "/", timeout=60) as r:
            r.read(0)

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)

    async def connect(self, *, fetch: bool = True) -> None:
        if fetch:
            await asyncio.get_running_loop().run_in_executor(None, self._fetch_cookies)
        host = urlparse(self.base).netloc
        headers = {"Cookie": self.cookie_header()} if len(self.jar) else {}
        protocols = ["streamlit"] + (["no-xsrf", self.session_id] if self.session_id else [])  # name, token, session
        self.ws = await websockets.connect(f"ws://{host}/_stcore/stream", subprotocols=protocols,
                                           additional_headers=headers, max_size=None, open_timeout=60,
                                           ping_interval=None)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    # --- runs ------------------------------------------------------------------------------

    async def run(self, page: str = "", *, text: str | None = None, timeout: float = 600) -> Run:
        """Ask for a run of ``page`` (its URL path; "" for the first step), with the text
        area holding ``text`` when given; wait for the run's end and return what it drew."""
        if text is not None:
            if self.text_area_id is None:
                raise RuntimeError("run once before typing: the text area's id comes from the page")
            self.widgets[self.text_area_id] = text
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = f"lang={self.lang}"
        rerun.page_name = page
        for wid, value in self.widgets.items():
            rerun.widget_states.widgets.add(id=wid, string_value=value)
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        out = Run(seconds=0.0)
        async with asyncio.timeout(timeout):
            while True:
                fwd = ForwardMsg.FromString(await self.ws.recv())
                kind = fwd.WhichOneof("type")
                if kind == "new_session":
                    self.session_id = self.session_id or fwd.new_session.initialize.session_id
                elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                    self._read(fwd.delta.new_element, out)
                elif kind == "script_finished":
                    if fwd.script_finished == RERUN:  # a rerun the script asked for (a page switch): go on
                        out = Run(seconds=0.0)
                        continue
                    out.finished = fwd.script_finished == DONE
                    break
        out.seconds = time.perf_counter() - start
        if out.text_area_id:
            self.text_area_id = out.text_area_id
        return out

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
