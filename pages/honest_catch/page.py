"""Step 6 — the honest catch: what each shortcut gets wrong, on the model's own q, k, v."""

import streamlit as st

from attn import methods
from ui import drawing, figures, measures, model_swaps, step_page, widgets
from pages import honest_catch

page = step_page.opened(honest_catch.STEP)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
n = a.n
layer, head = widgets.layer_head_picker(t, a, "s6")
c1, c2 = st.columns(2)
w = widgets.setting(t, "s6_w", a, t("honest_catch.pick_w"), where=c1)
hubs = tuple(sorted(widgets.setting(t, "s6_hubs", a, t("honest_catch.pick_hubs"), where=c2)))

drawing.formula(t, r"\text{@error} = \frac{\lVert o - o_{\text{@exact}} \rVert}{\lVert o_{\text{@exact}} \rVert}",
                t("honest_catch.formula_caption"))

sm = page.summary()
v: honest_catch.Numbers = sm.numbers
err, shown, order, names, values, best_linear = v.errors, v.shown, v.order, v.names, v.values, v.best_linear
mean = err.mean
own, own32 = methods.own().name, methods.in_float32(methods.own().name)  # the control, and it in float32 (GPU)
k1, k2, k3 = st.columns(3)
if err.plain:  # a soft cap, a bias: the fused kernel cannot, so the layer's own softmax was written out
    k1.metric(t("honest_catch.metric_written"), t.sci(mean[own]), help=t("honest_catch.metric_written_help",
                                                                         dtype=err.dtype))
else:
    k1.metric(t("honest_catch.metric_fused"), t.sci(mean[own]),
              help=t("honest_catch.metric_fused_help", dtype=err.dtype))
k2.metric(t("honest_catch.metric_error_of", name=honest_catch.window_hubs_name(t, w, hubs, err.hubs)),
          t.pct(mean[methods.window(hubs=True).name]))
k3.metric(t("honest_catch.metric_best_linear", f=t(f"features.{best_linear.feature}")), t.pct(mean[best_linear.name]),
          delta=t("honest_catch.metric_uniform", u=t.pct(err.uniform)), **drawing.REFERENCE)

if err.n < n:  # a long text: the layer's outputs are written out on its first tokens
    st.caption(t("common.layer_first", m=t.int(err.n), n=t.int(n)))
if (beyond := honest_catch.hubs_beyond(t, hubs, err.hubs, err.n)) is not None:  # named: measured without them
    st.caption(beyond)
drawing.show_figure(sm.figure, key="s6_errors")
st.caption(t("honest_catch.heads_note"))  # the errors average the layer's heads; the picked head draws the maps
linear = [m for m in shown if m.family == "linear"]
better = [m for m in linear if mean[m.name] < err.uniform]
both = "" if a.causal else "_both"  # on an encoder, equal weights over every token, both ways
uniform_said = t(f"honest_catch.uniform_said{both}")
if better:
    st.caption(t.sentences([uniform_said, t(
        "honest_catch.errors_caption_some", better=len(better), total=len(linear), rest=len(linear) - len(better),
        best=t(f"features.{best_linear.feature}"), gap=t.float(100 * (err.uniform - mean[best_linear.name]), 1))]))
else:
    st.caption(t.sentences([uniform_said, t("honest_catch.errors_caption_none")]))
ran = "_written" if err.plain else ""  # the layer's own attention: fused, or written out step by step
if own32 in mean:
    st.caption(t(f"honest_catch.errors_dtype_gpu{ran}", dtype=err.dtype, e32=t.sci(mean[own32])))
else:
    st.caption(t(f"honest_catch.errors_dtype{ran}", dtype=err.dtype))
if (cap := a.layers[layer].softcap) is not None:  # named with its value, not only in a tooltip
    st.caption(t("honest_catch.softcap_note", layer=layer, cap=t.float(cap, 1)))
over = [name for name, value in zip(names, values) if value > 1]
if over:  # named, not guessed at: which methods moved the output past its own length
    st.caption(t("honest_catch.over_100", names=t.list(over)))
own_window = a.layers[layer].window
if own_window is not None and n > own_window:
    st.caption(t("honest_catch.beyond_window", w=t.int(own_window)))
