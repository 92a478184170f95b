"""Step 1 — every pair: the real attention grid of the reader's text and its n² cells;
what doubling the text does to them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go


from attn import methods, patterns

from ui import figures, measures, room_figures
from ui.i18n import Translator
from ui.setting_rows import Setting, head_row, layer_row, positions
from ui.step_parts import (Estimate, Matched, Question, RoomChart, RoomView, Step, Summary, head_caption, head_of,
                           heatmap, who)
from ui.walk import page_file

ID = "every-pair"


def band_figure(z, first: int, lo: int, marked: int, labels, *, title, x_title, y_title, hover, separators,
              colorbar=""):
    """A band of rows at full resolution (z ``(rows, keys)``, its first row's and first key's
    positions in the text): one cell a pair, each axis in the text's positions, row
    ``marked`` outlined. ``hover`` may use %{customdata[0]} / [1]: the two tokens."""
    z = np.round(np.asarray(z, dtype=np.float32), 5)
    rows, keys = np.arange(first, first + z.shape[0]), np.arange(lo, lo + z.shape[1])
    pairs = [[[figures.safe(labels[i]), figures.safe(labels[j])] for j in keys] for i in rows]
    fig = go.Figure(go.Heatmap(z=z, x=keys, y=rows, customdata=pairs, zmin=0, zmax=1.0, colorscale=figures.WEIGHTS,
                               hoverongaps=False, hovertemplate=hover + "<extra></extra>",
                               colorbar={"title": {"text": figures.safe(colorbar)}}))
    fig.add_shape(type="rect", x0=lo - 0.5, x1=lo + z.shape[1] - 0.5, y0=marked - 0.5, y1=marked + 0.5,
                  line={"color": figures.OKABE_ITO[1], "width": 2})
    fig.update_yaxes(title=figures.safe(y_title), autorange="reversed")
    fig.update_xaxes(title=figures.safe(x_title))
    return figures.layout(fig, title, separators, height=300)


@dataclass(frozen=True)
class Numbers:
    """The layer and head drawn (head None: their average); the layer's own window (None:
    a full layer); the cells it computes on the text and on a text twice as long; the
    factor its grid was pooled by."""

    layer: int
    head: int | None
    window: int | None
    cells: int
    doubled: int
    factor: int


def own_cells(a, layer: int, n: int) -> int:
    """The cells the layer computes on a text of n tokens: its own pattern — causal (both
    ways on an encoder), its window if it slides."""
    return methods.own().cells(n, methods.Params(window=a.layers[layer].window, causal=a.causal))


def summary(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head = cfg["s1_layer"], head_of(cfg["s1_head"])
    n = a.n
    window = a.layers[layer].window
    cells, doubled = own_cells(a, layer, n), own_cells(a, layer, 2 * n)
    ratio = doubled / cells
    grid = measures.grid(text, model_id, layer, head)
    fig, factor = heatmap(t, grid, a.tokens, t("every_pair.grid_title", who=head_caption(t, a, layer, head)))
    q = Question(t("every_pair.question"), [2, 4, 8], ratio, lambda x: t("predict.times", x=x),
                 t("predict.times", x=t.float(ratio, 2)))
    key = [(t("every_pair.metric_n"), t.int(n)), (t("every_pair.metric_causal"), t.int(cells)),
           (t("every_pair.metric_doubled", n2=t.int(2 * n)), t.int(doubled))]
    return Summary(ID, who(t, a, layer, head), key, fig, [q], Numbers(layer, head, window, cells, doubled, factor))


def tripled(t: Translator, a, text: str, model_id: str, cfg: dict) -> Question:
    """The matched question: the same layer on a text three times as long (9× on a full
    layer; less on a sliding one whose window the longer text outgrows)."""
    ratio = own_cells(a, cfg["s1_layer"], 3 * a.n) / own_cells(a, cfg["s1_layer"], a.n)
    return Question(t("every_pair.question_matched"), [3, 6, 9], ratio, lambda x: t("predict.times", x=x),
                    t("predict.times", x=t.float(ratio, 2)))


def doubled_count(t: Translator, a, text: str, model_id: str, cfg: dict) -> Question:
    """The estimate: how many cells the layer computes on a text twice as long (a count)."""
    cells = own_cells(a, cfg["s1_layer"], 2 * a.n)
    return Question(t("every_pair.question_estimate", n2=t.int(2 * a.n)), [], cells, t.int, t.int(cells))


def room_cells(t: Translator, done: list, cfg: dict) -> RoomView:
    """Each text's cells against its n, on each kind of layer's curve."""
    points, where = [], {}
    window = done[0].numbers.window
    layer_kinds = sorted({k for x in done for k in x.numbers.layer_types})
    for x in done:
        n = x.numbers.n
        for layer_kind in layer_kinds:
            y = patterns.cells(n, window if layer_kind == "sliding" else None, causal=x.numbers.causal)
            points.append({"lang": x.lang, "x": n, "y": y, "symbol": "square" if layer_kind == "sliding" else "circle"})
        where[x.owner] = (n, patterns.cells(n, None, causal=x.numbers.causal))
    causal = done[0].numbers.causal
    hi = max(2 * x.numbers.n for x in done)
    xs = sorted({max(1, round(10 ** (e / 20))) for e in range(0, int(20 * math.log10(hi)) + 1)})
    both = "" if causal else "_both"  # an encoder's layers fill the square, its windows a band on both sides
    curves = [{"name": t(f"room.curve_full{both}"), "x": xs, "y": [patterns.cells(m, None, causal=causal) for m in xs]}]
    if "sliding" in layer_kinds:
        curves.append({"name": t(f"room.curve_sliding{both}", w=t.int(window)), "x": xs,
                       "y": [patterns.cells(m, window, causal=causal) for m in xs], "dash": "dash"})
    fig = room_figures.points_on_curves(points, curves, title=t("room.cells_title"), x_title=t("common.n_axis"),
                                        y_title=t("room.cells_axis"), separators=t.separators,
                                        lang_names=room_figures.languages(t, done), hover=t("room.hover_cells"))
    return RoomView([t("room.cells_caption", n=t.int(len(done)))], fig, where)


SETTINGS: tuple[Setting, ...] = (
    layer_row("s1_layer", ID), head_row("s1_head", ID),
    Setting("s1_token", ID, "choice", lambda d, c: d.n - 1, choices=positions, widget="selectbox", names="token"),
)

STEP = Step(ID, order=10, icon=":material/grid_on:", page=page_file(__file__), questions=("s1.doubling",),
            settings=SETTINGS, summary_from=("s1_layer", "s1_head"), summary=summary,
            room=(RoomChart("cells", room_cells),), matched=(Matched("s1.doubling", "s1.tripling", ask=tripled),),
            estimates=(Estimate("s1.doubling", "s1.cells_estimate", ask=doubled_count),))
