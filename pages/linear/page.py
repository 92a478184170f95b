"""Step 5 — never build the grid: linear attention reassociates (QKᵀ)V into Q(KᵀV)."""

import math

import streamlit as st

from attn import costs, methods
from ui import drawing, glossary, step_page, widgets
from pages import linear

page = step_page.opened(linear.STEP)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
layer, _ = widgets.layer_head_picker(t, a, "s5")
c1, c2 = st.columns([2, 1])
feature = widgets.setting(t, "s5_feature", a, t("linear.pick_feature"), where=c1, horizontal=True,
                          names=lambda f: t(f"features.{f}"))
causal = widgets.setting(t, "s5_causal", a, t("linear.causal"), where=c2)

drawing.formula(t, r"\underbrace{\big(\phi(Q)\,\phi(K)^\top\big)}_{n \times n}\,V \;=\; "
                r"\phi(Q)\,\underbrace{\big(\phi(K)^\top V\big)}_{m \times d}",
                t("linear.formula_caption", chunk=methods.linear(feature).scan_chunk))
st.latex(methods.linear(feature).formula)
st.caption(t(f"features.{feature}_note"))

sm = page.summary()
r = sm.numbers.orders
m1, m2, m3, m4 = st.columns(4)
m1.metric(t("linear.metric_diff"), t.sci(r.rel_diff), help=t("linear.metric_diff_help"))
m2.metric(t("linear.metric_grid_causal" if causal else "linear.metric_grid", n=t.int(r.n)), t.int(r.grid_numbers))
m3.metric(t("linear.metric_summary", m=t.int(r.m), d=t.int(r.d)), t.int(r.summary_numbers))
m4.metric(t("linear.metric_ratio"), t.ratio(r.grid_numbers / r.summary_numbers))
if r.n < a.n:  # a long text: both orders on its first tokens (the grid order builds the n×n grid)
    st.caption(t("common.layer_first", m=t.int(r.n), n=t.int(a.n)))
st.caption(t("linear.diff_caption", abs=t.sci(r.max_diff), layer=layer,
             tq=t.float(r.seconds_quadratic * 1e3, 1), tl=t.float(r.seconds_linear * 1e3, 1),
             runs=t.int(r.runs)))

st.subheader(t("linear.break_heading"))
even = costs.linear_break_even(r.m, r.d, causal)
b1, b2 = st.columns(2)
help_f = t("linear.break_help", f=t(f"features.{feature}"), m=t.int(r.m), d=t.int(r.d))
b1.metric(t("linear.metric_break_memory"), t.int(even.memory), help=help_f)
b2.metric(t("linear.metric_break_ops"), t.int(even.operations), help=help_f)
side = ("long" if r.n >= max(even.memory, even.operations)
        else "short" if r.n < min(even.memory, even.operations) else "between")
part = "_part" if r.n < a.n else ""  # a long text's first tokens: both lengths said
st.markdown(t(f"linear.break_{side}{part}", n=t.int(r.n), total=t.int(a.n), nm=t.int(even.memory),
              no=t.int(even.operations)))
clock = linear.clock_sentence(side, r.faster, causal)
if clock:
    st.caption(t(clock, runs=t.int(r.runs), chunk=t.int(methods.linear(feature).scan_chunk),
                 chunks=t.int(math.ceil(r.n / methods.linear(feature).scan_chunk)), cells=t.int(r.grid_numbers),
                 summary=t.int(r.summary_numbers)))
if a.k.shape[2] == 1 and a.n_heads > 1:
    st.caption(t("linear.shared_kv", h=a.n_heads))

drawing.show_figure(sm.figure, key="s5_sizes")
st.caption(t("linear.sizes_caption"))
glossary.prose(t, page.step, "linear.outro")

page.close(sm)
