"""What tests import: the repository root, devices and tolerances, the pages and
languages (from the app's own lists)."""

import os

import torch

from ui.i18n import LANGS as _LANGS
from ui.steps import PAGE_FILES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "app.py")
PAGES = PAGE_FILES
LANGS = list(_LANGS)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def tolerance(device: str) -> dict:
    """float32 on CPU: 1e-5; bfloat16 on CUDA: bf16's rounding (≈1e-2 relative)."""
    return {"atol": 1e-5, "rtol": 1e-5} if device == "cpu" else {"atol": 2e-2, "rtol": 2e-2}


def dtype_for(device: str) -> torch.dtype:
    return torch.float32 if device == "cpu" else torch.bfloat16
