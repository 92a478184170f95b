"""Step 6 — the honest catch: what each shortcut gets wrong, on the model's own q, k, v,
beside the exact fused kernel's rounding; then the whole model re-run with each one."""

from __future__ import annotations

from dataclasses import dataclass

from attn import methods

from ui import figures, measures, model_swaps, room_figures, served_model
from ui.i18n import Translator
from ui.setting_rows import Setting, hubs_row, layer_row, layers_of, linear_features, window_row
from ui.step_parts import Matched, Question, RoomChart, RoomView, Step, Summary, head_label, layer_label
from ui.walk import page_file

ID = "honest-catch"
SWEEP_METRICS = ("kl", "perplexity", "top1_agreement")  # what the sweep draws


@dataclass(frozen=True)
class Numbers:
    """The layer, head, window and hubs measured; each method's error (measures.Errors);
    the methods drawn (``shown``) and the bars' order, names and values; the best feature
    map; the shortcuts the question offers."""

    layer: int
    head: int
    w: int
    hubs: tuple[int, ...]
    errors: measures.Errors
    shown: tuple
    order: tuple[str, ...]
    names: tuple[str, ...]
    values: tuple[float, ...]
    best_linear: object
    shortcuts: tuple[str, ...]


def _chosen(cfg: dict) -> tuple[int, int, int, tuple[int, ...]]:
    """The layer, head, window and hubs measured, from the page's settings (as the page reads them)."""
    return cfg["s6_layer"], int(cfg["s6_head"]), cfg["s6_w"], tuple(sorted(cfg["s6_hubs"]))


def window_hubs_name(t: Translator, w: int, asked: tuple, reach: tuple) -> str:
    """Window + hubs as measured: with the hubs asked for, or, where some lie beyond the tokens
    a measure reads, with those in reach, named (``reach``: the hubs it was measured with)."""
    if len(reach) == len(asked):
        return t("methods.window_hubs", w=w, g=len(asked))
    if not reach:
        return t("honest_catch.name_window_hubs_none", w=w)
    return t("honest_catch.name_window_hubs_some", w=w, g=len(reach), hubs=t.list(str(h) for h in reach))


def hubs_beyond(t: Translator, asked: tuple, reach: tuple, m: int) -> str | None:
    """The sentence that says which hubs lie beyond the ``m`` tokens a measure read, and which
    it was measured with (None: every hub asked for was in reach)."""
    left = [h for h in asked if h not in reach]
    if not left:
        return None
    return t("honest_catch.hubs_beyond_some" if reach else "honest_catch.hubs_beyond_none", out=len(left),
             left=t.list(str(h) for h in left), m=t.int(m), g=len(reach), kept=t.list(str(h) for h in reach))


