"""Step 3 — look only at your neighbours: the sliding window and its reach."""

import streamlit as st

from ui import drawing, figures, glossary, measures, step_page, widgets
from ui.step_parts import sampled_note
from pages import neighbours

page = step_page.opened(neighbours.STEP)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
layer, head = widgets.layer_head_picker(t, a, "s3")
n = a.n
w = widgets.setting(t, "s3_w", a, t("neighbours.pick_w"))

if a.causal:
    drawing.formula(t, r"\text{@visible}(i, j) \iff 0 \le i - j < w \qquad \text{@cells} \approx n \cdot w",
                    t("neighbours.formula_caption"))
else:  # an encoder's window reaches both ways
    drawing.formula(t, r"\text{@visible}(i, j) \iff |i - j| < w \qquad \text{@cells} \approx n \cdot (2w - 1)",
                    t("neighbours.formula_caption_both"))
top = st.container()  # the window's numbers and grid, filled once every setting below is read

st.subheader(t("neighbours.reach_heading"))
st.markdown(t("neighbours.reach_lead" if a.causal else "neighbours.reach_lead_both"))
rc1, rc2 = st.columns(2)
rw = widgets.setting(t, "s3_rw", a, t("neighbours.pick_reach_w"), where=rc1)
rl = widgets.setting(t, "s3_rl", a, t("neighbours.pick_layers"), where=rc2)
sm = page.summary()
v: neighbours.Numbers = sm.numbers
kept = v.kept
shown = float(kept.per_head[layer].mean() if head is None else kept.per_head[layer][head])

with top:
    c1, c2, c3 = st.columns(3)
    c1.metric(t("neighbours.metric_kept_shown"), t.pct(shown), help=t("neighbours.metric_kept_shown_help"))
    c2.metric(t("neighbours.metric_kept_all"), t.pct(kept.mean))
    c3.metric(t("neighbours.metric_cells"), t.int(v.cells),
              delta=t("neighbours.metric_cells_delta", share=t.pct(v.cells / measures.cells(n, a.causal))),
              **drawing.REFERENCE)
    if (said := sampled_note(t, kept.sampled)) is not None:  # a long text: read on a sample of its rows
        st.caption(said)
    drawing.show_figure(sm.figure, key="s3_grid")
    drawing.downsample_note(t, v.factor, n, largest=True, window=a.layers[v.layer].window)  # measures.grid
    sliding = sum(1 for x in a.layer_types if x == "sliding")
    # on a text no longer than the window, a sliding layer still sees every earlier token
    note = ("neighbours.model_note_none" if not sliding else  # a model that slides no window
            "neighbours.model_note" if n > a.sliding_window else "neighbours.model_note_short")
    st.info(t(note, sliding=sliding, layers=a.n_layers, w=t.int(a.sliding_window), n=t.int(n)))

if a.causal:
    drawing.formula(t, r"\text{@reach}(L) = L\,(w-1) + 1 = " + f"{rl}\\,({rw}-1)+1 = {v.formula_size}")
else:  # both ways: L(w − 1) tokens on each side
    drawing.formula(t, r"\text{@reach}(L) = 2L\,(w-1) + 1 = " + f"2 \\cdot {rl}\\,({rw}-1)+1 = {v.formula_size}")
m1, m2 = st.columns(2)
m1.metric(t("neighbours.metric_reach_formula" if a.causal else "neighbours.metric_reach_formula_both"),
          t.int(v.formula_size))
m2.metric(t("neighbours.metric_reach_measured", i=v.i), t.int(v.measured),
          help=t("neighbours.metric_reach_measured_help" if a.causal else "neighbours.metric_reach_measured_help_both"))
drawing.chart("s3_reach", (v.rn, rw, rl), lambda: figures.reach_animation(
    v.frames, title=t("neighbours.reach_title", n=v.rn, w=rw), x_title=t("neighbours.reach_x"),
    y_title=t("neighbours.reach_y"), separators=t.separators, layer_word=t("neighbours.layers_word"),
    play=t("common.play"), pause=t("common.pause"), hover=t("neighbours.hover_reach"),
))
if not a.causal:
    st.caption(t("neighbours.reach_both"))
glossary.prose(t, page.step, "neighbours.outro")

page.room(window=w)
page.close(sm)
