"""The pattern playground: compose a sparse pattern, see on the reader's text what it
costs, what it can reach, what it keeps and what the model loses with it."""

import streamlit as st

from attn import composition, methods
from attn.topk import PART_ROWS
from attn.device import pick_device
from ui import (analyses, drawing, figures, live_bench, measures, model_swaps, page_run, row_reads, served_model,
                session, step_page, widgets)
from ui.step_parts import layer_label
from pages import playground as pg
from pages.playground import topk_part

t = session.tr()
step_page.page_header(t, pg.STEP)
st.markdown(t("playground.lead"))
a = analyses.analysis_or_message()
if a is None:
    page_run.stop_page()
text, model_id, n = session.current_text(), served_model.model_id(), a.n
anchors = sorted(p for p, _ in measures.anchors(text, model_id, 5)[:pg.ANCHOR_HUBS])

cfg = pg.settings(a)  # before the widgets: each starts from its kept value or its default

# --- the parts ------------------------------------------------------------------------

st.markdown(f"**{t('playground.presets')}**")
for col, name in zip(st.columns(len(pg.PRESETS)), pg.PRESETS):
    none = name == "model" and not a.sliding_window  # a model that slides no window has no such preset
    col.button(t(f"playground.preset_{name}"), key=f"pg_preset_{name}", on_click=pg.apply_preset,
               args=(name, a.sliding_window, a.causal), width="stretch", disabled=none,
               help=t("playground.preset_model_none" if none else
                      "playground.preset_sink_help_both" if name == "sink" and not a.causal else
                      f"playground.preset_{name}_help", w=t.int(a.sliding_window)))

def part_name(p: str) -> str:
    return t("parts.topk") if p == topk_part.NAME else t(composition.PARTS[p].label_key)


on = widgets.setting(t, "pg_on", a, t("playground.parts"), help=t("playground.parts_help"), names=part_name)
cols = st.columns(len(pg.PART_NAMES), border=True)
for col, name in zip(cols, pg.PART_NAMES):
    col.markdown(f"**{part_name(name)}**")
    if name not in on:
        col.caption(t("playground.part_off"))
with cols[0]:
    widgets.setting(t, "pg_w", a, t("playground.pick_w"))
with cols[1]:
    widgets.setting(t, "pg_dilated", a, t("playground.pick_dilated"))
    widgets.setting(t, "pg_stride", a, t("playground.pick_stride"))
with cols[2]:
    hub_mode = widgets.setting(t, "pg_hub_mode", a, t("playground.pick_hub_mode"), names=lambda m: t(
        f"playground.hub_mode_{m}", hubs=t.list(str(h) for h in anchors)))
    if hub_mode == "chosen":
        widgets.setting(t, "pg_hubs", a, t("playground.pick_hubs"))
with cols[3]:
    widgets.setting(t, "pg_random", a, t("playground.pick_random"))
    widgets.setting(t, "pg_rblock", a, t("playground.pick_rblock"))
    widgets.setting(t, "pg_seed", a, t("playground.pick_seed"))
with cols[4]:
    widgets.setting(t, "pg_local", a, t("playground.pick_local"))
with cols[5]:
    widgets.setting(t, "pg_k", a, t("playground.pick_k"), help=t("playground.pick_k_help"))
    widgets.setting(t, "pg_chooser", a, t("playground.pick_chooser"),
                    names=lambda c: t(f"playground.chooser_{c}", dims=methods.INDEXER_DIMS))

c1, c2, c3 = st.columns(3)
causal = widgets.setting(t, "pg_causal", a, t("playground.causal"), where=c1,
                         help=t("playground.causal_help" if a.causal else "playground.causal_help_both"))
scope = widgets.setting(t, "pg_scope", a, t("playground.scope"), where=c2, horizontal=True,
                        names=lambda s: t(f"playground.scope_{s}"))
layer = widgets.setting(t, "pg_layer", a, t("common.layer"), where=c3)
every = widgets.setting(t, "pg_every", a, t("playground.pick_every"), where=c2, disabled=scope != "stack")
scoped = pg.scoped(a, scope, every)
if scope == "stack":
    exact = [i for i in range(a.n_layers) if i not in scoped]
    c2.caption(t("playground.stack_kept", every=every, layers=t.list(str(i) for i in exact)) if exact else
               t("playground.stack_none", every=every, L=a.n_layers))

