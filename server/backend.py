"""What both stores share (server.store's SQLite file, server.pgstore's PostgreSQL): the
views' SQL and bounds, a view's key, the StoreError a caller says, and ``Backend`` —
``transaction()``, ``reading()``, ``create()`` for a part's tables (upgraded once when
an older layout is recorded, and made again where the tables vanished), ``put`` /
``get`` a view. Neither backend imports the other; server.store chooses one. No Streamlit
here.

Views are bounded in number and bytes; when full, the views of a site past its share of the
bytes go first, then the views neither kept nor recent, then the merely recent (made in the
last KEEP_HOURS); a kept view (a class was started from it, someone else opened it) never
goes for a new one: the new one is refused in words instead. Within each, the fair share
decides: the client (its address; an IPv6 /64) that made the most loses its own least
recently used first, and a site (an IPv6 /48) counts as SITE_FACTOR clients, so that one
address, or one site's many /64s, making hundreds of links evicts its own, not a teacher's
one link. A client makes a bounded number of links an hour and puts a bounded number of
bytes in the store an hour (server.limits).
"""

from __future__ import annotations

import hashlib
import json
import time

from . import limits

MAX_VIEWS = 2000
MAX_BYTES = 64 * 2**20
KEY_LENGTH = 12  # hex digits of a SHA-256: 48 bits, plenty for a class's links
# each part's tables and the version of their layout (a part whose version moves on is
# upgraded by its own statements; creating is idempotent, and serialised between processes)
SCHEMA_TABLE = "CREATE TABLE IF NOT EXISTS atlas_schema (part TEXT PRIMARY KEY, version INTEGER NOT NULL)"
VIEWS = ("""CREATE TABLE IF NOT EXISTS views (
    key TEXT PRIMARY KEY, payload TEXT NOT NULL, bytes INTEGER NOT NULL, created REAL NOT NULL, used REAL NOT NULL,
    maker TEXT NOT NULL DEFAULT '', kept INTEGER NOT NULL DEFAULT 0, client TEXT NOT NULL DEFAULT '',
    site TEXT NOT NULL DEFAULT '')""",)
# 2: who made a view, and whether it is kept first (opened by another, or a class's); 3: the
# client (server.limits.key of its address) that made it, for the fair share (a view kept
# before has none: all such views share one client's share); 4: its site (an IPv6 client's /48,
# else the client), for the site's share (a view kept before has none: one share, as its client)
VIEWS_VERSION = 4
VIEWS_UPGRADES = {2: ["ALTER TABLE views ADD COLUMN maker TEXT NOT NULL DEFAULT ''",
                      "ALTER TABLE views ADD COLUMN kept INTEGER NOT NULL DEFAULT 0"],
                  3: ["ALTER TABLE views ADD COLUMN client TEXT NOT NULL DEFAULT ''"],
                  4: ["ALTER TABLE views ADD COLUMN site TEXT NOT NULL DEFAULT ''"]}
KEEP_HOURS = 24  # a view made this recently goes only after every older one nobody kept
SITE_SHARE = 4  # one site holds at most 1/SITE_SHARE of the store's bytes before its views go first
LIMITS_VERSION = 1


def is_key(value) -> bool:
    """A key of ours: KEY_LENGTH lowercase hex digits (anything else is never looked up)."""
    return isinstance(value, str) and len(value) == KEY_LENGTH and all(c in "0123456789abcdef" for c in value)


def _payload(view: dict) -> str:
    return json.dumps(view, ensure_ascii=False, sort_keys=True)


def key_of(view: dict) -> str:
    """The key a view is kept under: the same view, the same key."""
    return hashlib.sha256(_payload(view).encode("utf-8", "surrogatepass")).hexdigest()[:KEY_LENGTH]


