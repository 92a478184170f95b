"""What tests import: the repository root, devices and tolerances, the pages and
languages (from the app's own lists)."""

import os
import re

import torch

from ui import i18n, walk
from ui.i18n import LANGS as _LANGS
from ui.step_parts import ANSWER_FROM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "app.py")
WALK = walk.pages()  # every page of the walk, in order (its Step)


def page_path(step) -> str:
    """A page's file as AppTest.switch_page takes it: relative to app.py's folder."""
    return os.path.relpath(step.page, ROOT)


PAGES = [page_path(p) for p in WALK]
PAGE = {p.id: page_path(p) for p in WALK}  # a page's file by its step's id: tests name pages by id
HOME = walk.home()
LANGS = list(_LANGS)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def tolerance(device: str) -> dict:
    """float32 on CPU: 1e-5; bfloat16 on CUDA: bf16's rounding (≈1e-2 relative)."""
    return {"atol": 1e-5, "rtol": 1e-5} if device == "cpu" else {"atol": 2e-2, "rtol": 2e-2}


def dtype_for(device: str) -> torch.dtype:
    return torch.float32 if device == "cpu" else torch.bfloat16


def revealed(at, lang="en") -> str:
    """The value a predict-then-reveal answer shows (between its ** **), pressing the
    reveal button first when the answer still waits for it."""
    heads = tuple(i18n.translate(lang, key, value="§").split("§")[0] for key in ANSWER_FROM.values())
    if not [m for m in at.markdown if m.value.startswith(heads)]:
        buttons = [b for b in at.button if b.key and re.fullmatch(r"reveal_s\d_\w+", b.key)]
        if buttons:
            buttons[0].click().run()
    found = [m.value for m in at.markdown if m.value.startswith(heads)]
    assert found, "no revealed answer on the page"
    head = next(h for h in heads if found[0].startswith(h))
    return found[0][len(head):].split("**")[0]
