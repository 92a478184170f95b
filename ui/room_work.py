"""The room's work on this process: one background thread that takes the texts a class's
students sent (a lease in the store, server.texts.Room.claim: every replica takes its
share, and takes over a text whose replica died), runs the model on each once through
the process's work queue (a room's tier: after the readers' own texts, before heavy
work), keeps its numbers (attn.room_numbers) and drops the analysis (it never enters the
readers' analysis cache). Started the first time this process serves a class."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter

import streamlit as st

from attn import room_numbers
from attn import settings
from server.store import StoreError
from server.texts import Room

from . import analyses, served_model, share

IDLE_WAIT = 1.0  # seconds between two looks at the store when no text waits
FAILED: Counter = Counter()  # texts that could not be analysed, by the exception's class (tests read it)


@st.cache_resource(show_spinner=False)
def rooms() -> Room:
    """The rooms of this process's store."""
    return Room(share.store())


def measure(claim, model_id: str) -> dict:
    """The numbers of one claimed text: one run of the model on its first ROOM_TOKENS
    tokens, through the process's queue, the analysis dropped after."""
    model = served_model.get_model(model_id)

    def work():
        return room_numbers.text_numbers(model.analyze(claim.text, max_tokens=room_numbers.ROOM_TOKENS))

    weight = min(len(claim.text), 5 * room_numbers.ROOM_TOKENS) / 1000 + 0.2
    return analyses.work_queue().run("room", work, None, weight=weight)


def work_once(room: Room, worker: str, model_id: str) -> bool:
    """Take one waiting text, measure it, keep its numbers: True when one was taken."""
    claim = room.claim(worker)
    if claim is None:
        return False
    try:
        numbers = measure(claim, model_id)
    except Exception as exc:  # said: the text shows as failed in the room, and the log has why
        FAILED[type(exc).__name__] += 1
        logging.getLogger(__name__).exception("measuring a text sent to a class's room")
        room.fail(claim, worker)
        return True
    room.finish(claim, worker, numbers)
    return True


def start() -> threading.Thread | None:
    """The process's one room worker, unless ``ATLAS_ROOM_WORKER=0``."""
    return _start() if settings.read().room_worker else None


@st.cache_resource(show_spinner=False)
def _start() -> threading.Thread:
    """The process's one room worker (a daemon thread), started once."""
    model_id = served_model.model_id()
    worker = f"{secrets.token_hex(4)}-{threading.get_native_id()}"

    def loop():
        while True:
            try:
                room = rooms()
                if not (room.pending() and work_once(room, worker, model_id)):
                    time.sleep(IDLE_WAIT)
            except StoreError:
                time.sleep(5 * IDLE_WAIT)  # the store is away: look again later
            except Exception:  # never let the thread die: log, wait, go on
                logging.getLogger(__name__).exception("the room's worker")
                time.sleep(5 * IDLE_WAIT)

    thread = threading.Thread(target=loop, name="atlas-room-worker", daemon=True)
    thread.start()
    return thread
