"""Step 3 — look only at your neighbours: the sliding window and its reach."""

import streamlit as st

from ui import figures, measures, step_page, widgets

page = step_page.opened(3)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
layer, head = widgets.layer_head_picker(t, a, "s3")
n = a.n
w = widgets.setting(t, "s3_w", a, t("step3.pick_w"))

if a.causal:
    widgets.formula(t, r"\text{@visible}(i, j) \iff 0 \le i - j < w \qquad \text{@cells} \approx n \cdot w",
                    t("step3.formula_caption"))
else:  # an encoder's window reaches both ways
    widgets.formula(t, r"\text{@visible}(i, j) \iff |i - j| < w \qquad \text{@cells} \approx n \cdot (2w - 1)",
                    t("step3.formula_caption_both"))
top = st.container()  # the window's numbers and grid, filled once every setting below is read

st.subheader(t("step3.reach_heading"))
st.markdown(t("step3.reach_lead"))
rc1, rc2 = st.columns(2)
rw = widgets.setting(t, "s3_rw", a, t("step3.pick_reach_w"), where=rc1)
rl = widgets.setting(t, "s3_rl", a, t("step3.pick_layers"), where=rc2)
sm = page.summary()
kept, cells = sm.values["kept"], sm.values["cells"]
shown = float(kept["per_head"][layer].mean() if head is None else kept["per_head"][layer][head])
rn, frames, formula_size, measured = (sm.values[k] for k in ("rn", "frames", "formula_size", "measured"))

with top:
    c1, c2, c3 = st.columns(3)
    c1.metric(t("step3.metric_kept_shown"), t.pct(shown), help=t("step3.metric_kept_shown_help"))
    c2.metric(t("step3.metric_kept_all"), t.pct(kept["mean"]))
    c3.metric(t("step3.metric_cells"), t.int(cells),
              delta=t("step3.metric_cells_delta", share=t.pct(cells / measures.cells(n, causal=a.causal))),
              **widgets.REFERENCE)
    widgets.show_figure(sm.figure, key="s3_grid")
    widgets.downsample_note(t, sm.values["factor"], n)
    sliding = sum(1 for x in a.layer_types if x == "sliding")
    # on a text no longer than the window, a sliding layer still sees every earlier token
    note = ("step3.model_note_none" if not sliding else  # a model that slides no window
            "step3.model_note" if n > a.sliding_window else "step3.model_note_short")
    st.info(t(note, sliding=sliding, layers=a.n_layers, w=t.int(a.sliding_window), n=t.int(n)))

widgets.formula(t, r"\text{@reach}(L) = L\,(w-1) + 1 = " + f"{rl}\\,({rw}-1)+1 = {formula_size}")
m1, m2 = st.columns(2)
m1.metric(t("step3.metric_reach_formula" if a.causal else "step3.metric_reach_formula_both"), t.int(formula_size))
m2.metric(t("step3.metric_reach_measured", i=rn - 1), t.int(measured),
          help=t("step3.metric_reach_measured_help"))
widgets.chart("s3_reach", (rn, rw, rl), lambda: figures.reach_animation(
    frames, title=t("step3.reach_title", n=rn, w=rw), x_title=t("step3.reach_x"), y_title=t("step3.reach_y"),
    separators=t.separators, layer_word=t("step3.layers_word"), play=t("common.play"), pause=t("common.pause"),
    hover=t("step3.hover_reach"),
))
if not a.causal:
    st.caption(t("step3.reach_both"))
widgets.prose(t, 3, "step3.outro")

page.room(window=w)
page.close(sm)