def summary(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head, w, hubs = _chosen(cfg)
    err = measures.errors(text, model_id, layer, w, hubs)
    hubs_name = window_hubs_name(t, w, hubs, err.hubs)  # with the hubs the errors' tokens hold
    mean = err.mean
    shown = methods.tagged(methods.ERRORS)
    order = [m.name for m in shown]
    # the layer's own pattern is drawn as what it is here: the fused kernel, in its dtype
    own, own32 = methods.own().name, methods.in_float32(methods.own().name)
    # (or, where the layer changes its scores before the softmax, written out step by step)
    ran = "written" if err.plain else "fused"
    with_hubs = methods.window(hubs=True).name
    names = [t(f"honest_catch.name_{ran}", dtype=err.dtype) if m.name == own else
             hubs_name if m.name == with_hubs else t(m.label_key, w=w, g=len(err.hubs)) for m in shown]
    if own32 in mean:  # on a GPU: the same in float32 too
        order.insert(1, own32)
        names.insert(1, t(f"honest_catch.name_{ran}", dtype="float32"))
    values = [max(mean[k], 1e-12) for k in order]

    def label(v):  # a bar and the axis say an error alike: a percentage, or a power of ten when tiny
        return t.pct(v, 0 if v >= 0.01 else 1) if v >= 1e-3 else t.sci(v)

    uniform_name = t("honest_catch.uniform_line" if a.causal else "honest_catch.uniform_line_both")
    fig = figures.bars(names, values, title=t("honest_catch.errors_title", layer=layer),
                       y_title=t("honest_catch.error_axis"), separators=t.separators, log_y=True,
                       hover=t("honest_catch.hover_error"), reference=err.uniform, reference_name=uniform_name,
                       text=[t.pct(v, 1) if v >= 1e-3 else t.sci(v) for v in values], tick_text=label)
    label_of = dict(zip(order, names))
    shortcuts = [name for name in order if name not in (own, own32)]
    closest = min(shortcuts, key=lambda name: mean[name])
    q = Question(t(f"honest_catch.question_{ran}", layer=layer), shortcuts, closest, lambda name: label_of[name],
                 f"{label_of[closest]} ({t.pct(mean[closest])})", note=hubs_beyond(t, hubs, err.hubs, err.n))
    best_linear = min((m for m in shown if m.family == "linear"), key=lambda m: mean[m.name])
    key = [(t(f"honest_catch.metric_{ran}"), t.sci(mean[own])),
           (t("honest_catch.metric_error_of", name=hubs_name), t.pct(mean[with_hubs])),
           (t("honest_catch.metric_best_linear", f=t(f"features.{best_linear.feature}")),
            t.pct(mean[best_linear.name]))]
    params = [(t("common.layer"), layer_label(t, a, layer)), (t("common.head"), head_label(t, head)),
              (t("honest_catch.pick_w"), t.int(w)),
              (t("honest_catch.pick_hubs"), ", ".join(str(h) for h in hubs) or "—")]
    return Summary(ID, params, key, fig, [q], Numbers(layer, head, w, hubs, err, tuple(shown), tuple(order),
                                                      tuple(names), tuple(values), best_linear, tuple(shortcuts)))


def ahead(a, text: str, model_id: str, cfg: dict) -> None:
    """What the page measures besides its summary, on the same settings: each method's
    sharpness, the maps each method implies, and top-k's recall where the page says it."""
    layer, head, w, hubs = _chosen(cfg)
    measures.sharpness(text, model_id, layer, w, hubs)
    measures.implied_maps(text, model_id, layer, head, w, hubs, cfg["s6_feature"])
    mean = measures.errors(text, model_id, layer, w, hubs).mean
    if methods.top_k().name in mean and methods.top_k(indexer=True).name in mean:
        measures.topk_recall(text, model_id, layer, w)


def measured(t: Translator, a, text: str, model_id: str, cfg: dict):
    """The handout's run of the whole model with each shortcut, where it was run here:
    (its heading's key, its two figures), or the key of the note that says it was not."""
    layer, metric = cfg["s6_swap_layer"], cfg["s6_swap_metric"]
    if not served_model.has_head(model_id):
        return "swap.no_head"
    results = model_swaps.measured(text, model_swaps.sweep_of(a, layer), model_id=model_id)
    if not model_swaps.complete(results):
        return "handout.sweep_not_run"
    return "swap.heading", list(model_swaps.sweep_figures(t, results, metric, layer))


def room_errors(t: Translator, done: list, cfg: dict) -> RoomView:
    """Each shortcut's output error, every text, beside the fused kernel's."""
    nums0 = done[0].numbers
    names = list(nums0.errors)
    own = methods.own().name
    order = [own] + [m for m in names if m not in (own, "uniform")] + (["uniform"] if "uniform" in names else [])

    def label(m):
        if m == own:
            return t("room.method_fused")
        if m == "uniform":
            return t("room.method_uniform")
        return t(methods.get(m).label_key, w=nums0.error_window, g=len(nums0.hubs))

    labels = [label(m) for m in order]
    points = []
    for x in done:
        for m, lab in zip(order, labels):
            if m in x.numbers.errors:
                points.append({"group": lab, "lang": x.lang, "y": max(x.numbers.errors[m], 1e-9)})
    fig, xs = room_figures.strips(labels, points, title=t("room.errors_title", layer=nums0.error_layer,
                                                          w=t.int(nums0.error_window)),
                                  y_title=t("room.error_axis"), separators=t.separators,
                                  lang_names=room_figures.languages(t, done), hover=t("room.hover_error"), log_y=True,
                                  tick_angle=-30, height=520)
    firsts = [i for i, p in enumerate(points) if p["group"] == labels[0]]
    where = {x.owner: (xs[firsts[i]], points[firsts[i]]["y"]) for i, x in enumerate(done) if i < len(firsts)}
    return RoomView([t("room.errors_caption")], fig, where)


def csv_columns(done: list) -> list:
    """The layer and window the errors were measured at, and each method's error."""
    names = sorted({m for x in done for m in x.errors})
    return ([("error_layer", lambda x: x.error_layer), ("error_window", lambda x: x.error_window)]
            + [(f"error_{m}", lambda x, m=m: x.errors.get(m, "")) for m in names])


SETTINGS: tuple[Setting, ...] = (
    layer_row("s6_layer", ID),
    Setting("s6_head", ID, "choice", lambda d, c: 0, choices=lambda d: tuple(range(d.n_heads)), widget="selectbox",
            names="head"),
    window_row("s6_w", ID, 16, 256),
    hubs_row("s6_hubs", ID, lambda d, c: c.anchors(3)),
    Setting("s6_feature", ID, "choice", lambda d, c: linear_features()[0], choices=lambda d: linear_features(),
            widget="radio"),
    Setting("s6_swap_layer", ID, "choice", lambda d, c: 0, choices=layers_of, widget="selectbox", names="layer"),
    Setting("s6_swap_metric", ID, "choice", lambda d, c: SWEEP_METRICS[0], choices=lambda d: SWEEP_METRICS,
            widget="radio"),
)

def other_layer(a, cfg: dict) -> dict:
    """The matched question's layer: the first of the other kind (a full layer after a
    sliding one, and back), else the layer half the stack away; on a model of one layer,
    another window."""
    layer, kinds = cfg["s6_layer"], [x.window is None for x in a.layers]
    other = next((i for i, full in enumerate(kinds) if full != kinds[layer]), None)
    if other is None and len(kinds) > 1:
        other = (layer + len(kinds) // 2) % len(kinds)
    if other is None:
        w = cfg["s6_w"]
        return {**cfg, "s6_w": w // 2 if w >= 32 else w * 2}
    return {**cfg, "s6_layer": other}


STEP = Step(ID, order=60, icon=":material/balance:", page=page_file(__file__), questions=("s6.closest",),
            settings=SETTINGS, summary_from=("s6_layer", "s6_head", "s6_w", "s6_hubs"), summary=summary,
            room=(RoomChart("errors", room_errors),), csv=csv_columns, prose=("lead", "outro", "swap.lead"),
            measured=measured, matched=(Matched("s6.closest", "s6.closest_other_layer", change=other_layer),),
            ahead=ahead)
