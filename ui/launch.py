"""The serving process: ``python -m ui.launch [streamlit run's options]`` is
``streamlit run app.py [options]`` with the model loaded and the sample text's pages
built in the background from the start (``ui.warm``), before the first visitor
(scripts/run.sh, and each replica of scripts/serve.sh)."""

from __future__ import annotations

import os
import sys

from streamlit.web import cli

from . import warm

APP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "app.py")


def main(args: list[str]) -> None:
    script = args[0] if args and args[0].endswith(".py") else APP
    options = args[1:] if args and args[0].endswith(".py") else args
    warm.start()  # waits for the runtime that cli.main creates
    cli.main(["run", script, *options], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
