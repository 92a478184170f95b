"""The project's words, held after the native-teacher reviews (ja-pt-review-4): Japanese says
生徒 for the class's students and ソフトマックス in prose; Portuguese calls a round of voting
a «votação» (a «voto» is one ballot) and never says "por extenso" or "atenção própria"."""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _flat(node, where=""):
    """Every string in a nested JSON value, by its dotted path (list items by index)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _flat(v, f"{where}.{k}" if where else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _flat(v, f"{where}[{i}]")
    elif isinstance(node, str):
        yield where, node


def _strings(lang: str) -> dict[str, str]:
    """The locale's strings, and the glossary's entries in that language, by key."""
    locale = json.loads((ROOT / "locales" / f"{lang}.json").read_text(encoding="utf-8"))
    glossary = json.loads((ROOT / "assets" / "glossary.json").read_text(encoding="utf-8"))
    texts = dict(_flat(locale))
    texts.update((f"glossary: {entry[lang]['term']}.{k}", v)
                 for entry in glossary for k, v in _flat(entry[lang]))
    return texts


CODE = re.compile(r"`[^`]*`|\$[^$]*\$")  # code spans and formulas may name torch's softmax


def test_japanese_says_seito_for_students():
    bad = sorted(k for k, v in _strings("ja").items() if "学生" in v)
    assert not bad, f"学生 where the project says 生徒: {bad}"


def test_japanese_prose_says_sofutomakkusu():
    bad = sorted(k for k, v in _strings("ja").items() if re.search("softmax", CODE.sub("", v), re.IGNORECASE))
    assert not bad, f"'softmax' in ja prose where the project says ソフトマックス: {bad}"


def test_portuguese_calls_a_round_of_voting_a_votacao():
    voto = re.compile(r"\b(primeiro voto|segundo voto|no voto)\b", re.IGNORECASE)
    bad = sorted(k for k, v in _strings("pt").items() if voto.search(v))
    assert not bad, f"'voto' for a round, where the project says 'votação' (1ª votação): {bad}"


def test_portuguese_never_says_por_extenso_nor_atencao_propria():
    bad = sorted(k for k, v in _strings("pt").items() if re.search("por extenso|atenção própria", v, re.IGNORECASE))
    assert not bad, f"'por extenso' / 'atenção própria' (say 'passo a passo', 'atenção do próprio modelo'): {bad}"
