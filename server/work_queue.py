"""A fair queue for the one model of a process: ``TicketQueue`` serves heavy work (a new
text's analysis, a room's text, step 6's sweep, step 7's benchmark, a handout) one at a
time, in three tiers: a reader's new text first, then a text sent to a class's room, then
heavy work. Within a tier the work with the least left goes first (its expected seconds:
the measured rate of its job times the size still left), aged by how long it has been in
line, so that a long text still finishes; work done in pieces (a long text's analysis, a
chunk of tokens at a time) gives the turn up between pieces to shorter work that came
meanwhile: a short text waits for at most one chunk of a long one. Each caller takes a
numbered ticket and waits for its turn, seeing meanwhile how many are ahead of it and
about how long they will take. The same work asked twice is done once. A plain lock would
not be fair: any waiter may win it. Pure Python (no Streamlit), shared by every session
of a process."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# How fast waiting makes work older than newer work: a ticket's place is the seconds it is
# expected to take still, less AGING × the seconds since it was taken. With AGING > 0 no
# ticket ever goes before one of its tier that was taken earlier and has less left (that
# one is both older and shorter), and a long text waiting behind a stream of short ones
# goes first once it has waited about as long as it has left to run.
AGING = 1.0


@dataclass(eq=False)
class Ticket:
    number: int
    job: str
    same: object = None  # what the work makes: a second request for it shares this ticket
    weight: float = 1.0  # how big the work is, in the unit its job's rate is measured in
    taken: float = 0.0  # when it was taken (time.monotonic)
    left: float | None = None  # how much of ``weight`` is still to do (None: all of it)
    ran: float = 0.0  # seconds it has run in earlier turns
    started: float | None = None  # when its present turn came (None: not running now)
    served: bool = False  # its turn has come (once at least)
    since: float = 0.0  # when ``left`` was last told, or its present turn came
    not_before: float = 0.0  # a ticket standing aside (``aside``) takes no turn before this moment
    piece: float | None = None  # seconds its last piece ran (work in pieces: between two ``turn``s)
    sharers: int = 0  # callers besides the first waiting on its result
    sharer_threads: set = field(default_factory=set)  # the threads of those waiting now (``_share``)
    finished: threading.Event = field(default_factory=threading.Event)
    result: object = None
    error: BaseException | None = None

    @property
    def tier(self) -> int:
        """0: a reader waits for it; 1: a room's text (no reader waits on a page, but a
        class does); 2: heavy work a reader asked for with a button."""
        return TicketQueue.TIERS.get(self.job, 2)

    @property
    def to_do(self) -> float:
        return self.weight if self.left is None else self.left


class TicketQueue:
    """One piece of heavy work at a time, the turn going by tier, then least work left
    (aged: ``AGING``). Work that runs in pieces calls the ``turn`` it is handed between
    them with how much it has left; a ticket that should now go first takes the turn
    there. A request for work that is already waiting or running (``same``: the same
    benchmark, the same text) takes no ticket of its own: it waits for that ticket and
    gets its result."""

    TIERS = {"analysis": 0, "room": 1}  # every other job: 2
    # a first guess at each job's duration (seconds per unit of weight: a token for a text's
    # analysis; for step 7's run of the model a unit of attn.model_run.run_units, the model's
    # pace a token: about 1.5 ms at 330 GFLOP/s, 0.004 on a machine three times slower)
    # until one has been measured
    GUESS = {"analysis": 0.01, "room": 1.0, "sweep": 90.0, "bench": 40.0, "handout": 5.0, "model_run": 0.004}

    def __init__(self):
        self._cond = threading.Condition()
        self._numbers = itertools.count(1)
        self._waiting: list[Ticket] = []  # every ticket not finished, in the order taken
        self._holder: Ticket | None = None  # the ticket whose turn it is
        self._took: dict[str, float] = {}  # job → smoothed measured seconds per unit of weight

    def take(self, job: str, same=None, weight: float = 1.0) -> Ticket:
        """A ticket for new work, in line."""
        with self._cond:
            ticket = Ticket(next(self._numbers), job, same, max(float(weight), 1e-9), time.monotonic())
            self._waiting.append(ticket)
            return ticket

    def _find(self, job: str, same) -> Ticket | None:
        if same is None:
            return None
        return next((t for t in self._waiting if t.job == job and t.same == same), None)

    def _place(self, t: Ticket, now: float) -> tuple:
        """Where a ticket stands among those waiting (smaller goes first)."""
        return (t.tier, self._left(t, now) - AGING * (now - t.taken), t.number)

    def _left(self, t: Ticket, now: float) -> float:
        """Seconds the ticket is expected to run still."""
        left = self.expected(t.job, t.to_do)
        if t.started is not None:
            left = max(left - (now - max(t.started, t.since)), 0.5)
        return left

    def _order(self) -> list[Ticket]:
        """Every ticket in serving order: the one whose turn it is, then the rest."""
        now = time.monotonic()
        rest = sorted((t for t in self._waiting if t is not self._holder), key=lambda t: self._place(t, now))
        return ([self._holder] if self._holder is not None else []) + rest

    def _next(self) -> Ticket | None:
        """The ticket whose turn comes next: the first in order not standing aside."""
        now = time.monotonic()
        return next((t for t in self._order() if t.not_before <= now), None)

    def ahead(self, ticket: Ticket) -> int:
        """How many tickets come before this one (0: its turn)."""
        with self._cond:
            order = self._order()
            return order.index(ticket) if ticket in order else 0

    def expected(self, job: str, weight: float = 1.0) -> float:
        """Seconds a piece of work of this job and weight is expected to take."""
        return self._took.get(job, self.GUESS.get(job, 5.0)) * weight

    def estimate(self, ticket: Ticket) -> float:
        """Seconds until this ticket's turn: what is left of the running work plus the
        expected durations of the tickets before it. Running work in pieces that this
        ticket would go before at its next ``turn`` counts only until then (about one piece
        from the last turn: a short text behind a long one waits a chunk, not the text)."""
        with self._cond:
            order = self._order()
            if ticket not in order:
                return 0.0
            now = time.monotonic()
            seconds = 0.0
            for t in order[: order.index(ticket)]:
                left = self._left(t, now)
                if t is self._holder and t.piece is not None and self._place(ticket, now) < self._place(t, now):
                    left = min(left, max(t.piece - (now - t.since), 0.1))
                seconds += left
            return seconds

    def wait(self, ticket: Ticket, on_wait: Callable[[int, float], None] | None = None, every: float = 0.5) -> None:
        """Block until this ticket's turn; ``on_wait(ahead, seconds)`` about every
        ``every`` seconds while others come first."""
        while True:
            with self._cond:
                if self._holder is ticket or (self._holder is None and self._next() is ticket):
                    self._holder = ticket
                    ticket.started = ticket.since = time.monotonic()
                    ticket.served = True
                    return
            if on_wait is not None:
                on_wait(self.ahead(ticket), self.estimate(ticket))
            with self._cond:
                if not (self._holder is None and self._next() is ticket):
                    self._cond.wait(timeout=every)

    def turn(self, ticket: Ticket, left: float, on_wait: Callable[[int, float], None] | None = None,
             weight: float | None = None) -> None:
        """Between two pieces of a ticket's work: ``left`` of its weight is still to do
        (``weight``: its whole size, where it is only known now). When a waiting ticket
        should now go first, it takes the turn, and this one waits for its turn again."""
        with self._cond:
            now = time.monotonic()
            if weight is not None:
                ticket.weight = max(float(weight), 1e-9)
            if ticket.started is not None and ticket.left is not None:  # a piece ran since the last turn
                ticket.piece = now - max(ticket.since, ticket.started)
            ticket.left, ticket.since = max(float(left), 0.0), now
            if self._holder is not ticket or ticket.started is None:
                return
            mine = self._place(ticket, now)
            if not any(self._place(t, now) < mine for t in self._waiting if t is not ticket):
                return
            ticket.ran += now - ticket.started
            ticket.started = None
            self._holder = None
            self._cond.notify_all()
        self.wait(ticket, on_wait)

    def aside(self, ticket: Ticket, seconds: float, on_wait: Callable[[int, float], None] | None = None) -> None:
        """The ticket whose turn it is cannot go on yet (the memory it needs is in use):
        it gives the turn up for ``seconds``, the others go meanwhile, then it waits for
        its turn again."""
        with self._cond:
            now = time.monotonic()
            if self._holder is ticket and ticket.started is not None:
                ticket.ran += now - ticket.started
                ticket.started = None
                self._holder = None
            ticket.not_before = now + seconds
            self._cond.notify_all()
        self.wait(ticket, on_wait)

    def done(self, ticket: Ticket) -> None:
        """The work ended (or was abandoned): measure it if it ran, and let the next one in."""
        with self._cond:
            ran = ticket.ran + (time.monotonic() - ticket.started if ticket.started is not None else 0.0)
            if ticket.served:
                rate = ran / ticket.weight
                old = self._took.get(ticket.job)
                self._took[ticket.job] = rate if old is None else 0.7 * old + 0.3 * rate
            if ticket in self._waiting:
                self._waiting.remove(ticket)
            if self._holder is ticket:
                self._holder = None
            ticket.started = None
            ticket.finished.set()
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._waiting)

    def run(self, job: str, work: Callable, on_wait: Callable[[int, float], None] | None = None,
            same=None, weight: float = 1.0, pieces: bool = False):
        """Take a ticket, wait for its turn, do ``work``, let the next one in — or, when
        the same work (``same``, not None) is already in line, wait for its result.
        ``pieces``: ``work`` is called with a :class:`Turn`, ``turn(left, weight=None)`` to
        call between its pieces (see :meth:`turn`), ``turn.aside(seconds)`` to stand aside."""
        with self._cond:
            shared = self._find(job, same)
            if shared is not None:
                shared.sharers += 1
        if shared is not None:
            return self._share(shared, on_wait, job, work, weight, pieces)
        ticket = self.take(job, same, weight)
        try:
            self.wait(ticket, on_wait)
            if pieces:
                ticket.result = work(Turn(self, ticket, on_wait))
            else:
                ticket.result = work()
            return ticket.result
        except BaseException as exc:
            ticket.error = exc
            raise
        finally:
            self.done(ticket)

    def _share(self, ticket: Ticket, on_wait, job: str, work, weight: float, pieces: bool = False):
        """Wait for another caller's ticket; its result is ours. When that work failed
        or was abandoned, ours runs (in line as usual): its failure may be its own."""
        me = threading.get_ident()
        with self._cond:
            ticket.sharer_threads.add(me)
        try:
            while not ticket.finished.wait(0.5):
                if on_wait is not None:
                    with self._cond:
                        left = self._left(ticket, time.monotonic())
                    on_wait(self.ahead(ticket) + 1, self.estimate(ticket) + left)
        finally:
            with self._cond:
                ticket.sharer_threads.discard(me)
        if ticket.error is None and ticket.served:
            return ticket.result
        return self.run(job, work, on_wait, None, weight, pieces)


@dataclass
class Turn:
    """What work done in pieces is handed: ``turn(left, weight=None)`` between two pieces
    (TicketQueue.turn), ``turn.aside(seconds)`` when it cannot go on yet (TicketQueue.aside)."""

    queue: TicketQueue
    ticket: Ticket
    on_wait: Callable[[int, float], None] | None = None

    def __call__(self, left: float, weight: float | None = None) -> None:
        self.queue.turn(self.ticket, left, self.on_wait, weight)

    def aside(self, seconds: float) -> None:
        self.queue.aside(self.ticket, seconds, self.on_wait)

    def sharers(self) -> set[int]:
        """The threads waiting now on this work's result (its work is theirs too)."""
        with self.queue._cond:
            return set(self.ticket.sharer_threads)
