"""The pages of the walk: each package here is one page — its declaration (``STEP``, a
ui.step_parts.Step, with its settings, questions, summary, room measure, charts and CSV
columns) in its ``__init__``, its page file ``page.py`` beside it. Importing this package
finds them and fills the walk (ui.walk), the one list that navigation, the summaries, the
handout and the class read; nothing else lists them.

Streamlit's own ``pages/`` folder convention does not apply: app.py builds the navigation
with ``st.navigation``, which ignores this folder's files."""

from __future__ import annotations

import importlib
import pkgutil

from ui import walk
from ui.step_parts import Step


def find() -> tuple[Step, ...]:
    """Fill the walk with every package on this package's ``__path__`` whose ``STEP`` is a
    Step (a test that adds a folder to the path calls it again)."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.ispkg:
            step = getattr(importlib.import_module(f"{__name__}.{info.name}"), "STEP", None)
            if isinstance(step, Step):
                found.append(step)
    return walk.fill(found)


WALK = find()  # as found on import (ui.walk.pages() is the walk now)
