"""Step 3 — look only at your neighbours: a sliding window over the real grid, the share
of real weight it keeps, and the reach that stacked layers give it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attn import graph, room_numbers, topk

from ui import figures, measures, room_figures
from ui.i18n import Translator
from ui.setting_rows import Setting, head_row, layer_row, window_row
from ui.step_parts import (Estimate, Matched, Question, RoomChart, RoomView, Step, Summary, head_caption, head_of,
                           heatmap, who)
from ui.walk import page_file

ID = "neighbours"
REACH_W, REACH_W_DEFAULT = (2, 8), 3  # the reach's window: 2..8, 3 at first
REACH_TOKENS = 64  # the reach is drawn on the first 64 tokens


@dataclass(frozen=True)
class Numbers:
    """The layer and head drawn, the window w, what it keeps (measures.Kept) and its cells;
    the grid's pooling; the reach: on the first ``rn`` tokens, each layer's frame for a
    window ``rw`` over ``rl`` layers, the formula's size and the measured one."""

    layer: int
    head: int | None
    w: int
    rw: int
    rl: int
    kept: measures.Kept
    cells: int
    factor: int
    rn: int
    frames: list[np.ndarray]
    formula_size: int
    measured: int
    i: int  # the token the question asks about: the last drawn; on an encoder the middle one


