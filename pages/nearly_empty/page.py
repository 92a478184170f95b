"""Step 2 — the grid is nearly empty: k(p) cells carry a share p of each row."""

import math

import streamlit as st

from ui import drawing, figures, glossary, measures, step_page, widgets
from ui.step_parts import sampled_note
from pages import nearly_empty

page = step_page.opened(nearly_empty.STEP)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
layer, head = widgets.layer_head_picker(t, a, "s2")
p = widgets.setting(t, "s2_p", a, t("nearly_empty.pick_p"), names=lambda x: t.pct(x, 0))

drawing.formula(t, r"k(p) = \min\Big\{k : \textstyle\sum_{\text{@top}\,k} a_{ij} \ge p\Big\} \qquad "
                r"\text{@useful} \approx n \cdot \bar k", t("nearly_empty.formula_caption"))

sm = page.summary()
v: nearly_empty.Numbers = sm.numbers
res = v.useful
prefixes = res.prefixes
n = a.n
c1, c2, c3, c4 = st.columns(4)
c1.metric(t("nearly_empty.metric_k", p=t.pct(p, 0)), t.float(res.k, 1))
c2.metric(t("nearly_empty.metric_useful"), t.int(res.useful), help=t("nearly_empty.metric_useful_help"))
c3.metric(t("nearly_empty.metric_share"), t.pct(res.share),
          help=t("nearly_empty.metric_share_help", cells=t.int(res.cells)))
# k̄ over every head and the share's trend: a long text's on a smaller sample of rows (row_reads.model_sample)
trend = measures.share_trend(text, model_id, p)
trend_said = sampled_note(t, trend.sampled, "cells")
c4.metric(t("nearly_empty.metric_all"), t.float(res.k_all, 1),
          help=t.sentences([t("nearly_empty.metric_all_help")] + ([trend_said] if trend_said else [])))
if (said := sampled_note(t, res.sampled)) is not None:  # a long text: its statistics read on a sample of its rows
    st.caption(said)
# the lead's "a small part of its cells", in this text's numbers
all_said = t("nearly_empty.all_caption", k=t.float(res.k_all, 1), p=t.pct(p, 0), n=t.int(n))
st.caption(t.sentences([all_said, trend_said]) if trend_said else all_said)
st.caption(t("nearly_empty.topk_caption", k=t.int(max(1, round(res.k))), p=t.pct(p, 0), kept=t.pct(res.top_kept),
             reached=t.pct(res.top_reached, 0)))

drawing.show_figure(sm.figure, key="s2_grid")
drawing.downsample_note(t, v.factor, n, largest=True)  # measures.top_share_view: each block's largest
if res.sampled is None or res.sampled.every_row:  # counted on every row
    st.caption(t("nearly_empty.grid_caption", p=t.pct(p, 0), cells=t.int(res.mask_cells), total=t.int(res.cells)))
else:  # a long text: the count is estimated from its row sample, and said so with its spread
    st.caption(t("nearly_empty.grid_caption_sampled", p=t.pct(p, 0), cells=t.int(res.mask_cells),
                 total=t.int(res.cells), spread=t.int(math.ceil(res.mask_spread)), rows=t.int(res.sampled.rows),
                 n=t.int(res.sampled.n)))
if head is None:
    st.caption(t("nearly_empty.grid_caption_average"))

st.subheader(t("nearly_empty.prefix_heading"))
xs = [r.n for r in prefixes]
# a tick is left unlabelled where the whole text lies just past a doubling (128 and 130 would
# print on top of each other and read as one number)
ticks = (xs, [t.int(x) if i == len(xs) - 1 or xs[-1] / x > 1.25 else "" for i, x in enumerate(xs)])
settings = (text, model_id, layer, head, p)


def growth_figure(measured: str, even: str, hover: str, title: str, axis: str, **extra):
    """One of the step's two lines against the prefix's length: the text's own
    (``measured``, a field of each prefix) beside an even spread's (``even``)."""
    series = [
        {"name": t(f"nearly_empty.series_{measured}"), "x": xs, "y": [getattr(r, measured) for r in prefixes],
         "hover": t(hover)},
        {"name": t("nearly_empty.series_uniform"), "x": xs, "y": [getattr(r, even) for r in prefixes], "dash": "dot",
         "colour": "#999999", "hover": t(hover if measured == "k" else "nearly_empty.hover_uniform")},
    ]
    return figures.lines(series, title=t(title, p=t.pct(p, 0)), x_title=t("common.n_axis"), y_title=t(axis),
                         separators=t.separators, log_x=True, log_y=True, x_ticks=ticks, **extra)


def prefix_figure():
    return growth_figure("share", "uniform_share", "nearly_empty.hover_prefix", "nearly_empty.prefix_title",
                         "nearly_empty.share_axis", y_format=".0%")


drawing.chart("s2_prefix", settings, prefix_figure)
if len(prefixes) >= 2:
    first, last = prefixes[0], prefixes[-1]
    # said as this text measured it: the share falls on many layers and heads, rises on others
    fell = last.share < first.share
    said = ("nearly_empty.prefix_caption" if fell
            else "nearly_empty.prefix_caption_rose" if last.share < 0.5  # still mostly empty
            else "nearly_empty.prefix_caption_rose_dense")
    # how each point was measured: a causal model's beginnings are read off the one run, an
    # encoder's (whose tokens look ahead too) are runs of their own
    how = "nearly_empty.prefix_how" if a.causal else "nearly_empty.prefix_how_encoder"
    st.caption(t.sentences([t(said, n0=t.int(first.n), s0=t.pct(first.share), n1=t.int(last.n),
                              s1=t.pct(last.share), p=t.pct(p, 0)), t(how)]))
    every = trend.heads_fell == trend.heads and trend.layers_fell == trend.layers  # nothing else left
    trend_line = t("nearly_empty.trend_caption_all" if every else "nearly_empty.trend_caption",
                   n0=t.int(trend.first), n1=t.int(trend.n), fell=t.int(trend.layers_fell),
                   layers=t.int(trend.layers), fell_heads=t.int(trend.heads_fell), heads=t.int(trend.heads))
    if trend_said:  # counted on the rows the model-wide k̄ above was
        trend_line = t.sentences([trend_line, t("nearly_empty.trend_sampled", rows=t.int(trend.sampled.rows),
                                                n=t.int(trend.sampled.n))])
    st.caption(trend_line)


def k_figure():
    return growth_figure("k", "uniform_k", "nearly_empty.hover_k", "nearly_empty.k_title", "nearly_empty.k_axis")


drawing.chart("s2_k", settings, k_figure)
if len(prefixes) >= 2 and prefixes[0].k > 0:  # what the chart shows, said with its numbers (the title is neutral)
    first, last = prefixes[0], prefixes[-1]
    st.caption(t("nearly_empty.k_caption", k0=t.float(first.k, 1), n0=t.int(first.n), k1=t.float(last.k, 1),
                 n1=t.int(last.n), nr=t.float(last.n / first.n, 1), kr=t.float(last.k / first.k, 1)))
if res.window is not None and n > res.window:
    st.caption(t("nearly_empty.window_cap", w=t.int(res.window)))
glossary.prose(t, page.step, "nearly_empty.outro")

page.room(layer=layer)
page.close(sm)
