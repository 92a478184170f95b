"""What every page draws besides its settings: a figure (shared by every reader, built once
per what it depends on; scaled for a projector), a table of numbers, a formula in the
reader's words, a piece of the reader's text placed in our Markdown as written, notes
and errors."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import streamlit as st

from . import figures, keys, session
from .i18n import Translator

# a metric's delta that is a reference beside the value (the full attention's cost, the
# equal weights' error), not a change: no colour and no arrow
REFERENCE = {"delta_color": "off", "delta_arrow": "off"}

def formula(t: Translator, latex: str, caption: str | None = None) -> None:
    """A formula; ``@word`` inside it becomes ``formula.word`` in the reader's language. The
    caption may name the formula's terms as inline formulas, ``$o_{\\text{@exact}}$``,
    worded the same way."""
    st.latex(re.sub(r"@([a-z_]+)", lambda m: t(f"formula.{m.group(1)}"), latex))
    if caption:
        st.caption(re.sub(r"\\text\{@([a-z_]+)\}", lambda m: r"\text{" + t(f"formula.{m.group(1)}") + "}", caption))


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


def downsample_note(t: Translator, factor: int, n: int, largest: bool = False, window: int | None = None) -> None:
    """Under a pooled grid: how many cells a square stands for — their mean, or with
    ``largest`` their largest weight — and, with a ``window``, that the cells a layer sliding
    it never computes are left blank."""
    if factor > 1:
        said = [t("common.downsampled_max" if largest else "common.downsampled", f=factor, n=t.int(n))]
        if window is not None and window < n:
            said.append(t("common.downsampled_beyond", w=t.int(window)))
        st.caption(t.sentences(said))


def show_figure(fig, key: str | None = None, on_select=None) -> None:
    """A figure with the chart's own camera button (a print-friendly PNG named after the
    chart and language). Figures are shared between readers: presenter mode styles a copy.
    ``on_select``: a callback run when the reader taps a point (its selection is in
    ``st.session_state[key]``)."""
    if session.presenter():  # readable from the back of a room: chart text scaled with the page's
        fig = go.Figure(fig.to_dict() if isinstance(fig, figures.FrozenFigure) else fig)  # a room chart: a dict only
        fig.update_layout(font={"size": 18}, title_font={"size": 24})
        fig.update_xaxes(tickfont={"size": 16}, title_font={"size": 18})  # the token axes set their own 10 px
        fig.update_yaxes(tickfont={"size": 16}, title_font={"size": 18})
    name = f"attention-atlas-{st.session_state.get(keys.LANG, 'en')}-{key or 'chart'}"
    chosen = {} if on_select is None else {"on_select": on_select, "selection_mode": "points"}
    st.plotly_chart(fig, width="stretch", key=key, config={
        "displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}}, **chosen)


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
