"""Shared views, kept on the server: a short key for a text and its settings.

An embedded SQLite database (standard library) in the app's cache folder, so a link
``?s=<key>`` stays short however long the text. It is bounded in count and in bytes,
evicting the least recently used views first, and safe with several app processes on
one machine (WAL journal, a busy timeout, every write one transaction). A database
file that cannot be read is set aside and a fresh one made: only the shared views are
lost, and the caller is told so it can say it. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from attn import convert

MAX_VIEWS = 2000
MAX_BYTES = 64 * 2**20
KEY_LENGTH = 12  # hex digits of a SHA-256: 48 bits, plenty for a class's links
_SCHEMA = """CREATE TABLE IF NOT EXISTS views (
    key TEXT PRIMARY KEY, payload TEXT NOT NULL, bytes INTEGER NOT NULL, created REAL NOT NULL, used REAL NOT NULL)"""


def default_path() -> Path:
    return convert.cache_dir() / "shared-views.sqlite3"


def is_key(value) -> bool:
    """A key of ours: KEY_LENGTH lowercase hex digits (anything else is never looked up)."""
    return isinstance(value, str) and len(value) == KEY_LENGTH and all(c in "0123456789abcdef" for c in value)


@dataclass
class Store:
    path: Path
    max_views: int = MAX_VIEWS
    max_bytes: int = MAX_BYTES
    recreated: bool = False  # the file was unreadable and has been replaced

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._connect() as db:
                ok = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
                db.execute(_SCHEMA)
        except sqlite3.DatabaseError:
            ok = False
        if not ok:
            self._recreate()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)  # autocommit; explicit transactions
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=30000")
        return db

    def _recreate(self) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.replace(p.with_name(f"{p.name}.corrupt-{stamp}"))
        with self._connect() as db:
            db.execute(_SCHEMA)
        self.recreated = True

    def put(self, view: dict) -> str:
        """Keep a view (a JSON-able dict: text, language, step, settings); returns its key.
        The same view always gets the same key."""
        payload = json.dumps(view, ensure_ascii=False, sort_keys=True)
        key = hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_LENGTH]
        size = len(payload.encode("utf-8", "surrogatepass"))
        now = time.time()
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO views(key, payload, bytes, created, used) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT(key) DO UPDATE SET used = excluded.used", (key, payload, size, now, now))
            self._evict(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            db.close()
        return key

    def _evict(self, db: sqlite3.Connection) -> None:
        """Least recently used views go first, until both bounds hold."""
        count, total = db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM views").fetchone()
        for key, size in db.execute("SELECT key, bytes FROM views ORDER BY used ASC").fetchall():
            if count <= self.max_views and total <= self.max_bytes:
                break
            db.execute("DELETE FROM views WHERE key = ?", (key,))
            count, total = count - 1, total - size

    def get(self, key) -> dict | None:
        """The view of a key, or None (not ours, never kept, or evicted)."""
        if not is_key(key):
            return None
        db = self._connect()
        try:
            row = db.execute("SELECT payload FROM views WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE views SET used = ? WHERE key = ?", (time.time(), key))
        finally:
            db.close()
        try:
            view = json.loads(row[0])
        except ValueError:
            return None
        return view if isinstance(view, dict) else None

    def count(self) -> int:
        db = self._connect()
        try:
            return db.execute("SELECT COUNT(*) FROM views").fetchone()[0]
        finally:
            db.close()
