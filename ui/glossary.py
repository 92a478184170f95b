"""The glossary: its entries (assets/glossary.json) as a table in the reader's language, and
each step's prose with the first use of each term linked to the page's "terms on this
page" section, which lists those terms with their meanings."""

from __future__ import annotations

import functools
import json
import re

import streamlit as st

from .i18n import ROOT, Translator
from .step_parts import Step

# --- glossary terms, linked where a page first uses them -------------------------------

TERMS_ANCHOR = "terms"  # the id of each step's "terms on this page" heading




def _split_links(text: str) -> list[tuple[str, bool]]:
    """The text in pieces, each marked whether it may take a link (not inside an existing
    link, inline code or a formula)."""
    pieces, last = [], 0
    for m in re.finditer(r"\[[^\]]*\]\([^)]*\)|`[^`]*`|\$[^$]*\$", text):
        pieces += [(text[last:m.start()], True), (m.group(0), False)]
        last = m.end()
    return pieces + [(text[last:], True)]


@functools.cache
def linked_prose(lang: str, prose: tuple[str, ...]) -> tuple[dict[str, str], tuple[int, ...]]:
    """Each prose text of a step (``prose``: its locale keys, in the order its page draws
    them: Step.prose_keys) with the first use of each glossary term linked to the page's
    terms section, and the glossary entries so linked (text by text, in glossary order).
    A term is found by its forms (``forms`` in the glossary): in Japanese as written, in
    English and Portuguese at the start of a word, taking the rest of the word along
    ("token" links "tokens")."""
    t = Translator(lang)
    used: list[int] = []
    out = {}
    for key in prose:
        if not t.has(key):
            continue
        text = t(key)
        for i, entry in enumerate(entries()):
            if i in used:
                continue
            for form in entry[lang]["forms"]:
                pattern = re.escape(form) if lang == "ja" else r"(?<![\w])" + re.escape(form) + r"\w*"
                pieces = _split_links(text)
                for k, (piece, free) in enumerate(pieces):
                    m = re.search(pattern, piece, flags=0 if lang == "ja" else re.IGNORECASE) if free else None
                    if m:
                        start, end = m.start(), m.end()
                        if piece[start - 2:start] == "**" and piece[end:end + 2] == "**":
                            # the bold goes inside the link: "**[ハブ](#…)**は" cannot close its
                            # bold in CommonMark (")" then a letter), "[**ハブ**](#…)は" can
                            start, end = start - 2, end + 2
                        pieces[k] = (piece[:start] + f"[{piece[start:end]}](#{TERMS_ANCHOR})" + piece[end:], False)
                        used.append(i)
                        break
                if i in used:
                    text = "".join(p for p, _ in pieces)
                    break
        out[key] = text
    return out, tuple(used)


def prose(t: Translator, step: Step, key: str) -> None:
    """One of a step's texts, its first uses of glossary terms linked to the terms section."""
    st.markdown(linked_prose(t.lang, tuple(step.prose_keys()))[0].get(key, t(key)))


def terms_footer(t: Translator, step: Step) -> None:
    """The glossary entries a step's prose links to, with their meanings."""
    used = linked_prose(t.lang, tuple(step.prose_keys()))[1]
    if not used:
        return
    st.subheader(t("glossary.on_page"), anchor=TERMS_ANCHOR, divider="gray")
    found = entries()
    st.markdown("\n".join(f"- **{found[i][t.lang]['term']}** — {found[i][t.lang]['meaning']}" for i in used))


@functools.cache
def entries() -> list:
    """The glossary's entries: per language, a term and its meaning."""
    return json.loads((ROOT / "assets" / "glossary.json").read_text(encoding="utf-8"))


@functools.cache
def _glossary_arrow(lang: str):
    """The glossary of one language as an Arrow table, built once: the sidebar draws it
    on every run."""
    import pyarrow as pa

    t = Translator(lang)
    return pa.table({t("closing.col_term"): [g[lang]["term"] for g in entries()],
                     t("closing.col_meaning"): [g[lang]["meaning"] for g in entries()]})


def glossary_table(t: Translator) -> None:
    """The glossary in the reader's language: a static table, so long meanings wrap (its
    texts are ours, never the reader's)."""
    st.table(_glossary_arrow(t.lang), hide_index=True)
