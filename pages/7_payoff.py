"""Step 7 — length stops being a wall: the cost model, and a live benchmark."""

import streamlit as st

from attn import bench, methods
from attn.costs import Shape
from attn.device import compute_dtype, pick_device
from ui import boot, figures, live, state, widgets

boot.through_app()

t = state.tr()
widgets.step_header(t, 7)
question = st.container()  # filled below, once the page's numbers are known

s = Shape()
widgets.formula(t, r"\frac{\text{@cost}(2n)}{\text{@cost}(n)} \;\to\; 4 \;\;(n^2) \qquad \text{@vs} \qquad 2 \;\;(n)",
                t("step7.formula_caption", w=s.window, g=s.hubs, d=s.d, h=s.heads))

ns = [2 ** e for e in range(9, 21)]
ticks = (ns[::2], [t.int(n) for n in ns[::2]])
costs = methods.operations(ns, s)
series = [{"name": live.method_name(t, m, s), "x": ns, "y": costs[m], "hover": t("step7.hover_flops")}
          for m in costs]
series.append({"name": t("step7.ref_n2"), "x": ns, "y": [costs["full"][0] * (n / ns[0]) ** 2 for n in ns],
               "dash": "dot", "colour": "#999999", "mode": "lines", "hover": t("step7.hover_flops")})
series.append({"name": t("step7.ref_n"), "x": ns, "y": [costs["window"][0] * (n / ns[0]) for n in ns],
               "dash": "dash", "colour": "#999999", "mode": "lines", "hover": t("step7.hover_flops")})
fig = figures.lines(series, title=t("step7.model_title"), x_title=t("common.n_axis"), y_title=t("step7.flops_axis"),
                    separators=t.separators, log_x=True, log_y=True, height=460, x_ticks=ticks)
widgets.show_figure(fig, key="s7_model")
# the last step of the chart: from n = 2¹⁹ to 2n = 2²⁰
st.markdown(f"**{t('step7.ratio_heading', n=t.int(ns[-2]), n2=t.int(ns[-1]))}**")
cols = st.columns(len(costs))
for i, m in enumerate(costs):
    cols[i].metric(t("step7.metric_model_ratio", m=live.method_name(t, m, s)), t.float(costs[m][-1] / costs[m][-2], 2),
                   help=t("step7.metric_model_ratio_help", n=t.int(ns[-2]), n2=t.int(ns[-1])))

st.subheader(t("step7.live_heading"))
device = pick_device()
st.markdown(t("step7.live_lead", device=state.device_line(), dtype=str(compute_dtype(device)).replace("torch.", "")))
sizes = bench.live_sizes(device)
key = (str(device), tuple(sizes), s.window, s.hubs, s.d, s.heads)
rows = live.results(key)
if rows is None:
    st.caption(t("step7.live_bound", sizes=", ".join(t.int(n) for n in sizes)))
    if st.button(t("step7.run"), type="primary", key="s7_run"):
        rows = live.run(t, key, s, device, sizes)
if rows:
    live_ticks = (sizes, [t.int(n) for n in sizes])
    time_series, mem_series = [], []
    for m, backend in live.plan_methods():
        rs = [r for r in rows if r.key == bench.row_key(m, backend)]
        name = f"{live.method_name(t, m, s, backend)} [{rs[-1].backend} · {rs[-1].extra['dtype']}]"
        time_series.append({"name": name, "x": [r.n for r in rs], "y": [r.seconds * 1e3 for r in rs],
                            "hover": t("step7.hover_ms")})
        mem_series.append({"name": name, "x": [r.n for r in rs], "y": [(r.peak_bytes or 0) / 2**20 for r in rs],
                           "hover": t("step7.hover_mib")})
    g1, g2 = st.columns(2)
    with g1:
        widgets.show_figure(figures.lines(time_series, title=t("step7.time_title"), x_title=t("common.n_axis"),
                                          y_title=t("step7.ms_axis"), separators=t.separators, log_x=True,
                                          log_y=True, x_ticks=live_ticks), key="s7_time")
    with g2:
        widgets.show_figure(figures.lines(mem_series, title=t("step7.mem_title"), x_title=t("common.n_axis"),
                                          y_title=t("step7.mib_axis"), separators=t.separators, log_x=True,
                                          log_y=True, x_ticks=live_ticks), key="s7_mem")
    st.info(t("step7.walls_note"))
    st.caption(t("step7.dtype_note"))
    ratios = bench.ratios(rows)
    last = sizes[-1]
    plan = live.plan_methods()
    cols = st.columns(len(plan))
    for i, (m, backend) in enumerate(plan):
        r = ratios.get((bench.row_key(m, backend), last))
        cols[i].metric(t("step7.metric_live_ratio", m=live.method_name(t, m, s, backend), n=t.int(last)),
                       "—" if r is None else t.float(r, 2))
    st.dataframe(live.table(t, rows, s), hide_index=True, width="stretch")
    st.caption(t("step7.live_caption"))
st.markdown(t("step7.outro"))

with question:
    live_ratio = bench.ratios(rows).get(("window", sizes[-1])) if rows else None
    ratio = live_ratio if live_ratio is not None else costs["window"][-1] / costs["window"][-2]
    widgets.predict(t, 7, t("predict.q7"), [1, 2, 4], ratio, label=lambda x: t.int(x),
                    value_text=t.float(ratio, 2),
                    note=t("predict.from_live") if live_ratio is not None else t("predict.from_model"))
