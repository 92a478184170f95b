"""Step 7 — length stops being a wall: the cost model, and a live benchmark."""

import streamlit as st

from attn import bench, methods
from attn.device import pick_device
from attn import model_run
from ui import (analyses, drawing, glossary, live_bench, measures, model_runs, served_model, session, step_page,
                summaries)
from pages import payoff

page = step_page.opened(payoff.STEP)  # the cost model and this device: no text
t = page.t

device = pick_device()
sizes = bench.live_sizes(device)
key = live_bench.key(device, sizes)
sm = page.summary()  # with this device's live run, where it was run (payoff.inputs)
v: payoff.Numbers = sm.numbers
s, ns, costs = v.shape, v.ns, v.costs
drawing.formula(t, r"\frac{\text{@cost}(2n)}{\text{@cost}(n)} \;\to\; 4 \;\;(n^2) \qquad \text{@vs} \qquad 2 \;\;(n)",
                t("payoff.formula_caption" if s.causal else "payoff.formula_caption_both", w=t.int(s.window),
                  g=t.int(s.hubs), d=t.int(s.d), h=t.int(s.heads), layers=t.int(s.layers)))
drawing.show_figure(sm.figure, key="s7_model")
indexer = methods.top_k(indexer=True)
st.caption(t("payoff.topk_caption", d=t.int(s.d), dims=t.int(min(indexer.indexer_dims, s.d))))
# the last step of the chart: from n = 2¹⁹ to 2n = 2²⁰
st.markdown(f"**{t('payoff.ratio_heading', n=t.int(ns[-2]), n2=t.int(ns[-1]))}**")
cols = st.columns(len(costs))
for i, m in enumerate(costs):
    cols[i].metric(t("payoff.metric_model_ratio", m=live_bench.method_name(t, m, s)),
                   t.float(costs[m][-1] / costs[m][-2], 2),
                   help=t("payoff.metric_model_ratio_help", n=t.int(ns[-2]), n2=t.int(ns[-1])))

st.subheader(t("payoff.cache_heading"))
if not s.causal:  # an encoder reads the whole text at once: nothing is kept to write a next token
    st.markdown(t("payoff.cache_encoder"))
elif page.model_id:
    served = served_model.get_model(page.model_id)
    arch = served.arch
    per, dtype = payoff.cache_number(served)  # the dtype the app runs the model in, not another's
    kept = payoff.cache(arch, s.window, per)  # up to the positions the model reads
    st.markdown(t("payoff.cache_lead", kv=t.int(arch.kv_heads), d=t.int(arch.head_dim),
                  per=t.int(2 * arch.kv_heads * arch.head_dim)))
    drawing.chart("s7_cache", (page.model_id, s.window, per), lambda: payoff.cache_figure(t, kept))
    at_n = payoff.cache_at(arch)  # never past the positions the model reads
    at = kept.ns.index(at_n)
    c1, c2, c3 = st.columns(3)
    c1.metric(t("payoff.metric_cache_model", n=t.int(at_n)), t("payoff.mb", mb=t.float(kept.model[at], 1)))
    c2.metric(t("payoff.metric_cache_full"), t("payoff.mb", mb=t.float(kept.full[at], 1)),
              delta=t("payoff.cache_times", x=t.float(kept.full[at] / kept.model[at], 1)), **drawing.REFERENCE)
    c3.metric(t("payoff.metric_cache_linear"), t("payoff.mb", mb=t.float(kept.linear[at], 2)))
    own, beyond = payoff.cache_lengths(arch)
    drawing.data_table(payoff.cache_rows(t, arch, s, own, per))
    said = [t("payoff.cache_caption", bytes=t.int(per), dtype=dtype)]
    if arch.max_positions:
        said.append(t("payoff.cache_context", max=t.int(arch.max_positions)))
    st.caption(t.sentences(said))
    if beyond:  # longer texts than this model reads: another model's cache, apart and said so
        st.caption(t("payoff.cache_beyond", max=t.int(arch.max_positions), dtype=dtype))
        drawing.data_table(payoff.cache_rows(t, arch, s, beyond, per))

st.subheader(t("payoff.live_heading"))
st.markdown(t("payoff.live_lead", device=served_model.device_line()))  # the device line names its dtype
bs = payoff.BENCH_SHAPE  # the live run times kernels, one layer of the benchmark's shape
st.caption(t("payoff.live_shape", h=t.int(bs.heads), d=t.int(bs.d), w=t.int(bs.window), g=t.int(bs.hubs)))
rows = live_bench.results(key)
if rows is None:
    st.caption(t("payoff.live_bound", sizes=t.numbers(t.int(n) for n in sizes)))
    if st.button(t("payoff.run"), type="primary", key="s7_run"):
        try:
            rows = live_bench.run(t, key, bs, device, sizes)
        except Exception as exc:  # said, with what the engine reported; the page goes on
            drawing.error_box(t, "payoff.failed")
            st.code(f"{type(exc).__name__}: {exc}", language=None)
        else:
            sm = summaries.get(payoff.STEP, t, None, "", page.model_id, {}, **payoff.inputs())