oracle, indexer = methods.top_k(), methods.top_k(indexer=True)
if oracle.name in mean and indexer.name in mean:
    keep = oracle.keep_of(methods.Params(window=w, causal=a.causal))
    st.caption(t("honest_catch.topk_caption", k=t.int(keep), w=t.int(w), oracle=t.pct(mean[oracle.name]),
                 indexer=t.pct(mean[indexer.name]), dims=indexer.indexer_dims,
                 recall=t.pct(measures.topk_recall(text, model_id, layer, w)),
                 window=t.pct(mean[methods.window().name])))

sharpness = measures.sharpness(text, model_id, layer, w, hubs)
peak = sharpness.peak
flat_names = names[:1] + tuple(n_ for n_, k_ in zip(names, order) if k_ not in (own, own32))
flat_values = [peak[own]] + [peak[k_] for k_ in order if k_ not in (own, own32)]
drawing.chart("s6_flat", (text, model_id, layer, w, hubs), lambda: figures.bars(
    [t("methods.own")] + list(flat_names[1:]), flat_values, title=t("honest_catch.flat_title", layer=layer),
    y_title=t("honest_catch.flat_axis"), separators=t.separators, log_y=True, hover=t("honest_catch.hover_peak"),
    reference=sharpness.uniform, reference_name=t(f"honest_catch.uniform_line{both}"),
    text=[t.pct(x, 1) for x in flat_values], tick_text=lambda d: t.pct(d, 0 if d >= 0.01 else 1)))


def spread(ms) -> str:
    """The names of some feature maps, and the range of their largest weights."""
    vals = [peak[m.name] for m in ms]
    span = t.pct(vals[0]) if len(vals) == 1 else f"{t.pct(min(vals))}–{t.pct(max(vals))}"
    return t.list(t(f"features.{m.feature}") for m in ms), span


# flat: at most twice as sharp as equal weights; sharp: sharper than softmax itself
flat = [m for m in linear if peak[m.name] <= 2 * sharpness.uniform and peak[m.name] < peak[own]]  # never both
spiky = [m for m in linear if peak[m.name] > peak[own]]
said = [t("honest_catch.flat_caption", soft=t.pct(peak[own]), uni=t.pct(sharpness.uniform))]
if flat:
    names_, range_ = spread(flat)
    said.append(t("honest_catch.flat_some", names=names_, range=range_, count=len(flat)))
if spiky:
    names_, range_ = spread(spiky)
    said.append(t("honest_catch.sharp_some", names=names_, range=range_, count=len(spiky)))
st.caption(t.sentences(said))
norms = sharpness.norms
favor = methods.linear("favor")
favor_fails = mean.get(favor.name, err.uniform) >= err.uniform  # no better than equal weights on this layer
st.caption(t("honest_catch.favor_norms" if favor_fails else "honest_catch.favor_norms_ok", q=t.float(norms.q, 1),
             k=t.float(norms.k, 1),
             qs=t.float(norms.q_scaled, 1), ks=t.float(norms.k_scaled, 1)))

st.subheader(t("honest_catch.maps_heading"))
feature = widgets.setting(t, "s6_feature", a, t("honest_catch.pick_feature"), horizontal=True,
                          names=lambda f: t(f"features.{f}"))
maps = measures.implied_maps(text, model_id, layer, head, w, hubs, feature)
m = maps[own].shape[0]
cols = st.columns(2)
small = tuple(h for h in hubs if h < m)  # the hubs among the drawn tokens: those the maps hold
titles = {name: honest_catch.window_hubs_name(t, w, hubs, small) if name == methods.window(hubs=True).name else
          t(methods.get(name).label_key, w=w, g=len(small)) for name in maps}


def map_figure(key: str, grid):
    return figures.attention_heatmap(
        grid, a.tokens[:m], title=titles[key], x_title=t("common.key_axis"), y_title=t("common.query_axis"),
        hover=t("common.hover_cell"), separators=t.separators, colorbar=t("common.weight"), height=420,
        named_axes=True)[0]


for i, (key, grid) in enumerate(maps.items()):
    with cols[i % 2]:
        drawing.chart(f"s6_map_{key}", (text, model_id, layer, head, w, hubs, feature),
                      lambda key=key, grid=grid: map_figure(key, grid))
st.caption(t("honest_catch.maps_caption", m=m, layer=layer, h=head))

page.room(layer=layer, window=w)
page.ask(sm)
model_swaps.sweep_section(t, a, text, page.step)
page.end()