def reach_options(w: int, layers: int, rn: int) -> list[int]:
    """The question's options: how many tokens reach token rn − 1 after ``layers`` layers
    of a causal window ``w`` (itself included). The right one, min(L·(w − 1) + 1, rn) (the
    formula, capped by the tokens before it, as the question says), among the usual
    wrong guesses (L·w, counting each layer's whole window; w^L, as if windows
    multiplied; the formula uncapped) — at least three, all different."""
    right = min(graph.reach_size(w, layers), rn)
    options = {right, layers * w, w**layers, graph.reach_size(w, layers)}
    for extra in (2 * right, right + layers, max(1, right // 2), right + 1):  # when the guesses coincide (L = 1…)
        if len(options) >= 3:
            break
        options.add(extra)
    return sorted(options)


def reach_options_both(w: int, layers: int, rn: int, i: int) -> list[int]:
    """The question's options on an encoder, where the window reaches both ways: how many
    of the first ``rn`` tokens reach token i after ``layers`` layers, itself included. The
    right one, min(i, L·(w − 1)) + min(rn − 1 − i, L·(w − 1)) + 1, among the usual wrong
    guesses (one side only, L·(w − 1) + 1; each layer's whole window, 2·L·w) — at least three."""
    side = layers * (w - 1)
    right = min(i, side) + min(rn - 1 - i, side) + 1
    options = {right, min(graph.reach_size(w, layers), rn), min(2 * layers * w, rn)}
    for extra in (right + 2, max(1, right // 2), right + 1):
        if len(options) >= 3:
            break
        options.add(extra)
    return sorted(options)


def summary(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head, w = cfg["s3_layer"], head_of(cfg["s3_head"]), cfg["s3_w"]
    rw, rl = cfg["s3_rw"], cfg["s3_rl"]
    n = a.n
    kept = measures.kept(text, model_id, w, ())
    cells = measures.cells(n, a.causal, w)
    fig, factor = heatmap(t, measures.grid(text, model_id, layer, head), a.tokens,
                          t("neighbours.grid_title", w=t.int(w), who=head_caption(t, a, layer, head)))
    figures.add_band(fig, n, w, name=t("neighbours.band_name", w=t.int(w)), causal=a.causal)
    rn = min(n, REACH_TOKENS)
    frames = measures.reach_frames(rn, rw, rl, a.causal)
    if a.causal:  # the last token drawn: every other one lies before it
        i = rn - 1
        formula_size, options = graph.reach_size(rw, rl), reach_options(rw, rl, rn)
    else:  # an encoder's window reaches both ways: the middle token, reached from either side
        i = rn // 2
        formula_size, options = 2 * rl * (rw - 1) + 1, reach_options_both(rw, rl, rn, i)
    measured = int(frames[-1][i].sum())
    q = Question(t("neighbours.question" if a.causal else "neighbours.question_both", L=rl, w=rw, i=t.int(i)),
                 options, measured, lambda x: t.int(x), t.int(measured))
    key = [(t("neighbours.metric_kept_all"), t.pct(kept.mean)), (t("neighbours.metric_cells"), t.int(cells)),
           (t("neighbours.metric_reach_measured", i=i), t.int(measured))]
    params = who(t, a, layer, head) + [(t("neighbours.pick_w"), t.int(w)), (t("neighbours.pick_reach_w"), t.int(rw)),
                                       (t("neighbours.pick_layers"), t.int(rl))]
    return Summary(ID, params, key, fig, [q], Numbers(layer, head, w, rw, rl, kept, cells, factor, rn, frames,
                                                      formula_size, measured, i))


def nearest_window(asked) -> int:
    """The room's measured window nearest the page's (a log scale: 20 is nearer 16 than 64)."""
    if not isinstance(asked, int) or asked < 1:
        return room_numbers.ROOM_WINDOWS[1]
    return min(room_numbers.ROOM_WINDOWS, key=lambda w: abs(math.log(w) - math.log(asked)))


def room_window(t: Translator, done: list, cfg: dict) -> RoomView:
    """The share of weight a window keeps, every text, by language."""
    w = nearest_window(cfg.get("window"))
    langs = room_figures.languages(t, done)
    points = [{"group": langs[x.lang], "lang": x.lang, "y": x.numbers.kept[w].mean} for x in done]
    fig, xs = room_figures.strips(list(langs.values()), points, title=t("room.window_title", w=t.int(w)),
                                  y_title=t("room.kept_axis"), separators=t.separators, lang_names=langs,
                                  hover=t("room.hover_share"), y_format=".0%")
    where = {x.owner: (xs[i], points[i]["y"]) for i, x in enumerate(done)}
    said = [t("room.window_measured", ws=t.list(t.int(v) for v in room_numbers.ROOM_WINDOWS), w=t.int(w))]
    if cfg.get("window") not in (None, w):
        said.append(t("room.window_nearest", asked=t.int(cfg["window"]), w=t.int(w)))
    shorter = sum(1 for x in done if x.numbers.n <= w)
    if shorter:
        said.append(t("room.window_shorter", n=shorter, w=t.int(w)))
    with_top = [x.numbers for x in done if x.numbers.kept_top is not None]
    if with_top:  # top-k at the same cells a row, beside the window (texts measured before it have none)
        keep = topk.for_window(w, with_top[0].causal)
        said.append(t("room.window_top", k=t.int(keep), texts=len(with_top),
                      top=t.pct(room_numbers.median([nums.kept_top[w].mean for nums in with_top])),
                      window=t.pct(room_numbers.median([nums.kept[w].mean for nums in with_top]))))
    return RoomView(said, fig, where)


def csv_columns(done: list) -> list:
    """The share each of the room's windows keeps, and each row's top cells at the same
    cells a row (empty for a text measured before top-k was)."""
    return ([(f"kept_window{w}", lambda x, w=w: x.kept[w].mean) for w in room_numbers.ROOM_WINDOWS]
            + [(f"kept_top{w}", lambda x, w=w: None if x.kept_top is None else x.kept_top[w].mean)
               for w in room_numbers.ROOM_WINDOWS])


SETTINGS: tuple[Setting, ...] = (
    layer_row("s3_layer", ID), head_row("s3_head", ID), window_row("s3_w", ID, 16, 512),
    Setting("s3_rw", ID, "int", lambda d, c: REACH_W_DEFAULT, bounds=lambda d: REACH_W, widget="slider"),
    Setting("s3_rl", ID, "int", lambda d, c: min(4, d.n_layers), bounds=lambda d: (1, d.n_layers), widget="slider"),
)

def other_reach_window(a, cfg: dict) -> dict:
    """The matched question's window for the reach: two wider (two narrower at the slider's top)."""
    rw = cfg["s3_rw"]
    return {**cfg, "s3_rw": rw + 2 if rw + 2 <= REACH_W[1] else rw - 2}


STEP = Step(ID, order=30, icon=":material/swap_horiz:", page=page_file(__file__), questions=("s3.reach",),
            settings=SETTINGS, summary_from=("s3_layer", "s3_head", "s3_w", "s3_rw", "s3_rl"), summary=summary,
            room=(RoomChart("window", room_window),), csv=csv_columns,
            matched=(Matched("s3.reach", "s3.reach_other_window", change=other_reach_window),),
            estimates=(Estimate("s3.reach", "s3.reach_estimate"),))
