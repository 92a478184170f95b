"""Each step's summary, built once per text, language and settings and shared by every
reader (each step's package says how: pages.<step>.summary): the page, the handout,
a class's votes and the summaries a class builds ahead all read it from here."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import streamlit as st
from plotly.utils import PlotlyJSONEncoder

from . import figures, glossary, measures, setting_table
from . import walk
from .i18n import LANGS, Translator
from .setting_rows import AVERAGE
from .step_parts import Question, Step, Summary


def build(step: Step, t: Translator, a, text: str, model_id: str, cfg: dict, **inputs) -> Summary:
    """A step's summary, built here (uncached: ``get`` shares one), its questions named by
    the ids the step declares — as many as it declares, or a ValueError."""
    made = step.summary(t, a, text, model_id, cfg, **inputs)
    if len(step.questions) != len(made.questions):
        raise ValueError(f"{step.id} declares {len(step.questions)} questions and its summary asks "
                         f"{len(made.questions)}")
    for qid, q in zip(step.questions, made.questions):
        q.id = qid
    return made


def question(sm: Summary, qid: str) -> Question:
    """The question ``qid`` of a summary."""
    found = next((q for q in sm.questions if q.id == qid), None)
    if found is None:
        raise KeyError(f"{sm.step} asks no question {qid!r}")
    return found


def matched(step: Step, mid: str):
    """The step's matched question ``mid`` (ui.step_parts.Matched), or None."""
    return next((m for m in step.matched if m.id == mid), None)


def estimate(step: Step, eid: str):
    """The step's estimate question ``eid`` (ui.step_parts.Estimate), or None."""
    return next((e for e in step.estimates if e.id == eid), None)


def asked(step: Step, qid: str, t: Translator, a, text: str, model_id: str, cfg: dict) -> Question:
    """The question ``qid`` of a step — one of its own, a matched one or an estimate — on the
    text and the page's whole settings ``cfg``, in ``t``'s language: a matched question by
    its own builder, or by the step's summary on the other settings it names; an estimate by
    its own builder, or as the question it comes from, its measured answer the number."""
    e = estimate(step, qid)
    if e is not None:
        q = e.ask(t, a, text, model_id, cfg) if e.ask is not None else asked(step, e.of, t, a, text, model_id, cfg)
        return dataclasses.replace(q, id=qid, options=[], form="estimate")
    m = matched(step, qid)
    if m is not None and m.ask is not None:
        q = m.ask(t, a, text, model_id, cfg)
    else:
        base = m.of if m is not None else qid
        cfg = m.change(a, dict(cfg)) if m is not None else cfg
        q = question(get(step, t, a, text, model_id, inputs(step, cfg), **extra(step)), base)
    return dataclasses.replace(q, id=qid)


SUMMARIES = 64  # summaries kept for every reader (a step's figure of 372 tokens is ≈ 1–2 MB)


def _frozen(cfg: dict) -> tuple:
    """The settings as a cache key; a set of positions (hubs) in one order whatever the
    order it was picked or defaulted in."""
    def one(k, v):
        if k in setting_table.ROWS and setting_table.row(k).takes == "many":
            return tuple(sorted(v))
        return tuple(v) if isinstance(v, list) else v

    return tuple(sorted((k, one(k, v)) for k, v in cfg.items()))


BUILT: Counter = Counter()  # summaries built by this process, by step id (the cache's misses)


@st.cache_resource(max_entries=SUMMARIES, show_spinner=False)
def _cached_summary(step_id: str, lang: str, text: str, model_id: str, cfg: tuple, live: tuple, _a, _inputs):
    BUILT[step_id] += 1
    made = build(walk.get(step_id), Translator(lang), _a, text, model_id, dict(cfg), **_inputs)
    made.figure, made.measured = figures.frozen(made.figure), figures.frozen(made.measured)
    return made


def get(step: Step, t: Translator, a, text: str, model_id: str, cfg: dict, **inputs) -> Summary:
    """A step's summary, built once per text, language, settings and inputs (step 7's live
    run: ``step.inputs``) and shared by every reader (read-only: a page that changes a
    figure copies it first)."""
    if set(cfg) != set(step.summary_from):  # one list of them: the step's declaration
        raise ValueError(f"{step.id}'s summary is built from {step.summary_from}, given {tuple(cfg)}")
    live = _inputs_key(inputs)
    cfg = {k: (v if v is not None else AVERAGE) if k.endswith("_head") else v for k, v in cfg.items()}
    return _cached_summary(step.id, t.lang, text, model_id, _frozen(cfg), live, a, inputs)


def _inputs_key(inputs: dict) -> tuple:
    """What a step's extra inputs are, as a cache key (a live run by its sizes and times)."""
    rows = inputs.get("live_rows")
    return (inputs.get("live_last"), tuple(r.seconds for r in rows)) if rows else ()


def inputs(step: Step, cfg: dict) -> dict:
    """The settings a step's summary is built from (its declaration's ``summary_from``),
    taken from ``cfg``: the page gives the same ones, so that it finds what was built."""
    return {k: cfg[k] for k in step.summary_from}


def extra(step: Step) -> dict:
    """What else a step's summary reads (``step.inputs``: step 7's live run), as its page
    reads it now."""
    return step.inputs() if step.inputs else {}


def build_all(a, text: str, model_id: str, settings: dict, langs=LANGS, stop=lambda: False,
              pause=lambda: None, only=None, ahead: bool = True) -> int:
    """Every step's summary for this text and these settings (each page's defaults where
    a setting is not given or does not fit), in every language, into the cache the pages
    read — with no reader's session: the language is given. A step's extra inputs are
    those its page would read now (``step.inputs``); its other measures are built too
    (``step.ahead``). Returns how many were built here (0
    when all were built already); ``stop()`` true ends it early; ``pause()`` is called
    before each piece (the start's build waits there while a visitor's page runs); ``only``:
    these steps alone; ``ahead``: the steps' other measures too."""
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), settings or {})
    made = 0
    for step in walk.steps() if only is None else only:
        for lang in langs:
            pause()
            if stop():
                return made
            before = BUILT[step.id]
            if step.needs_text:
                get(step, Translator(lang), a, text, model_id, inputs(step, cfg), **extra(step))
            else:
                get(step, Translator(lang), None, "", model_id, inputs(step, cfg), **extra(step))
            made += BUILT[step.id] - before
        if ahead and step.ahead is not None and step.needs_text:
            pause()
            if stop():
                return made
            step.ahead(a, text, model_id, cfg)  # the page's other measures: language-free, built once
    return made


def first_view(a, text: str, model_id: str, lang: str) -> dict:
    """Step 1 on this text at its default settings, as ``ui.first_view`` saves it for the next
    start to show before its model: the words above its numbers, its key numbers and its figure
    (a dict in JSON's types), in ``lang`` — from the summary the page reads."""
    step, t = walk.home(), Translator(lang)
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), {})
    sm = get(step, t, a, text, model_id, inputs(step, cfg), **extra(step))
    lead = step.lead_key(t, both_ways=not a.causal)
    prose = glossary.linked_prose(lang, tuple(step.prose_keys()))[0]
    return {"step_of": t("common.step_of", step=walk.number(step), total=len(walk.steps())),
            "title": t(step.title_key), "lead": prose.get(lead, t(lead)), "key": [list(x) for x in sm.key],
            "figure": json.loads(json.dumps(sm.figure.to_dict(), cls=PlotlyJSONEncoder))}
