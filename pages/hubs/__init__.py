"""Step 4 — hubs: a few global tokens join every pair in two hops (bidirectional); in a
causal model the first token is a sink; an encoder's own hubs are its special tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass

from attn import room_numbers

from ui import figures, measures, room_figures
from ui.i18n import Translator
from ui.setting_rows import Setting, hubs_row, window_row
from ui.step_parts import Matched, Question, RoomChart, RoomView, Step, Summary
from ui.walk import page_file

ID = "hubs"
HOP_TOKENS, HOP_WINDOW = 48, 4  # hops are drawn on the first 48 tokens, the window at most 4


@dataclass(frozen=True)
class Numbers:
    """The hubs and window chosen; the cells they compute; what the window keeps alone and
    with the hubs; the hop grids on the first ``hn`` tokens for a window ``hw`` and the hubs
    among them (``hop_hubs``: the first token stands in when none is); how the grids are
    drawn (``hop_style``)."""

    hubs: tuple[int, ...]
    w: int
    cells_h: int
    kept_w: measures.Kept
    kept_h: measures.Kept
    hn: int
    hop_hubs: tuple[int, ...]
    hw: int
    grids: measures.HopGrids
    hop_style: dict


def distance(t: Translator, res: measures.HopGrid) -> str:
    """The farthest pair in layers, or "never" when some pair is never joined."""
    return t("hubs.never_value") if res.farthest is None else t.int(res.farthest)


def reach_phrase(t: Translator, res: measures.HopGrid) -> str:
    """How far apart a hop grid's pairs are, as a phrase: the farthest pair in layers, or,
    when some pair is never joined, how many are never joined (never "never layers")."""
    if res.farthest is None:
        return t("hubs.pairs_never", n=t.int(res.never))
    return t("hubs.farthest_layers", n=t.int(res.farthest))


ANCHORS_LISTED = 5  # the anchors the page lists (of measures.ANCHORS_READ read)


def overlap(x: tuple, y: tuple) -> bool:
    """Whether two anchors' (position, score, spread) ranges overlap: a sample that cannot
    tell which of them takes more weight."""
    return abs(x[1] - y[1]) <= x[2] + y[2]


def score_digits(spreads) -> int:
    """The decimals the anchors' scores and spreads are written with: 3, or more where the
    smallest spread needs them to show its first two digits (at most 6)."""
    small = min((x for x in spreads if x > 0), default=0.0)
    return 3 if small <= 0 else min(6, max(3, 1 - math.floor(math.log10(small))))


def close_groups(found: list) -> list[list]:
    """The listed anchors (best first, each (position, score, spread)) in runs of neighbours in
    rank whose ranges overlap, each run of two or more: the orders the sample cannot tell."""
    runs, run = [], found[:1]
    for prev, x in zip(found, found[1:]):
        if overlap(prev, x):
            run.append(x)
        else:
            runs.append(run)
            run = [x]
    runs.append(run)
    return [r for r in runs if len(r) > 1]


def close_to_last(read: list, listed: int) -> list:
    """The anchors read but not listed whose range overlaps the last listed one's: read on
    every row, one of them could be listed in its place."""
    if len(read) <= listed:
        return []
    last = read[listed - 1]
    return [x for x in read[listed:] if overlap(last, x)]


def hub_sets(hubs: tuple) -> tuple:
    """The hubs the page's window is read with, in one pass (measures.kept_and_sink): none,
    the reader's, and the first token alone."""
    return ((), hubs, (0,))


