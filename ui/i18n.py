"""Locale lookup and number formatting: the one place for both.

Strings live in ``locales/<lang>.json`` (same keys in every file, grouped by
page). English is the fallback. Numbers follow the language through Babel's CLDR
data (``en``, ``pt_BR``, ``ja``): ``0,93``, ``1.024`` and ``93,0%`` in Portuguese,
``0.93``, ``1,024`` and ``93.0%`` in English and Japanese.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import string
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from babel import Locale, numbers

ROOT = Path(__file__).resolve().parent.parent
LOCALES = ROOT / "locales"
LANGS = {"ja": "日本語", "pt": "Português", "en": "English"}
DEFAULT = "en"
LIST_SEPARATOR = {"ja": "、"}  # between the items of a list (", " otherwise)
NUMBER_SEPARATOR = {"ja": "、"}  # between numbers that hold grouping commas (" · " otherwise: "512 · 1,024")
SENTENCE_SEPARATOR = {"ja": ""}  # between sentences (" " otherwise)


def _flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@functools.cache
def strings(lang: str) -> dict[str, str]:
    """All strings of a language, flat ``{"every_pair.title": ...}``."""
    return _flatten(json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8")))


def translate(lang: str, key: str, **kwargs) -> str:
    """A string of ``lang`` with its fields filled. A field may choose its words by the
    count it holds, as CLDR's plural rules for the language say (``{g:one=# hub|other=#
    hubs}``; ``zero=`` for a count of 0 written apart; ``#`` is the count as given): never
    "hub(s)"."""
    lang = lang if lang in LANGS else DEFAULT
    text = strings(lang).get(key)
    if text is None:
        text = strings(DEFAULT).get(key, key)
    return _Fields(lang).format(text, **kwargs) if kwargs else text


class _Fields(string.Formatter):
    """str.format, with plural choices (see ``translate``)."""

    def __init__(self, lang: str):
        self.lang = lang

    def format_field(self, value, spec: str) -> str:
        if "=" not in spec:
            return super().format_field(value, spec)
        forms = dict(part.split("=", 1) for part in spec.split("|"))
        n = count_of(value)
        words = forms["zero"] if n == 0 and "zero" in forms else forms.get(plural_category(n, self.lang),
                                                                              forms["other"])
        return words.replace("#", str(value))


def count_of(value) -> int:
    """The whole number a field holds: an int, or one written with the language's
    grouping (``1,024``, ``1.024``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    digits = "".join(ch for ch in str(value) if ch.isdigit())
    if not digits or any(not (ch.isdigit() or ch in ",. \u00a0\u202f") for ch in str(value)):
        raise ValueError(f"a plural needs a whole number, not {value!r}")
    return int(digits)


def plural_category(n: int, lang: str) -> str:
    """CLDR's plural category of ``n`` in our language (pt: Brazilian, 0 and 1 are "one")."""
    return _locale(lang).plural_form(abs(n))


def detect_language(query_value: str | None, browser_locale: str | None) -> str:
    """``?lang=`` first, then the browser's locale when it is one of ours, else English."""
    for candidate in (query_value, browser_locale):
        if candidate:
            code = str(candidate).strip().lower().replace("_", "-").split("-")[0]
            if code in LANGS:
                return code
    return DEFAULT


# --- numbers -----------------------------------------------------------------
# Babel's CLDR data decides the symbols and where they go (en: 93.0%, pt_BR: 93,0%,
# ja: 93.0%); we decide only how many digits. Rounding happens here, on the exact
# binary value, half to even — the digits ``f"{x:.2f}"`` gives — so Babel only lays out.

CLDR = {"en": "en", "pt": "pt_BR", "ja": "ja"}  # our language → the CLDR locale it writes numbers in
NONE = "—"  # what a missing or non-finite number shows


@functools.cache
def _locale(lang: str) -> Locale:
    return Locale.parse(CLDR.get(lang, CLDR[DEFAULT]))


# (decimal, thousands) per language, read from CLDR; Plotly's separators and the tests use it.
_SEPARATORS = {lang: (numbers.get_decimal_symbol(code), numbers.get_group_symbol(code)) for lang, code in CLDR.items()}


@functools.cache
def _pattern(lang: str, percent: bool, digits: int) -> numbers.NumberPattern:
    """The locale's own decimal or percent pattern, with exactly ``digits`` decimals."""
    loc = _locale(lang)
    pattern = copy.copy((loc.percent_formats if percent else loc.decimal_formats)[None])
    pattern.frac_prec = (digits, digits)
    return pattern


def _missing(x) -> bool:
    try:
        return x is None or not math.isfinite(x)
    except TypeError:
        return False


def _rounded(x, digits: int) -> Decimal:
    """x rounded to ``digits`` decimals, half to even on its exact value; never ``-0``."""
    d = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_EVEN)
    return abs(d) if d == 0 else d