class Refused(Exception):
    """A change refused by a limit of the client's (server.limits): ``what`` names it."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


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


class Backend:
    """What both backends share: the views' SQL (``?`` placeholders; each backend's
    connection takes them), their bounds, and creating a part's tables once."""

    max_views: int
    max_bytes: int
    recreated: bool = False
    problem: str | None = None
    parts: dict  # part → (version, statements, upgrades): what ``create`` made, to make again

    def transaction(self):  # a connection inside one write transaction (writers one at a time)
        raise NotImplementedError

    def reading(self):  # a connection for reads
        raise NotImplementedError

    def _touch(self, db, key: str, kept: bool = False) -> None:  # record a view's use, waiting a moment at most
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
        self.parts[part] = (version, statements, upgrades)
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

    def create_base_parts(self) -> None:
        """The parts every store has from its start: the views and the limits."""
        self.create("views", VIEWS_VERSION, VIEWS, VIEWS_UPGRADES)
        self.create("limits", LIMITS_VERSION, limits.SCHEMA)

    def put(self, view: dict, address: str | None = None, maker: str = "") -> str:
        """Keep a view (a JSON-able dict: text, language, step, settings); returns its key.
        The same view always gets the same key. ``address``: the client (server.limits.key;
        None for a tool: not limited), whose links and bytes an hour are bounded
        (``Refused("links")`` / ``Refused("bytes")`` past them); ``Refused("full")`` when the
        store holds only kept views and a new one would push one out; ``maker``: who made it
        (an id of the maker's session), so that another's opening keeps it first. Raises
        StoreError when it cannot be written (nothing half-written stays: one transaction)."""
        payload = _payload(view)
        key = key_of(view)
        size = len(payload.encode("utf-8", "surrogatepass"))
        now = time.time()
        with self.transaction() as db:
            for statement in VIEWS:  # a store that could not be made at start is made now
                db.execute(statement)
            for statement in limits.SCHEMA:
                db.execute(statement)
            if db.execute("SELECT 1 FROM views WHERE key = ?", (key,)).fetchone() is None:
                kept, kept_bytes = db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM views "
                                              "WHERE kept = 1").fetchone()
                if kept + 1 > self.max_views or kept_bytes + size > self.max_bytes:
                    raise Refused("full")  # only kept views are left to go: none goes for a new one
                if not limits.take(db, limits.LINKS, address, now):
                    raise Refused("links")
                if not limits.take(db, limits.LINK_BYTES, address, now, cost=size):
                    raise Refused("bytes")
            client = address or ""
            db.execute("INSERT INTO views(key, payload, bytes, created, used, maker, client, site) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET used = excluded.used",
                       (key, payload, size, now, now, maker, client, limits.site(limits.key(client)) or client
                        if client else ""))
            self._evict(db, now)
            limits.forget_full(db, now)
        return key

    def _evict(self, db, now: float) -> None:
        """A site's views past its share of the bytes (max_bytes / SITE_SHARE: its least
        recently used) go at once. Until both bounds hold, views then go by tier — those neither
        kept nor made in the last KEEP_HOURS, then the merely recent, the kept last (kept: a
        class's, or opened by another reader; ``put`` refuses a new view before one would
        go) — and within a tier by fair share: every client's most recently used view is
        kept before any client's second, and so on, a site's views counting as if SITE_FACTOR
        clients shared them (the client or site that made the most loses its own oldest
        first), least recently used last. One statement: the views kept are the first in
        that order whose running total fits both bounds."""
        order = "tier DESC, share, used DESC, key"
        db.execute(f"""DELETE FROM views WHERE key IN (
            SELECT key FROM (SELECT key, tier,
                ROW_NUMBER() OVER (ORDER BY {order}) AS place,
                SUM(bytes) OVER (ORDER BY {order} ROWS UNBOUNDED PRECEDING) AS total
                FROM (SELECT key, bytes, used,
                        CASE WHEN kept = 1 THEN 3 WHEN site != '' AND site_bytes > ? THEN 0
                             WHEN created > ? THEN 2 ELSE 1 END AS tier,
                        CASE WHEN by_client >= (by_site + ? - 1) / ? THEN by_client
                             ELSE (by_site + ? - 1) / ? END AS share
                      FROM (SELECT key, bytes, used, kept, created, site,
                              ROW_NUMBER() OVER (PARTITION BY client ORDER BY used DESC, key) AS by_client,
                              ROW_NUMBER() OVER (PARTITION BY site ORDER BY used DESC, key) AS by_site,
                              SUM(bytes) OVER (PARTITION BY site ORDER BY used DESC, key
                                               ROWS UNBOUNDED PRECEDING) AS site_bytes
                            FROM views) AS counted) AS fair) AS ranked
            WHERE place > ? OR total > ? OR tier = 0)""",
                   (self.max_bytes // SITE_SHARE, now - KEEP_HOURS * 3600, *(limits.SITE_FACTOR,) * 4,
                    self.max_views, self.max_bytes))

    def keep(self, key) -> None:
        """Keep a view first (a class was started from it): it outlives the views nobody
        opened."""
        if is_key(key):
            with self.transaction() as db:
                db.execute("UPDATE views SET kept = 1 WHERE key = ?", (key,))

    def get(self, key, reader: str = "") -> dict | None:
        """The view of a key, or None (not ours, never kept, or evicted); opened by a
        ``reader`` other than its maker, it is kept first from now on. Reading never
        depends on writing: when the view's last use cannot be recorded (a lock, a full
        disk, a read-only file), the view still comes back. Raises StoreError only when
        the store cannot be read."""
        if not is_key(key):
            return None
        with self.reading() as db:
            try:
                row = db.execute("SELECT payload, maker FROM views WHERE key = ?", (key,)).fetchone()
            except Exception as exc:
                if self._missing_table(exc):
                    return None
                raise
            if row is None:
                return None
            self._touch(db, key, kept=bool(reader) and reader != row[1])
        try:
            view = json.loads(row[0])
        except ValueError:
            return None
        return view if isinstance(view, dict) else None

    def count(self) -> int:
        with self.reading() as db:
            return db.execute("SELECT COUNT(*) FROM views").fetchone()[0]
