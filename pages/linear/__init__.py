"""Step 5 — never build the grid: linear attention regroups (QKᵀ)V into Q(KᵀV), an m×d
summary instead of the n×n grid; both orders give the same numbers."""

from __future__ import annotations

from dataclasses import dataclass

from attn import patterns
from attn.features import FEATURE_MAPS

from ui import figures, measures
from ui.i18n import Translator
from ui.setting_rows import Setting, head_row, layer_row
from ui.step_parts import Matched, Question, Step, Summary, layer_label
from ui.walk import page_file

ID = "linear"


@dataclass(frozen=True)
class Numbers:
    """The layer, the feature map φ and the direction measured, and both orders on the
    layer's own q, k, v (measures.LinearOrders)."""

    layer: int
    feature: str
    causal: bool
    orders: measures.LinearOrders


def summary(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, feature, causal = cfg["s5_layer"], cfg["s5_feature"], cfg["s5_causal"]
    r = measures.linear_orders(text, model_id, layer, feature, causal)
    ns = [2 ** e for e in range(8, 18)]
    series = [
        {"name": t("linear.series_grid"), "x": ns, "y": [n * (n + 1) // 2 if causal else n * n for n in ns],
         "hover": t("linear.hover_numbers")},
        {"name": t("linear.series_summary", m=r.m, d=r.d), "x": ns, "y": [r.summary_numbers] * len(ns),
         "hover": t("linear.hover_numbers")},
        {"name": t("linear.series_features"), "x": ns, "y": [n * r.m for n in ns], "dash": "dot",
         "hover": t("linear.hover_numbers")},
    ]
    fig = figures.lines(series, title=t("linear.sizes_title"), x_title=t("common.n_axis"),
                        y_title=t("linear.numbers_axis"), separators=t.separators, log_x=True, log_y=True,
                        x_ticks=(ns[::2], [t.int(n) for n in ns[::2]]))
    smaller = "grid" if r.grid_numbers < r.summary_numbers else "summary"
    q = Question(t("linear.question"), ["grid", "summary"], smaller, lambda o: t(f"predict.opt_{o}"),
                 t(f"predict.opt_{smaller}"))
    grid_label = t("linear.metric_grid_causal" if causal else "linear.metric_grid", n=t.int(r.n))
    key = [(grid_label, t.int(r.grid_numbers)),
           (t("linear.metric_summary", m=t.int(r.m), d=t.int(r.d)), t.int(r.summary_numbers)),
           (t("linear.metric_diff"), t.sci(r.rel_diff))]
    params = [(t("common.layer"), layer_label(t, a, layer)), (t("linear.pick_feature"), t(f"features.{feature}")),
              (t("linear.causal"), "✓" if causal else "✗")]
    return Summary(ID, params, key, fig, [q], Numbers(layer, feature, causal, r))


def clock_sentence(side: str, faster: str | None, causal: bool) -> str | None:
    """The locale key of what the clock says beside the count (``side``: where the text's
    length stands against the break-even lengths, "long", "between" or "short"; ``faster``:
    the order that ran faster beyond the runs' spread, None when they overlap): a word only
    when the runs overlap or the clock goes against the count, None when it agrees."""
    if faster is None:
        return "linear.clock_noisy"
    if side == "long" and faster == "grid":
        return "linear.clock_against_causal" if causal else "linear.clock_against"
    if side == "short" and faster == "summary":
        return "linear.clock_against_short"
    return None


def shorter(t: Translator, a, text: str, model_id: str, cfg: dict) -> Question:
    """The matched question: the same layer and feature map on a text an eighth as long —
    the grid shrinks with n², the summary (m × d) not at all; counted as the page's chart
    counts them."""
    r = measures.linear_orders(text, model_id, cfg["s5_layer"], cfg["s5_feature"], cfg["s5_causal"])
    n = max(4, r.n // 8)
    grid = patterns.cells(n, None, causal=cfg["s5_causal"])
    smaller = "grid" if grid < r.summary_numbers else "summary"
    return Question(t("linear.question_matched", n=t.int(n)), ["grid", "summary"], smaller,
                    lambda o: t(f"predict.opt_{o}"), t(f"predict.opt_{smaller}"), source="model")


SETTINGS: tuple[Setting, ...] = (
    layer_row("s5_layer", ID), head_row("s5_head", ID),
    Setting("s5_feature", ID, "choice", lambda d, c: next(iter(FEATURE_MAPS)), choices=lambda d: tuple(FEATURE_MAPS),
            widget="radio"),
    Setting("s5_causal", ID, "bool", lambda d, c: d.causal, widget="toggle"),
)

STEP = Step(ID, order=50, icon=":material/linear_scale:", page=page_file(__file__), questions=("s5.order",),
            settings=SETTINGS, summary_from=("s5_layer", "s5_feature", "s5_causal"), summary=summary,
            matched=(Matched("s5.order", "s5.order_shorter", ask=shorter),))
