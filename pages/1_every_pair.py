"""Step 1 — every pair: the real attention grid and its n² cells."""

import streamlit as st

from attn import patterns
from ui import boot, data, figures, state, widgets

boot.through_app()

t, a = widgets.open_step(1)

layer, head = widgets.layer_head_picker(t, a, "s1")
n = a.n
cells_causal = patterns.cells(n, None, (), True)
cells_square = patterns.cells(n, None, (), False)
doubled = patterns.cells(2 * n, None, (), True)

widgets.formula(t, r"\text{@cells} = n^2 \qquad \text{@causal: } \frac{n(n+1)}{2}", t("step1.formula_caption"))

c1, c2, c3, c4 = st.columns(4)
c1.metric(t("step1.metric_n"), t.int(n))
c2.metric(t("step1.metric_square"), t.int(cells_square))
c3.metric(t("step1.metric_causal"), t.int(cells_causal), help=t("step1.metric_causal_help"))
c4.metric(t("step1.metric_doubled", n2=t.int(2 * n)), t.int(doubled),
          delta=t("step1.metric_doubled_delta", ratio=t.float(doubled / cells_causal)), delta_color="off")

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
token = st.selectbox(t("step1.pick_token"), list(range(n)), index=default_token,
                     format_func=lambda i: widgets.token_option(a, i), key="s1_token")
row = grid[token, : token + 1]
top = sorted(range(len(row)), key=lambda j: -row[j])[:3]
fig_row = figures.row_bars(
    row, a.tokens[: token + 1], title=t("step1.row_title", i=token), x_title=t("common.key_axis"),
    y_title=t("common.weight"), hover=t("common.hover_bar"), separators=t.separators, highlight=top,
)
widgets.show_figure(fig_row, key="s1_row")
st.caption(t("step1.row_caption", k=t.int(token + 1)))
st.markdown(t("step1.outro"))
