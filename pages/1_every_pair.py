"""Step 1 — every pair: the real attention grid and its n² cells."""

import streamlit as st

from attn import methods, patterns
from ui import boot, data, figures, state, widgets

boot.through_app()

t, a = widgets.open_step(1)
question = st.container()  # filled below, once the page's numbers are known

layer, head = widgets.layer_head_picker(t, a, "s1")
n = a.n
own = methods.get("own")  # the layer's own pattern: causal, plus its window in a sliding layer
window = a.own_window(layer)
cells_layer = own.cells(n, methods.Params(window=window))
cells_square = patterns.cells(n, None, (), False)
doubled = own.cells(2 * n, methods.Params(window=window))

widgets.formula(t, r"\text{@cells} = n^2 \qquad \text{@causal: } \frac{n(n+1)}{2}", t("step1.formula_caption"))

c1, c2, c3, c4 = st.columns(4)
c1.metric(t("step1.metric_n"), t.int(n))
c2.metric(t("step1.metric_square"), t.int(cells_square))
help_causal = (t("step1.metric_causal_help") if window is None
               else t("step1.metric_causal_help_sliding", w=t.int(window), w1=t.int(window - 1)))
c3.metric(t("step1.metric_causal"), t.int(cells_layer), help=help_causal)
c4.metric(t("step1.metric_doubled", n2=t.int(2 * n)), t.int(doubled),
          delta=t("step1.metric_doubled_delta", ratio=t.float(doubled / cells_layer)), delta_color="off")
model_cells = sum(own.cells(n, methods.Params(window=a.own_window(i))) for i in range(a.n_layers))
all_full = a.n_layers * patterns.cells(n, None, (), True)
sliding = sum(1 for x in a.layer_types if x == "sliding")
st.caption(t("step1.model_cells_less" if model_cells < all_full else "step1.model_cells_same",
             cells=t.int(model_cells), all_full=t.int(all_full), layers=t.int(a.n_layers), sliding=t.int(sliding),
             full=t.int(a.n_layers - sliding), w=t.int(a.sliding_window)))

grid = data.grid(state.current_text(), state.model_kind(), layer, head)
fig, factor = figures.attention_heatmap(
    grid, a.tokens, title=t("step1.grid_title", who=widgets.head_caption(t, a, layer, head)),
    x_title=t("common.key_axis"), y_title=t("common.query_axis"),
    hover=t("common.hover_cell_tokens") if n <= 128 else t("common.hover_cell"),
    separators=t.separators, colorbar=t("common.weight"),
)
widgets.show_figure(fig, key="s1_grid")
widgets.downsample_note(t, factor, n)
st.caption(t("step1.grid_caption"))

st.subheader(t("step1.row_heading"))
default_token = n - 1
widgets.fit("s1_token", options=range(n))
token = st.selectbox(t("step1.pick_token"), list(range(n)), index=default_token,
                     format_func=lambda i: widgets.token_option(a, i), key="s1_token")
row = grid[token, : token + 1]
top = sorted(range(len(row)), key=lambda j: -row[j])[:3]
fig_row = figures.row_bars(
    row, a.tokens[: token + 1], title=t("step1.row_title", i=token), x_title=t("common.key_axis"),
    y_title=t("common.weight"), hover=t("common.hover_bar"), separators=t.separators, highlight=top,
)
widgets.show_figure(fig_row, key="s1_row")
st.caption(t("step1.row_caption", k=t.int(token + 1 if window is None else min(token + 1, window))))
st.markdown(t("step1.outro"))

with question:
    ratio = doubled / cells_layer
    widgets.predict(t, 1, t("predict.q1"), [2, 4, 8], ratio, label=lambda x: t("predict.times", x=x),
                    value_text=t("predict.times", x=t.float(ratio, 2)))
