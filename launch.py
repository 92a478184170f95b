"""The serving process: ``python -m launch [--cold] [app.py] [streamlit run's options]`` is
``streamlit run app.py [options]`` with the model loaded and the sample text's pages
built in the background from the start (``ui.warm``), before the first visitor
(scripts/run.sh, and each replica of scripts/serve.sh); ``--cold`` builds nothing ahead
(the model loads on the first visit). It sits beside app.py, above pages/: the background
build reads the walk that importing ``pages`` fills.

It also turns off Streamlit's older ``pages/`` folder mode before the first visitor: a
server's first run would otherwise take ``pages/`` for that mode and answer a bookmarked
page's URL with "page not found" (app.py's ``st.navigation`` names the pages)."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

from ui import warm

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")


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
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: every thread's stack to stderr
    if not cold:
        warm.start(the_walk)  # waits for the runtime that cli.main creates
    cli.main(["run", script, *options], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
