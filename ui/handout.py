"""The handout: one self-contained HTML file of the seven steps, for the reader's text
and settings, in the reader's language — to print or keep, and to open offline.

Each step brings what its summary says of it (ui.summaries: the page's own code): its
explanation, main figure, key numbers, settings, and the reader's prediction with the
measured answer; a step that runs something on a button (``Step.measured``: the model
re-run, the live benchmark) adds it only where it was run. Plotly's
JavaScript is embedded once; nothing is fetched. The reader's text and token labels
are escaped, never markup; our own explanations are Markdown rendered with raw HTML
turned off.
"""

from __future__ import annotations

import datetime
import functools
import html
import re
from collections.abc import Callable

import plotly.offline
from babel.dates import format_datetime
from markdown_it import MarkdownIt

from . import glossary, keys, measures, served_model, setting_table, walk, summaries
from .classroom import vote_results
from .i18n import Translator
from .step_parts import Step, Summary, verdict

TEXT_SHOWN = 4_000  # characters of the reader's text printed at the top (the analysis may read more)
_MD = MarkdownIt("commonmark", {"html": False})
CSS = """
body { font-family: system-ui, "Noto Sans", "IPAGothic", sans-serif; max-width: 980px; margin: 2rem auto;
       padding: 0 1rem; color: #1f2328; line-height: 1.55; }
h1 { font-size: 2rem; margin-bottom: .2rem; }
h2 { font-size: 1.45rem; margin-top: 2.6rem; border-top: 2px solid #d0d7de; padding-top: 1rem; }
.made, .note { color: #4f5660; font-size: .92rem; }
pre.text { white-space: pre-wrap; background: #f6f8fa; padding: .8rem; border-radius: 6px; font-size: .9rem; }
table { border-collapse: collapse; margin: .6rem 0; }
td, th { border: 1px solid #d0d7de; padding: .25rem .6rem; text-align: left; vertical-align: top; }
.numbers td:last-child { font-weight: 600; font-variant-numeric: tabular-nums; }
.predict { border: 1px solid #d0d7de; border-radius: 6px; padding: .2rem 1rem; margin: .8rem 0; }
.figure { page-break-inside: avoid; }
@media print { h2 { page-break-before: always; } }
"""


@functools.cache
def _plotly_js() -> str:
    return plotly.offline.get_plotlyjs()


def _md(text: str) -> str:
    """Our own Markdown (locale text, never the reader's) as HTML; raw HTML stays text."""
    return _MD.render(re.sub(r":material/[a-z_]+:", "", text))


def _rows(pairs: list[tuple[str, str]], css: str = "") -> str:
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in pairs)
    return f'<table class="{css}">{body}</table>'


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """The text without NUL and the other control characters (a line break and a tab
    stay): a handout is a file a browser and a printer read, and they show these as
    boxes or drop the rest of the line."""
    return _CONTROL.sub("", text)


def _figure(fig) -> str:
    div = fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})
    return f'<div class="figure">{div}</div>'


def build(t: Translator, a, text: str, model_id: str, kept: dict, *, device: str, model: str,
          when: datetime.datetime | None = None, progress: Callable[[float], None] | None = None,
          class_results: list | None = None) -> str:
    """The handout as one HTML document.

    ``kept``: the reader's settings and guesses, keyed as the pages' widgets are (those
    that do not fit the text fall back to the page's defaults). Each step's measured runs
    (``Step.measured``) come from what this server has run."""
    when = when or datetime.datetime.now(datetime.UTC)
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), kept)
    text = printable(text)
    shown = text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN] + " …"
    out = [
        f'<h1>{html.escape(t("app.name"))} — {html.escape(t("handout.title"))}</h1>',
        '<p class="made">' + html.escape(t("handout.made", date=format_datetime(when, "medium", locale=t.lang) + " UTC",
                                                 device=device, model=model)) + "</p>",
        f'<h3>{html.escape(t("handout.text_heading"))}</h3>',
        f'<pre class="text">{html.escape(shown)}</pre>',
        '<p class="note">' + html.escape(t("handout.text_note", n=t.int(a.n), chars=t.int(len(text)))) + "</p>",
    ]
    steps = walk.steps()
    for i, step in enumerate(steps):
        sm = summaries.build(step, t, a if step.needs_text else None, text if step.needs_text else "",
                             model_id, summaries.inputs(step, cfg), **summaries.extra(step))
        out.append(f'<h2 id="{html.escape(step.id)}">'
                   f'{html.escape(t("common.step_of", step=walk.number(step), total=len(steps)))} · '
                   f'{html.escape(t(step.title_key))}</h2>')
        out.append(_md(t(f"{step.key}.lead")))
        out.append(_section(t, sm, cfg))
        out.append(_figure(sm.figure))
        out.append(_md(t(f"{step.key}.outro")) if t.has(f"{step.key}.outro") else "")
        out.extend(_measured(t, step, a, text, model_id, cfg))
        if progress:
            progress((i + 1) / (len(steps) + 1))
    if class_results:  # a teacher's live class: what the room answered, question by question
        out.append(f'<h2>{html.escape(t("vote.results_heading"))}</h2>')
        head = (t("vote.col_step"), t("vote.col_first"), t("vote.col_second"), t("vote.col_matched"))
        out.append('<table class="numbers"><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
                   + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                             for row in class_results) + "</table>")
    out.append(f'<h2>{html.escape(t("closing.glossary"))}</h2>')
    out.append(_rows([(g[t.lang]["term"], g[t.lang]["meaning"]) for g in glossary.entries()]))
    out.append('<p class="note">' + html.escape(served_model.credits(t)) + "</p>")
    if progress:
        progress(1.0)
    return ("<!DOCTYPE html>\n"
            f'<html lang="{html.escape(t.lang)}"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{html.escape(t("app.name"))} — {html.escape(t("handout.title"))}</title>'
            f"<style>{CSS}</style><script>{_plotly_js()}</script></head><body>"
            + "\n".join(out) + "</body></html>")


