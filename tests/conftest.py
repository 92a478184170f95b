import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def tolerance(device: str) -> dict:
    """float32 on CPU: 1e-5; bfloat16 on CUDA: bf16's rounding (≈1e-2 relative)."""
    return {"atol": 1e-5, "rtol": 1e-5} if device == "cpu" else {"atol": 2e-2, "rtol": 2e-2}


def dtype_for(device: str) -> torch.dtype:
    return torch.float32 if device == "cpu" else torch.bfloat16


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


APP = os.path.join(ROOT, "app.py")
PAGES = [
    "pages/1_every_pair.py", "pages/2_nearly_empty.py", "pages/3_neighbours.py", "pages/4_hubs.py",
    "pages/5_linear.py", "pages/6_honest_catch.py", "pages/7_payoff.py", "pages/8_closing.py",
]
LANGS = ["ja", "pt", "en"]


@pytest.fixture
def make_app(monkeypatch):
    """AppTest of app.py as the server runs it: st.navigation in app.py drawing the
    sidebar on every page. (AppTest would otherwise re-detect the pages/ folder on
    every run and run a page file alone, skipping app.py.)"""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)

    def make(model: str = "tiny", lang: str | None = None, timeout: float = 180):
        monkeypatch.setenv("ATLAS_MODEL", model)
        at = AppTest.from_file(APP, default_timeout=timeout)
        if lang:
            at.query_params["lang"] = lang
        return at

    return make
