"""The store of what a room shares: share links here (a short key for a text and its
settings), classes in :mod:`room.classes`, both in one database.

Two backends behind one small interface (``transaction()``, ``reading()``, ``create()``
for a part's tables; ``put`` / ``get`` a view; the classes' own SQL in room.classes):

* ``Store``: an embedded SQLite file (standard library), the default: nothing to start,
  every process on one machine shares it (WAL journal, a busy timeout, every write one
  transaction). A file that is not a database, or fails SQLite's check, is set aside
  and a fresh one made (the caller is told, so it can say it).
* ``room.pgstore.PgStore``: PostgreSQL, when ``ATLAS_DATABASE_URL`` names one: every
  replica on every machine sees the same links and classes.

``open_store()`` picks one. Both keep the views bounded in count and in bytes (the least
recently used go first, in one statement), write in transactions (nothing half-written
is ever read), and turn trouble — a lock held too long, a full disk, a read-only file,
a database out of reach — into a StoreError for the caller to say. No Streamlit here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from attn import settings

MAX_VIEWS = 2000
MAX_BYTES = 64 * 2**20
KEY_LENGTH = 12  # hex digits of a SHA-256: 48 bits, plenty for a class's links
# each part's tables and the version of their layout (a part whose version moves on is
# upgraded by its own statements; creating is idempotent, and serialised between processes)
SCHEMA_TABLE = "CREATE TABLE IF NOT EXISTS atlas_schema (part TEXT PRIMARY KEY, version INTEGER NOT NULL)"
VIEWS = ("""CREATE TABLE IF NOT EXISTS views (
    key TEXT PRIMARY KEY, payload TEXT NOT NULL, bytes INTEGER NOT NULL, created REAL NOT NULL, used REAL NOT NULL)""",)
VIEWS_VERSION = 1


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
        from . import pgstore  # only where PostgreSQL is asked for (the module imports this one)

        return pgstore.PgStore(where, **bounds)
    return Store(Path(where), **bounds)


def is_key(value) -> bool:
    """A key of ours: KEY_LENGTH lowercase hex digits (anything else is never looked up)."""
    return isinstance(value, str) and len(value) == KEY_LENGTH and all(c in "0123456789abcdef" for c in value)


def _payload(view: dict) -> str:
    return json.dumps(view, ensure_ascii=False, sort_keys=True)


def key_of(view: dict) -> str:
    """The key a view is kept under: the same view, the same key."""
    return hashlib.sha256(_payload(view).encode("utf-8", "surrogatepass")).hexdigest()[:KEY_LENGTH]


class StoreError(Exception):
    """The store could not be used just now; ``reason`` names why, for the reader's notice:

    * ``locked``: another process held the database past the busy timeout;
    * ``full``: the disk is full;
    * ``readonly``: the file or its folder cannot be written;
    * ``unavailable``: it cannot be opened or read at all (permissions, an I/O error).

    The file is never set aside for any of these: the links in it are sound."""

    REASONS = ("locked", "full", "readonly", "unavailable")

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason

    @classmethod
    def of(cls, exc: BaseException) -> StoreError:
        """The reason an sqlite3 or OS error stands for."""
        name = getattr(exc, "sqlite_errorname", "")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc):
            return cls("locked", str(exc))
        if name.startswith("SQLITE_FULL") or "disk is full" in str(exc) or getattr(exc, "errno", None) == 28:
            return cls("full", str(exc))
        if name.startswith("SQLITE_READONLY") or "readonly" in str(exc):
            return cls("readonly", str(exc))
        return cls("unavailable", str(exc))


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """A file that is not a database, or a damaged one (nothing else: a lock, a full disk
    or a read-only file is a moment's trouble, not a reason to set the links aside)."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or (
        not name and ("not a database" in str(exc) or "malformed" in str(exc)))


