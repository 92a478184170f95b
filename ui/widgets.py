"""Widgets and layout pieces every page shares."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from . import figures, keys, measures, served_model, session, setting_table
from .i18n import ROOT, Translator
from .setting_rows import AVERAGE, Dims, Setting
from .step_parts import Step, head_label, layer_label


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
        for i, entry in enumerate(glossary()):
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
    entries = glossary()
    st.markdown("\n".join(f"- **{entries[i][t.lang]['term']}** — {entries[i][t.lang]['meaning']}" for i in used))


# a metric's delta that is a reference beside the value (the full attention's cost, the
# equal weights' error), not a change: no colour and no arrow
REFERENCE = {"delta_color": "off", "delta_arrow": "off"}

KEEP = "session"  # every setting's widget keeps its value across pages (persist_state)


def setting(t: Translator, key: str, a, label: str, *, where=None, ctx=None,
            names: Callable[[Any], str] | None = None, **extra):
    """Draw the widget of setting ``key`` from its row of ui.setting_table — the kind of
    widget, its range or options on this text, its value (``place``), kept across pages
    (persist_state) — and return its value. ``names``: each option's label, where the row
    does not name them itself (tokens, layers, heads); ``where``: a container (the
    sidebar, a column); ``extra``: what only this page's widget says (help, horizontal).
    A change the reader makes in it is recorded (``changed_by_reader``); a value the app
    puts there is not."""
    row = setting_table.row(key)
    place(key, a, ctx)
    where = where or st
    kw = dict(key=key, persist_state=KEEP, on_change=changed_by_reader, args=(key,), **extra)
    if row.kind == "bool":
        return where.toggle(label, **kw)
    if row.kind == "text":
        return where.text_input(label, max_chars=row.chars, **kw)
    options = span(key, a)
    if row.kind == "int":
        draw = where.number_input if row.widget == "number" else where.slider
        return draw(label, *options, **kw)
    kw["format_func"] = option_names(t, row, a, options, names)
    if row.widget == "pills":
        return where.pills(label, options, selection_mode="multi", **kw)
    draw = {"select_slider": where.select_slider, "selectbox": where.selectbox, "radio": where.radio,
            "multiselect": where.multiselect}[row.widget]
    return draw(label, options, **kw) if row.widget != "select_slider" else draw(label, options=options, **kw)


def option_names(t: Translator, row: Setting, a, options, names) -> Callable[[Any], str]:
    """A choice's ``format_func``: the page's ``names``, else what the row's options are
    (tokens, layers, heads), else the options as written."""
    if names is not None:
        return labels(options, names)
    if row.names == "token":
        return token_labels(a)
    if row.names == "layer":
        return layer_labels(t, a)
    if row.names == "head":
        return labels(options, lambda h: head_label(t, None if h == AVERAGE else h))
    return labels(options, str)


def place(key: str, a, ctx=None) -> None:
    """Before drawing key's widget: its value in session state, put there by the app —
    the kept one when its widget takes it on this text, else its row's default (a value
    that came with a link and is dropped is said, ``session.forget_setting``). Through
    session state, so the browser is sent it: a widget left to its own default keeps
    whatever the browser last held, and a token picker's browser holds the last text's
    names, which match nothing here and come back as a stale label on the next click."""
    if key in st.session_state and setting_table.fits(key, st.session_state[key], a):
        if setting_table.row(key).tokens:
            relabel(key, a)
        return
    session.forget_setting(key)
    if ctx is None:
        ctx = measures.setting_context(session.current_text(), served_model.model_id())
    st.session_state[key] = setting_table.default(key, a, ctx)
    if setting_table.row(key).tokens:
        st.session_state.setdefault(keys.LABELLED, {})[key] = hash(tuple(a.tokens))


def changed_by_reader(key: str) -> None:
    """on_change of every setting's widget (and the text): the reader's own change, which
    Streamlit reports only for a value the browser sent, never for one the app set. A
    following student's own change takes them out of the class's lead (ui.classroom)."""
    st.session_state.setdefault(keys.CHANGED, set()).add(key)


def relabel(key: str, a) -> None:
    """A widget whose options are named by the text's tokens (a token picker, hubs),
    on a new text: its value goes back through session state, so that the browser
    shows it under the new tokens' names. (Streamlit keeps a keyed widget across a
    change of its options; the browser would hold the old text's names and send them
    back on the next click, where they match nothing and the widget falls back to its
    default — a shared link then carried the default, not what the reader saw.)"""
    labelled = st.session_state.setdefault(keys.LABELLED, {})
    text = hash(tuple(a.tokens))
    if labelled.get(key) != text:
        if key in st.session_state and labelled.get(key) is not None:
            value = st.session_state[key]
            st.session_state[key] = list(value) if isinstance(value, (list, tuple)) else value
        labelled[key] = text


def span(key: str, a):
    """The values key's widget takes on this text: ``(lo, hi)`` for a number, else the
    list of its options (its row of ui.setting_table)."""
    row, d = setting_table.row(key), Dims.of(a)
    return row.bounds(d) if row.kind == "int" else list(row.choices(d))


def formula(t: Translator, latex: str, caption: str | None = None) -> None:
    """A formula; ``@word`` inside it becomes ``formula.word`` in the reader's language. The
    caption may name the formula's terms as inline formulas, ``$o_{\\text{@exact}}$``,
    worded the same way."""
    st.latex(re.sub(r"@([a-z_]+)", lambda m: t(f"formula.{m.group(1)}"), latex))
    if caption:
        st.caption(re.sub(r"\\text\{@([a-z_]+)\}", lambda m: r"\text{" + t(f"formula.{m.group(1)}") + "}", caption))


def layer_head_picker(t: Translator, a, key: str):
    """In the sidebar: which layer and head this page shows (``{key}_layer`` and
    ``{key}_head``, rows of ui.setting_table). Returns (layer, head); head is None for
    the average over heads."""
    folded = session.presenter()  # on a projector the pickers fold away with the other controls
    with st.sidebar.expander(t("common.shown")) if folded else st.sidebar:
        if not folded:
            st.markdown(f"**{t('common.shown')}**")
        layer = setting(t, f"{key}_layer", a, t("common.layer"))
        head = setting(t, f"{key}_head", a, t("common.head"))
    return layer, (None if head == AVERAGE else int(head))


def labels(options, label: Callable[[Any], str]) -> Callable[[Any], str]:
    """A widget's ``format_func``: every option's label made now, looked up later.
    Streamlit keeps a widget's ``format_func`` in the reader's session for as long as
    the session lives (and two minutes after the tab closes), so it must hold strings
    only: a lambda that closes over the analysis, or one defined in a page (whose
    globals hold the analysis), keeps each reader's analysis alive past the cache's
    byte budget — thirty own texts held ≈ 2 GB that way (docs/deploy.md)."""
    return {option: label(option) for option in options}.__getitem__


def layer_labels(t: Translator, a) -> Callable[[int], str]:
    """``format_func`` for a layer picker: each layer with its own window (see ``labels``)."""
    return labels(range(a.n_layers), lambda i: layer_label(t, a, i))


def token_labels(a) -> Callable[[int], str]:
    """``format_func`` for a token picker: position and token (see ``labels``)."""
    return labels(range(a.n), lambda i: f"{i} · {a.tokens[i]}")


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|$~&])")


def literal(text: str) -> str:
    """A piece of the reader's text (a token) placed inside our Markdown, shown as
    written: every character Markdown or its formulas could read (``*``, ``_``, ``[``,
    a backquote, ``$``...) escaped with a backslash, line breaks as spaces."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\n", " ").replace("\r", " "))


