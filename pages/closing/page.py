"""Closing page: what a reader can safely ignore, written from the reader's own numbers."""

import streamlit as st

from attn.swap import hub_pair
from ui import analyses, glossary, measures, model_swaps, served_model, session, step_page
from pages import closing

t = session.tr()
step_page.page_header(t, closing.STEP)
text, model_id = session.current_text(), served_model.model_id()
a = analyses.analysis_or_message() if text.strip() else None
if a is None:
    if not text.strip():  # a text too short has been told so already, by the analysis
        st.info(t("closing.empty"))
else:
    near = measures.kept(text, model_id, closing.NEAR, ())
    both = measures.kept(text, model_id, closing.NEAR, (0,))
    sink, read = measures.sink_estimate(text, model_id)  # the rows all three were read on (a long text's sample)
    # an encoder's window reaches both ways: its neighbours lie on either side
    lead = "closing.lead_numbers" if a.causal else "closing.lead_numbers_both"
    st.markdown(t(lead, n=t.int(a.n), sink=t.pct(sink), w=closing.NEAR, near=t.pct(near.mean),
                  both=t.pct(both.mean)))
    if not read.every_row:  # read on a sample of a long text's rows: said so, with each number's stray
        strays = {"sink": 100 * read.spread, "near": 100 * near.sampled.spread, "both": 100 * both.sampled.spread}
        digits = closing.stray_digits(strays.values())
        st.caption(t("closing.lead_sampled", rows=t.int(read.rows), n=t.int(read.n), first=t.int(read.first),
                     spaced=t.int(read.rows - read.first), **{k: t.float(x, digits) for k, x in strays.items()}))
    pair = hub_pair(4)
    measured = model_swaps.measured(text, pair) if served_model.has_head() else None
    if not served_model.has_head():  # a folder without its language-model head: nothing to measure with
        st.markdown(t("swap.no_head"))
    elif model_swaps.complete(measured):
        alone, hub = measured
        st.markdown(t("closing.swap_measured", w=alone.swap.window, m=t.int(alone.n),
                      x0=t.float(alone.perplexity / alone.base_perplexity, 1),
                      x1=t.float(hub.perplexity / hub.base_perplexity, 1)))
    else:
        st.markdown(t("closing.swap_unmeasured"))
st.markdown(t("closing.body"))
step_page.room(t, closing.STEP)  # in a class whose teacher shows the room: its verdict on each claim
st.subheader(t("closing.glossary"))
glossary.glossary_table(t)
st.caption(served_model.credits(t))
