"""Widgets and layout pieces every page shares."""

from __future__ import annotations

import functools
import json
import math
import re

import streamlit as st

from . import state
from .i18n import ROOT, Translator
from .steps import N_STEPS, PAGES

AVERAGE = "avg"
DEFAULT_LAYER = 8  # a sliding layer whose local band and sink read clearly on the sample texts


def step_nav(t: Translator, number: int) -> None:
    """Previous / next with "3 / 7" between them, drawn before anything that may stop
    the page. PageUp / PageDown, what presentation clickers send, press them
    (Streamlit's shortcuts leave keys typed in the text area alone)."""
    i = next(k for k, p in enumerate(PAGES) if p.number == number)
    prev = PAGES[i - 1] if i > 0 else None
    nxt = PAGES[i + 1] if i + 1 < len(PAGES) else None
    c1, c2, c3 = st.columns([1, 2, 1], vertical_alignment="center")
    go = None
    if c1.button(t("nav.prev"), key="nav_prev", shortcut="PageUp", disabled=prev is None, width="stretch",
                 icon=":material/arrow_back:", help=t("nav.keys_help")):
        go = prev
    if PAGES[i].is_step:
        c2.markdown(t("nav.position", step=number, total=N_STEPS), text_alignment="center")
    if c3.button(t("nav.next"), key="nav_next", shortcut="PageDown", disabled=nxt is None, width="stretch",
                 icon=":material/arrow_forward:", icon_position="right", help=t("nav.keys_help")):
        go = nxt
    if go is not None:
        st.switch_page(go.path, query_params=dict(st.query_params))


def step_header(t: Translator, step: int) -> None:
    step_nav(t, step)
    if step <= N_STEPS:
        st.caption(t("common.step_of", step=step, total=N_STEPS))
    st.title(t(f"step{step}.title"))
    st.markdown(t(f"step{step}.lead"))


def open_step(step: int):
    """A step page's header, then the analysis of the reader's text: returns
    ``(translator, analysis)``, or stops the page after saying why there is none."""
    t = state.tr()
    step_header(t, step)
    a = state.analysis_or_message()
    if a is None:
        st.stop()
    return t, a


def fit(key: str, *, options=None, lo=None, hi=None) -> None:
    """Before drawing a widget: drop a remembered value it could not take (not among its
    options, or outside lo..hi), so the widget starts from its default instead of failing."""
    if key not in st.session_state:
        return
    value = st.session_state[key]
    values = value if isinstance(value, (list, tuple)) else [value]
    if options is not None:
        ok = all(v in options for v in values)
    else:
        ok = all(isinstance(v, (int, float)) and lo <= v <= hi for v in values)
    if not ok:
        state.forget_setting(key)


def formula(t: Translator, latex: str, caption: str | None = None) -> None:
    """A formula; ``@word`` inside it becomes ``formula.word`` in the reader's language."""
    st.latex(re.sub(r"@([a-z_]+)", lambda m: t(f"formula.{m.group(1)}"), latex))
    if caption:
        st.caption(caption)


def layer_label(t: Translator, a, layer: int) -> str:
    kind = a.layer_types[layer]
    if kind == "sliding":
        return t("common.layer_sliding", layer=layer, w=t.int(a.sliding_window))
    return t("common.layer_full", layer=layer)


def layer_head_picker(t: Translator, a, key: str, allow_average: bool = True, default_layer: int = DEFAULT_LAYER):
    """In the sidebar: which layer and head this page shows. Returns (layer, head);
    head is None for the average over heads."""
    heads = ([AVERAGE] if allow_average else []) + list(range(a.n_heads))
    fit(f"{key}_layer", options=range(a.n_layers))
    fit(f"{key}_head", options=heads)
    folded = state.presenter()  # on a projector the pickers fold away with the other controls
    with st.sidebar.expander(t("common.shown")) if folded else st.sidebar:
        if not folded:
            st.markdown(f"**{t('common.shown')}**")
        layer = st.selectbox(t("common.layer"), list(range(a.n_layers)), index=min(default_layer, a.n_layers - 1),
                             format_func=lambda i: layer_label(t, a, i), key=f"{key}_layer")
        head = st.selectbox(t("common.head"), heads, key=f"{key}_head",
                            format_func=lambda h: t("common.head_average") if h == AVERAGE else t("common.head_n", h=h))
    return layer, (None if head == AVERAGE else int(head))


def head_caption(t: Translator, a, layer: int, head) -> str:
    who = t("common.head_average") if head is None else t("common.head_n", h=head)
    return f"{layer_label(t, a, layer)} · {who}"


