"""A step's page, opened and closed the same way on every step: its navigation, title
and lead; in a live class whose vote on this step is open, the question alone (the
page stops there: its numbers would answer it); the analysis of the reader's text (or
why there is none); a slot for its questions, filled once its numbers are known; its
glossary terms at the end. The class's gate is asked for here, so the widgets every
page shares (ui.widgets) know nothing of a class."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from . import analyses, boot, keys, page_run, session, served_model, summary, widgets
from .classroom import membership, room_charts, votes
from .i18n import Translator
from .steps import N_STEPS, page_of
from .summary import Question, verdict


@dataclass
class StepPage:
    """An opened step: its number, the reader's language, the analysis of their text
    (None on step 7, which needs no text), the text and the model, and the slot where
    its questions go."""

    number: int
    t: Translator
    a: object
    text: str
    model_id: str
    questions: st.delta_generator.DeltaGenerator

    def summary(self, **extra) -> summary.Summary:
        """The step's summary, built from the settings its declaration names (ui.steps:
        ``summary_from``), as its widgets now hold them."""
        return summary.get(self.number, self.t, self.a, self.text, self.model_id,
                           summary.inputs(self.number, st.session_state), **extra)

    def ask(self, sm: summary.Summary) -> None:
        """The step's questions in their slot (asked once its numbers are known)."""
        with self.questions:
            ask(self.t, self.number, sm)

    def end(self) -> None:
        """The glossary terms the step's prose linked, with their meanings."""
        widgets.terms_footer(self.t, self.number)

    def room(self, **settings) -> None:
        """In a class whose teacher shows the room: every text of the class on this step's
        claim (``settings``: the page's layer or window, which the room follows)."""
        room_charts.section(self.t, self.number, **settings)

    def close(self, sm: summary.Summary) -> None:
        """``ask``, then ``end``: a step with nothing after its numbers."""
        self.ask(sm)
        self.end()


def room_verdict(t: Translator) -> None:
    """The closing page's part of the room: the class's verdict on each claim, from every
    text it sent (when its teacher shows the room)."""
    room_charts.closing(t)


def opened(step: int, needs_text: bool = True) -> StepPage:
    """A step's page up to its own content: through app.py's navigation (ui.boot), its
    header (with the class's gate), then the analysis of the reader's text — or the page
    stops after saying why there is none."""
    boot.through_app()
    t = session.tr()
    step_header(t, step)
    text, model_id, a = "", "", None
    if needs_text:
        text, model_id = session.current_text(), served_model.model_id()
        a = analyses.analysis_or_message()
        if a is None:
            widgets.terms_footer(t, step)
            page_run.stop_page()
    return StepPage(step, t, a, text, model_id, st.container())


def step_header(t: Translator, step: int) -> None:
    """A step's navigation, title and lead — in a live class with a vote on this step whose
    answer is not revealed yet (open, or closed for the discussion), the question and the
    class's answers come before the lead (on a phone they fit the first screen), and the
    page stops there: its numbers would answer it until the teacher reveals the answer.
    While the class cannot be read at all, the page says so and stops before its numbers
    too (it cannot know whether a vote is open): it fails closed, and the class's poll
    redraws it once the class can be read."""
    widgets.step_nav(t, step)
    if step <= N_STEPS:
        st.caption(t("common.step_of", step=step, total=N_STEPS))
    st.title(t(f"step{step}.title"))
    shown = votes.gate(t, step) if step <= N_STEPS else None
    if shown == votes.HELD:
        for qid in page_of(step).questions:
            votes.vote_panel(t, step, qid, widgets.show_figure)
    elif shown == votes.UNREAD:
        st.warning(t("class.unreadable"), icon=":material/cloud_off:")
        votes.pending_note(t)
    widgets.prose(t, step, f"step{step}.lead")
    if shown is not None:
        page_run.stop_page()


def ask(t: Translator, step: int, sm) -> None:
    """Every question of a step's summary, in the order the step declares them."""
    for q in sm.questions:
        predict(t, step, q)


def predict(t: Translator, step: int, q: Question) -> None:
    """Predict, then reveal: a question whose answer the page measures (``q`` comes from
    ui.summary, as the page's numbers do; its id names its guess and reveal keys). In
    every mode the answer waits until the reader picks an option or presses the reveal
    button (predicting first is the point: an answer standing under the question before
    anyone guesses teaches nothing). In a live class, the question is the class's vote
    (ui.classroom.votes.vote_panel)."""
    if membership.member() is not None:
        votes.vote_panel(t, step, q.id, widgets.show_figure)
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
