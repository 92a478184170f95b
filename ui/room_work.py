"""The room's work on this process: one background thread that takes the texts a class's
students sent (a lease in the store, server.texts.Room.claim: every replica takes its
share, and takes over a text whose replica died), runs the model on each once through
the process's work queue (a room's tier: after the readers' own texts, before heavy
work), keeps its numbers (attn.room_numbers) and drops the analysis (it never enters the
readers' analysis cache). Started the first time this process serves a class. Each text
is measured on its class's model (one this process offers: the others' texts are left to
a replica that offers theirs), its lease renewed while it is."""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import threading
import time
from collections import Counter

import streamlit as st

from attn import room_numbers
from attn import settings
from server.store import StoreError
from server import texts
from server.texts import Room

from . import analyses, served_model, share, walk

IDLE_WAIT = 1.0  # seconds between two looks at the store when no text waits (a send on this process wakes it)
_SENT = threading.Event()  # set by a send on this process: the worker looks at once
FAILED: Counter = Counter()  # texts that could not be analysed, by the exception's class (tests read it)


@st.cache_resource(show_spinner=False)
def rooms() -> Room:
    """The rooms of this process's store."""
    return Room(share.store())


def measure(claim, model_id: str) -> room_numbers.RoomNumbers:
    """The numbers of one claimed text on ``model_id`` (its class's model): one run of the
    model on its first ROOM_TOKENS tokens, through the process's queue, the analysis
    dropped after; they record what made them (served_model.measured_as)."""
    model = served_model.get_model(model_id)
    made_by = served_model.measured_as(model_id)

    def work():
        a = model.analyze(claim.text, max_tokens=room_numbers.ROOM_TOKENS)
        return dataclasses.replace(room_numbers.text_numbers(a, model=made_by), steps=steps_own(a))

    weight = min(len(claim.text), 5 * room_numbers.ROOM_TOKENS) / 1000 + 0.2
    return analyses.work_queue().run("room", work, None, weight=weight)


def steps_own(a) -> dict:
    """What each step that declares a measure of its own (ui.step_parts.RoomMeasure) keeps of
    an analysed text: step id → its layout version and its record as JSON. A step whose
    measure fails (or gives what JSON cannot hold) is left out and logged: its charts say the
    text was not measured, and every other step keeps its numbers."""
    out = {}
    for step in walk.pages():
        if step.room_measure is None:
            continue
        try:
            record = step.room_measure.to_json(step.room_measure.measure(a))
            json.dumps(record)
        except Exception:
            logging.getLogger(__name__).exception("step %s's own measure of a room text", step.id)
            continue
        out[step.id] = {"version": step.room_measure.version, "record": record}
    return out


class Renewing:
    """While a text is measured, its lease renewed every third of LEASE_SECONDS (a thread
    of its own: the measuring may wait in the queue and run for long); stopped on exit."""

    def __init__(self, room: Room, claim, worker: str):
        self.room, self.claim, self.worker = room, claim, worker
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="atlas-room-lease", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(texts.LEASE_SECONDS / 3):
            try:
                if not self.room.renew(self.claim, self.worker):
                    return  # replaced, withdrawn or taken over: its finish will be ignored
            except StoreError:
                pass  # the next renewal tries again; the lease is long enough for one miss

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()


def work_once(room: Room, worker: str, models=None) -> bool:
    """Take one waiting text of ``models`` (the ones this process offers; None: any),
    measure it on its class's model with its lease renewed meanwhile, keep its numbers:
    True when one was taken."""
    claim = room.claim(worker, models)
    if claim is None:
        return False
    model_id = claim.model or served_model.default_model()  # a text of an older release names none
    try:
        with Renewing(room, claim, worker):
            numbers = measure(claim, model_id)
    except Exception as exc:  # said: the text shows as failed in the room, and the log has why
        FAILED[type(exc).__name__] += 1
        logging.getLogger(__name__).exception("measuring a text sent to a class's room")
        room.fail(claim, worker)
        return True
    room.finish(claim, worker, numbers)
    return True


HEARTBEAT = 10.0  # seconds between two of this worker's words on the models it measures


def start() -> threading.Thread | None:
    """The process's one room worker, unless ``ATLAS_ROOM_WORKER=0``."""
    return _start() if settings.read().room_worker else None


def sent() -> None:
    """A text was sent on this process: its worker, if idle, looks at the store now rather
    than at its next look (another replica's worker finds it at its own next look)."""
    _SENT.set()


@st.cache_resource(show_spinner=False)
def _start() -> threading.Thread:
    """The process's one room worker (a daemon thread), started once: it measures the
    texts of every class whose model this process offers, each on its class's model."""
    worker = f"{secrets.token_hex(4)}-{threading.get_native_id()}"
    return _running(worker)


def _running(worker: str, stop: threading.Event | None = None) -> threading.Thread:
    """A worker's loop in a daemon thread, until ``stop`` is set (never, for the process's)."""
    def loop():
        said = 0.0
        while stop is None or not stop.is_set():
            try:
                room = rooms()
                models = served_model.offered()
                if time.monotonic() - said > HEARTBEAT:
                    room.heartbeat(worker, models)
                    said = time.monotonic()
                _SENT.clear()  # a send from here on is seen by the look below or wakes the wait
                if not (room.pending(models) and work_once(room, worker, models)):
                    _SENT.wait(IDLE_WAIT)
            except StoreError:
                time.sleep(5 * IDLE_WAIT)  # the store is away: look again later
            except Exception:  # never let the thread die: log, wait, go on
                logging.getLogger(__name__).exception("the room's worker")
                time.sleep(5 * IDLE_WAIT)

    thread = threading.Thread(target=loop, name="atlas-room-worker", daemon=True)
    thread.start()
    return thread
