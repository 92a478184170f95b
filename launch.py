"""The serving process: ``python -m launch [--cold] [app.py] [streamlit run's options]`` is
``streamlit run app.py [options]`` with the model loaded and the sample text's pages
built in the background from the start (``ui.warm``), before the first visitor
(scripts/run.sh, and each replica of scripts/serve.sh); ``--cold`` builds nothing ahead
(the model loads on the first visit). It sits beside app.py, above pages/: the background
build reads the walk that importing ``pages`` fills.

It also turns off Streamlit's older ``pages/`` folder mode before the first visitor: a
server's first run would otherwise take ``pages/`` for that mode and answer a bookmarked
page's URL with "page not found" (app.py's ``st.navigation`` names the pages); and it bounds
the files a session may hold in the server's memory (:class:`BoundedUploads`)."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
from collections import OrderedDict

from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli
from streamlit.web.server import server as streamlit_server

from ui import warm

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")


class BoundedUploads(MemoryUploadedFileManager):
    """Streamlit's in-memory store of uploaded files, bounded: ``PUT
    /_stcore/upload_file/<session>/<id>`` keeps a file only under an id an uploader of that
    session was given (the ids Streamlit hands out when a page asks where to upload; a
    made-up id keeps nothing), and a session holds at most FILES_PER_SESSION files (the
    oldest goes). Streamlit 1.67 took any number of files under made-up ids from one session
    (100 files of 2 MB in 3 s: 160 MB held while the session lived)."""

    FILES_PER_SESSION = 2  # the sidebar's one uploader, and one being replaced
    IDS_PER_SESSION = 16  # ids handed out and not yet used, per session (the oldest forgotten)

    def __init__(self, upload_endpoint: str) -> None:
        super().__init__(upload_endpoint)
        self._given: dict[str, OrderedDict] = {}

    def get_upload_urls(self, session_id, file_names):
        urls = super().get_upload_urls(session_id, file_names)
        with self._lock:
            given = self._given.setdefault(session_id, OrderedDict())
            for url in urls:
                given[url.file_id] = None
            while len(given) > self.IDS_PER_SESSION:
                given.popitem(last=False)
        return urls

    def add_file(self, session_id, file) -> None:
        with self._lock:
            given = file.file_id in self._given.get(session_id, ())
        if not given:
            logging.getLogger("atlas").warning("an upload under an id never given to its session was dropped")
            return
        super().add_file(session_id, file)
        with self._lock:
            held = list(self.file_storage.get(session_id, ()))
        for old in held[:-self.FILES_PER_SESSION]:
            self.remove_file(session_id, old)

    def remove_session_files(self, session_id) -> None:
        super().remove_session_files(session_id)
        with self._lock:
            self._given.pop(session_id, None)


def bound_uploads() -> None:
    """The server that cli.main makes keeps its uploads in :class:`BoundedUploads`."""
    streamlit_server.MemoryUploadedFileManager = BoundedUploads


def the_walk():
    """The pages, found only when the background build asks (once the server answers: the
    steps' packages import torch, which would hold the interpreter while it binds its port)."""
    import pages

    return pages.WALK


def main(args: list[str]) -> None:
    cold = bool(args) and args[0] == "--cold"
    args = args[1:] if cold else args
    script = args[0] if args and args[0].endswith(".py") else APP
    options = args[1:] if args and args[0].endswith(".py") else args
    PagesManager.uses_pages_directory = False  # read once, when the first session starts
    bound_uploads()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: every thread's stack to stderr
    if not cold:
        warm.start(the_walk)  # waits for the runtime that cli.main creates
    else:  # nothing prepared ahead: no view of step 1 before the model either
        warm.no_views()
    cli.main(["run", script, *options], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
