"""Every step's summary for a class's text and settings, in all three languages, built
in the background on this process (beside ui.summary.build_all, which it calls): the
first student to open a step in their language finds it built."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter, OrderedDict

import streamlit as st

from . import analyses, page_run, served_model, summaries, walk
from .i18n import LANGS

# a reader's long text: its other pages are built ahead only while no page runs, however long
# that takes (work built ahead for one text never delays another reader's page: a class's own
# pasting after three chapters waited 10× its time alone behind their pages built ahead)
QUIET_WAIT = float("inf")


PREBUILDS = 16  # class views whose summaries this process keeps track of having built
PREBUILD_AGAIN = 10.0  # seconds after a build ends before the same view is checked again


@st.cache_resource(show_spinner=False)
def _prebuilds() -> dict:
    return {"lock": threading.Lock(), "views": OrderedDict()}  # view → (thread, when it ended or None)


def prebuild(view: dict, langs: tuple[str, ...] = LANGS, quiet: bool = False) -> threading.Thread | None:
    """Every step's summary for a class's text and settings, in all three languages,
    built in the background on this process: the first student to open a step in their
    language finds it built. Called wherever a process meets a class's view (its start,
    the teacher's changes, a student joining or following), so every replica serving the
    class builds it; a view built a while ago is checked again (the summaries' cache is
    bounded, and only what it dropped is built again). ``langs``: the languages built
    (a reader's long text: theirs); ``quiet``: each piece waits while a reader's page runs
    (page_run.wait_quiet), so the pages being read come first. Returns the thread."""
    text, settings = view.get("text"), view.get("settings") or {}
    if not isinstance(text, str) or not text.strip() or not isinstance(settings, dict):
        return None
    model = view.get("model")  # the class's model, where this process offers it
    model_id = model if isinstance(model, str) and model in served_model.offered() else served_model.model_id()
    key = (model_id, text, json.dumps(settings, sort_keys=True, default=str), tuple(langs))
    book = _prebuilds()
    with book["lock"]:
        found = book["views"].get(key)
        if found is not None:
            thread, ended = found
            book["views"].move_to_end(key)
            if ended is None or time.time() - ended < PREBUILD_AGAIN:
                return thread
        thread = threading.Thread(target=_build_summaries, args=(key, text, model_id, dict(settings), tuple(langs),
                                                                 quiet), daemon=True, name="atlas-class-summaries")
        book["views"][key] = (thread, None)
        while len(book["views"]) > PREBUILDS:
            book["views"].popitem(last=False)
    thread.start()
    return thread


PREBUILD_FAILED: Counter = Counter()  # background builds that raised, by the exception's class


def lower_priority() -> None:
    """This thread (and the threads its numeric libraries start from it) at the lowest CPU
    priority (Linux: a thread's nice value is its own, and threads inherit it): work built
    ahead takes only the CPU that readers' pages leave. Elsewhere, nothing."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def _build_quietly(text: str, model_id: str, settings: dict, langs: tuple[str, ...]) -> None:
    """A reader's long text: each step, in each language, built only while no page runs,
    from the analysis the process keeps — fetched again after every wait and never held
    while waiting (the memory budget does not count this thread), nor read again once the
    cache dropped it."""
    for step in walk.steps():
        ahead = (None,) if step.ahead is not None and step.needs_text else ()  # None: its other measures
        for lang in (*langs, *ahead):
            page_run.wait_quiet(QUIET_WAIT)
            a = analyses.cached(text, model_id)
            if a is None or a.n < 3:
                return
            summaries.build_all(a, text, model_id, settings, langs=() if lang is None else (lang,), only=(step,),
                                ahead=lang is None)
            del a


def _build_summaries(key: tuple, text: str, model_id: str, settings: dict, langs: tuple[str, ...] = LANGS,
                     quiet: bool = False) -> None:
    if quiet:
        lower_priority()
    try:
        if quiet:
            _build_quietly(text, model_id, settings, langs)
        else:
            a = analyses.analysis_unseen(text, model_id)
            if a.n >= 3:  # a shorter text has no steps to build (its pages say so)
                # each step as its page shows it (its inputs too)
                summaries.build_all(a, text, model_id, settings, langs=langs)
    except Exception as exc:  # reported, never swallowed: logged with its traceback and counted
        PREBUILD_FAILED[type(exc).__name__] += 1  # (a reader who opens the step builds it then, and sees the error)
        logging.getLogger(__name__).exception("building a class's summaries in the background")
    finally:
        book = _prebuilds()
        with book["lock"]:
            found = book["views"].get(key)
            if found is not None and found[0] is threading.current_thread():
                book["views"][key] = (found[0], time.time())
