"""Locale lookup and number formatting: the one place for both.

Strings live in ``locales/<lang>.json`` (same keys in every file, grouped by
page). English is the fallback. Numbers follow the language: ``0,93`` and
``1.024`` in Portuguese, ``0.93`` and ``1,024`` in English and Japanese.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALES = ROOT / "locales"
LANGS = {"ja": "日本語", "pt": "Português", "en": "English"}
DEFAULT = "en"
_SEPARATORS = {"en": (".", ","), "ja": (".", ","), "pt": (",", ".")}  # (decimal, thousands)


def _flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@functools.lru_cache(maxsize=None)
def strings(lang: str) -> dict[str, str]:
    """All strings of a language, flat ``{"step1.title": ...}``."""
    return _flatten(json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8")))


def translate(lang: str, key: str, **kwargs) -> str:
    table = strings(lang if lang in LANGS else DEFAULT)
    text = table.get(key)
    if text is None:
        text = strings(DEFAULT).get(key, key)
    return text.format(**kwargs) if kwargs else text


def detect_language(query_value: str | None, browser_locale: str | None) -> str:
    """``?lang=`` first, then the browser's locale when it is one of ours, else English."""
    for candidate in (query_value, browser_locale):
        if candidate:
            code = str(candidate).strip().lower().replace("_", "-").split("-")[0]
            if code in LANGS:
                return code
    return DEFAULT


# --- numbers -----------------------------------------------------------------


def _group(digits: str, sep: str) -> str:
    out = []
    while len(digits) > 3:
        out.insert(0, digits[-3:])
        digits = digits[:-3]
    out.insert(0, digits)
    return sep.join(out)


def fmt_int(x, lang: str) -> str:
    dec, thou = _SEPARATORS.get(lang, _SEPARATORS[DEFAULT])
    x = int(round(x))
    sign = "-" if x < 0 else ""
    return sign + _group(str(abs(x)), thou)


def fmt_float(x, lang: str, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    dec, thou = _SEPARATORS.get(lang, _SEPARATORS[DEFAULT])
    text = f"{abs(x):.{digits}f}"
    whole, _, frac = text.partition(".")
    sign = "-" if x < 0 and float(text) != 0 else ""
    return sign + _group(whole, thou) + (dec + frac if frac else "")


def fmt_pct(x, lang: str, digits: int = 1) -> str:
    return fmt_float(100 * x, lang, digits) + " %"


def fmt_sci(x, lang: str, digits: int = 1) -> str:
    """1.2 × 10⁻⁷ style, for errors at rounding level."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return "—"
    exp = int(math.floor(math.log10(abs(x))))
    if -3 <= exp <= 3:
        return fmt_float(x, lang, max(digits, -exp + digits))
    mant = x / 10**exp
    sup = str(exp).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{fmt_float(mant, lang, digits)} × 10{sup}"


def fmt_ratio(x, lang: str) -> str:
    return fmt_float(x, lang, 2) + "×"


def plotly_separators(lang: str) -> str:
    """Plotly's ``layout.separators``: decimal then thousands."""
    dec, thou = _SEPARATORS.get(lang, _SEPARATORS[DEFAULT])
    return dec + thou


class Translator:
    """Bound to one language: ``tr("step1.title")``, ``tr.int(1024)`` …"""

    def __init__(self, lang: str):
        self.lang = lang if lang in LANGS else DEFAULT

    def __call__(self, key: str, **kwargs) -> str:
        return translate(self.lang, key, **kwargs)

    def int(self, x) -> str:
        return fmt_int(x, self.lang)

    def float(self, x, digits: int = 2) -> str:
        return fmt_float(x, self.lang, digits)

    def pct(self, x, digits: int = 1) -> str:
        return fmt_pct(x, self.lang, digits)

    def sci(self, x, digits: int = 1) -> str:
        return fmt_sci(x, self.lang, digits)

    def ratio(self, x) -> str:
        return fmt_ratio(x, self.lang)

    @property
    def separators(self) -> str:
        return plotly_separators(self.lang)
