"""A page of the walk, opened and closed the same way on every step: its navigation, title
and lead; in a live class with a vote on the step whose answer is not revealed yet, the
question and the class's answers alone (the page stops there: its numbers would answer
it); the analysis of the reader's text (or why there is none); a slot for its questions,
filled once its numbers are known; its room charts; its glossary terms at the end. The
class's gate is asked for here, so the widgets every page shares (ui.widgets) know nothing
of a class, and the steps' own packages know nothing of the walk around them."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attn import settings

from . import analyses, drawing, glossary, keys, page_run, prebuild, served_model, session, summaries, walk, widgets
from .classroom import gate, membership, room_charts, votes
from .i18n import Translator
from .step_parts import Question, Step, Summary, verdict


@functools.lru_cache(maxsize=32)
def _page_made(path: str, title: str, url_path: str, icon: str, default: bool) -> st.Page:
    return st.Page(path, title=title, url_path=url_path, icon=icon, default=default)


def nav_pages(t: Translator) -> list:
    """The walk's pages for st.navigation in the reader's language. Each st.Page is made
    once per process and title (making one resolves its file's path: a file-system call per
    folder, each giving up the interpreter lock, 16 % of a following student's page run
    among a hundred), and each run gets its own copy: st.navigation marks the page it
    returns as callable once, so one object shared by two readers' runs would refuse one."""
    home = walk.home()
    made = _page_made if get_script_run_ctx() is not None else _page_made.__wrapped__  # outside a run: not kept
    return [copy.copy(made(p.page, walk.nav_title(t, p), p.id, p.icon, p.id == home.id)) for p in walk.pages()]


def step_nav(t: Translator, step: Step) -> None:
    """Previous / next with "3 / 7" between them, drawn before anything that may stop
    the page. PageUp / PageDown, what presentation clickers send, press them
    (Streamlit's shortcuts leave keys typed in the text area alone)."""
    prev, nxt = walk.around(step)
    # presenter mode's larger type needs wider buttons ("Próximo" and its PageDown key were cut)
    c1, c2, c3 = st.columns([3, 2, 3] if session.presenter() else [1, 2, 1], vertical_alignment="center")
    target = None
    if c1.button(t("nav.prev"), key="nav_prev", shortcut="PageUp", disabled=prev is None, width="stretch",
                 icon=":material/arrow_back:", help=t("nav.keys_help")):
        target = prev
    if step.is_step:
        c2.markdown(t("nav.position", step=walk.number(step), total=len(walk.steps())), text_alignment="center")
    if c3.button(t("nav.next"), key="nav_next", shortcut="PageDown", disabled=nxt is None, width="stretch",
                 icon=":material/arrow_forward:", icon_position="right", help=t("nav.keys_help")):
        target = nxt
    if target is not None:
        st.switch_page(target.page, query_params=dict(st.query_params))


def page_header(t: Translator, step: Step) -> None:
    """A page of the walk that is not a step (the closing page, the playground): its
    navigation and title — and, for a student while the class votes with the walk locked,
    only a notice (the closing page's numbers would answer any step's question)."""
    step_nav(t, step)
    st.title(t(step.title_key))
    if gate.gate(t, step) == gate.LOCKED:
        gate.locked_note(t)
        page_run.stop_page()


@dataclass
class StepPage:
    """An opened step: its declaration, the reader's language, the analysis of their text
    (None on a step that needs no text), the text and the model, and the slot where its
    questions go."""

    step: Step
    t: Translator
    a: object
    text: str
    model_id: str
    questions: st.delta_generator.DeltaGenerator

    def summary(self) -> Summary:
        """The step's summary, built from the settings its declaration names
        (``summary_from``), as its widgets now hold them, and its extra inputs."""
        return summaries.get(self.step, self.t, self.a, self.text, self.model_id,
                             summaries.inputs(self.step, st.session_state), **summaries.extra(self.step))

    def ask(self, sm: Summary) -> None:
        """The step's questions in their slot (asked once its numbers are known)."""
        with self.questions:
            ask(self.t, self.step, sm)

    def end(self) -> None:
        """The glossary terms the step's prose linked, with their meanings."""
        glossary.terms_footer(self.t, self.step)

    def room(self, **settings) -> None:
        """In a class whose teacher shows the room: every text of the class on this step's
        claims (``settings``: the page's layer or window, which the room follows)."""
        room(self.t, self.step, **settings)

    def close(self, sm: Summary) -> None:
        """``ask``, then ``end``: a step with nothing after its numbers."""
        self.ask(sm)
        self.end()


