"""Every setting read from the environment, in one place.

* ``ATLAS_CACHE_DIR``: where the converted model lives (else
  ``$XDG_CACHE_HOME/attention-atlas``, else ``~/.cache/attention-atlas``);
* ``ATLAS_MODEL=tiny``: the tiny random-weight model instead of Gemma-3-270m;
* ``ATLAS_DEVICE``: force a device (``cpu``, ``cuda``);
* ``ATLAS_MAX_TOKENS``: tokens analysed at most (else the device's budget);
* ``ATLAS_ANALYSIS_MB``: memory the analyses of texts may hold together (default 700
  MB; the least recently used text is dropped first);
* ``ATLAS_PUBLIC_URL``: the address a class reaches the app at, for share links and
  their QR code (else the address the reader's browser used).

The Hugging Face libraries are put offline here too, before anything imports them:
the app never downloads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


def go_offline() -> None:
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)


go_offline()


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    model_kind: str  # "gemma" or "tiny"
    device: str | None  # None: CUDA when present, else CPU
    max_tokens: int | None  # None: the device's budget
    public_url: str | None  # e.g. http://192.0.2.10:8501 (None: the browser's own address)
    analysis_bytes: int = 700 * 2**20  # the analyses' byte budget


def read() -> Settings:
    """The settings as the environment says now (tests change it between calls)."""
    env = os.environ
    if env.get("ATLAS_CACHE_DIR"):
        cache = Path(env["ATLAS_CACHE_DIR"]).expanduser()
    else:
        cache = Path(env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "attention-atlas"
    kind = "tiny" if env.get("ATLAS_MODEL", "").lower() == "tiny" else "gemma"
    tokens = env.get("ATLAS_MAX_TOKENS")
    return Settings(cache_dir=cache, model_kind=kind, device=env.get("ATLAS_DEVICE") or None,
                    max_tokens=int(tokens) if tokens else None,
                    public_url=(env.get("ATLAS_PUBLIC_URL") or "").rstrip("/") or None,
                    analysis_bytes=int(float(env.get("ATLAS_ANALYSIS_MB") or 700) * 2**20))