def fmt_int(x, lang: str) -> str:
    if _missing(x):
        return NONE
    return _pattern(lang, False, 0).apply(Decimal(int(round(x))), _locale(lang))


def fmt_float(x, lang: str, digits: int = 2) -> str:
    if _missing(x):
        return NONE
    return _pattern(lang, False, digits).apply(_rounded(float(x), digits), _locale(lang))


def fmt_pct(x, lang: str, digits: int = 1) -> str:
    """A share (0.93) as a percentage in the language's own style: "93.0%", "93,0%"."""
    if _missing(x):
        return NONE
    hundredths = _rounded(100 * float(x), digits)  # the same digits as formatting 100·x
    return _pattern(lang, True, digits).apply(hundredths.scaleb(-2), _locale(lang))


def fmt_sci(x, lang: str, digits: int = 1) -> str:
    """1.2 × 10⁻⁷ style, for errors at rounding level."""
    if _missing(x):
        return NONE
    if x == 0:
        return "0"
    exp = int(math.floor(math.log10(abs(x))))
    if -3 <= exp <= 3:
        return fmt_float(x, lang, max(digits, -exp + digits))
    mant = x / 10**exp
    sup = str(exp).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{fmt_float(mant, lang, digits)} × 10{sup}"


def fmt_ratio(x, lang: str) -> str:
    """A ratio as the language writes it: "3.46×", 「3.46 倍」 (``common.ratio``)."""
    return translate(lang, "common.ratio", x=fmt_float(x, lang, 2))


def plotly_separators(lang: str) -> str:
    """Plotly's ``layout.separators``: CLDR's decimal symbol, then its group symbol."""
    dec, thou = _SEPARATORS.get(lang, _SEPARATORS[DEFAULT])
    return dec + thou


class Translator:
    """Bound to one language: ``tr("every_pair.title")``, ``tr.int(1024)`` …"""

    def __init__(self, lang: str):
        self.lang = lang if lang in LANGS else DEFAULT

    def __call__(self, key: str, **kwargs) -> str:
        return translate(self.lang, key, **kwargs)

    def has(self, key: str) -> bool:
        return key in strings(self.lang)

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

    def list(self, items) -> str:
        """Items of a list as the language writes them: 「a、b、c」 in Japanese, "a, b, and c"
        in English, "a, b e c" in Portuguese (the conjunction is ``common.and``)."""
        items = [str(x) for x in items]
        if self.lang in LIST_SEPARATOR or len(items) < 2:
            return LIST_SEPARATOR.get(self.lang, ", ").join(items)
        last = f" {self('common.and')} {items[-1]}"
        if len(items) == 2:
            return items[0] + last
        return ", ".join(items[:-1]) + ("," if self.lang == "en" else "") + last  # English's serial comma

    def numbers(self, items) -> str:
        """Numbers one after another, never run into their own grouping marks."""
        return NUMBER_SEPARATOR.get(self.lang, " · ").join(items)

    def sentences(self, items) -> str:
        """Sentences one after another: Japanese puts no space after 。."""
        return SENTENCE_SEPARATOR.get(self.lang, " ").join(items)

    @property
    def separators(self) -> str:
        return plotly_separators(self.lang)
