"""Words and numbers: each language writes numbers as CLDR says it does, and uses one
term per concept (the glossary lists the variants to avoid)."""

import math

import pytest
from babel import numbers

from ui import i18n

CLDR = {"en": "en", "pt": "pt_BR", "ja": "ja"}


@pytest.mark.parametrize("lang", list(CLDR))
def test_separators_are_cldrs_decimal_and_group_symbols(lang):
    dec, group = numbers.get_decimal_symbol(CLDR[lang]), numbers.get_group_symbol(CLDR[lang])
    assert i18n.plotly_separators(lang) == dec + group
    assert i18n.fmt_float(1234567.891, lang) == f"1{group}234{group}567{dec}89"
    assert i18n.fmt_int(1024, lang) == f"1{group}024"


@pytest.mark.parametrize("lang", list(CLDR))
def test_percentages_follow_cldr_with_the_same_digits_as_before(lang):
    # CLDR's own rendering of 93.0 % with one decimal, for this locale
    expected = numbers.format_percent(0.93, "#,##0.0%", locale=CLDR[lang])
    assert i18n.fmt_pct(0.93, lang) == expected
    assert i18n.fmt_pct(0.5, lang, 0) == numbers.format_percent(0.5, locale=CLDR[lang])
    assert " %" not in i18n.fmt_pct(0.93, lang)


def test_english_portuguese_and_japanese_percentages_read_as_each_language_writes_them():
    assert i18n.fmt_pct(0.93, "en") == "93.0%"
    assert i18n.fmt_pct(0.93, "pt") == "93,0%"
    assert i18n.fmt_pct(0.93, "ja") == "93.0%"
    assert i18n.fmt_pct(0.0525, "pt", 2) == "5,25%"


@pytest.mark.parametrize("lang", list(CLDR))
def test_digits_round_like_python_and_never_show_minus_zero(lang):
    dec = numbers.get_decimal_symbol(CLDR[lang])
    for x, digits in [(2.675, 2), (0.125, 2), (0.935, 1), (1 / 3, 3), (-0.001, 2), (7.0, 0)]:
        assert i18n.fmt_float(x, lang, digits) == f"{x:.{digits}f}".replace(".", dec).replace("-0" + dec + "00", "0" + dec + "00")
    assert i18n.fmt_float(-0.001, lang) == f"0{dec}00"
    assert i18n.fmt_float(-1.5, lang, 1) == f"-1{dec}5"


@pytest.mark.parametrize("lang", list(CLDR))
def test_missing_numbers_show_a_dash(lang):
    for f in (i18n.fmt_float, i18n.fmt_pct, i18n.fmt_int, i18n.fmt_sci):
        assert f(None, lang) == "—"
        assert f(math.nan, lang) == "—"
    assert i18n.fmt_sci(math.inf, lang) == "—"


@pytest.mark.parametrize("lang", list(CLDR))
def test_scientific_style_keeps_working(lang):
    dec = numbers.get_decimal_symbol(CLDR[lang])
    assert i18n.fmt_sci(1.234e-7, lang) == f"1{dec}2 × 10⁻⁷"
    assert i18n.fmt_sci(-4.56e5, lang) == f"-4{dec}6 × 10⁵"
    assert i18n.fmt_sci(0.0123, lang) == f"0{dec}012"
    assert i18n.fmt_sci(0, lang) == "0"
    assert i18n.Translator(lang).ratio(3.456) == f"3{dec}46×"
