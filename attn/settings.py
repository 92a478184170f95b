"""Every setting read from the environment, in one place.

* ``ATLAS_CACHE_DIR``: where the converted model lives (else
  ``$XDG_CACHE_HOME/attention-atlas``, else ``~/.cache/attention-atlas``);
* ``ATLAS_MODEL``: ``tiny`` for the tiny random-weight model, or the folder of a Hugging
  Face model (a decoder or an encoder; attn.folders) instead of Gemma-3-270m;
* ``ATLAS_MODELS``: more models to offer in the sidebar, comma-separated (``tiny``,
  ``gemma`` or folders), besides ``ATLAS_MODEL``'s; at most two are held in memory;
* ``ATLAS_DEVICE``: force a device (``cpu``, ``cuda``);
* ``ATLAS_MAX_TOKENS``: tokens analysed at most (else the device's budget);
* ``ATLAS_ANALYSIS_MB``: memory the analyses of texts may hold together (default 1,000
  MB; the least recently used text is dropped first);
* ``ATLAS_PUBLIC_URL``: the address a class reaches the app at, for share links and
  their QR code (else the address the reader's browser used);
* ``ATLAS_FLEX_WARMUP=0``: no FlexAttention compile in the background (the tests set
  it, so that no call switches kernels by timing; the app compiles once idle);
* ``ATLAS_BUILD_AHEAD=0``: a reader's long text (its statistics read on a sample of its
  rows) gets no background build of its other pages (the tests set it; on by default);
* ``ATLAS_ROOM_WORKER=0``: this process takes no text of a class's room to measure (the
  test process sets it and measures them itself; the servers the tests start do not);
* ``ATLAS_JOIN_BURST``: students that may join a class at once from one client address
  (default 120: a lecture behind one school NAT); then one more every 10 s;
* ``ATLAS_IPV6_PREFIX``: the IPv6 prefix one client is counted by in every per-client
  bound (default 64: a home connection holds a /64 and may use any address in it);
* ``ATLAS_IPV6_SITE_PREFIX``: a wider IPv6 prefix (default 48; 0: none) whose clients
  together get ``server.limits.SITE_FACTOR`` times one client's bound, so that a site's
  65,536 /64s cannot multiply it;
* ``ATLAS_START_KEY``: a passphrase that *Start a class* asks for (unset: anyone may
  start a class, as on a classroom's own server);
* ``ATLAS_LIVE_MAX_N``: the live benchmark's largest length (4,096 on the CPU, 16,384 on
  CUDA; the tests run it smaller);
* ``ATLAS_STORE_PATH``: the SQLite file of share links and classes (else
  ``shared-views.sqlite3`` in the cache folder), so that replicas can share a model copy
  and not a store, or the reverse;
* ``ATLAS_DATABASE_URL``: a PostgreSQL database for share links and classes instead
  (``postgresql://user@host:port/db``; ``?sslmode=require`` across machines), shared by
  every replica on every machine;
* ``ATLAS_TORCH_THREADS``: the CPU threads torch may use in this process (else all the
  cores; ``scripts/serve.sh`` gives each replica its share).

A value that does not fit (``ATLAS_MAX_TOKENS=abc``, ``ATLAS_ANALYSIS_MB=0``) raises
:class:`SettingError`, whose message names the variable and what it takes.

The Hugging Face libraries are put offline here too, before anything imports them:
the app never downloads.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


def go_offline() -> None:
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)


go_offline()


class SettingError(ValueError):
    """An environment variable whose value does not fit: ``variable``, the ``value``
    found and the kind of value ``expected``, all three in the message."""

    def __init__(self, variable: str, value: str, expected: str):
        self.variable, self.value, self.expected = variable, value, expected
        super().__init__(f"{variable}={value!r} does not fit: set it to {expected}, or unset it.")


def _max_tokens(raw: str | None) -> int | None:
    """``ATLAS_MAX_TOKENS``: a whole number > 0; None when unset or empty."""
    if not raw:
        return None
    try:
        tokens = int(raw)
    except ValueError:
        tokens = 0
    if tokens <= 0:
        raise SettingError("ATLAS_MAX_TOKENS", raw, "a whole number of tokens above 0, e.g. 1024")
    return tokens


def _live_max_n(raw: str | None) -> int | None:
    """``ATLAS_LIVE_MAX_N``: the live benchmark's largest length, a power of two ≥ 64;
    None when unset (the device's own)."""
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 64 or n & (n - 1):
        raise SettingError("ATLAS_LIVE_MAX_N", raw, "a power of two of at least 64, e.g. 4096")
    return n


# the analyses' default budget: eight texts of 1,024 tokens in memory (113 MB each: q, k, v, no
# weights), or twenty-five of 370 tokens; a text past half of it keeps q, k, v in files and two
# layers in memory (attn.spill: ≈ 100 MB for a chapter of 8,192 tokens) (docs/deploy.md)
ANALYSIS_MB = 1000


def _analysis_bytes(raw: str | None) -> int:
    """``ATLAS_ANALYSIS_MB``: a finite number of megabytes > 0 (1,000 when unset), × 2**20 bytes."""
    if not raw:
        return ANALYSIS_MB * 2**20
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not (math.isfinite(mb) and mb * 2**20 >= 1):  # nan or inf would fail later, far from their cause
        raise SettingError("ATLAS_ANALYSIS_MB", raw, "a number of megabytes above 0, e.g. 500")
    return int(mb * 2**20)


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    model_id: str  # "gemma", "tiny", or a model folder's absolute path (ATLAS_MODEL=<folder>)
    device: str | None  # None: CUDA when present, else CPU
    max_tokens: int | None  # None: the device's budget
    public_url: str | None  # e.g. http://192.0.2.10:8501 (None: the browser's own address)
    analysis_bytes: int = ANALYSIS_MB * 2**20  # the analyses' byte budget
    flex_warmup: bool = True  # compile FlexAttention in the background once the server is idle
    live_max_n: int | None = None  # the live benchmark's largest n (None: the device's own)
    store_path: Path | None = None  # the SQLite store's file
    database_url: str | None = None  # PostgreSQL instead of the SQLite file
    torch_threads: int | None = None  # None: torch's own choice (every core)
    room_worker: bool = True  # measure the texts sent to classes' rooms in the background
    build_ahead: bool = True  # build a reader's long text's other pages in the background
    join_burst: int = 120  # students joining at once from one client address (server.limits.joins)
    max_classes: int = 500  # live classes the server holds at once (server.classes)
    models: tuple[str, ...] = ()  # the models the sidebar offers, ATLAS_MODEL's first (ATLAS_MODELS)
    ipv6_prefix: int = 64  # one client's IPv6 prefix in every per-client bound (server.limits.key)
    ipv6_site_prefix: int = 48  # the wider prefix whose clients share SITE_FACTOR bounds (0: none)
    start_key: str | None = None  # the passphrase Start a class asks for (None: anyone may start)


OFF = ("0", "off", "no", "false")  # what turns a switch off


def read() -> Settings:
    """The settings as the environment says now (tests change it between calls);
    :class:`SettingError` for a value that does not fit."""
    env = os.environ
    if env.get("ATLAS_CACHE_DIR"):
        cache = Path(env["ATLAS_CACHE_DIR"]).expanduser()
    else:
        cache = Path(env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "attention-atlas"
    first = model_id_of(env.get("ATLAS_MODEL", ""))
    return Settings(cache_dir=cache, model_id=first, device=env.get("ATLAS_DEVICE") or None,
                    max_tokens=_max_tokens(env.get("ATLAS_MAX_TOKENS")),
                    public_url=(env.get("ATLAS_PUBLIC_URL") or "").rstrip("/") or None,
                    analysis_bytes=_analysis_bytes(env.get("ATLAS_ANALYSIS_MB")),
                    flex_warmup=(env.get("ATLAS_FLEX_WARMUP") or "1").strip().lower() not in OFF,
                    live_max_n=_live_max_n(env.get("ATLAS_LIVE_MAX_N")),
                    store_path=Path(env["ATLAS_STORE_PATH"]).expanduser() if env.get("ATLAS_STORE_PATH")
                    else cache / "shared-views.sqlite3",
                    database_url=_database_url(env.get("ATLAS_DATABASE_URL")),
                    torch_threads=_threads(env.get("ATLAS_TORCH_THREADS")),
                    room_worker=(env.get("ATLAS_ROOM_WORKER") or "1").strip().lower() not in OFF,
                    build_ahead=(env.get("ATLAS_BUILD_AHEAD") or "1").strip().lower() not in OFF,
                    join_burst=_join_burst(env.get("ATLAS_JOIN_BURST")),
                    max_classes=_whole(env.get("ATLAS_MAX_CLASSES"), "ATLAS_MAX_CLASSES", 500,
                                       "a whole number of classes, at least 1"),
                    models=_models(first, env.get("ATLAS_MODELS", "")),
                    **_prefixes(env.get("ATLAS_IPV6_PREFIX"), env.get("ATLAS_IPV6_SITE_PREFIX")),
                    start_key=env.get("ATLAS_START_KEY") or None)


def _prefixes(raw: str | None, raw_site: str | None) -> dict:
    """``ATLAS_IPV6_PREFIX`` (1–128, default 64) and ``ATLAS_IPV6_SITE_PREFIX`` (0, or
    1 up to the first, default 48 — or the first, when that is shorter)."""
    def whole(raw, name, low, high, default, expected):
        if raw is None or not raw.strip():
            return default
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if not low <= value <= high:
            raise SettingError(name, raw, expected)
        return value

    prefix = whole(raw, "ATLAS_IPV6_PREFIX", 1, 128, 64, "a prefix length from 1 to 128, e.g. 64")
    site = whole(raw_site, "ATLAS_IPV6_SITE_PREFIX", 0, prefix, min(48, prefix),
                 f"0 (no wider bucket) or a prefix length from 1 to ATLAS_IPV6_PREFIX ({prefix}), e.g. 48")
    return {"ipv6_prefix": prefix, "ipv6_site_prefix": site}


def _models(first: str, raw: str) -> tuple[str, ...]:
    """ATLAS_MODEL's model, then ATLAS_MODELS' (comma-separated), each once."""
    out = [first]
    for part in raw.split(","):
        if part.strip() and (model := model_id_of(part)) not in out:
            out.append(model)
    return tuple(out)


def model_id_of(raw: str) -> str:
    """``ATLAS_MODEL``'s model: ``"gemma"`` (unset, empty or ``gemma``), ``"tiny"``, or
    the folder's absolute path (whether it serves is the app's to find out and say)."""
    raw = raw.strip()
    if raw.lower() in ("", "gemma"):
        return "gemma"
    if raw.lower() == "tiny":
        return "tiny"
    return str(Path(raw).expanduser().resolve())


def _join_burst(raw: str | None) -> int:
    return _whole(raw, "ATLAS_JOIN_BURST", 120, "a whole number of students, at least 1")


def _whole(raw: str | None, name: str, default: int, expected: str) -> int:
    """A whole number of at least 1 (``default`` when unset or blank)."""
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingError(name, raw, expected) from None
    if value < 1:
        raise SettingError(name, raw, expected)
    return value


def _database_url(raw: str | None) -> str | None:
    """``ATLAS_DATABASE_URL``: a ``postgresql://`` (or ``postgres://``) URL; None when unset."""
    raw = (raw or "").strip()
    if not raw:
        return None
    if not raw.startswith(("postgresql://", "postgres://")):
        raise SettingError("ATLAS_DATABASE_URL", hide_password(raw),
                           "a PostgreSQL URL, e.g. postgresql://atlas@db.example:5432/atlas")
    return raw


def hide_password(url: str) -> str:
    """A URL as it may be shown or logged: its password replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<not a URL>"
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _threads(raw: str | None) -> int | None:
    """``ATLAS_TORCH_THREADS``: a whole number ≥ 1; None when unset."""
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingError("ATLAS_TORCH_THREADS", raw, "a whole number of threads, at least 1")
    return value