if rows:
    fig_time, fig_mem = drawing.figure_once("s7_live", (key, tuple(r.seconds for r in rows)),
                                            lambda: live_bench.figures_of(t, rows, sizes, bs))
    g1, g2 = st.columns(2)
    with g1:
        drawing.show_figure(fig_time, key="s7_time")
    with g2:
        drawing.show_figure(fig_mem, key="s7_mem")
    ratios = bench.ratios(rows)
    last = sizes[-1]
    walls, said = live_bench.walls_shown(rows, last)  # read from this run's numbers, never a fixed lesson
    st.info(t(walls, n=t.int(last // 2), n2=t.int(last), **{k: t.float(v, 2) for k, v in said.items()}))
    st.caption(t("payoff.dtype_note"))
    plan = live_bench.plan_methods()
    per_row = 4
    for i, (m, backend) in enumerate(plan):
        if i % per_row == 0:
            cols = st.columns(per_row)
        r = ratios.get((bench.row_key(m, backend), last))
        label = t("payoff.metric_live_ratio", m=live_bench.method_name(t, m, bs, backend), n=t.int(last // 2),
                  n2=t.int(last))
        cols[i % per_row].metric(label, "—" if r is None else t.float(r, 2))
    drawing.data_table(live_bench.table(t, rows, bs))
    full, window = (ratios.get((bench.row_key(m.name, "auto"), last)) for m in (methods.exact(), methods.window()))
    if full is None or window is None:
        st.caption(t("payoff.live_caption"))
    else:  # what this run measured, beside what the cost model says
        st.caption(t("payoff.live_caption_measured", n=t.int(last // 2), n2=t.int(last), full=t.float(full, 2),
                     window=t.float(window, 2)))
    oracle, found = (ratios.get((bench.row_key(m.name, "auto"), last)) for m in (methods.top_k(), methods.top_k(True)))
    if oracle is not None and found is not None:
        st.caption(t.sentences([t("payoff.live_topk", w=t.int(bs.window), oracle=t.float(oracle, 2),
                                  indexer=t.float(found, 2)),
                                live_bench.topk_split(t, live_bench.topk_parts(rows, last))]))

# --- the model itself, on the reader's text ---------------------------------------------

st.subheader(t("payoff.model_heading"))
text = session.current_text()
model = served_model.get_model(page.model_id) if page.model_id else None
a = analyses.get_analysis(text, page.model_id) if model is not None and text.strip() else None
res = None  # the model run's result, once there is one
if a is None or a.n < 8:
    st.info(t("payoff.model_short"))
else:
    measured = model_run.measured(model)  # an encoder predicts no next token; a folder may lack its head
    lengths = model_run.lengths_of(a.n)
    sliding = any(x.sliding for x in a.layers)
    st.markdown(t("payoff.model_lead", n=t.int(a.n), lengths=t.numbers(t.int(m) for m in lengths),
                  w=t.int(a.sliding_window or model_run.WINDOW)))
    if not sliding:
        st.caption(t("payoff.model_no_sliding", w=t.int(model_run.WINDOW), last=a.n_layers - 1))
    if a.n <= (a.sliding_window or model_run.WINDOW):  # the window holds the whole text: nothing is dropped
        st.caption(t("payoff.model_window_covers", n=t.int(a.n), w=t.int(a.sliding_window or model_run.WINDOW),
                     own=t("payoff.way_own" if sliding else "payoff.way_window"), hubs=t("payoff.way_hubs")))
    if not measured:
        st.caption(t("payoff.model_unmeasured" if model.causal else "payoff.model_unmeasured_both"))
    run_key = model_runs.key(page.model_id, text, a.n)
    res = model_runs.result(run_key)
    if res is None:
        pace = analyses.pace(a, page.model_id)  # the model's own pace on this text: the run's forecast
        runs = len(model_run.run_units(a.n, measured))
        about = max(1, round(model_run.forecast(pace, a.n, measured)))
        st.caption(t.sentences([t("payoff.model_bound", runs=runs, n=t.int(a.n)),
                                t("payoff.model_forecast", s=t.int(about))]))
        if st.button(t("payoff.model_run"), type="primary", key="s7_model_run"):
            stop = st.empty()
            stop.button(t("payoff.model_stop"), key="s7_model_stop")  # its click reruns the page: the run ends
            hubs = tuple(sorted({0, *(p for p, _ in measures.anchors(text, page.model_id, 3) if p != 0)}))[:3]
            try:
                res = model_runs.run(t, run_key, a.ids, hubs, pace)
            except Exception as exc:  # said, with what the engine reported; the page goes on
                drawing.error_box(t, "payoff.failed")
                st.code(f"{type(exc).__name__}: {exc}", language=None)
            finally:
                stop.empty()  # nothing left to stop
    if res is not None:
        drawing.data_table(model_runs.table(t, res))
        cols = st.columns(len(model_run.WAYS))
        half, whole = res.lengths[-2], res.lengths[-1]
        for i, way in enumerate(model_run.WAYS):
            r, counted = res.ratio(way), res.ratio(way, lambda x: x.operations)
            cols[i].metric(t("payoff.metric_way_ratio", way=model_runs.way_name(t, res, way), n=t.int(half),
                             n2=t.int(whole)),
                           "—" if r is None else t.float(r, 2),
                           delta=None if counted is None else t("payoff.metric_way_counted", x=t.float(counted, 2)),
                           **drawing.REFERENCE)
        st.caption(t("payoff.model_ratio_caption", n=t.int(half), n2=t.int(whole)))
        for way, got, counted in model_runs.slower_than_counted(res):
            st.warning(t("payoff.model_slower", way=model_runs.way_name(t, res, way), got=t.float(got, 2),
                         counted=t.float(counted, 2)), icon=":material/speed:")
        st.caption(t("payoff.model_memory_caption"))
        if measured:
            st.caption(t("payoff.model_kl_caption", k=t.int(model_run.KL_POSITIONS),
                         hubs=t.numbers(t.int(h) for h in res.hubs)))

# the closing words read the model run where there is one: its shortcut's time grew less than full attention's
shown = res is None or model_runs.payoff_shown(res)
glossary.prose(t, page.step, "payoff.outro" if shown else "payoff.outro_unshown")

page.close(sm)
