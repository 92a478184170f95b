"""The sample texts, a short one and a long one (a whole chapter, over 8,000 tokens) per
language, written for this app, as a plain module: the pages, the tests and the
benchmarks read them without Streamlit."""

from __future__ import annotations

from .i18n import LANGS, ROOT

SAMPLES = {lang: (ROOT / "assets" / f"sample_{lang}.txt") for lang in LANGS}


LONG_SAMPLES = {lang: (ROOT / "assets" / f"long_{lang}.txt") for lang in LANGS}


def sample_text(lang: str) -> str:
    return SAMPLES[lang].read_text(encoding="utf-8").strip()


def long_text(lang: str) -> str:
    """The language's long sample: a chapter of its own, read whole by the analysis."""
    return LONG_SAMPLES[lang].read_text(encoding="utf-8").strip()
