"""Every session-state key the app reads or writes, named once. A setting's key (``s3_w``,
``pg_on``...) is a row of :mod:`ui.setting_table`; the keys here are the rest: the
language, the text, presenter mode, what a share link has done, the revealed answers."""

from __future__ import annotations

LANG = "lang"  # the reader's language (not a widget: the widget below writes it)
LANG_CHOICE = "lang_choice"  # the sidebar's language selectbox
PRESENTER = "presenter"  # presenter mode (not a widget)
PRESENTER_CHOICE = "presenter_choice"  # the sidebar's presenter toggle
TEXT = "text"  # the sidebar's text area: the reader's text
SHARE_APPLIED = "_share_applied"  # the share key (?s=) this session has already applied
FROM_LINK = "_from_link"  # the settings a share link set, so that dropping one is said
LINKS_MADE = "_links_made"  # share links this session has made (bounded per session)
AFTER_PAGE = "_after_page"  # what runs once the page has drawn its widgets (state.after_page)
LABELLED = "_labelled"  # per token-named setting: the text its widget's labels were made for


def revealed(step: int) -> str:
    """Whether step's answer was revealed in presenter mode."""
    return f"p{step}_revealed"


def guess(step: int) -> str:
    """The reader's guess on step's question (a setting: see ui.setting_table)."""
    return f"p{step}_guess"