def _section(t: Translator, sm: Summary, cfg: dict) -> str:
    """A step's settings, its key numbers, and each of its questions with the reader's
    guess (``cfg``: every setting, the guesses by question id among them) and the answer."""
    out = (f'<h3>{html.escape(t("handout.settings"))}</h3>' + _rows(sm.params)
           + f'<h3>{html.escape(t("handout.numbers"))}</h3>' + _rows(sm.key, "numbers"))
    for q in sm.questions:
        guess = cfg.get(keys.guess(q.id))
        if guess is not None and guess not in q.options:
            guess = None  # a guess made on another text or setting: not this question's
        said = t("handout.guess", guess=q.label(guess)) if guess is not None else t("handout.no_guess")
        out += ('<div class="predict">' + _md(f"**{t('predict.heading')}** · {q.text}") + _md(said)
                + _md(verdict(t, q, guess)) + "</div>")
    return out


def _measured(t: Translator, step: Step, a, text: str, model_id: str, cfg: dict) -> list[str]:
    """What a step ran on a button, where it was run on this server (its heading and
    figures), or the note that says it was not."""
    if step.measured is None:
        return []
    got = step.measured(t, a, text, model_id, cfg)
    if isinstance(got, str):
        return ['<p class="note">' + html.escape(t(got)) + "</p>"]
    heading, figs = got
    return [f"<h3>{html.escape(t(heading))}</h3>", *(_figure(f) for f in figs)]


def offer(t: Translator, locked: bool = False):
    """In the sidebar: a button that asks for the handout. Returns the place its
    progress bar and download go when pressed (else None): app.py builds it there
    with ``build_into`` once the page has drawn its widgets, whose values it reads.
    ``locked``: a student while their class votes (the handout holds every answer)."""
    import streamlit as st

    if not st.button(t("handout.button"), icon=":material/description:", width="stretch",
                     help=t("vote.locked") if locked else t("handout.button_help"), key="handout_build",
                     disabled=locked):
        return None
    return st.container()


def build_into(slot, t: Translator) -> None:
    """Build the handout (with a progress bar) in ``slot``, then offer its download. The
    file is not kept: it is built again on the next click."""
    with slot:
        _build_and_offer(t)


def _build_and_offer(t: Translator) -> None:
    import streamlit as st

    from . import analyses, served_model, session

    text, model_id = session.current_text(), served_model.model_id()
    if not text.strip():
        st.info(t("handout.need_text"))
        return
    bar = st.progress(0.0, text=t("handout.building"))
    served_model.ensure_model()
    a = analyses.get_analysis(text, model_id)
    if a.n < 3:
        bar.empty()
        st.info(t("common.too_short", n=a.n))
        return
    # every step's settings and guesses (each widget keeps its value for the session)
    kept = {k: st.session_state[k] for k in setting_table.KEYS if k in st.session_state}
    total = len(walk.steps()) + 1

    def progress(fraction: float) -> None:
        bar.progress(fraction, text=t("handout.building_step", done=round(fraction * total), total=total))

    try:
        page = analyses.in_line("handout", lambda: build(
            t, a, text, model_id, kept, device=served_model.device_line(), model=served_model.model_line(t),
            progress=progress, class_results=vote_results.results(t)))
    finally:
        bar.empty()  # a failed build leaves no bar behind
    st.download_button(t("handout.download"), page.encode("utf-8"), file_name=f"attention-atlas-{t.lang}.html",
                       mime="text/html", icon=":material/download:", on_click="ignore", type="primary",
                       width="stretch", key="handout_download")
