"""The sample texts, one per language (written for this app), as a plain module:
the pages, the tests and the benchmarks read them without Streamlit."""

from __future__ import annotations

from .i18n import LANGS, ROOT

SAMPLES = {lang: (ROOT / "assets" / f"sample_{lang}.txt") for lang in LANGS}


def sample_text(lang: str) -> str:
    return SAMPLES[lang].read_text(encoding="utf-8").strip()
