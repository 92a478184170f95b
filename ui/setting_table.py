"""Every setting a reader can change, once: the rows each page of the walk declares
(pages.<step>.SETTINGS, built with ui.setting_rows), and a guess row for each of its
questions. The pages' widgets, the settings kept across pages, a share link's checks,
the handout's settings and the playground's give-backs all read a row of this table;
nothing else says what a setting may be.

A value is checked twice, by the same row:

* ``valid(key, value)`` — its kind and the range its widget would take on the longest
  text and the largest model (a share link is checked with this before anything of it
  is used);
* ``fits(key, value, a)`` — the exact range of its widget on this text (``a``, an
  analysis: tokens, layers, heads). Each page drops a value that does not fit before it
  draws the widget, saying so when the value came from a link.

``TABLE``, ``ROWS`` and ``KEYS`` follow the pages the walk has now (ui.walk.pages). No
Streamlit here."""

from __future__ import annotations

from typing import Any

from . import walk
from .keys import guess
from .setting_rows import Context, Dims, Setting, guess_row


_made: tuple | None = None  # (the pages it was made from, the rows, key → row)


def _current() -> tuple[tuple[Setting, ...], dict[str, Setting]]:
    """The rows of the walk's pages now, made once per set of pages (ui.walk.pages is
    one object until the walk is found again)."""
    global _made
    pages = walk.pages()
    if _made is None or _made[0] is not pages:
        rows = tuple(row for page in pages for row in (*page.settings,
                                                       *(guess_row(guess(qid), page.id) for qid in page.questions)))
        keys = [r.key for r in rows]
        if len(set(keys)) != len(keys):
            raise ValueError(f"two settings share a key: {sorted({k for k in keys if keys.count(k) > 1})}")
        _made = (pages, rows, {r.key: r for r in rows})
    return _made[1], _made[2]


def __getattr__(name: str):
    """``TABLE`` (every row, in the walk's order), ``ROWS`` (key → row) and ``KEYS``, as the
    walk has them now."""
    if name == "TABLE":
        return _current()[0]
    if name == "ROWS":
        return dict(_current()[1])
    if name == "KEYS":
        return tuple(_current()[1])
    raise AttributeError(name)


def row(key: str) -> Setting:
    return _current()[1][key]


def keys(page: str) -> tuple[str, ...]:
    """The settings one page (by its id) draws, in the table's order."""
    return tuple(s.key for s in _current()[0] if s.page == page)


def valid(key: str, value) -> bool:
    """A share link's check: a setting of ours, of its kind, in the range its widget has
    on the longest text and the largest model."""
    found = _current()[1].get(key) if isinstance(key, str) else None
    return found is not None and found.valid(value)


def fits(key: str, value, a) -> bool:
    """Whether the widget of ``key`` takes ``value`` on this text (analysis ``a``)."""
    return row(key).valid(value, Dims.of(a))


def kept(key: str, value, a) -> Any:
    """The reader's ``value`` of ``key`` as its widget keeps it on this text: as it is where
    it fits; a window clamped into its range (a window of 64 on a 41-token text is 41: the
    row's ``clamp``); else None (the widget starts from its default)."""
    r = row(key)
    d = Dims.of(a)
    if r.valid(value, d):
        return value
    if r.clamp and isinstance(value, int) and not isinstance(value, bool):
        lo, hi = r.bounds(d)
        clamped = min(max(value, lo), hi)
        if r.valid(clamped, d):
            return clamped
    return None


def default(key: str, a, ctx: Context) -> Any:
    """The first value of key's widget on this text."""
    return row(key).default(Dims.of(a), ctx)


def defaults(a, ctx: Context) -> dict:
    """Every setting as its page starts it on this text (``ctx``: its anchors, from
    ui.measures.setting_context)."""
    return {s.key: s.default(Dims.of(a), ctx) for s in _current()[0]}


def settings_for(a, ctx: Context, given: dict) -> dict:
    """The pages' defaults, with each given setting kept on this text (``kept``) in its place."""
    out = defaults(a, ctx)
    rows = _current()[1]
    for key, value in given.items():
        if key in rows and (value := kept(key, value, a)) is not None:
            out[key] = value
    return out
