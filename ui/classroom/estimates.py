"""An estimate in a class: a number from each student instead of an option (a step's count
or ratio). While the vote is open no one sees another's number (it would anchor theirs);
once it closes, the class's numbers on a log axis; once revealed, the measured value beside
them with the band that counts as right (within server.answers.ESTIMATE_FACTOR, either way),
and each student reads how far theirs was."""

from __future__ import annotations

import math

import streamlit as st

from server import answers

from .. import keys, room_figures
from ..i18n import Translator
from .vote_actions import send_answer


EDGE = 1000.0  # an estimate further than this factor from the class's median is drawn at the chart's edge


def number_text(t: Translator, x: float) -> str:
    """A number as a class reads it: whole from 100 up (or when it is whole), else to three
    significant digits, no trailing zeros (6.5, 0.722); one too small for that in six
    decimals in powers of ten (1.0 × 10⁻³⁰⁰), never a 0 that no one sent."""
    x = float(x)
    if abs(x) >= 100 or x.is_integer():
        return t.int(round(x))
    if abs(x) < 1e-4:  # three significant digits would need more than six decimals
        return t.sci(x, 2)
    most = min(6, max(0, 2 - math.floor(math.log10(abs(x)))))
    return t.float(x, next(d for d in range(most + 1) if round(x, d) == round(x, most)))


def estimate_panel(t: Translator, found, vote, teacher: bool, show_figure) -> None:
    """An estimate's vote below its question: a student's number and Send while it is open;
    afterwards the class's numbers (and once revealed the measured value), and the
    student's own."""
    if vote.state == "open":
        if not teacher:
            _answer(t, found, vote)
        return
    factor = answers.ESTIMATE_FACTOR
    question, revealed = vote.question, vote.state == "revealed"
    value = question.estimate
    guesses = found.guesses.get(vote.vote, ())
    st.markdown(f"**{t('vote.estimate_chart_title', n=t.int(len(guesses)))}**")
    fig = room_figures.estimates(guesses, value if revealed else None, factor, x_title=t("vote.estimate_axis"),
                                 separators=t.separators, guess_name=t("vote.estimate_guesses"),
                                 value_name=t("vote.estimate_measured"),
                                 band_name=t("vote.estimate_band", f=t.float(factor, 1)),
                                 hover=t("vote.estimate_hover"), edge=EDGE,
                                 edge_name=t("vote.estimate_edge", f=t.int(EDGE)))
    show_figure(fig, f"vote_chart_{keys.slug(vote.qid)}")
    mine = None if teacher else found.mine_numbers.get(vote.vote)
    if mine is not None:
        if revealed:
            near = answers.estimate_choice(mine, value) == 1  # the rule the store counted it by
            st.caption(t("vote.estimate_far_near" if near else "vote.estimate_far_off", number=number_text(t, mine),
                         times=number_text(t, mine / value) if value else "—", f=t.float(factor, 1)))
        else:
            st.caption(t("vote.estimate_yours", number=number_text(t, mine)))
    if revealed:
        counts = found.seated(vote.vote) or [0, 0]  # the class seated when it opened
        share = counts[1] / sum(counts) if sum(counts) else 0.0
        said = "vote.revealed_estimate_model" if question.source == "model" else "vote.revealed_estimate"
        st.markdown(t(said, value=question.words("value_text", t.lang), right=t.pct(share, 0),
                      f=t.float(factor, 1)))


def _answer(t: Translator, found, vote) -> None:
    """A student's number for an open estimate, once: typed, sent, or waiting to be sent."""
    mine = found.mine_numbers.get(vote.vote)
    if mine is not None:
        st.markdown(t("vote.estimate_sent", number=number_text(t, mine)))
        st.caption(t("vote.page_waits"))
        return
    pending = st.session_state.get(keys.PENDING)
    waiting = pending is not None and (pending.get("code"), pending.get("vote")) == (found.code, vote.vote)
    typed = st.text_input(t("vote.estimate_input"), key=f"vote_number_{vote.vote}", disabled=waiting, max_chars=40,
                          placeholder=t("vote.estimate_placeholder"))
    number = answers.read_number(typed, t.lang)
    if typed and not waiting:  # what was understood, before Send: «1,5» is one and a half, not 15
        if number is None:
            st.caption(t("vote.estimate_unread"))
        else:
            st.caption(t("vote.estimate_read", number=number_text(t, number)))
    if waiting:  # kept: the poll sends it when the store can take it
        st.warning(t("vote.pending", answer=number_text(t, pending["number"])), icon=":material/schedule_send:")
    else:
        st.button(t("vote.send"), key=f"vote_send_{vote.vote}", type="primary", disabled=not number,
                  icon=":material/send:", width="stretch", on_click=send_answer, args=(found.code, vote.vote))
    st.caption(t("vote.page_waits"))