def token_option(a, i: int) -> str:
    return f"{i} · {a.tokens[i]}"


def downsample_note(t: Translator, factor: int, n: int) -> None:
    if factor > 1:
        st.caption(t("common.downsampled", f=factor, n=n))


def show_figure(fig, key: str | None = None) -> None:
    if state.presenter():  # readable from the back of a room: chart text scaled with the page's
        fig.update_layout(font={"size": 18}, title_font={"size": 24})
    # the chart's own camera button: a print-friendly PNG named after the chart and language
    name = f"attention-atlas-{st.session_state.get('lang', 'en')}-{key or 'chart'}"
    st.plotly_chart(fig, width="stretch", key=key, config={
        "displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}})


BASE_CSS = """
<style>
/* WCAG AA: Streamlit's faded grey (#767c83, 4.2:1 on white) is too light for captions and
   key hints on a projector; this grey reads 7.3:1 on white and 6.7:1 on the sidebar. */
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p,
.stApp kbd, .stApp [data-testid="stWidgetLabel"] small { color: #4f5660; opacity: 1; }
/* formulas never scroll (a scrolling region without anything to focus is out of reach
   of the keyboard) */
.stApp .katex-display { overflow: visible; }
</style>
"""


def base_style() -> None:
    """Our fixed CSS for every page: contrast that passes WCAG AA."""
    st.html(BASE_CSS)


PRESENTER_CSS = """
<style>
.stApp [data-testid="stMarkdownContainer"], .stApp [data-testid="stMarkdownContainer"] p,
.stApp [data-testid="stMarkdownContainer"] li, .stApp [data-testid="stWidgetLabel"] p,
.stApp [data-testid="stMetricLabel"] p, .stApp label, .stApp label p { font-size: 24px; }
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p { font-size: 22px; }
.stApp [data-testid="stMetricValue"], .stApp [data-testid="stMetricValue"] *,
.stApp [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p { font-size: 3.6rem; line-height: 1.2; }
.stApp h1 { font-size: 3.4rem; }
.stApp h2, .stApp h3 { font-size: 2.2rem; }
</style>
"""


def presenter_style() -> None:
    """Presenter mode's type sizes: body text at least 22 px, each key number large.
    (Our own fixed CSS; no reader text goes into it.)"""
    st.html(PRESENTER_CSS)


def error_box(t: Translator, key: str = "common.bad_setting", **kwargs) -> None:
    """A clear, translated message instead of a traceback."""
    st.error(t(key, **kwargs))


@functools.cache
def _glossary() -> list:
    return json.loads((ROOT / "assets" / "glossary.json").read_text(encoding="utf-8"))


def glossary_table(t: Translator) -> None:
    """The glossary in the reader's language: a static table, so long meanings wrap (its
    texts are ours, never the reader's)."""
    st.table({t("closing.col_term"): [g[t.lang]["term"] for g in _glossary()],
              t("closing.col_meaning"): [g[t.lang]["meaning"] for g in _glossary()]}, hide_index=True)


def nearest_option(options: list, answer):
    """The option that counts as right: the answer itself among categories, else the
    number nearest to it on a log scale (so 3.6 is nearer 4 than 2, 9 nearer 10 than 2)."""
    if not all(isinstance(o, (int, float)) for o in options):
        return answer

    def log(x):
        return math.log(max(float(x), 1e-12))

    return min(options, key=lambda o: abs(log(o) - log(answer)))


def predict(t: Translator, step: int, question: str, options: list, answer, *, label, value_text: str,
            note: str | None = None) -> None:
    """Predict, then reveal: a question whose answer the page measures. The reader picks
    an option or none; the answer is the page's own number. In presenter mode it waits
    for the reveal button; otherwise nothing is hidden."""
    right = nearest_option(options, answer)
    with st.container(border=True):
        st.markdown(f"**{t('predict.heading')}** · {question}")
        guess = st.radio(t("predict.pick"), options, index=None, horizontal=True, format_func=label,
                         key=f"p{step}_guess")
        revealed = f"p{step}_revealed"
        if state.presenter() and not st.session_state.get(revealed):
            if not st.button(t("predict.reveal"), key=f"p{step}_reveal", icon=":material/visibility:"):
                return
            st.session_state[revealed] = True
        said = [t("predict.answer", value=value_text)]
        if guess is not None:
            said.append(t("predict.right") if guess == right else t("predict.wrong", nearest=label(right)))
        if note:
            said.append(note)
        st.markdown(" ".join(said))
