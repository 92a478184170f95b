"""The store on PostgreSQL (``ATLAS_DATABASE_URL``): share links and classes seen by
every replica on every machine. The SQL is server.store's and server.classes' own; only
what differs is here:

* a connection pool per process (``psycopg_pool``; it reconnects by itself when the
  database comes back), connections in autocommit, and ``?`` placeholders read as
  psycopg's ``%s`` (our statements hold no other ``?`` or ``%``);
* ``REAL`` columns (seconds since the epoch) created as ``DOUBLE PRECISION``
  (PostgreSQL's ``REAL`` keeps 24 bits: a time to two minutes);
* every write transaction first takes one advisory lock, so writers go one at a time as
  in SQLite (a vote closing and an answer arriving can never interleave), and creating
  the tables is serialised the same way between replicas starting at once;
* errors turned into server.store's StoreError reasons, with the password never in a
  notice or a log (``settings.hide_password``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import weakref

import psycopg
import psycopg_pool
from psycopg import errors as pgerrors

from attn.settings import hide_password

from .backend import MAX_BYTES, MAX_VIEWS, Backend, StoreError

WRITERS_LOCK = 0x41544C53  # "ATLS": the one advisory lock every write transaction takes
CONNECT_SECONDS = 2.0  # how long a request waits for a connection before saying the store is away
DOWN_SECONDS = 5.0  # after that, how long every use is told so at once before the pool is tried again
_log = logging.getLogger(__name__)
_OPEN: weakref.WeakSet = weakref.WeakSet()  # the stores whose pools are open (close_all: a test's end)


def _sql(statement: str) -> str:
    """room's SQL as psycopg takes it: ``%s`` placeholders, and a ``REAL`` column (a table
    made, or a column added by an upgrade) as ``DOUBLE PRECISION``."""
    out = statement.replace("?", "%s")
    return re.sub(r"\bREAL\b", "DOUBLE PRECISION", out) if out.lstrip().upper().startswith(("CREATE", "ALTER")) else out


class _Connection:
    """A psycopg connection that takes server.store's SQL as written."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn

    def execute(self, statement: str, params=()):
        return self.conn.execute(_sql(statement), params)


def explain(exc: BaseException, url: str) -> StoreError:
    """The StoreError an error of the database (or of reaching it) stands for, its detail
    one sentence an operator can act on, without the password."""
    text = hide_password(str(exc)).replace(url, hide_password(url))
    if isinstance(exc, (pgerrors.LockNotAvailable, pgerrors.QueryCanceled, pgerrors.DeadlockDetected)):
        return StoreError("locked", text)
    if isinstance(exc, pgerrors.DiskFull):
        return StoreError("full", text)
    if isinstance(exc, (pgerrors.ReadOnlySqlTransaction, pgerrors.InsufficientPrivilege)):
        return StoreError("readonly", text)
    if "password authentication failed" in text or "no password supplied" in text:
        return StoreError("unavailable", f"the database refused the user's password ({hide_password(url)})")
    if re.search(r'database "[^"]+" does not exist', text):
        return StoreError("unavailable", f"no such database on the server ({hide_password(url)})")
    if isinstance(exc, psycopg_pool.PoolTimeout) or "connection refused" in text.lower():
        return StoreError("unavailable", f"the database cannot be reached ({hide_password(url)})")
    return StoreError("unavailable", text)