def summary(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    hubs, w = tuple(sorted(cfg["s4_hubs"])), cfg["s4_w"]
    n = a.n
    cells_h = measures.cells(n, a.causal, w, hubs)
    kept_w, kept_h, _ = measures.kept_and_sink(text, model_id, w, hub_sets(hubs))[0]
    hn = min(n, HOP_TOKENS)
    hop_hubs = tuple(h for h in hubs if h < hn) or (0,)
    hw = min(w, HOP_WINDOW)
    grids = measures.hop_grids(hn, hw, hop_hubs)
    hop_style = dict(x_title=t("common.key_axis"), y_title=t("common.query_axis"), hover=t("hubs.hover_hops"),
                     separators=t.separators, colorbar=t("hubs.hops_unit"), missing_label=t("hubs.never"))
    fig = figures.integer_grid(grids.hubs.grid, a.tokens[:hn], title=t("hubs.hops_hubs", w=hw, g=len(hop_hubs)),
                               **hop_style)
    far, alone_far = grids.hubs.farthest, grids.none.farthest
    options = sorted({1, 2, alone_far if alone_far is not None else hn - 1})
    q = Question(t("hubs.question", w=hw), options, far if far is not None else hn, lambda x: t.int(x),
                 distance(t, grids.hubs))
    key = [(t("hubs.metric_cells", g=len(hubs)), t.int(cells_h)),
           (t("hubs.metric_kept_window"), t.pct(kept_w.mean)),
           (t("hubs.metric_kept_hubs", g=len(hubs)), t.pct(kept_h.mean)),
           (t("hubs.metric_max_hops"), distance(t, grids.hubs))]
    params = [(t("hubs.pick_hubs"), ", ".join(str(h) for h in hubs) or "—"), (t("hubs.pick_w"), t.int(w))]
    return Summary(ID, params, key, fig, [q], Numbers(hubs, w, cells_h, kept_w, kept_h, hn, hop_hubs, hw, grids,
                                                      hop_style))


def room_sink(t: Translator, done: list, cfg: dict) -> RoomView:
    """The first token's share of each row, and what a window keeps alone and with the
    first token and each text's own anchors as hubs."""
    w = done[0].numbers.hub_window
    labels = [t("room.group_sink"), t("room.group_window", w=t.int(w)), t("room.group_window_hubs", w=t.int(w))]
    points = []
    for x in done:
        nums = x.numbers
        for label, y in zip(labels, (nums.sink_mean, nums.kept_window, nums.kept_window_hubs)):
            points.append({"group": label, "lang": x.lang, "y": y})
    fig, xs = room_figures.strips(labels, points, title=t("room.sink_title"), y_title=t("room.share_axis"),
                                  separators=t.separators, lang_names=room_figures.languages(t, done),
                                  hover=t("room.hover_share"), y_format=".0%")
    where = {x.owner: (xs[3 * i], points[3 * i]["y"]) for i, x in enumerate(done)}
    v = room_numbers.verdicts([(x.lang, x.numbers) for x in done]).sink
    return RoomView([t("room.sink_caption", above=t.int(v.above), n=t.int(v.of))], fig, where)


def csv_columns(done: list) -> list:
    """The first token's share; what the room's hub window keeps alone and with hubs."""
    return [("sink_share", lambda x: x.sink_mean), ("kept_window_alone", lambda x: x.kept_window),
            ("kept_window_hubs", lambda x: x.kept_window_hubs), ("hub_window", lambda x: x.hub_window)]


SETTINGS: tuple[Setting, ...] = (hubs_row("s4_hubs", ID, lambda d, c: c.anchors(5)[:3]), window_row("s4_w", ID, 8, 256))

def other_window(a, cfg: dict) -> dict:
    """The matched question's window: the hop grids' window (at most HOP_WINDOW) changes —
    2 after a wider one, HOP_WINDOW after 2 or less."""
    hw = min(cfg["s4_w"], HOP_WINDOW)
    return {**cfg, "s4_w": 2 if hw > 2 else min(HOP_WINDOW, max(2, a.n))}


def ahead(a, text: str, model_id: str, cfg: dict) -> None:
    """What the page measures besides its summary: the window with the first token alone as
    its hub, the sink's share, and an encoder's special tokens."""
    measures.kept_and_sink(text, model_id, cfg["s4_w"], hub_sets(tuple(sorted(cfg["s4_hubs"]))))
    if not a.causal:
        measures.special_share(text, model_id)


STEP = Step(ID, order=40, icon=":material/hub:", page=page_file(__file__), questions=("s4.hops",),
            settings=SETTINGS, summary_from=("s4_hubs", "s4_w"), summary=summary,
            room=(RoomChart("sink", room_sink),), csv=csv_columns,
            prose=("lead", "sink_why", "sink_why_both", "outro"),
            matched=(Matched("s4.hops", "s4.hops_other_window", change=other_window),), ahead=ahead)