cfg = {k: st.session_state[k] for k in pg.KEYS}  # as the widgets now hold them
top = topk_part.of_settings(cfg)
tk = None if top is None else top.key
comp, problem = pg.composition(cfg, n, anchors)
if problem is not None:
    st.error(pg.error_text(t, problem), icon=":material/tune:")
    page_run.stop_page()
key = pg.key_of(comp)
if comp.window >= n:
    st.warning(t("playground.window_covers" if causal else "playground.window_covers_both", w=t.int(comp.window),
                 n=t.int(n)), icon=":material/open_in_full:")  # read both ways: every token, not every earlier one
st.info(t("playground.composed" if pg.any_part(comp) or top else "playground.composed_alone",
          parts=pg.parts_label(t, comp, top),
          direction=t("playground.causal_word" if causal else "playground.bidirectional_word")),
        icon=":material/join:")

# --- what it costs --------------------------------------------------------------------

st.subheader(t("playground.cost_heading"))
m1, m2, m3, m4 = st.columns(4)
if top is not None:
    tc = pg.top_costs(text, model_id, key, tk, layer, causal)
    if tc.n < n:  # a long text: top-k's cells chosen on its first tokens (and the hubs past them named)
        st.caption(t.sentences(x for x in (t("playground.topk_first", m=t.int(tc.n), n=t.int(n)),
                                           pg.hubs_left_out(t, comp, tc.n)) if x))
    mean_cells = tc.cells / tc.heads
    m1.metric(t("playground.metric_cells_topk", layer=layer),
              t.int(tc.cells // tc.heads) if tc.cells % tc.heads == 0 else t.float(mean_cells, 2),
              delta=t("playground.metric_cells_delta", share=t.pct(mean_cells / tc.every), every=t.int(tc.every)),
              **drawing.REFERENCE)
    m2.metric(t("playground.metric_flops"), t.sci(tc.attend + tc.scoring),
              delta=t("playground.metric_flops_delta", full=t.sci(tc.full_flops)), **drawing.REFERENCE)
    m3.metric(t("playground.metric_numbers_topk"), t.int(tc.numbers),
              help=t("playground.metric_numbers_topk_help", rows=t.int(min(n, PART_ROWS))))
    m4.metric(t("playground.metric_ratio_ops", n=t.int(pg.LARGE_N)), t.float(tc.ratio, 2),
              delta=t("playground.metric_ratio_delta", full=t.float(tc.full_ratio, 2)), **drawing.REFERENCE)
    drawing.formula(t, r"\text{@flops} = 4\,d \cdot \text{@cells} + \text{@choosing} = 4 \cdot "
                    + f"{a.q.shape[-1]}" + r" \cdot " + drawing.tex_int(t, tc.cells) + r" + "
                    + drawing.tex_int(t, int(tc.scoring)),
                    t("playground.cost_caption_indexer" if top.indexer else "playground.cost_caption_topk",
                      heads=a.n_heads, dims=methods.INDEXER_DIMS, d=a.q.shape[-1], layer=layer))
    cost = None
else:
    cost = pg.costs(n, key, causal, a.n_heads, a.q.shape[-1])
if cost is not None:
    m1.metric(t("playground.metric_cells"), t.int(cost.cells),
              delta=t("playground.metric_cells_delta", share=t.pct(cost.share), every=t.int(cost.every)),
              **drawing.REFERENCE)
    m2.metric(t("playground.metric_flops"), t.sci(cost.flops),
              delta=t("playground.metric_flops_delta", full=t.sci(cost.full_flops)), **drawing.REFERENCE)
    m3.metric(t("playground.metric_numbers"), t.int(cost.numbers), help=t("playground.metric_numbers_help"))
    m4.metric(t("playground.metric_ratio", n=t.int(pg.LARGE_N)), t.float(cost.ratio, 2),
              delta=t("playground.metric_ratio_delta", full=t.float(cost.full_ratio, 2)), **drawing.REFERENCE)
    drawing.formula(t, r"\text{@flops} = 4\,d\,h \cdot \text{@cells} = 4 \cdot " + f"{a.q.shape[-1]} \\cdot {a.n_heads}"
                    + r" \cdot " + drawing.tex_int(t, cost.cells),
                    t("playground.cost_caption", large=t.int(cost.large), doubled=t.int(cost.doubled)))
if top is not None:
    st.caption(t("playground.grid_layer_topk", which=layer_label(t, a, layer)))
elif scope != "all" and layer not in scoped:
    st.caption(t("playground.grid_layer_own", layer=layer))
else:
    st.caption(t("playground.grid_layer", which=layer_label(t, a, layer)))


def grid_figure():
    g = pg.grid(n, key, causal) if top is None else pg.top_grid(text, model_id, key, tk, layer, causal)
    drawn = n if top is None else min(n, row_reads.layer_tokens(a))  # top-k's: a long text's first tokens
    fig, _ = figures.attention_heatmap(
        g, a.tokens[:drawn], title=t("playground.grid_title", parts=pg.parts_label(t, comp, top)),
        x_title=t("common.key_axis"), y_title=t("common.query_axis"), hover=t("playground.hover_grid"),
        separators=t.separators, colorbar=t("playground.grid_colorbar"), colorscale=figures.PATTERN,
        named_axes=n <= 128)  # tokens named on the axes of short texts; positions numbered on longer ones
    return fig


drawing.chart("pg_grid", (model_id, text, key, causal, tk, layer if top else None), grid_figure)
drawing.downsample_note(t, figures.pool_factor(n), n)

# --- what it can reach ------------------------------------------------------------------

st.subheader(t("playground.reach_heading"))
rl = widgets.setting(t, "pg_rl", a, t("playground.pick_layers"))
r = pg.reach(n, key, rl, causal)
st.caption(t("playground.reach_caption", m=r.m))
if top is not None:
    st.caption(t("playground.reach_topk"))
rows = []
for name, g in (("causal", r.causal), ("bidirectional", r.bidirectional)):
    far = t("hubs.never_value") if g.farthest is None else t.int(g.farthest)
    rows.append({t("playground.col_direction"): t(f"playground.{name}_word"), t("hubs.metric_max_hops"): far,
                 t("playground.col_never"): t.int(g.never),
                 t("playground.col_reach", L=rl, i=r.m - 1): t.int(g.reach_last)})
drawing.data_table(rows)
drawing.chart("pg_hops", (model_id, text, key, rl, causal), lambda: figures.integer_grid(
    r.drawn.grid, a.tokens[:r.m], title=t("playground.hops_title", m=r.m, direction=t(f"playground.{r.shown}_word")),
    x_title=t("common.key_axis"), y_title=t("common.query_axis"), hover=t("hubs.hover_hops"),
    separators=t.separators, colorbar=t("hubs.hops_unit"), missing_label=t("hubs.never")))

# --- what it keeps ----------------------------------------------------------------------

st.subheader(t("playground.keep_heading"))
st.markdown(t("playground.keep_lead" if a.causal else "playground.keep_lead_both"))
kept = pg.kept(text, model_id, key, scope, tk, every)
in_scope = layer in kept.scoped  # a layer outside the scope keeps its own attention: nothing to measure
err = pg.error(text, model_id, key, layer, tk) if in_scope else None
k1, k2, k3 = st.columns(3)
k1.metric(t("playground.metric_kept_all"), t.pct(kept.mean))
k2.metric(t("playground.metric_kept_layer", layer=layer), t.pct(float(kept.per_layer[layer])))
if err is not None:
    k3.metric(t("playground.metric_error", layer=layer), t.pct(err.mean),
              delta=t("playground.metric_error_delta", floor=t.pct(err.uniform)), **drawing.REFERENCE)
else:
    k3.metric(t("playground.metric_error", layer=layer), "—", help=t("playground.keeps_own", layer=layer))
if err is not None and err.n < n and top is None:  # a long text: the error reads its first tokens (top-k: said above)
    st.caption(t.sentences(x for x in (t("playground.error_first", m=t.int(err.n), n=t.int(n)),
                                       pg.hubs_left_out(t, comp, err.n)) if x))
own = a.layers[layer].window
if err is not None and own is not None and comp.window > own and n > own and top is None:
    # the pattern keeps every weight the layer computes, and reads further back than the layer ever does
    st.caption(t("playground.wider_than_layer", w=t.int(comp.window), own=t.int(own), layer=layer))
drawing.chart("pg_kept", (model_id, text, key, scope, tk, every), lambda: figures.bars(
    [str(i) for i in range(a.n_layers)], [float(x) for x in kept.per_layer],
    title=t("playground.kept_title"), y_title=t("playground.kept_axis"), separators=t.separators,
    hover=t("playground.hover_kept"), text=[t.pct(float(x), 0) for x in kept.per_layer],
    colours=[figures.OKABE_ITO[0] if i in kept.scoped else "#BBBBBB" for i in range(a.n_layers)]))

st.markdown(f"**{t('playground.swap_heading')}**")
swap_n = model_swaps.swap_budget()
scope_words = (t("playground.scope_stack_n", layers=t.list(str(i) for i in range(a.n_layers) if i not in scoped))
               if scope == "stack" else t(f"playground.scope_{scope}"))
if served_model.has_head():  # without one nothing runs: run_or_show says so, and no caption says it runs
    caption = "playground.swap_caption" + ("" if a.causal else "_both") + ("" if a.n > swap_n else "_all")
    left = pg.hubs_left_out(t, comp, min(a.n, swap_n))  # the hubs the swap's tokens do not hold, named
    st.caption(t.sentences(x for x in (t(caption, n=t.int(min(a.n, swap_n)), scope=scope_words), left) if x))
res = model_swaps.run_or_show(t, text, pg.swap_settings(a, comp, scope, top, every), swap_n,
                              t("playground.swap_button"), "pg_swap")
if res and not model_swaps.failure(t, res):
    control, mine = res
    model_swaps.masked_note(t, a, control)
    s1, s2, s3, s4 = st.columns(4)
    s1.metric(t("swap.base_ppl"), t.float(control.base_perplexity, 2))
    s2.metric(t("swap.control_ppl"), t.float(control.perplexity, 2))
    s3.metric(t("playground.pattern_ppl"), t.float(mine.perplexity, 2),
              delta=t("swap.times", x=t.float(mine.perplexity / mine.base_perplexity, 2)), **drawing.REFERENCE)
    s4.metric(t("playground.pattern_kl_top1"), t.float(max(mine.kl, 0.0), 3),
              delta=t("playground.top1", a=t.pct(mine.top1_agreement, 0)), **drawing.REFERENCE)
    st.caption(t("playground.swap_done", n=t.int(mine.n), control_kl=t.sci(max(control.kl, 0.0))))

# --- the fast path ------------------------------------------------------------------------

st.subheader(t("playground.fast_heading"))
if top is not None:  # chosen on each text: nothing compiled once
    st.markdown(t("playground.fast_topk", rows=PART_ROWS))
else:
    st.markdown(t("playground.fast_lead"))
    if pick_device().type != "cuda":
        st.caption(t("playground.fast_cpu"))
    else:
        ready = methods.composed().compiled(pick_device())
        st.caption(t("playground.fast_ready" if ready else "playground.fast_blocked"))
timed = pg.timing(text, model_id, key, layer, tk)
if timed is None and st.button(t("playground.timing_button"), key="pg_time"):
    timed = pg.time_it(t, text, model_id, key, layer, tk)
if timed is not None:
    f1, f2, f3 = st.columns(3)
    f1.metric(t("playground.time_pattern", backend=live_bench.kernel_name(t, timed.backend)),
              t.float(timed.pattern * 1e3, 2) + " ms")
    f2.metric(t("playground.time_sdpa" if a.causal else "playground.time_sdpa_both"),
              t.float(timed.full * 1e3, 2) + " ms")
    f3.metric(t("playground.time_ratio"), t.float(timed.pattern / max(timed.full, 1e-12), 2))
    st.caption(t("playground.timing_caption", n=t.int(timed.n), layer=layer))

st.caption(t("playground.share_hint"))
