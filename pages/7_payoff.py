"""Step 7 — length stops being a wall: the cost model, and a live benchmark."""

import streamlit as st

from attn import bench, methods
from attn.device import pick_device
from ui import served_model, step_page, summary, live_bench, widgets

page = step_page.opened(7, needs_text=False)  # the cost model and this device: no text
t = page.t

device = pick_device()
sizes = bench.live_sizes(device)
key = live_bench.key(device, sizes)
rows, last = live_bench.on_this_device()  # what a class's summaries built ahead used too
sm = page.summary(live_rows=rows, live_last=last)
s, ns, costs = sm.values["shape"], sm.values["ns"], sm.values["costs"]
widgets.formula(t, r"\frac{\text{@cost}(2n)}{\text{@cost}(n)} \;\to\; 4 \;\;(n^2) \qquad \text{@vs} \qquad 2 \;\;(n)",
                t("step7.formula_caption", w=s.window, g=s.hubs, d=s.d, h=s.heads))
widgets.show_figure(sm.figure, key="s7_model")
# the last step of the chart: from n = 2¹⁹ to 2n = 2²⁰
st.markdown(f"**{t('step7.ratio_heading', n=t.int(ns[-2]), n2=t.int(ns[-1]))}**")
cols = st.columns(len(costs))
for i, m in enumerate(costs):
    cols[i].metric(t("step7.metric_model_ratio", m=live_bench.method_name(t, m, s)),
                   t.float(costs[m][-1] / costs[m][-2], 2),
                   help=t("step7.metric_model_ratio_help", n=t.int(ns[-2]), n2=t.int(ns[-1])))

st.subheader(t("step7.live_heading"))
st.markdown(t("step7.live_lead", device=served_model.device_line()))  # the device line names its dtype
if rows is None:
    st.caption(t("step7.live_bound", sizes=t.numbers(t.int(n) for n in sizes)))
    if st.button(t("step7.run"), type="primary", key="s7_run"):
        try:
            rows = live_bench.run(t, key, s, device, sizes)
        except Exception as exc:  # said, with what the engine reported; the page goes on
            widgets.error_box(t, "step7.failed")
            st.code(f"{type(exc).__name__}: {exc}", language=None)
        else:
            sm = summary.get(7, t, None, "", "", {}, live_rows=rows, live_last=sizes[-1])
if rows:
    fig_time, fig_mem = widgets.figure_once("s7_live", (key, tuple(r.seconds for r in rows)),
                                       lambda: live_bench.figures_of(t, rows, sizes, s))
    g1, g2 = st.columns(2)
    with g1:
        widgets.show_figure(fig_time, key="s7_time")
    with g2:
        widgets.show_figure(fig_mem, key="s7_mem")
    st.info(t("step7.walls_note"))
    st.caption(t("step7.dtype_note"))
    ratios = bench.ratios(rows)
    last = sizes[-1]
    plan = live_bench.plan_methods()
    cols = st.columns(len(plan))
    for i, (m, backend) in enumerate(plan):
        r = ratios.get((bench.row_key(m, backend), last))
        cols[i].metric(t("step7.metric_live_ratio", m=live_bench.method_name(t, m, s, backend), n=t.int(last // 2),
                         n2=t.int(last)),
                       "—" if r is None else t.float(r, 2))
    widgets.data_table(live_bench.table(t, rows, s))
    full, window = (ratios.get((bench.row_key(m.name, "auto"), last)) for m in (methods.exact(), methods.window()))
    if full is None or window is None:
        st.caption(t("step7.live_caption"))
    else:  # what this run measured, beside what the cost model says
        st.caption(t("step7.live_caption_measured", n=t.int(last // 2), n2=t.int(last), full=t.float(full, 2),
                     window=t.float(window, 2)))
widgets.prose(t, 7, "step7.outro")

page.close(sm)
