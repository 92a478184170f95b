"""Step 2 — the grid is nearly empty: k(p) cells carry a share p of each row; the useful
share k/n, measured on growing beginnings of the text."""

from __future__ import annotations

from dataclasses import dataclass

from attn import room_numbers

from ui import measures, room_figures
from ui.i18n import Translator
from ui.setting_rows import Setting, head_row, layer_row
from ui.step_parts import (Estimate, Matched, Question, RoomChart, RoomView, Step, Summary, head_caption, head_of,
                           heatmap, who)
from ui.walk import page_file

ID = "nearly-empty"
P_OPTIONS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)


@dataclass(frozen=True)
class Numbers:
    """The layer and head drawn, the share p, what the layer's rows hold at p
    (measures.Useful) and the factor its grid was pooled by."""

    layer: int
    head: int | None
    p: float
    useful: measures.Useful
    factor: int


def summary(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head, p = cfg["s2_layer"], head_of(cfg["s2_head"]), cfg["s2_p"]
    res = measures.useful(text, model_id, layer, head, p)
    shown = measures.top_share_view(text, model_id, layer, head, p)
    fig, factor = heatmap(t, shown, a.tokens,
                          t("nearly_empty.grid_title", p=t.pct(p, 0), who=head_caption(t, a, layer, head)),
                          reduce="max")
    half = max(3, round(res.cells / a.n / 2))  # about half of a row's cells
    q = Question(t("nearly_empty.question", p=t.pct(p, 0)), sorted({2, 10, half}), res.k,
                 lambda x: t("predict.about", x=t.int(x)), t.float(res.k, 1))
    key = [(t("nearly_empty.metric_k", p=t.pct(p, 0)), t.float(res.k, 1)),
           (t("nearly_empty.metric_useful"), t.int(res.useful)), (t("nearly_empty.metric_share"), t.pct(res.share))]
    params = who(t, a, layer, head) + [(t("nearly_empty.pick_p"), t.pct(p, 0))]
    return Summary(ID, params, key, fig, [q], Numbers(layer, head, p, res, factor))


def other_p(a, cfg: dict) -> dict:
    """The matched question's share: half a row's weight after a large share, 95 % after a small one."""
    return {**cfg, "s2_p": 0.5 if cfg["s2_p"] >= 0.8 else 0.95}


def room_useful(t: Translator, done: list, cfg: dict) -> RoomView:
    """The experiment: each text's useful share on its growing prefixes, in the page's
    layer; in how many texts it fell, and in how many layers."""
    layer = cfg.get("layer", 0)
    rows, where, fell = [], {}, []
    for x in done:
        nums = x.numbers
        ly = min(layer, nums.layers - 1)
        pts = nums.useful[ly]
        rows.append({"lang": x.lang, "x": [u.n for u in pts], "y": [u.share for u in pts],
                     "ref": [u.uniform_share for u in pts]})
        where[x.owner] = (pts[-1].n, pts[-1].share)
        f = room_numbers.share_fell(nums, ly)
        if f is not None:
            fell.append((x.lang, f))
    langs = room_figures.languages(t, done)
    fig = room_figures.prefix_lines(rows, title=t("room.useful_title", p=t.pct(room_numbers.ROOM_P, 0), layer=layer),
                                    x_title=t("common.n_axis"), y_title=t("nearly_empty.share_axis"),
                                    separators=t.separators, lang_names=langs,
                                    hover=t("room.hover_useful"), reference_name=t("nearly_empty.series_uniform"))
    verdict = room_numbers.verdicts([(x.lang, x.numbers) for x in done]).shrinks
    said = [t("room.useful_layer", fell=t.int(sum(f for _, f in fell)), n=t.int(len(fell)), layer=layer,
              langs=room_figures.count_by_language(t, fell)),
            t("room.useful_all", held=t.int(verdict.held), n=t.int(verdict.of))]
    return RoomView(said, fig, where)


def csv_columns(done: list) -> list:
    """p, each layer's useful share on the first prefix and on the whole text, and in how
    many layers it fell."""
    layers = max(x.layers for x in done)

    def at(layer: int, i: int):
        return lambda x: x.useful[layer][i].share if layer < x.layers else ""

    def fell(x):
        got = room_numbers.layers_fell(x)
        return "" if got is None else got[0]

    return ([("p", lambda x: x.p)] + [(f"share_first_layer{i}", at(i, 0)) for i in range(layers)]
            + [(f"share_whole_layer{i}", at(i, -1)) for i in range(layers)] + [("layers_share_fell", fell)])


SETTINGS: tuple[Setting, ...] = (
    layer_row("s2_layer", ID), head_row("s2_head", ID),
    Setting("s2_p", ID, "choice", lambda d, c: 0.9, choices=lambda d: P_OPTIONS, widget="select_slider"),
)

STEP = Step(ID, order=20, icon=":material/grain:", page=page_file(__file__), questions=("s2.cells",),
            settings=SETTINGS, summary_from=("s2_layer", "s2_head", "s2_p"), summary=summary,
            room=(RoomChart("useful", room_useful),), csv=csv_columns,
            matched=(Matched("s2.cells", "s2.cells_other_p", change=other_p),),
            estimates=(Estimate("s2.cells", "s2.cells_estimate"),))
