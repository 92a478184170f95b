"""Limits a client cannot sidestep by opening new sessions, by reaching another replica or
by taking another address of its own: each a token bucket kept in the shared store, keyed
by what is limited and the client's ``key`` — its address as the server gives it
(Streamlit's ``st.context.ip_address``: the connection's address, or the one a trusted
proxy forwarded; never a header the app reads itself), an IPv4 address as it is, an IPv6
address by its prefix (``ATLAS_IPV6_PREFIX``, a /64: what one home connection holds), an
IPv4-mapped IPv6 address as the IPv4 address it maps. An IPv6 client's use also takes from
its site's bucket (``ATLAS_IPV6_SITE_PREFIX``, a /48), which holds ``SITE_FACTOR`` times
the bound: a site's 65,536 /64s share four clients' worth, not 65,536.

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

import ipaddress
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


REASON_EVERY = 2.0  # after its burst, one more reason from one address every 2 s


def reasons() -> Limit:
    """Written reasons from one address (each with one student's answer): twice the join
    burst at once — a hall behind one NAT writes one each, twice — then one every
    REASON_EVERY seconds, faster than a class of 120 writes them on a question every few
    minutes."""
    return Limit("reason", burst=2 * settings.read().join_burst, every=REASON_EVERY)


def joins() -> Limit:
    """New students from one address: ``ATLAS_JOIN_BURST`` (120) at once — a lecture hall
    behind one school NAT gets in — then one every JOIN_EVERY seconds: a script minting ids
    gets its burst, then 6 a minute (and the teacher sees it, and can close the door)."""
    return Limit("join", burst=settings.read().join_burst, every=JOIN_EVERY)


SITE_FACTOR = 4  # a site's (an IPv6 /48's) bucket holds four clients' bounds


def key(address: str | None) -> str:
    """The bucket's key for a client's address (None: the server's own machine): an IPv4
    address as it is; an IPv6 address as its network of ``ATLAS_IPV6_PREFIX`` bits
    (``2001:db8:1:2::/64``); an IPv4-mapped IPv6 address (``::ffff:192.0.2.1``) as the IPv4
    address; anything that is no address, as it is."""
    if not isinstance(address, str) or not address:
        return LOCAL
    try:
        found = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return address
    if isinstance(found, ipaddress.IPv6Address):
        if found.ipv4_mapped is not None:
            return str(found.ipv4_mapped)
        found = ipaddress.IPv6Address(int(found))  # without a zone (fe80::1%eth0)
        return str(ipaddress.IPv6Network((found, settings.read().ipv6_prefix), strict=False))
    return str(found)


def site(client: str) -> str | None:
    """The wider bucket an IPv6 client's ``key`` also takes from — its network of
    ``ATLAS_IPV6_SITE_PREFIX`` bits — or None (an IPv4 client, no wider prefix set, or a
    prefix no wider than the client's own)."""
    if "/" not in client:
        return None
    try:
        net = ipaddress.IPv6Network(client)
    except ValueError:
        return None
    wide = settings.read().ipv6_site_prefix
    if not wide or wide >= net.prefixlen:
        return None
    return str(net.supernet(new_prefix=wide))


def _site_limit(limit: Limit) -> Limit:
    return Limit(limit.what, limit.burst * SITE_FACTOR, limit.every / SITE_FACTOR)


def _tokens(db, limit: Limit, who: str, now: float) -> float:
    row = db.execute("SELECT tokens, at FROM limits WHERE what = ? AND address = ?", (limit.what, who)).fetchone()
    return limit.burst if row is None else min(limit.burst, row[0] + max(0.0, now - row[1]) / limit.every)


def take(db, limit: Limit, client: str | None, now: float | None = None, cost: float = 1.0) -> bool:
    """Inside a write transaction: take ``cost`` from the bucket of ``client`` (its
    ``key``; an address is keyed here too) and, for an IPv6 client, from its site's;
    False (and nothing taken) when either holds less. No client: not limited."""
    if client is None:
        return True
    now = time.time() if now is None else now
    who = key(client)
    buckets = [(limit, who)]
    wide = site(who)
    if wide is not None:
        buckets.append((_site_limit(limit), wide))
    left = [(lim, name, _tokens(db, lim, name, now)) for lim, name in buckets]
    if any(tokens < cost for _, _, tokens in left):
        return False
    for lim, name, tokens in left:
        db.execute("INSERT INTO limits (what, address, tokens, at) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (what, address) DO UPDATE SET tokens = excluded.tokens, at = excluded.at",
                   (lim.what, name, tokens - cost, now))
    return True


def forget_full(db, now: float | None = None) -> None:
    """Drop the buckets that have refilled (a full bucket is no row): the table holds only
    clients seen lately."""
    now = time.time() if now is None else now
    for limit in (STARTS, joins(), reasons(), LINKS, LINK_BYTES):
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

    def _tokens(self, who: str, now: float, factor: int = 1) -> float:
        found = self._buckets.get(who)
        burst = float(self.limit.burst * factor)
        if found is None:
            return burst
        tokens, at = found
        return min(burst, tokens + max(0.0, now - at) * factor / self.limit.every)

    def _buckets_of(self, address: str | None) -> list[tuple[str, int]]:
        who = key(address)
        wide = site(who)
        return [(who, 1)] + ([] if wide is None else [(wide, SITE_FACTOR)])

    def allowed(self, address: str | None, now: float | None = None) -> bool:
        """Whether the client may try a code now (a wrong try is then ``missed``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return all(self._tokens(who, now, factor) >= 1.0 for who, factor in self._buckets_of(address))

    def missed(self, address: str | None, now: float | None = None) -> None:
        """A wrong code tried: one token taken (from the site's bucket too)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            for who, factor in self._buckets_of(address):
                self._buckets[who] = (max(0.0, self._tokens(who, now, factor) - 1.0), now)
                self._buckets.move_to_end(who)
            while len(self._buckets) > self.clients:
                self._buckets.popitem(last=False)
