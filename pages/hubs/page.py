"""Step 4 — hubs: a few global tokens join every pair in two hops (bidirectional),
and in a causal model the first token is a sink; an encoder's own hubs are its
special tokens ([CLS], [SEP])."""

import streamlit as st

from ui import drawing, figures, glossary, measures, model_swaps, row_reads, served_model, step_page, widgets
from ui.step_parts import sampled_note
from pages import hubs as step

page = step_page.opened(step.STEP)
t, a, text, model_id = page.t, page.a, page.text, page.model_id
n = a.n
read_all = measures.anchor_scores(text, model_id)  # the anchors read: the 5 listed, then the next ones
found = read_all[:step.ANCHORS_LISTED]
if n <= measures.ANCHOR_DISTANCE:  # no row lies that far after another: there is nothing to score anchors by
    st.caption(t("hubs.anchors_none" if a.causal else "hubs.anchors_none_both", n=t.int(n),
                 d=t.int(measures.ANCHOR_DISTANCE)))
else:
    read = row_reads.model_sample(a)  # a long text's anchors: found on a sample of its rows, each score ± its spread
    digits = step.score_digits(x[2] for x in read_all)

    def item(p: int, score: float, spread: float) -> str:
        if read.every_row:
            return t("hubs.anchor_item", p=p, token=drawing.literal(a.tokens[p]), score=t.float(score, 3))
        return t("hubs.anchor_item_sampled", p=p, token=drawing.literal(a.tokens[p]), score=t.float(score, digits),
                 spread=t.float(spread, digits))

    st.caption(t("hubs.anchors_found" if a.causal else "hubs.anchors_found_both",
                 found=t.list(item(*x) for x in found)))
    if not read.every_row:
        said = [t("hubs.anchors_sampled", rows=t.int(read.count), n=t.int(n), first=t.int(read.whole),
                  spaced=t.int(read.count - read.whole))]
        for group in step.close_groups(found):  # neighbours in rank the sample cannot order
            said.append(t("hubs.anchors_close", names=t.list(str(p) for p, _, _ in group)))
        if nearby := step.close_to_last(read_all, step.ANCHORS_LISTED):  # one not listed that could be fifth
            said.append(t("hubs.anchors_close_next", names=t.list(item(*x) for x in nearby), count=len(nearby),
                          last=found[-1][0]))
        st.caption(t.sentences(said))
hubs = tuple(sorted(widgets.setting(t, "s4_hubs", a, t("hubs.pick_hubs"))))
w = widgets.setting(t, "s4_w", a, t("hubs.pick_w"))
g = len(hubs)

drawing.formula(t, r"\text{@cells} = O\big(n\,(w + g)\big) \ll n^2", t("hubs.formula_caption"))

sm = page.summary()
v: step.Numbers = sm.numbers
cells_full = measures.cells(n, a.causal)
(_, _, kept_s), sink_share, sink_rows = measures.kept_and_sink(text, model_id, w, step.hub_sets(hubs))
c1, c2, c3, c4 = st.columns(4)
c1.metric(t("hubs.metric_cells", g=g), t.int(v.cells_h),
          delta=t("hubs.metric_cells_delta", share=t.pct(v.cells_h / cells_full)), **drawing.REFERENCE)
c2.metric(t("hubs.metric_kept_window"), t.pct(v.kept_w.mean))
c3.metric(t("hubs.metric_kept_hubs", g=g), t.pct(v.kept_h.mean),
          delta=t("hubs.metric_kept_delta", d=t.float(100 * (v.kept_h.mean - v.kept_w.mean), 1)),
          **drawing.REFERENCE)
c4.metric(t("hubs.metric_kept_sink"), t.pct(kept_s.mean),
          delta=t("hubs.metric_kept_delta", d=t.float(100 * (kept_s.mean - v.kept_w.mean), 1)),
          **drawing.REFERENCE)
if (said := sampled_note(t, v.kept_h.sampled)) is not None:  # a long text: read on a sample of its rows
    st.caption(said)

st.subheader(t("hubs.hops_heading"))
st.markdown(t("hubs.hops_lead"))
hn, hop_hubs, hw, grids = v.hn, v.hop_hubs, v.hw, v.grids
outside = [h for h in hubs if h >= hn]
if not any(h < hn for h in hubs):  # the hop grid needs a hub: the first token stands in, and the page says so
    st.caption(t("hubs.hub_stand_in", n=t.int(hn)))
if outside:
    st.caption(t("hubs.hubs_outside", n=hn, g=len(outside), outside=t.list(str(h) for h in outside)))


def farthest_metric(res: measures.HopGrid) -> None:
    st.metric(t("hubs.metric_max_hops"), step.distance(t, res),
              help=t("hubs.metric_never_help", pairs=t.int(res.never)) if res.never else None)


h1, h2 = st.columns(2)
common = v.hop_style
with h1:
    drawing.chart("s4_hops_none", (text, model_id, hn, hw), lambda: figures.integer_grid(
        grids.none.grid, a.tokens[:hn], title=t("hubs.hops_none", w=hw), **common))
    farthest_metric(grids.none)
with h2:
    drawing.show_figure(sm.figure, key="s4_hops_hubs")
    farthest_metric(grids.hubs)
st.caption(t("hubs.hops_caption", n=hn, w=hw))
if not a.causal:  # the grids above are how this very model reads: both ways
    st.caption(t("hubs.hops_real"))

