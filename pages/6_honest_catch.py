"""Step 6 — the honest catch: what each shortcut gets wrong, on the model's own q, k, v."""

import streamlit as st

from attn import methods
from ui import figures, measures, model_swaps, step_page, widgets

page = step_page.opened(6)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
n = a.n
layer, head = widgets.layer_head_picker(t, a, "s6")
found = measures.anchors(text, model_id, 3)
c1, c2 = st.columns(2)
w = widgets.setting(t, "s6_w", a, t("step6.pick_w"), where=c1)
hubs = tuple(sorted(widgets.setting(t, "s6_hubs", a, t("step6.pick_hubs"), where=c2)))

widgets.formula(t, r"\text{@error} = \frac{\lVert o - o_{\text{@exact}} \rVert}{\lVert o_{\text{@exact}} \rVert}",
                t("step6.formula_caption"))

sm = page.summary()
err, shown, order, names, values, best_linear = (
    sm.values[k] for k in ("err", "shown", "order", "names", "values", "best_linear"))
mean = err["mean"]
own, own32 = methods.own().name, methods.in_float32(methods.own().name)  # the control, and it in float32 (GPU)
k1, k2, k3 = st.columns(3)
k1.metric(t("step6.metric_fused"), t.sci(mean[own]), help=t("step6.metric_fused_help", dtype=err["dtype"]))
k2.metric(t("step6.metric_window_hubs", w=w, g=len(hubs)), t.pct(mean[methods.window(hubs=True).name]))
k3.metric(t("step6.metric_best_linear", f=t(f"features.{best_linear.feature}")), t.pct(mean[best_linear.name]),
          delta=t("step6.metric_uniform", u=t.pct(mean["uniform"])), **widgets.REFERENCE)

widgets.show_figure(sm.figure, key="s6_errors")
st.caption(t("step6.heads_note"))  # the errors average the layer's heads; the picked head draws the maps
linear = [m for m in shown if m.family == "linear"]
better = [m for m in linear if mean[m.name] < mean["uniform"]]
both = "" if a.causal else "_both"  # on an encoder, equal weights over every token, both ways
uniform_said = t(f"step6.uniform_said{both}")
if better:
    st.caption(t.sentences([uniform_said, t(
        "step6.errors_caption_some", better=len(better), total=len(linear), rest=len(linear) - len(better),
        best=t(f"features.{best_linear.feature}"), gap=t.float(100 * (mean["uniform"] - mean[best_linear.name]), 1))]))
else:
    st.caption(t.sentences([uniform_said, t("step6.errors_caption_none")]))
if own32 in mean:
    st.caption(t("step6.errors_dtype_gpu", dtype=err["dtype"], e32=t.sci(mean[own32])))
else:
    st.caption(t("step6.errors_dtype", dtype=err["dtype"]))
over = [name for name, v in zip(names, values) if v > 1]
if over:  # named, not guessed at: which methods moved the output past its own length
    st.caption(t("step6.over_100", names=t.list(over)))
own_window = a.own_window(layer)
if own_window is not None and n > own_window:
    st.caption(t("step6.beyond_window", w=t.int(own_window)))

sharpness = measures.sharpness(text, model_id, layer, w, hubs)
peak = sharpness["peak"]
flat_names = names[:1] + [n_ for n_, k_ in zip(names, order) if k_ not in (own, own32)]
flat_values = [peak[own]] + [peak[k_] for k_ in order if k_ not in (own, own32)]
widgets.chart("s6_flat", (text, model_id, layer, w, hubs), lambda: figures.bars(
    [t("methods.own")] + flat_names[1:], flat_values, title=t("step6.flat_title", layer=layer),
    y_title=t("step6.flat_axis"), separators=t.separators, log_y=True, hover=t("step6.hover_peak"),
    reference=peak["uniform"], reference_name=t(f"step6.uniform_line{both}"), text=[t.pct(v, 1) for v in flat_values],
    tick_text=lambda d: t.pct(d, 0 if d >= 0.01 else 1)))


def spread(ms) -> str:
    """The names of some feature maps, and the range of their largest weights."""
    vals = [peak[m.name] for m in ms]
    span = t.pct(vals[0]) if len(vals) == 1 else f"{t.pct(min(vals))}–{t.pct(max(vals))}"
    return t.list(t(f"features.{m.feature}") for m in ms), span


# flat: at most twice as sharp as equal weights; sharp: sharper than softmax itself
flat = [m for m in linear if peak[m.name] <= 2 * peak["uniform"] and peak[m.name] < peak[own]]  # never both
spiky = [m for m in linear if peak[m.name] > peak[own]]
said = [t("step6.flat_caption", soft=t.pct(peak[own]), uni=t.pct(peak["uniform"]))]
if flat:
    names_, range_ = spread(flat)
    said.append(t("step6.flat_some", names=names_, range=range_, count=len(flat)))
if spiky:
    names_, range_ = spread(spiky)
    said.append(t("step6.sharp_some", names=names_, range=range_, count=len(spiky)))
st.caption(t.sentences(said))
norms = sharpness["norms"]
st.caption(t("step6.favor_norms", q=t.float(norms["q"], 1), k=t.float(norms["k"], 1),
             qs=t.float(norms["q_scaled"], 1), ks=t.float(norms["k_scaled"], 1)))

st.subheader(t("step6.maps_heading"))
feature = widgets.setting(t, "s6_feature", a, t("step6.pick_feature"), horizontal=True,
                          names=lambda f: t(f"features.{f}"))
maps = measures.implied_maps(text, model_id, layer, head, w, hubs, feature)
m = maps[own].shape[0]
cols = st.columns(2)
g_small = len([h for h in hubs if h < m])
titles = {name: t(methods.get(name).label_key, w=w, g=g_small) for name in maps}


def map_figure(key: str, grid):
    return figures.attention_heatmap(
        grid, a.tokens[:m], title=titles[key], x_title=t("common.key_axis"), y_title=t("common.query_axis"),
        hover=t("common.hover_cell"), separators=t.separators, colorbar=t("common.weight"), height=420,
        named_axes=True)[0]


for i, (key, grid) in enumerate(maps.items()):
    with cols[i % 2]:
        widgets.chart(f"s6_map_{key}", (text, model_id, layer, head, w, hubs, feature),
                      lambda key=key, grid=grid: map_figure(key, grid))
st.caption(t("step6.maps_caption", m=m, layer=layer, h=head))

page.room(layer=layer, window=w)
page.ask(sm)
model_swaps.sweep_section(t, a, text)
page.end()
