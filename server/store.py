"""The store of what a room shares: share links here (a short key for a text and its
settings), classes in :mod:`server.classes`, both in one database.

Two backends behind one small interface (``transaction()``, ``reading()``, ``create()``
for a part's tables; ``put`` / ``get`` a view; the classes' own SQL in server.classes):

* ``Store``: an embedded SQLite file (standard library), the default: nothing to start,
  every process on one machine shares it (WAL journal, a busy timeout, every write one
  transaction; a few connections kept open for the process's page runs, which run each on
  a thread of their own). A file that is not a database, or fails SQLite's check, is set aside
  and a fresh one made (the caller is told, so it can say it); a file deleted while the
  app runs is made again in place, with every part's tables, at the next use.
* ``server.pgstore.PgStore``: PostgreSQL, when ``ATLAS_DATABASE_URL`` names one: every
  replica on every machine sees the same links and classes.

``open_store()`` picks one. Both keep the views bounded in count and in bytes (the least
recently used go first, in one statement), write in transactions (nothing half-written
is ever read), and turn trouble — a lock held too long, a full disk, a read-only file,
a database out of reach — into a StoreError for the caller to say. No Streamlit here.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from attn import settings

from . import pgstore
from .backend import (  # noqa: F401 (what callers of the store import from here)
    MAX_BYTES,
    MAX_VIEWS,
    VIEWS,
    VIEWS_VERSION,
    Backend,
    Refused,
    StoreError,
    is_key,
    key_of,
)


def default_path() -> Path:
    """The SQLite file: ``ATLAS_STORE_PATH``, else the cache folder's."""
    return settings.read().store_path


def open_store(**bounds) -> Backend:
    """The store this process uses: PostgreSQL when ``ATLAS_DATABASE_URL`` is set, else
    the SQLite file (``ATLAS_STORE_PATH``, else in the cache folder)."""
    return store_at(settings.read().database_url or default_path(), **bounds)


def store_at(where, **bounds) -> Backend:
    """The store at ``where``: a ``postgresql://`` URL, or an SQLite file's path."""
    if isinstance(where, str) and where.startswith(("postgresql://", "postgres://")):
        return pgstore.PgStore(where, **bounds)
    return Store(Path(where), **bounds)


KEPT_CONNECTIONS = 8  # SQLite connections a process keeps open for its page runs (opening one: ≈ 0.5 ms)


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """A file that is not a database, or a damaged one (nothing else: a lock, a full disk
    or a read-only file is a moment's trouble, not a reason to set the links aside)."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or (
        not name and ("not a database" in str(exc) or "malformed" in str(exc)))


@dataclass
class Store(Backend):
    """The SQLite backend (see the module's doc)."""

    path: Path
    max_views: int = MAX_VIEWS
    max_bytes: int = MAX_BYTES
    timeout: float = 30.0  # seconds a write waits for another process's lock
    recreated: bool = False  # the file was not a database (or failed its check) and has been replaced
    problem: str | None = None  # a StoreError's reason met at start (the store is left as it is)
    remade: int = 0  # times the file vanished while in use and was made again in place
    _idle: list = field(default_factory=list, repr=False)  # (connection, the file's inode when opened)
    _idle_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.parts = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._connect()
            try:
                ok = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            finally:
                db.close()  # the check's connection: each use opens its own
        except sqlite3.DatabaseError as exc:
            if not _is_damaged(exc):
                self.problem = StoreError.of(exc).reason
                return
            ok = False
        except (OSError, sqlite3.Error) as exc:
            self.problem = StoreError.of(exc).reason
            return
        if not ok:
            self._recreate()
        self._create_views()

    def _create_views(self) -> None:
        try:
            self.create_base_parts()
        except StoreError as exc:
            self.problem = exc.reason

    def _connect(self) -> sqlite3.Connection:
        # autocommit (explicit transactions); any thread: a kept connection serves the next page run's thread
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            db.execute("PRAGMA journal_mode=WAL")
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> tuple[sqlite3.Connection, int | None]:
        """A connection (and the file's inode it is open on), or a StoreError saying why
        there is none. A file that vanished (deleted while the app runs) is made again
        first, with every part's tables: what it held is gone, and the callers find their
        rows missing and say so. A kept connection is reused only while the file is the
        one it opened (its inode): one kept across a deletion would read the old file."""
        if self.parts and not self.path.exists():
            self._remake()
        try:
            inode = self.path.stat().st_ino
        except OSError:
            inode = None
        db = self._kept(inode)
        if db is not None:
            return db, inode
        try:
            return self._connect(), inode
        except (OSError, sqlite3.Error) as exc:
            raise StoreError.of(exc) from exc

    def _kept(self, inode: int | None) -> sqlite3.Connection | None:
        """A kept connection open on the file at ``inode`` (those on another are closed), or None."""
        with self._idle_lock:
            while self._idle:
                db, was = self._idle.pop()
                if inode is not None and was == inode:
                    return db
                db.close()
        return None

    def _close(self, db: sqlite3.Connection, inode: int | None, healthy: bool) -> None:
        """A connection back: kept for the next use (KEPT_CONNECTIONS at most) when it
        ended cleanly, outside a transaction, on the file it opened; closed otherwise."""
        if healthy and inode is not None and not db.in_transaction:
            with self._idle_lock:
                if len(self._idle) < KEPT_CONNECTIONS:
                    self._idle.append((db, inode))
                    return
        db.close()

    def close(self) -> None:
        """Close the connections kept for reuse (a test's store, before its file goes)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for db, _ in idle:
            db.close()

    def _remake(self) -> None:
        parts, self.parts = dict(self.parts), {}
        self.remade += 1
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connect().close()  # the file, before anything asks for it again
            for part, (version, statements, upgrades) in parts.items():
                self.create(part, version, statements, upgrades)
        except (OSError, sqlite3.Error, StoreError):
            self.parts = parts  # the next use tries again

    def _recreate(self) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.replace(p.with_name(f"{p.name}.corrupt-{stamp}"))
        self._connect().close()
        self.recreated = True

    @contextlib.contextmanager
    def transaction(self):
        """A connection inside ``BEGIN IMMEDIATE`` … ``COMMIT``: everything or nothing.
        A failed BEGIN raises its own StoreError (there is nothing to roll back); any
        failure inside rolls back and is raised (an sqlite3 error as a StoreError)."""
        db, inode = self._open()
        healthy = False
        try:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError.of(exc) from exc
            try:
                yield db
                db.execute("COMMIT")
                healthy = True
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError.of(exc) from exc
                raise
        finally:
            self._close(db, inode, healthy)

    @contextlib.contextmanager
    def reading(self):
        """A connection for reads (WAL: never blocked by a writer); an sqlite3 error
        inside is raised as a StoreError."""
        db, inode = self._open()
        healthy = False
        try:
            yield db
            healthy = True
        except sqlite3.Error as exc:
            raise StoreError.of(exc) from exc
        finally:
            self._close(db, inode, healthy)

    def _touch(self, db, key: str, kept: bool = False) -> None:
        with contextlib.suppress(sqlite3.Error):
            db.execute("PRAGMA busy_timeout=100")  # a moment, not the writers' wait
            try:
                db.execute("UPDATE views SET used = ?, kept = MAX(kept, ?) WHERE key = ?",
                           (time.time(), int(kept), key))
            finally:  # the connection is kept for others: the writers' wait again
                db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")

    def _missing_table(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc)
