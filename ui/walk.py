"""The walk: every page of it (each one package of the top-level ``pages/``, its
declaration a ui.step_parts.Step), in order. ``pages/__init__`` finds them and fills
this registry once, when imported (app.py, the launcher, the tests and benches import
it); nothing in ui/ names a step. Navigation, the setting table, the summaries, the
handout, the class's votes and the room's charts and CSV all read ``pages()``.

A step is named by its id everywhere something is kept (a class, a vote, a share link);
its number on screen is its place among the steps now. Links and stores written when
pages were numbered name them through server.class_layout.NUMBERED_PAGES."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .step_parts import Step

_walk: list[tuple[Step, ...]] = []  # the pages, once filled (one entry: a tuple, replaced whole)


def page_file(module_file: str) -> str:
    """The page file beside a step's declaration (its package's ``page.py``)."""
    return str(Path(module_file).resolve().parent / "page.py")


def fill(found: Iterable[Step]) -> tuple[Step, ...]:
    """The walk is these pages, put in their declared order (``pages/__init__`` calls it;
    a test that adds a page calls it again). Two pages with one id or one order: an error."""
    ordered = tuple(sorted(found, key=lambda s: s.order))
    for what in ("id", "order"):
        seen = [getattr(s, what) for s in ordered]
        if len(set(seen)) != len(seen):
            raise ValueError(f"two pages of the walk share one {what}: {seen}")
    _walk[:] = [ordered]
    return ordered


def pages() -> tuple[Step, ...]:
    """Every page of the walk, in order."""
    if not _walk:
        raise RuntimeError("the walk is empty: import the pages package (app.py does) before reading it")
    return _walk[0]


def steps() -> tuple[Step, ...]:
    """The steps, in order (the walk without the closing page and the playground)."""
    return tuple(p for p in pages() if p.is_step)


def by_id(page_id) -> Step | None:
    """The page of this id, or None (an id a link or a class holds may be anything)."""
    return next((p for p in pages() if p.id == page_id), None)


def get(page_id: str) -> Step:
    found = by_id(page_id)
    if found is None:
        raise KeyError(f"no page {page_id!r} in the walk")
    return found


def number(step: Step) -> int | None:
    """A step's number on screen: its place among the steps (None: not a step)."""
    return next((i for i, s in enumerate(steps(), start=1) if s.id == step.id), None)


def nav_title(t, step: Step) -> str:
    """A page's name in the navigation: a step's with its number now ("3 · Neighbours")."""
    name = t(step.nav_key)
    return t("nav.numbered", n=number(step), name=name) if step.is_step else name


def home() -> Step:
    """The first page: the app's home page."""
    return pages()[0]


def link(step: Step) -> str:
    """The path of its URL: "" for the home page."""
    return "" if step.id == home().id else step.id


def questions() -> dict[str, Step]:
    """Every question's id → its step, in the walk's order."""
    return {qid: s for s in steps() for qid in s.questions}


def around(step: Step) -> tuple[Step | None, Step | None]:
    """The pages before and after it in the walk."""
    walk = pages()
    i = next(k for k, p in enumerate(walk) if p.id == step.id)
    return (walk[i - 1] if i > 0 else None), (walk[i + 1] if i + 1 < len(walk) else None)
