"""A setting's widget, drawn from its row of the setting table: its kind, its range or
options on this text, its value kept across pages, its options named by the text's
tokens or the model's layers and heads; the layer and head pickers; a reader's own
change recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from . import keys, measures, page_run, served_model, session, setting_table
from . import tap_strip
from .i18n import Translator
from .setting_rows import AVERAGE, Dims, Setting
from .step_parts import head_label, layer_label

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
    page_run.drawing(key)
    where = where or st
    kw = dict(key=key, persist_state=KEEP, on_change=changed_by_reader, args=(key,), **extra)
    if row.takes == "bool":
        return where.toggle(label, **kw)
    if row.takes == "text":
        return where.text_input(label, max_chars=row.chars, **kw)
    options = span(key, a)
    if row.takes == "int":
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


def place(key: str, a, ctx=None) -> Any:
    """Before drawing key's widget: its value in session state, put there by the app —
    the kept one when its widget takes it on this text, else its row's default (a value
    that came with a link and is dropped is said, ``session.forget_setting``). Through
    session state, so the browser is sent it: a widget left to its own default keeps
    whatever the browser last held, and a token picker's browser holds the last text's
    names, which match nothing here and come back as a stale label on the next click.
    The kept value is written again when the widget's range changed with the text: a
    slider with other bounds is another widget to Streamlit (its id holds them), which
    would otherwise start at its minimum. (Written on every run, it would send the value
    of a run under way back over a slider the reader is still moving.) Returns the value."""
    if key in st.session_state:
        value = setting_table.kept(key, st.session_state[key], a)
        if value is not None:
            row = setting_table.row(key)
            bounds = row.bounds(Dims.of(a)) if row.takes == "int" else None
            ranges = st.session_state.setdefault(keys.RANGES, {})
            if value != st.session_state[key] or ranges.get(key, bounds) != bounds:
                st.session_state[key] = value
            ranges[key] = bounds
            if row.tokens:
                relabel(key, a)
            return st.session_state[key]
    session.forget_setting(key)
    if ctx is None:
        ctx = measures.setting_context(session.current_text(), served_model.model_id())
    st.session_state[key] = setting_table.default(key, a, ctx)
    row = setting_table.row(key)
    if row.takes == "int":
        st.session_state.setdefault(keys.RANGES, {})[key] = row.bounds(Dims.of(a))
    if setting_table.row(key).tokens:
        st.session_state.setdefault(keys.LABELLED, {})[key] = hash(tuple(a.tokens))
    return st.session_state[key]


def follow_tapped(chart: str, key: str, strip_curve: int, n: int, factor: int) -> None:
    """on_select of a grid with a tappable row strip (``tap_strip.added``): a tap on the
    strip makes that row's token setting ``key``'s value, as the reader's own change. Given
    its arguments by ``functools.partial`` (small numbers: a callback kept in the reader's
    session must never hold the page's analysis)."""
    points = st.session_state[chart]["selection"]["points"]
    found = [x for x in (tap_strip.token_of(p, strip_curve, n, factor) for p in points) if x is not None]
    if found:
        chosen_by_reader(key, found[0])


def changed_by_reader(key: str) -> None:
    """on_change of every setting's widget (and the text): the reader's own change, which
    Streamlit reports only for a value the browser sent, never for one the app set. A
    following student's own change takes them out of the class's lead (ui.classroom).

    A value a timed fragment's tick brought is put back instead (``page_run.stale``)."""
    if page_run.stale(key):
        return
    st.session_state.setdefault(keys.CHANGED, set()).add(key)


def chosen_by_reader(key: str, value) -> None:
    """A setting the reader chose by another control than its widget (a preset, a tap):
    their own change, never taken for a stale one."""
    page_run.set_by_reader(key, value)
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
    return row.bounds(d) if row.takes == "int" else list(row.choices(d))


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
    byte budget (docs/deploy.md)."""
    return {option: label(option) for option in options}.__getitem__


def layer_labels(t: Translator, a) -> Callable[[int], str]:
    """``format_func`` for a layer picker: each layer with its own window (see ``labels``)."""
    return labels(range(a.n_layers), lambda i: layer_label(t, a, i))


def token_labels(a) -> Callable[[int], str]:
    """``format_func`` for a token picker: position and token (see ``labels``)."""
    return labels(range(a.n), lambda i: f"{i} · {a.tokens[i]}")
