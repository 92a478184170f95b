"""Step 3 — look only at your neighbours: the sliding window and its reach."""

import streamlit as st

from attn import graph
from ui import boot, data, figures, state, widgets

boot.through_app()

t, a = widgets.open_step(3)
question = st.container()  # filled below, once the page's numbers are known

text, kind = state.current_text(), state.model_kind()
layer, head = widgets.layer_head_picker(t, a, "s3")
n = a.n
widgets.fit("s3_w", lo=1, hi=max(2, min(n, 512)))
w = st.slider(t("step3.pick_w"), 1, max(2, min(n, 512)), min(16, n), key="s3_w")

widgets.formula(t, r"\text{@visible}(i, j) \iff 0 \le i - j < w \qquad \text{@cells} \approx n \cdot w",
                t("step3.formula_caption"))

kept = data.kept(text, kind, w, ())
shown = float(kept["per_head"][layer].mean() if head is None else kept["per_head"][layer][head])
cells = data.cells(n, w, (), True)
c1, c2, c3 = st.columns(3)
c1.metric(t("step3.metric_kept_shown"), t.pct(shown), help=t("step3.metric_kept_shown_help"))
c2.metric(t("step3.metric_kept_all"), t.pct(kept["mean"]))
c3.metric(t("step3.metric_cells"), t.int(cells),
          delta=t("step3.metric_cells_delta", share=t.pct(cells / data.cells(n))), delta_color="off")

grid = data.grid(text, kind, layer, head)
fig, factor = figures.attention_heatmap(
    grid, a.tokens, title=t("step3.grid_title", w=t.int(w), who=widgets.head_caption(t, a, layer, head)),
    x_title=t("common.key_axis"), y_title=t("common.query_axis"),
    hover=t("common.hover_cell_tokens") if n <= 128 else t("common.hover_cell"),
    separators=t.separators, colorbar=t("common.weight"),
)
figures.add_band(fig, n, w, name=t("step3.band_name", w=t.int(w)))
widgets.show_figure(fig, key="s3_grid")
widgets.downsample_note(t, factor, n)

sliding = sum(1 for x in a.layer_types if x == "sliding")
st.info(t("step3.model_note", sliding=sliding, layers=a.n_layers, w=t.int(a.sliding_window)))

st.subheader(t("step3.reach_heading"))
st.markdown(t("step3.reach_lead"))
rc1, rc2 = st.columns(2)
widgets.fit("s3_rl", lo=1, hi=a.n_layers)
rw = rc1.slider(t("step3.pick_reach_w"), 2, 8, 3, key="s3_rw")
rl = rc2.slider(t("step3.pick_layers"), 1, a.n_layers, 4, key="s3_rl")
rn = min(n, 64)
frames = data.reach_frames(rn, rw, rl)
formula_size = graph.reach_size(rw, rl)
measured = int(frames[-1][rn - 1].sum())
widgets.formula(t, r"\text{@reach}(L) = L\,(w-1) + 1 = " + f"{rl}\\,({rw}-1)+1 = {formula_size}")
m1, m2 = st.columns(2)
m1.metric(t("step3.metric_reach_formula"), t.int(formula_size))
m2.metric(t("step3.metric_reach_measured", i=rn - 1), t.int(measured),
          help=t("step3.metric_reach_measured_help"))
fig_r = figures.reach_animation(
    frames, title=t("step3.reach_title", n=rn, w=rw), x_title=t("step3.reach_x"), y_title=t("step3.reach_y"),
    separators=t.separators, layer_word=t("step3.layers_word"), play=t("common.play"), pause=t("common.pause"),
    hover=t("step3.hover_reach"),
)
widgets.show_figure(fig_r, key="s3_reach")
st.markdown(t("step3.outro"))

with question:
    options = sorted({rl * rw, formula_size, rw**rl})
    widgets.predict(t, 3, t("predict.q3", L=rl, w=rw), options, measured, label=lambda x: t.int(x),
                    value_text=t.int(measured))
