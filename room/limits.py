"""Limits a client cannot sidestep by opening new sessions or by reaching another replica:
each a token bucket kept in the shared store, keyed by what is limited and the client's
address as the server gives it (Streamlit's ``st.context.ip_address``: the connection's
address, or the one a trusted proxy forwarded; never a header the app reads itself).

A bucket holds ``burst`` tokens and gains one every ``every`` seconds; each use takes
``cost`` (one, or a link's bytes). Every replica reads and writes the same row inside
the write transaction of the change it limits, so two replicas never give a client twice
its allowance. A client on the server's own machine (no address) has a bucket of its own,
like any other (``key``); a change asked for by no client at all (a tool, a test: None)
is not limited.

Guessing a class's code costs no write (a wrong code only reads), so its counter is this
process's own (``Guesses``): with R replicas a guesser gets R times the rate, still
hundreds of years per live class (docs/deploy.md). No Streamlit here."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from attn import settings

SCHEMA = ("""CREATE TABLE IF NOT EXISTS limits (
    what TEXT NOT NULL, address TEXT NOT NULL, tokens REAL NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (what, address))""",)
LOCAL = "local"  # the key of a client with no address (the server's own machine)


@dataclass(frozen=True)
class Limit:
    """``burst`` uses at once, then one more every ``every`` seconds."""

    what: str
    burst: float
    every: float

    def per_hour(self) -> float:
        return 3600.0 / self.every


# the bounds, with their reasons (docs/deploy.md lists each and what its refusal says)
STARTS = Limit("start", burst=6, every=300.0)  # a teacher restarting a few times; a loop stops at 6, then 12 an hour
LINKS = Limit("link", burst=100, every=36.0)  # links a client makes: 100 at once, then 100 an hour
LINK_BYTES = Limit("link_bytes", burst=16 * 2**20, every=3600.0 / (16 * 2**20))  # 16 MB at once, 16 MB an hour
JOIN_EVERY = 10.0  # after its burst, one more student from one address every 10 s: 6 a minute


def joins() -> Limit:
    """New students from one address: ``ATLAS_JOIN_BURST`` (120) at once — a lecture hall
    behind one school NAT gets in — then one every JOIN_EVERY seconds: a script minting ids
    gets its burst, then 6 a minute (and the teacher sees it, and can close the door)."""
    return Limit("join", burst=settings.read().join_burst, every=JOIN_EVERY)


def key(address: str | None) -> str:
    """The bucket's key for a client's address (None: the server's own machine)."""
    return address if isinstance(address, str) and address else LOCAL


def take(db, limit: Limit, client: str | None, now: float | None = None, cost: float = 1.0) -> bool:
    """Inside a write transaction: take ``cost`` from the bucket of ``client`` (its
    ``key``); False (and nothing taken) when it holds less. No client: not limited."""
    if client is None:
        return True
    now = time.time() if now is None else now
    who = client
    row = db.execute("SELECT tokens, at FROM limits WHERE what = ? AND address = ?", (limit.what, who)).fetchone()
    tokens = limit.burst if row is None else min(limit.burst, row[0] + max(0.0, now - row[1]) / limit.every)
    if tokens < cost:
        return False
    db.execute("INSERT INTO limits (what, address, tokens, at) VALUES (?, ?, ?, ?) "
               "ON CONFLICT (what, address) DO UPDATE SET tokens = excluded.tokens, at = excluded.at",
               (limit.what, who, tokens - cost, now))
    return True


def forget_full(db, now: float | None = None) -> None:
    """Drop the buckets that have refilled (a full bucket is no row): the table holds only
    clients seen lately."""
    now = time.time() if now is None else now
    for limit in (STARTS, joins(), LINKS, LINK_BYTES):
        db.execute("DELETE FROM limits WHERE what = ? AND at < ?", (limit.what, now - limit.burst * limit.every))


class Guesses:
    """Wrong join codes per client, counted in this process only (a wrong code reads and
    never writes): ``burst`` at once, then one more every ``every`` seconds. At most
    ``clients`` addresses are remembered, the least recently seen forgotten first."""

    def __init__(self, burst: int = 10, every: float = 30.0, clients: int = 4096):
        self.limit = Limit("guess", burst, every)
        self.clients = clients
        self._buckets: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def _tokens(self, who: str, now: float) -> float:
        found = self._buckets.get(who)
        if found is None:
            return float(self.limit.burst)
        tokens, at = found
        return min(float(self.limit.burst), tokens + max(0.0, now - at) / self.limit.every)

    def allowed(self, address: str | None, now: float | None = None) -> bool:
        """Whether the client may try a code now (a wrong try is then ``missed``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._tokens(key(address), now) >= 1.0

    def missed(self, address: str | None, now: float | None = None) -> None:
        """A wrong code tried: one token taken."""
        now = time.monotonic() if now is None else now
        who = key(address)
        with self._lock:
            self._buckets[who] = (max(0.0, self._tokens(who, now) - 1.0), now)
            self._buckets.move_to_end(who)
            while len(self._buckets) > self.clients:
                self._buckets.popitem(last=False)
