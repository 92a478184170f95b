"""Every session-state key the app reads or writes, named once. A setting's key (``s3_w``,
``pg_on``...) is a row of :mod:`ui.setting_table`; the keys here are the rest: the
language, the text, presenter mode, what a share link has done, the revealed answers."""

from __future__ import annotations

LANG = "lang"  # the reader's language (not a widget: the widget below writes it)
LANG_CHOICE = "lang_choice"  # the sidebar's language selectbox
PRESENTER = "presenter"  # presenter mode (not a widget)
PRESENTER_CHOICE = "presenter_choice"  # the sidebar's presenter toggle
TEXT = "text"  # the sidebar's text area: the reader's text
MODEL = "model"  # the model this reader's pages run (ATLAS_MODELS: one of those offered; not a widget)
MODEL_CHOICE = "model_choice"  # the sidebar's model selectbox
SHARE_APPLIED = "_share_applied"  # the share key (?s=) this session has already applied
FROM_LINK = "_from_link"  # the settings a share link set, so that dropping one is said
LINKS_MADE = "_links_made"  # share links this session has made (bounded per session)
AFTER_PAGE = "_after_page"  # what runs once the page has drawn its widgets (page_run.after_page)
DRAWN = "_drawn_page"  # (script hash, page id, whole run's serial) of the page last drawn whole (page_run.drawn)
REDRAWN = "_redrawn_at"  # the whole run's serial whose page a stale timed fragment redrew (once each)
CLASS = "_class"  # the code of the live class this session is in
HOST = "_class_host"  # the class's host key: the teacher's session only, never an address
STUDENT = "_class_student"  # a student's anonymous id (also in their address)
FOLLOWING = "_class_following"  # a student whose screen follows the teacher
SEEN = "_class_seen"  # the class version this session last drew
PRESENCE_AT = "_class_presence_at"  # when this student's presence was last written
CLASS_ASKED = "_class_asked"  # the ?class= this session has already acted on
HANDLE_SALT = "_class_handle_salt"  # the teacher's session's secret for the handles in her widget keys
WRONG_TRIES = "_class_wrong_tries"  # wrong codes and keys this session typed (ui.classroom.membership.slow_down)
CLASS_READ = "_class_read"  # the class as this page run read it (ui.classroom.handle.read: once a run)
PENDING = "_class_pending"  # a student's answer the store could not keep yet: sent again by the poll
ROOM_PENDING = "_room_pending"  # a text for the room the store could not take yet: sent again by the poll
UNREAD = "_class_unread"  # the page stopped because the class could not be read: the poll redraws it
NOTICED = "_noticed"  # the store's troubles already said this run (once each)
READER_ID = "_reader_id"  # this session's own id: who made a link (another's opening keeps it first)
NOTICES = "_notices"  # notices to show on the next run (a page switch drops this run's)
LABELLED = "_labelled"  # per token-named setting: the text its widget's labels were made for
RANGES = "_ranges"  # per number setting: the range its widget was last drawn with
CHANGED = "_changed"  # the settings (and "text") the reader changed by hand since the last run began
AS_DRAWN = "_as_drawn"  # per setting (and "text", the model): its value as last drawn, or as the app then set it
SET_BY_APP = "_set_by_app"  # the page widgets the app set (a class, a link) and no run has drawn since


def slug(qid: str) -> str:
    """A question's id ("s3.reach") as a widget key's part ("s3_reach")."""
    return qid.replace(".", "_")


def revealed(qid: str) -> str:
    """Whether a question's answer was revealed (its reveal button pressed)."""
    return f"revealed_{slug(qid)}"


def reveal_button(qid: str) -> str:
    return f"reveal_{slug(qid)}"


def guess(qid: str) -> str:
    """The reader's guess on a question (a setting: see ui.setting_table)."""
    return f"guess_{slug(qid)}"