class Backend:
    """What both backends share: the views' SQL (``?`` placeholders; each backend's
    connection takes them), their bounds, and creating a part's tables once."""

    max_views: int
    max_bytes: int
    recreated: bool = False
    problem: str | None = None

    def transaction(self):  # a connection inside one write transaction (writers one at a time)
        raise NotImplementedError

    def reading(self):  # a connection for reads
        raise NotImplementedError

    def _touch(self, db, key: str) -> None:  # record a view's use, waiting a moment at most
        raise NotImplementedError

    def _missing_table(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def create(self, part: str, version: int, statements, upgrades: dict | None = None) -> int | None:
        """A part's tables at layout ``version``, in one write transaction (writers go one
        at a time, so two processes starting at once do this once):

        * none recorded: ``statements`` (``CREATE … IF NOT EXISTS``) make the newest layout;
        * an older version recorded: ``upgrades[v]`` for each v after it up to ``version``
          (each a list of statements, or of (statement, parameters)), run once, in order,
          here; the tables the newest layout adds are made by ``statements`` after them;
        * a newer version recorded (a later release wrote the store): a StoreError, the
          tables left as they are.

        Returns the version that was recorded before (None: a new store)."""
        with self.transaction() as db:
            db.execute(SCHEMA_TABLE)
            row = db.execute("SELECT version FROM atlas_schema WHERE part = ?", (part,)).fetchone()
            before = None if row is None else int(row[0])
            if before is not None and before > version:
                raise StoreError("unavailable", f"the store's {part} were written by a newer release "
                                                f"(layout {before}; this one reads {version})")
            for v in range(version + 1 if before is None else before + 1, version + 1):
                for statement in (upgrades or {}).get(v, ()):
                    sql, params = statement if isinstance(statement, tuple) else (statement, ())
                    db.execute(sql, params)
            for statement in statements:
                db.execute(statement)
            db.execute("INSERT INTO atlas_schema VALUES (?, ?) "
                       "ON CONFLICT(part) DO UPDATE SET version = excluded.version", (part, version))
        return before

    def version_of(self, part: str) -> int | None:
        """The layout version recorded for a part (read inside a write transaction, so
        never between another process's upgrade and its record)."""
        with self.transaction() as db:
            db.execute(SCHEMA_TABLE)
            row = db.execute("SELECT version FROM atlas_schema WHERE part = ?", (part,)).fetchone()
        return None if row is None else row[0]

    def put(self, view: dict) -> str:
        """Keep a view (a JSON-able dict: text, language, step, settings); returns its key.
        The same view always gets the same key. Raises StoreError when it cannot be
        written (nothing half-written stays: one transaction)."""
        payload = _payload(view)
        key = key_of(view)
        size = len(payload.encode("utf-8", "surrogatepass"))
        now = time.time()
        with self.transaction() as db:
            for statement in VIEWS:  # a store that could not be made at start is made now
                db.execute(statement)
            db.execute("INSERT INTO views(key, payload, bytes, created, used) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT(key) DO UPDATE SET used = excluded.used", (key, payload, size, now, now))
            self._evict(db)
        return key

    def _evict(self, db) -> None:
        """Least recently used views go first, until both bounds hold: one statement, the
        views kept being the most recently used whose running total fits both bounds."""
        db.execute("""DELETE FROM views WHERE key IN (
            SELECT key FROM (SELECT key,
                ROW_NUMBER() OVER (ORDER BY used DESC, key) AS place,
                SUM(bytes) OVER (ORDER BY used DESC, key ROWS UNBOUNDED PRECEDING) AS total FROM views) AS ranked
            WHERE place > ? OR total > ?)""", (self.max_views, self.max_bytes))

    def get(self, key) -> dict | None:
        """The view of a key, or None (not ours, never kept, or evicted). Reading never
        depends on writing: when the view's last use cannot be recorded (a lock, a full
        disk, a read-only file), the view still comes back. Raises StoreError only when
        the store cannot be read."""
        if not is_key(key):
            return None
        with self.reading() as db:
            try:
                row = db.execute("SELECT payload FROM views WHERE key = ?", (key,)).fetchone()
            except Exception as exc:
                if self._missing_table(exc):
                    return None
                raise
            if row is None:
                return None
            self._touch(db, key)
        try:
            view = json.loads(row[0])
        except ValueError:
            return None
        return view if isinstance(view, dict) else None

    def count(self) -> int:
        with self.reading() as db:
            return db.execute("SELECT COUNT(*) FROM views").fetchone()[0]


@dataclass
class Store(Backend):
    """The SQLite backend (see the module's doc)."""

    path: Path
    max_views: int = MAX_VIEWS
    max_bytes: int = MAX_BYTES
    timeout: float = 30.0  # seconds a write waits for another process's lock
    recreated: bool = False  # the file was not a database (or failed its check) and has been replaced
    problem: str | None = None  # a StoreError's reason met at start (the store is left as it is)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
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
            self.create("views", VIEWS_VERSION, VIEWS)
        except StoreError as exc:
            self.problem = exc.reason

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)  # autocommit; explicit transactions
        try:
            db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            db.execute("PRAGMA journal_mode=WAL")
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection:
        """A connection, or a StoreError saying why there is none."""
        try:
            return self._connect()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError.of(exc) from exc

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
        db = self._open()
        try:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError.of(exc) from exc
            try:
                yield db
                db.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError.of(exc) from exc
                raise
        finally:
            db.close()

    @contextlib.contextmanager
    def reading(self):
        """A connection for reads (WAL: never blocked by a writer); an sqlite3 error
        inside is raised as a StoreError."""
        db = self._open()
        try:
            yield db
        except sqlite3.Error as exc:
            raise StoreError.of(exc) from exc
        finally:
            db.close()

    def _touch(self, db, key: str) -> None:
        with contextlib.suppress(sqlite3.Error):
            db.execute("PRAGMA busy_timeout=100")  # a moment, not the writers' 30 s
            db.execute("UPDATE views SET used = ? WHERE key = ?", (time.time(), key))

    def _missing_table(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc)