def tex_int(t: Translator, x: int) -> str:
    """A whole number inside a formula as the page's metrics write it (1,024 / 1.024), its
    grouping mark braced so that TeX does not space it as punctuation."""
    return t.int(x).replace(",", "{,}").replace(".", "{.}")


def downsample_note(t: Translator, factor: int, n: int) -> None:
    if factor > 1:
        st.caption(t("common.downsampled", f=factor, n=n))


def show_figure(fig, key: str | None = None) -> None:
    """A figure with the chart's own camera button (a print-friendly PNG named after the
    chart and language). Figures are shared between readers: presenter mode styles a copy."""
    if session.presenter():  # readable from the back of a room: chart text scaled with the page's
        fig = go.Figure(fig.to_dict() if isinstance(fig, figures.FrozenFigure) else fig)  # a room chart: a dict only
        fig.update_layout(font={"size": 18}, title_font={"size": 24})
        fig.update_xaxes(tickfont={"size": 16}, title_font={"size": 18})  # the token axes set their own 10 px
        fig.update_yaxes(tickfont={"size": 16}, title_font={"size": 18})
    name = f"attention-atlas-{st.session_state.get(keys.LANG, 'en')}-{key or 'chart'}"
    st.plotly_chart(fig, width="stretch", key=key, config={
        "displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}})


FIGURES = 256  # figures kept for every reader, besides the steps' summaries


@st.cache_resource(max_entries=FIGURES, show_spinner=False)
def _built(key: str, deps: tuple, _build):
    return figures.frozen(_build())


def figure_once(key: str, deps: tuple, build):
    """What ``build()`` makes (a figure, or several), built once per ``deps`` (everything
    it depends on: the text, the settings...) and language, and shared by every reader."""
    return _built(key, (st.session_state.get(keys.LANG, "en"),) + tuple(deps), build)


def chart(key: str, deps: tuple, build) -> None:
    """Show a shared figure (see ``figure_once``)."""
    show_figure(figure_once(key, deps, build), key=key)


def data_table(rows) -> None:
    """A table of numbers: scrollable and sortable on a screen; in presenter mode a static
    table whose type grows with the page's (an interactive grid draws its own small type)."""
    if session.presenter():
        st.table(rows, hide_index=True)
    else:
        st.dataframe(rows, hide_index=True, width="stretch")


def error_box(t: Translator, key: str = "common.bad_setting", **kwargs) -> None:
    """A clear, translated message instead of a traceback."""
    st.error(t(key, **kwargs))


@functools.cache
def glossary() -> list:
    """The glossary's entries: per language, a term and its meaning."""
    return json.loads((ROOT / "assets" / "glossary.json").read_text(encoding="utf-8"))


@functools.cache
def _glossary_arrow(lang: str):
    """The glossary of one language as an Arrow table, built once: the sidebar draws it
    on every run, and turning a dict into Arrow each time was a tenth of a class's load."""
    import pyarrow as pa

    t = Translator(lang)
    return pa.table({t("closing.col_term"): [g[lang]["term"] for g in glossary()],
                     t("closing.col_meaning"): [g[lang]["meaning"] for g in glossary()]})


def glossary_table(t: Translator) -> None:
    """The glossary in the reader's language: a static table, so long meanings wrap (its
    texts are ours, never the reader's)."""
    st.table(_glossary_arrow(t.lang), hide_index=True)
