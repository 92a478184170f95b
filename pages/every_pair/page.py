"""Step 1 — every pair: the real attention grid and its n² cells."""

import functools

import streamlit as st

from attn import methods, stats
from ui import drawing, figures, glossary, measures, step_page, tap_strip, widgets
from pages import every_pair

page = step_page.opened(every_pair.STEP)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
layer, head = widgets.layer_head_picker(t, a, "s1")
sm = page.summary()
v: every_pair.Numbers = sm.numbers
n, window = a.n, v.window
own, full = methods.own(), methods.exact()
cells_square = full.cells(n, methods.Params(causal=False))
both = not a.causal  # an encoder: every token looks both ways, the whole square

if both:
    drawing.formula(t, r"\text{@cells} = n^2", t("every_pair.formula_caption_both"))
else:
    drawing.formula(t, r"\text{@cells} = n^2 \qquad \text{@causal: } \frac{n(n+1)}{2}",
                    t("every_pair.formula_caption"))

UNKNOWN_SHARE = 0.03  # past this share of unknown tokens, the page says what the vocabulary lost
said = []  # what the tokenizer costs this text, where it costs something
if a.n and a.unknown / a.n > UNKNOWN_SHARE:
    said.append(t("every_pair.unknown_note", share=t.pct(a.unknown / a.n), count=a.unknown))
if a.changed:
    shown_changes = list(a.changed.items())[:3]
    said.append(t("every_pair.normalised_note", share=t.pct(a.changed_share), examples=t.list(
        f"{drawing.literal(c)} → {drawing.literal(m) if m else '∅'}" for c, m in shown_changes)))
if said:
    st.caption(t.sentences(said))

c1, c2, c3, c4 = st.columns(4)
c1.metric(t("every_pair.metric_n"), t.int(n))
c2.metric(t("every_pair.metric_square"), t.int(cells_square))
if both:
    help_causal = (t("every_pair.metric_both_help") if window is None
                   else t("every_pair.metric_both_help_sliding", w=t.int(window), w1=t.int(window - 1)))
else:
    help_causal = (t("every_pair.metric_causal_help") if window is None
                   else t("every_pair.metric_causal_help_sliding", w=t.int(window), w1=t.int(window - 1)))
c3.metric(t("every_pair.metric_causal"), t.int(v.cells), help=help_causal)
c4.metric(t("every_pair.metric_doubled", n2=t.int(2 * n)), t.int(v.doubled),
          delta=t("every_pair.metric_doubled_delta", ratio=t.float(v.doubled / v.cells)), **drawing.REFERENCE)
# every head of every layer computes its own grid: the model's count is per head × heads
model_cells = a.n_heads * sum(own.cells(n, methods.Params(window=x.window, causal=x.causal)) for x in a.layers)
all_full = a.n_heads * a.n_layers * full.cells(n, methods.Params(causal=a.causal))
sliding = sum(1 for x in a.layer_types if x == "sliding")
cells_key = ("every_pair.model_cells_less" if model_cells < all_full else
             "every_pair.model_cells_same" if sliding else
             "every_pair.model_cells_full_both" if both else "every_pair.model_cells_full")  # no sliding layer
st.caption(t(cells_key,
             cells=t.int(model_cells), all_full=t.int(all_full), layers=t.int(a.n_layers), sliding=t.int(sliding),
             full=t.int(a.n_layers - sliding), w=t.int(a.sliding_window), heads=t.int(a.n_heads)))

followed = widgets.place("s1_token", a)  # its kept value, before the grid marks it
tapped = drawing.figure_once("s1_tap", (text, model_id, layer, head, followed), lambda: tap_strip.added(
    sm.figure, a.tokens, v.factor, followed, t("every_pair.hover_strip")))
# a tap on the strip (the figure's last trace) follows that row's token, as the drop-down below does
drawing.show_figure(tapped, key="s1_grid", on_select=functools.partial(
    widgets.follow_tapped, "s1_grid", "s1_token", len(sm.figure.data), n, v.factor))
drawing.downsample_note(t, v.factor, n, largest=True, window=v.window)  # measures.grid
st.caption(t.sentences([t("every_pair.grid_caption"), t("every_pair.strip_caption")]))

st.subheader(t("every_pair.row_heading"))
token = widgets.setting(t, "s1_token", a, t("every_pair.pick_token"), help=t("every_pair.pick_token_help"))


def row_figure():
    row = measures.row(text, model_id, layer, head, token)
    top = sorted(range(len(row)), key=lambda j: -row[j])[:3]
    return figures.row_bars(
        row, a.tokens[: len(row)], title=t("every_pair.row_title", i=token), x_title=t("common.key_axis"),
        y_title=t("common.weight"), hover=t("common.hover_bar"), separators=t.separators, highlight=top,
    )


drawing.chart("s1_row", (text, model_id, layer, head, token), row_figure)
row_cells = int(stats.row_cells(n, a.layers[layer])[token])
st.caption(t("every_pair.row_caption" if row_cells > 3 else "every_pair.row_caption_few", k=t.int(row_cells)))
if v.factor > 1:  # the grid above is pooled: the rows around the token, one cell a pair
    z, first, lo = measures.band(text, model_id, layer, head, token)
    drawing.chart("s1_band", (text, model_id, layer, head, token), lambda: every_pair.band_figure(
        z, first, lo, token, a.tokens, title=t("every_pair.band_title", a=t.int(first),
                                                b=t.int(first + z.shape[0] - 1), i=t.int(token)),
        x_title=t("common.key_axis"), y_title=t("common.query_axis"), hover=t("common.hover_cell_tokens"),
        separators=t.separators, colorbar=t("common.weight")))
    st.caption(t("every_pair.band_caption", f=t.int(v.factor), c=t.int(lo), d=t.int(lo + z.shape[1] - 1)))
glossary.prose(t, page.step, "every_pair.outro" if a.causal else "every_pair.outro_both")
if window is not None and 2 * n > window:  # the lesson names a full layer; this one slides a window
    st.caption(t("every_pair.outro_sliding", w=t.int(window), ratio=t.float(v.doubled / v.cells)))

page.room(layer=layer)
page.close(sm)