class PgStore(Backend):
    """The PostgreSQL backend (see the module's doc)."""

    def __init__(self, url: str, max_views: int = MAX_VIEWS, max_bytes: int = MAX_BYTES, timeout: float = 30.0,
                 max_connections: int = 8):
        self.url, self.max_views, self.max_bytes, self.timeout = url, max_views, max_bytes, timeout
        self.recreated, self.problem, self.parts = False, None, {}
        self._down_until, self._down = 0.0, None  # after a failure to connect: say so at once for a moment
        try:
            self.pool = psycopg_pool.ConnectionPool(
                url, min_size=1, max_size=max_connections, open=True, name="atlas-store",
                kwargs={"autocommit": True, "connect_timeout": int(CONNECT_SECONDS)},
                check=psycopg_pool.ConnectionPool.check_connection, reconnect_timeout=0)
        except psycopg.Error as exc:  # a URL the client cannot even parse
            error = explain(exc, url)
            raise StoreError(error.reason, str(error)) from None
        _OPEN.add(self)
        try:
            self.create_base_parts()
        except StoreError as exc:  # the database is away: the app works without links, and says so
            self.problem = exc.reason
            _log.warning("the shared store (PostgreSQL) is not usable now: %s", exc)

    def close(self) -> None:
        self.pool.close()
        _OPEN.discard(self)

    @contextlib.contextmanager
    def _connection(self):
        """A pooled connection. When none could be had, the reason is said at once to every
        use for ``DOWN_SECONDS`` (a page asks several times; each would wait anew), then
        the pool is tried again."""
        if time.monotonic() < self._down_until:
            raise StoreError(self._down.reason, str(self._down))
        try:
            with self.pool.connection(timeout=CONNECT_SECONDS) as conn:
                yield conn
        except psycopg_pool.PoolTimeout as exc:
            why = self._why(exc)
            if why.reason != "locked":  # away: said at once for a moment; merely busy: tried anew each time
                self._down, self._down_until = why, time.monotonic() + DOWN_SECONDS
            raise why from None
        except psycopg.OperationalError as exc:
            if conn_broken(exc):
                self._down = explain(exc, self.url)
                self._down_until = time.monotonic() + DOWN_SECONDS
            raise explain(exc, self.url) from None
        except psycopg.Error as exc:
            raise explain(exc, self.url) from None

    def _why(self, timeout: BaseException) -> StoreError:
        """Why the pool has no connection to give: one connection tried by hand says
        (the server away, a refused password, a missing database). When that one connects,
        the server is there and every pooled connection is busy — this process's writes
        queued behind another's lock (a whole class pressing Send at once): "locked", as a
        lock that was waited for too long."""
        try:
            psycopg.connect(self.url, connect_timeout=int(CONNECT_SECONDS)).close()
        except psycopg.Error as exc:
            return explain(exc, self.url)
        return StoreError("locked", f"every pooled connection to the database was busy for {CONNECT_SECONDS:g} s "
                                    f"({hide_password(self.url)}): {timeout}")

    @contextlib.contextmanager
    def transaction(self):
        """A connection inside one transaction, after the writers' lock: everything or
        nothing, one writer at a time (waits for the lock at most ``timeout``)."""
        with self._connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{int(self.timeout * 1000)}ms'")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITERS_LOCK,))
            yield _Connection(conn)

    @contextlib.contextmanager
    def reading(self):
        with self._connection() as conn:
            yield _Connection(conn)

    def _touch(self, db: _Connection, key: str, kept: bool = False) -> None:
        with contextlib.suppress(psycopg.Error), db.conn.transaction():
            db.conn.execute("SET LOCAL lock_timeout = '100ms'")  # a moment, not the writers' wait
            db.execute("UPDATE views SET used = ?, kept = GREATEST(kept, ?) WHERE key = ?",
                       (time.time(), int(kept), key))

    def _missing_table(self, exc: BaseException) -> bool:
        return isinstance(exc, pgerrors.UndefinedTable)


def conn_broken(exc: BaseException) -> bool:
    """An error that says the server went away mid-use (not one of a statement's)."""
    text = str(exc).lower()
    return any(s in text for s in ("server closed the connection", "connection refused", "terminating connection",
                                   "consuming input failed", "the connection is lost", "connection is closed"))


def close_all() -> None:
    """Close every store's pool in this process (a test's end: its database goes away)."""
    for store in list(_OPEN):
        store.close()
