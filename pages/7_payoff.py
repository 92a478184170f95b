"""Step 7 — length stops being a wall: the cost model, and a live benchmark."""

import streamlit as st

from attn import bench
from attn.device import compute_dtype, pick_device
from ui import figures, state, widgets

t = state.tr()
widgets.step_header(t, 7)

s = bench.Setting()
widgets.formula(r"\frac{\text{cost}(2n)}{\text{cost}(n)} \;\to\; 4 \;\;(n^2) \qquad \text{vs} \qquad 2 \;\;(n)",
                t("step7.formula_caption", w=s.window, g=s.hubs, d=s.d, h=s.heads))

METHODS = {"sdpa": "step7.m_full", "naive": "step7.m_naive", "window": "step7.m_window",
           "window_hubs": "step7.m_window_hubs", "linear": "step7.m_linear"}
ns = [2 ** e for e in range(9, 21)]
costs = bench.cost_model(ns, s)
series = [{"name": t(METHODS[m], w=s.window, g=s.hubs), "x": ns, "y": costs[m], "hover": t("step7.hover_flops")}
          for m in costs]
series.append({"name": t("step7.ref_n2"), "x": ns, "y": [costs["sdpa"][0] * (n / ns[0]) ** 2 for n in ns],
               "dash": "dot", "colour": "#999999", "mode": "lines", "hover": t("step7.hover_flops")})
series.append({"name": t("step7.ref_n"), "x": ns, "y": [costs["window"][0] * (n / ns[0]) for n in ns],
               "dash": "dash", "colour": "#999999", "mode": "lines", "hover": t("step7.hover_flops")})
fig = figures.lines(series, title=t("step7.model_title"), x_title=t("common.n_axis"), y_title=t("step7.flops_axis"),
                    separators=t.separators, log_x=True, log_y=True, height=460)
widgets.show_figure(fig, key="s7_model")
c = st.columns(4)
for i, m in enumerate(costs):
    c[i].metric(t("step7.metric_model_ratio", m=t(METHODS[m], w=s.window, g=s.hubs)),
                t.float(costs[m][-1] / costs[m][-2], 2), help=t("step7.metric_model_ratio_help", n=t.int(ns[-1])))

st.subheader(t("step7.live_heading"))
device = pick_device()
st.markdown(t("step7.live_lead", device=state.device_line(), dtype=str(compute_dtype(device)).replace("torch.", "")))
sizes = bench.live_sizes(device)


@st.cache_resource(show_spinner=False)
def _results() -> dict:
    """Finished live runs, per device and settings, shared by readers."""
    return {}


key = (str(device), tuple(sizes), s.window, s.hubs, s.d, s.heads)
store = _results()
if key not in store:
    st.caption(t("step7.live_bound", sizes=", ".join(t.int(n) for n in sizes)))
    if st.button(t("step7.run"), type="primary", key="s7_run"):
        plan = [(m, n) for n in sizes for m in METHODS]
        bar = st.progress(0.0, text=t("step7.running"))
        rows = []
        for i, (m, n) in enumerate(plan):
            bar.progress(i / len(plan), text=t("step7.running_one", m=t(METHODS[m], w=s.window, g=s.hubs), n=t.int(n)))
            rows.append(bench.measure(m, n, s, device, repeats=2, max_seconds=2.0))
        bar.empty()
        store[key] = rows
rows = store.get(key)
if rows:
    time_series, mem_series = [], []
    for m in METHODS:
        rs = [r for r in rows if r.method == m]
        name = t(METHODS[m], w=s.window, g=s.hubs) + f" [{rs[-1].backend}]"
        time_series.append({"name": name, "x": [r.n for r in rs], "y": [r.seconds * 1e3 for r in rs],
                            "hover": t("step7.hover_ms")})
        mem_series.append({"name": name, "x": [r.n for r in rs], "y": [(r.peak_bytes or 0) / 2**20 for r in rs],
                           "hover": t("step7.hover_mib")})
    g1, g2 = st.columns(2)
    with g1:
        widgets.show_figure(figures.lines(time_series, title=t("step7.time_title"), x_title=t("common.n_axis"),
                                          y_title=t("step7.ms_axis"), separators=t.separators, log_x=True,
                                          log_y=True), key="s7_time")
    with g2:
        widgets.show_figure(figures.lines(mem_series, title=t("step7.mem_title"), x_title=t("common.n_axis"),
                                          y_title=t("step7.mib_axis"), separators=t.separators, log_x=True,
                                          log_y=True), key="s7_mem")
    ratios = bench.ratios(rows)
    last = sizes[-1]
    cols = st.columns(len(METHODS))
    for i, m in enumerate(METHODS):
        r = ratios.get((m, last))
        cols[i].metric(t("step7.metric_live_ratio", m=t(METHODS[m], w=s.window, g=s.hubs), n=t.int(last)),
                       "—" if r is None else t.float(r, 2))
    table = {t("step7.col_method"): [], t("common.n_axis"): [], t("step7.ms_axis"): [], t("step7.col_ratio"): [],
             t("step7.mib_axis"): [], t("step7.col_backend"): []}
    for r in rows:
        table[t("step7.col_method")].append(t(METHODS[r.method], w=s.window, g=s.hubs))
        table[t("common.n_axis")].append(t.int(r.n))
        table[t("step7.ms_axis")].append(t.float(r.seconds * 1e3, 2))
        ratio = ratios.get((r.method, r.n))
        table[t("step7.col_ratio")].append("" if ratio is None else t.float(ratio, 2))
        table[t("step7.mib_axis")].append("—" if r.peak_bytes is None else t.float(r.peak_bytes / 2**20, 1))
        table[t("step7.col_backend")].append(r.backend)
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(t("step7.live_caption"))
st.markdown(t("step7.outro"))
