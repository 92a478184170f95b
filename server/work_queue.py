"""A fair queue for the one model of a process: ``TicketQueue`` serves heavy work (a new
text's analysis, a room's text, step 6's sweep, step 7's benchmark, a handout) one at a
time, in three tiers: a reader's new text first, then a text sent to a class's room,
then heavy work, each before the tiers after it that are still waiting, otherwise first
come first served; each caller
takes a numbered ticket and waits for its turn, seeing meanwhile how many are ahead of it
and about how long they will take (from the measured durations of earlier work of each
job, per unit of its size). The same work asked twice is done once. A plain lock would
not be fair: any waiter may win it. Pure Python (no Streamlit), shared by every session
of a process."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(eq=False)
class Ticket:
    number: int
    job: str
    same: object = None  # what the work makes: a second request for it shares this ticket
    weight: float = 1.0  # how big the work is, in the unit its job's rate is measured in
    started: float | None = None  # when its turn came
    sharers: int = 0  # callers besides the first waiting on its result
    finished: threading.Event = field(default_factory=threading.Event)
    result: object = None
    error: BaseException | None = None

    @property
    def tier(self) -> int:
        """0: a reader waits for it; 1: a room's text (no reader waits on a page, but a
        class does); 2: heavy work a reader asked for with a button."""
        return TicketQueue.TIERS.get(self.job, 2)



class TicketQueue:
    """One piece of heavy work at a time. Light work (a reader's own new text: about a
    second) goes before a room's texts and heavy work still waiting, a room's text before
    heavy work still waiting (a sweep, a benchmark, a handout: tens of seconds), never
    before the work already running; within each tier, first come, first served. A
    request for work that is already waiting or running (``same``: the same benchmark,
    the same text) takes no ticket of its own: it waits for that ticket and gets its
    result."""

    TIERS = {"analysis": 0, "room": 1}  # every other job: 2
    # a first guess at each job's duration (seconds per unit of weight) until one has been measured
    GUESS = {"analysis": 2.0, "room": 1.0, "sweep": 90.0, "bench": 40.0, "handout": 5.0}

    def __init__(self):
        self._cond = threading.Condition()
        self._numbers = itertools.count(1)
        self._waiting: list[Ticket] = []  # in serving order; the first is served (or next)
        self._took: dict[str, float] = {}  # job → smoothed measured seconds per unit of weight

    def take(self, job: str, same=None, weight: float = 1.0) -> Ticket:
        """A ticket for new work, placed before every ticket of a later tier that has not
        started, else last."""
        with self._cond:
            ticket = Ticket(next(self._numbers), job, same, max(float(weight), 1e-9))
            place = next((i for i, t in enumerate(self._waiting) if t.tier > ticket.tier and t.started is None),
                         len(self._waiting))
            self._waiting.insert(place, ticket)
            return ticket

    def _find(self, job: str, same) -> Ticket | None:
        if same is None:
            return None
        return next((t for t in self._waiting if t.job == job and t.same == same), None)

    def ahead(self, ticket: Ticket) -> int:
        """How many tickets come before this one (0: its turn)."""
        with self._cond:
            return self._waiting.index(ticket) if ticket in self._waiting else 0

    def expected(self, job: str, weight: float = 1.0) -> float:
        """Seconds a piece of work of this job and weight is expected to take."""
        return self._took.get(job, self.GUESS.get(job, 5.0)) * weight

    def estimate(self, ticket: Ticket) -> float:
        """Seconds until this ticket's turn: what is left of the running work plus the
        expected durations of the tickets waiting before it."""
        with self._cond:
            if ticket not in self._waiting:
                return 0.0
            before = self._waiting[: self._waiting.index(ticket)]
            now = time.monotonic()
            total = 0.0
            for t in before:
                left = self.expected(t.job, t.weight) - (now - t.started if t.started is not None else 0.0)
                total += max(left, 0.5 if t.started is not None else 0.0)
            return total

    def wait(self, ticket: Ticket, on_wait: Callable[[int, float], None] | None = None, every: float = 0.5) -> None:
        """Block until this ticket's turn; ``on_wait(ahead, seconds)`` about every
        ``every`` seconds while others come first."""
        while True:
            with self._cond:
                if self._waiting and self._waiting[0] is ticket:
                    ticket.started = time.monotonic()
                    return
                position = self._waiting.index(ticket)
            if on_wait is not None:
                on_wait(position, self.estimate(ticket))
            with self._cond:
                if not (self._waiting and self._waiting[0] is ticket):
                    self._cond.wait(timeout=every)

    def done(self, ticket: Ticket) -> None:
        """The work ended (or was abandoned): measure it if it ran, and let the next one in."""
        with self._cond:
            if ticket.started is not None:
                rate = (time.monotonic() - ticket.started) / ticket.weight
                old = self._took.get(ticket.job)
                self._took[ticket.job] = rate if old is None else 0.7 * old + 0.3 * rate
            if ticket in self._waiting:
                self._waiting.remove(ticket)
            ticket.finished.set()
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._waiting)

    def run(self, job: str, work: Callable[[], object], on_wait: Callable[[int, float], None] | None = None,
            same=None, weight: float = 1.0):
        """Take a ticket, wait for its turn, do ``work``, let the next one in — or, when
        the same work (``same``, not None) is already in line, wait for its result."""
        with self._cond:
            shared = self._find(job, same)
            if shared is not None:
                shared.sharers += 1
        if shared is not None:
            return self._share(shared, on_wait, job, work, weight)
        ticket = self.take(job, same, weight)
        try:
            self.wait(ticket, on_wait)
            ticket.result = work()
            return ticket.result
        except BaseException as exc:
            ticket.error = exc
            raise
        finally:
            self.done(ticket)

    def _share(self, ticket: Ticket, on_wait, job: str, work, weight: float):
        """Wait for another caller's ticket; its result is ours. When that work failed
        or was abandoned, ours runs (in line as usual): its failure may be its own."""
        while not ticket.finished.wait(0.5):
            if on_wait is not None:
                ran = time.monotonic() - ticket.started if ticket.started is not None else 0.0
                on_wait(self.ahead(ticket) + 1,
                        self.estimate(ticket) + max(self.expected(ticket.job, ticket.weight) - ran, 0.5))
        if ticket.error is None and ticket.started is not None:
            return ticket.result
        return self.run(job, work, on_wait, None, weight)