def room(t: Translator, step: Step, **settings) -> None:
    """The room's part of a page: its charts of every text the class sent (when its
    teacher shows the room)."""
    room_charts.section(t, step, **settings)


AHEAD_TOKENS = 512  # a reader's text longer than this has its other pages built in the background


def opened(step: Step) -> StepPage:
    """A step's page up to its own content: its header (with the class's gate), then the
    analysis of the reader's text — or the page stops after saying why there is none."""
    t = session.tr()
    step_header(t, step)
    text, model_id, a = "", served_model.model_id(), None  # a step without a text still counts in the model's shape
    if step.needs_text:
        text = session.current_text()
        a = analyses.analysis_or_message()
        if a is None:
            glossary.terms_footer(t, step)
            page_run.stop_page()
        if a.n > AHEAD_TOKENS and settings.read().build_ahead:
            # a longer text (each statistic a pass over its rows, recomputed from q and k): the
            # other steps' pages built meanwhile, in the reader's language, while no page runs
            prebuild.prebuild({"text": text, "settings": {}, "model": model_id}, langs=(t.lang,), quiet=True)
    return StepPage(step, t, a, text, model_id, st.container())


def step_header(t: Translator, step: Step) -> None:
    """A step's navigation, title and lead — in a live class with a vote on this step whose
    answer is not revealed yet (open, or closed for the discussion), the question and the
    class's answers come before the lead (on a phone they fit the first screen), and the
    page stops there: its numbers would answer it until the teacher reveals the answer.
    While the class cannot be read at all, the page says so and stops before its lead and
    numbers (it cannot know whether a vote is open): it fails closed, and the class's poll
    redraws it once the class can be read. A page locked while the class votes elsewhere
    draws its notice and the way back, nothing of its own."""
    step_nav(t, step)
    st.caption(t("common.step_of", step=walk.number(step), total=len(walk.steps())))
    st.title(t(step.title_key))
    shown = gate.gate(t, step)
    if shown == gate.HELD:
        for qid in step.questions:
            votes.vote_panel(t, step, qid, drawing.show_figure)
    elif shown == gate.UNREAD:
        st.warning(t("class.unreadable"), icon=":material/cloud_off:")
        gate.pending_note(t)
    elif shown == gate.LOCKED:
        gate.locked_note(t)
    if shown in (gate.LOCKED, gate.UNREAD):  # a notice (and the way back) only: a lead can answer a vote too
        page_run.stop_page()  # (step 7's «double the text, four times the work» answers step 1's)
    glossary.prose(t, step, step.lead_key(t, both_ways=not served_model.reads_back_only()))
    if shown is not None:
        page_run.stop_page()


def ask(t: Translator, step: Step, sm) -> None:
    """Every question of a step's summary, in the order the step declares them."""
    for q in sm.questions:
        predict(t, step, q)


def predict(t: Translator, step: Step, q: Question) -> None:
    """Predict, then reveal: a question whose answer the page measures (``q`` comes from
    the step's summary, as the page's numbers do; its id names its guess and reveal keys).
    In every mode the answer waits until the reader picks an option or presses the reveal
    button (predicting first is the point: an answer standing under the question before
    anyone guesses teaches nothing). In a live class, the question is the class's vote
    (ui.classroom.votes.vote_panel)."""
    if membership.member() is not None:
        votes.vote_panel(t, step, q.id, drawing.show_figure)
        return
    with st.container(border=True):
        st.markdown(f"**{t('predict.heading')}** · {q.text}")
        key = keys.guess(q.id)
        if st.session_state.get(key) is not None and st.session_state[key] not in q.options:
            session.forget_setting(key)  # a guess on other settings' options (or a link's): asked afresh
        guess = st.radio(t("predict.pick"), q.options, index=None, horizontal=True,
                         format_func=widgets.labels(q.options, q.label), key=key, persist_state=widgets.KEEP)
        revealed = keys.revealed(q.id)
        if guess is None and not st.session_state.get(revealed):
            if not st.button(t("predict.reveal"), key=keys.reveal_button(q.id), icon=":material/visibility:"):
                return
            st.session_state[revealed] = True
        st.markdown(verdict(t, q, guess))
