"""The app in this process, as Streamlit's AppTest runs it (no server, no browser): what
bench/pages.py times a page with. Streamlit's own pages/ folder mode is off after each
PagesManager is made, as launch.py turns it off for the server."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def app(lang: str, timeout: float = 900):
    """The app's AppTest in ``lang``, not yet run."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    if not getattr(PagesManager.__init__, "atlas_single", False):
        made = PagesManager.__init__

        def single(self, *a, **k):
            made(self, *a, **k)
            PagesManager.uses_pages_directory = False

        single.atlas_single = True
        PagesManager.__init__ = single
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.query_params["lang"] = lang
    return at


def page_of(page_file: str) -> str:
    """A page's path as AppTest's switch_page takes it (from the root)."""
    return str(Path(page_file).resolve().relative_to(ROOT))
