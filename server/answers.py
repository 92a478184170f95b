"""What a student may send to a class, checked before anything is kept: their anonymous
id, an option's number, a written reason (plain text on one line), an estimate (a number,
right within ESTIMATE_FACTOR of the measured value). No Streamlit, no SQL."""

from __future__ import annotations

import math
import re
import secrets
import unicodedata

from babel.numbers import NumberFormatError, parse_decimal

MAX_OPTIONS = 12
MAX_REASON = 200  # characters of a student's written reason
# an estimate (a number asked for instead of an option) within this factor of the measured
# value counts as right; its vote's two options, in this order: off by more, within
ESTIMATE_FACTOR = 1.5
ESTIMATE_OPTIONS = ("off", "within")
MAX_ESTIMATE = 1e15  # the largest number an estimate may be (the app's counts stay far below)


def new_student() -> str:
    """An anonymous student id (in the student's address, so a reload keeps it)."""
    return secrets.token_urlsafe(12)


def estimate_choice(number, value: float) -> int | None:
    """An estimate's option: 1 when ``number`` lies within ESTIMATE_FACTOR of the measured
    ``value`` (either way), else 0; None when it is no finite number in (0, MAX_ESTIMATE]."""
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None
    number = float(number)
    if not (math.isfinite(number) and 0 < number <= MAX_ESTIMATE):
        return None
    return int(value / ESTIMATE_FACTOR <= number <= value * ESTIMATE_FACTOR)


def clean_reason(value) -> str | None:
    """A student's reason as kept: plain text on one line (line breaks and other control
    characters become spaces, runs of spaces one), at most MAX_REASON characters; None
    when it is no text or longer."""
    if not isinstance(value, str):
        return None
    text = " ".join("".join(" " if unicodedata.category(c)[0] == "C" else c for c in value).split())
    return text if len(text) <= MAX_REASON else None


def is_student(value) -> bool:
    return isinstance(value, str) and 8 <= len(value) <= 32 and all(c.isalnum() or c in "-_" for c in value)


NUMBER_LOCALES = {"en": "en_US", "pt": "pt_BR", "ja": "ja_JP"}  # how each language writes a number
SCIENTIFIC = re.compile(r"[0-9]+(\.[0-9]+)?[eE][+-]?[0-9]+")  # 1e6, 2.5E-3: read the same in every language


def read_number(text, lang: str) -> float | None:
    """An estimate as a reader of ``lang`` writes it: grouping and decimal marks of that
    language ("1,5" and "2.098.176" in Portuguese, "1.5" and "2,098,176" in English),
    full-width digits and marks (「１．５」), spaces ignored, or the scientific 1e6. None
    when it is no such number, or none in (0, MAX_ESTIMATE]."""
    if not isinstance(text, str):
        return None
    plain = "".join(unicodedata.normalize("NFKC", text).split())  # full-width → ASCII; no spaces
    plain = plain.replace("、", ",").replace("。", ".")
    if not plain:
        return None
    if SCIENTIFIC.fullmatch(plain):
        value = float(plain)
    else:
        try:
            value = float(parse_decimal(plain, locale=NUMBER_LOCALES.get(lang, "en_US"), strict=True))
        except (NumberFormatError, ValueError, ArithmeticError):
            return None
    return value if math.isfinite(value) and 0 < value <= MAX_ESTIMATE else None