far_i, far_j = hn - 1, next((j for j in range(hn) if j not in hop_hubs), 0)
path = measures.route(hn, hw, hop_hubs, far_i, far_j)
if path:
    st.markdown(t("hubs.route_lead", i=far_i, j=far_j, hops=len(path) - 1))
    st.text(" → ".join(f"{p} · {a.tokens[p]}" for p in path))
    drawing.chart("s4_route", (text, model_id, hn, hw, hop_hubs, far_i, far_j), lambda: figures.route_diagram(
        hn, path, hop_hubs, a.tokens[:hn], title=t("hubs.route_title"), separators=t.separators,
        token_word=t("common.token"), hub_word=t("common.hub")))


def causal_hubs() -> None:
    """A causal model's hubs: the first token is a sink, a hub further in relays."""
    st.subheader(t("hubs.sink_heading"))
    sink, alone = grids.causal_sink, grids.causal_none
    if sink.farthest is None or alone.farthest is None:
        st.markdown(t("hubs.sink_text_never"))
    else:
        # the first token as hub joins no pair sooner: said once, not twice
        same = sink.farthest == alone.farthest
        st.markdown(t("hubs.sink_text_same" if same else "hubs.sink_text", far=t.int(sink.farthest),
                      far0=t.int(alone.farthest)))
    c1, c2 = st.columns(2)
    with c1:
        drawing.chart("s4_hops_causal", (text, model_id, hn, hw), lambda: figures.integer_grid(
            sink.grid, a.tokens[:hn], title=t("hubs.hops_causal", w=hw), **common))
        farthest_metric(sink)
    with c2:
        relay = [h for h in hubs if h > 0]  # the first token cannot relay: a hub further in can
        if relay:
            # a span of hn tokens around the first such hub (the first hn tokens when it lies among them)
            start = max(0, min(relay[0] - hn // 2, n - hn))
            inside = tuple(h - start for h in hubs if start <= h < start + hn)
            span = measures.hop_grids(hn, hw, inside, inside)
            mine, alone_span = span.causal_hubs, span.causal_none
            where = t.list(str(h + start) for h in inside)
            drawing.chart("s4_hops_causal_hubs", (text, model_id, hn, hw, start, inside), lambda: figures.integer_grid(
                mine.grid, a.tokens[start:start + hn],
                title=t("hubs.hops_causal_hubs", w=hw, g=len(inside), where=where), start=start,
                **common))
            farthest_metric(mine)
            if start:
                st.caption(t("hubs.span_caption", a=start, b=start + hn - 1, h=relay[0], w=hw))
        else:
            st.info(t("hubs.no_hub_drawn", n=hn))
    if relay:
        st.markdown(t("hubs.causal_hub_text", mine=step.reach_phrase(t, mine),
                      alone=step.reach_phrase(t, alone_span)))


HUB_FACTOR = 2  # a special token is called a hub where it takes at least twice its even share


def encoder_hubs() -> tuple[list[str], list[str]] | None:
    """An encoder's own hubs: the tokenizer's special tokens, which many heads lean on.
    Returns those measured as hubs and those not (each "position · token"), or None where
    the tokenizer adds none."""
    st.subheader(t("hubs.encoder_heading"))
    got = measures.special_share(text, model_id)
    if not got.columns:
        st.markdown(t("hubs.encoder_no_specials"))
        return None
    st.markdown(t("hubs.encoder_text"))
    hubs = [p for p, share, even in got.each if share >= HUB_FACTOR * even]
    named = {p: f"{p} · {drawing.literal(a.tokens[p])}" for p, _, _ in got.each}
    for p, share, even in got.each:  # each with its own share: a hub only where it takes clearly more
        key = "hubs.encoder_token_hub" if p in hubs else "hubs.encoder_token_plain"
        st.markdown(f"- {t(key, token=named[p], share=t.pct(share), even=t.pct(even), ratio=t.float(share / even, 1))}")
    if len(got.columns) > 1:
        top = max(range(len(got.per_layer)), key=lambda layer: got.per_layer[layer])
        st.caption(t("hubs.encoder_layer", layer=top, share=t.pct(got.per_layer[top])))
    return [named[p] for p in named if p in hubs], [named[p] for p in named if p not in hubs]


def which_hubs(found: tuple[list[str], list[str]] | None) -> None:
    """After why hubs form: which of the tokenizer's tokens this model made such places on
    this text, as measured above (nothing where the tokenizer adds none)."""
    if found is None:
        return
    hubs, plain = found
    if hubs and plain:
        st.markdown(t("hubs.sink_which_some", hubs=t.list(hubs), plain=t.list(plain)))
    elif hubs:
        st.markdown(t("hubs.sink_which_all", hubs=t.list(hubs)))
    else:
        st.markdown(t("hubs.sink_which_none", plain=t.list(plain)))


specials = None
if a.causal:
    causal_hubs()
else:
    specials = encoder_hubs()
st.metric(t("hubs.metric_sink"), t.pct(sink_share), help=t("hubs.metric_sink_help"))
if (said := sampled_note(t, sink_rows)) is not None:
    st.caption(said)
if not a.first_is_special:  # GPT-2's tokenizer adds no start token: the sink is a piece of the text
    st.caption(t("hubs.first_is_text"))
glossary.prose(t, step.STEP, "hubs.sink_why" if a.causal else "hubs.sink_why_both")
which_hubs(specials)

st.subheader(t("hubs.model_heading"))
if served_model.has_head():  # announced only where it can be measured
    st.markdown(t("hubs.model_text"))
    model_swaps.hub_evidence(t, a, text)
else:  # what this page did measure, first; then the one thing it cannot
    st.markdown(t("hubs.model_text_no_head"))
    model_swaps.no_head_said(t)

page.room(window=w)
page.close(sm)
