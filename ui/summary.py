"""What each step measures, said once: its main figure, its key numbers, the settings
they were measured with, and its predict-then-reveal question. The step's page and the
handout both draw from here, so the answer a reader is shown and the number the page
shows are computed by the same code.

Settings are given as a dict keyed like the pages' widgets (``s3_w``, ``s4_hubs``...),
rows of ui.setting_table (``setting_table.settings_for`` fills in each step's defaults
and drops values that do not fit the text, as the pages' widgets do)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from attn import graph, methods
from attn.costs import Shape

from . import figures, measures, setting_table
from .i18n import LANGS, Translator
from .setting_table import AVERAGE
from .steps import page_of

HOP_TOKENS, HOP_WINDOW = 48, 4  # step 4 draws hops on the first 48 tokens, window at most 4
STEP7_SIZES = [2 ** e for e in range(9, 21)]  # step 7's cost model: n = 512 … 2²⁰


@dataclass
class Question:
    """Predict, then reveal: ``answer`` is the page's own number; the option nearest to
    it counts as right."""

    text: str
    options: list
    answer: Any
    label: Callable[[Any], str]
    value_text: str
    note: str | None = None
    source: str = "text"  # where the answer comes from: "text" (measured on the reader's text)
    # or "model" (worked out by the cost model; a timing on this device is only a note beside it)
    id: str = ""  # its stable id, from the step's declaration (ui.steps): ``build`` sets it

    @property
    def right(self):
        return nearest_option(self.options, self.answer)


@dataclass
class Summary:
    step: int
    params: list[tuple[str, str]]  # the settings used, as (label, value) in the reader's language
    key: list[tuple[str, str]]  # the step's key numbers, as (label, value)
    figure: go.Figure
    questions: list[Question]  # in the order the step declares their ids (ui.steps), each with its id
    values: dict = field(default_factory=dict)  # the raw numbers, for the page's other metrics
    measured: list[go.Figure] = field(default_factory=list)  # runs started by a button, when they were run


ANSWER_FROM = {"text": "predict.answer", "model": "predict.answer_model"}


def verdict(t: Translator, q: Question, guess) -> str:
    """The measured answer with its note (where it comes from) beside it, then whether
    the guess (or None) was right."""
    said = [t(ANSWER_FROM[q.source], value=q.value_text)]
    if q.note:
        said.append(q.note)
    if guess is not None:
        said.append(t("predict.right") if guess == q.right else t("predict.wrong", nearest=q.label(q.right)))
    return t.sentences(said)


def nearest_option(options: list, answer):
    """The option that counts as right: the answer itself among categories, else the
    number nearest to it on a log scale (so 3.6 is nearer 4 than 2, 9 nearer 10 than 2)."""
    if not all(isinstance(o, (int, float)) for o in options):
        return answer

    def log(x):
        return math.log(max(float(x), 1e-12))

    return min(options, key=lambda o: abs(log(o) - log(answer)))


def _head(value):
    """A head setting: the picker's "average" (or None, as pickers return it) or a number."""
    return None if value is None or value == AVERAGE else int(value)


# --- shared labels ---------------------------------------------------------------------


def layer_label(t: Translator, a, layer: int) -> str:
    if a.layer_types[layer] == "sliding":
        return t("common.layer_sliding", layer=layer, w=t.int(a.sliding_window))
    return t("common.layer_full", layer=layer)


def head_label(t: Translator, head) -> str:
    return t("common.head_average") if head is None else t("common.head_n", h=head)


def head_caption(t: Translator, a, layer: int, head) -> str:
    return f"{layer_label(t, a, layer)} · {head_label(t, head)}"


def _who(t: Translator, a, layer: int, head) -> list[tuple[str, str]]:
    return [(t("common.layer"), layer_label(t, a, layer)), (t("common.head"), head_label(t, head))]


def _heatmap(t: Translator, grid, tokens, title: str, **kw):
    n = len(tokens)
    return figures.attention_heatmap(
        grid, tokens, title=title, x_title=t("common.key_axis"), y_title=t("common.query_axis"),
        hover=t("common.hover_cell_tokens") if n <= 128 else t("common.hover_cell"),
        separators=t.separators, colorbar=t("common.weight"), **kw)


# --- the seven steps ---------------------------------------------------------------------


def step1(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head = cfg["s1_layer"], _head(cfg["s1_head"])
    n = a.n
    own = methods.own()  # the layer's own pattern: causal (both ways on an encoder), its window if it slides
    window = a.own_window(layer)
    cells = own.cells(n, methods.Params(window=window, causal=a.causal))
    doubled = own.cells(2 * n, methods.Params(window=window, causal=a.causal))
    ratio = doubled / cells
    grid = measures.grid(text, model_id, layer, head)
    fig, factor = _heatmap(t, grid, a.tokens, t("step1.grid_title", who=head_caption(t, a, layer, head)))
    q = Question(t("predict.q1"), [2, 4, 8], ratio, lambda x: t("predict.times", x=x),
                 t("predict.times", x=t.float(ratio, 2)))
    key = [(t("step1.metric_n"), t.int(n)), (t("step1.metric_causal"), t.int(cells)),
           (t("step1.metric_doubled", n2=t.int(2 * n)), t.int(doubled))]
    return Summary(1, _who(t, a, layer, head), key, fig, [q],
                   dict(layer=layer, head=head, window=window, cells=cells, doubled=doubled, factor=factor))


def step2(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head, p = cfg["s2_layer"], _head(cfg["s2_head"]), cfg["s2_p"]
    res = measures.useful(text, model_id, layer, head, p)
    s = res["summary"]
    shown = measures.top_share_view(text, model_id, layer, head, p)
    fig, factor = _heatmap(t, shown, a.tokens,
                           t("step2.grid_title", p=t.pct(p, 0), who=head_caption(t, a, layer, head)), reduce="max")
    half = max(3, round(s["cells"] / a.n / 2))  # about half of a row's cells
    q = Question(t("predict.q2", p=t.pct(p, 0)), sorted({2, 10, half}), s["k"],
                 lambda x: t("predict.about", x=t.int(x)), t.float(s["k"], 1))
    key = [(t("step2.metric_k", p=t.pct(p, 0)), t.float(s["k"], 1)), (t("step2.metric_useful"), t.int(s["useful"])),
           (t("step2.metric_share"), t.pct(s["share"]))]
    params = _who(t, a, layer, head) + [(t("step2.pick_p"), t.pct(p, 0))]
    return Summary(2, params, key, fig, [q], dict(layer=layer, head=head, p=p, res=res, factor=factor))


def step3(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head, w = cfg["s3_layer"], _head(cfg["s3_head"]), cfg["s3_w"]
    rw, rl = cfg["s3_rw"], cfg["s3_rl"]
    n = a.n
    kept = measures.kept(text, model_id, w, ())
    cells = measures.cells(n, w, (), a.causal)
    fig, factor = _heatmap(t, measures.grid(text, model_id, layer, head), a.tokens,
                           t("step3.grid_title", w=t.int(w), who=head_caption(t, a, layer, head)))
    figures.add_band(fig, n, w, name=t("step3.band_name", w=t.int(w)), causal=a.causal)
    rn = min(n, 64)
    frames = measures.reach_frames(rn, rw, rl, a.causal)
    formula_size = graph.reach_size(rw, rl)
    measured = int(frames[-1][rn - 1].sum())
    q = Question(t("predict.q3", L=rl, w=rw, i=t.int(rn - 1)), reach_options(rw, rl, rn), measured,
                 lambda x: t.int(x), t.int(measured))
    key = [(t("step3.metric_kept_all"), t.pct(kept["mean"])), (t("step3.metric_cells"), t.int(cells)),
           (t("step3.metric_reach_measured", i=rn - 1), t.int(measured))]
    params = _who(t, a, layer, head) + [(t("step3.pick_w"), t.int(w)), (t("step3.pick_reach_w"), t.int(rw)),
                                        (t("step3.pick_layers"), t.int(rl))]
    return Summary(3, params, key, fig, [q], dict(layer=layer, head=head, w=w, rw=rw, rl=rl, kept=kept, cells=cells,
                                                factor=factor, rn=rn, frames=frames, formula_size=formula_size,
                                                measured=measured))


def reach_options(w: int, layers: int, rn: int) -> list[int]:
    """Step 3's options: how many tokens reach token rn − 1 after ``layers`` layers of a
    causal window ``w`` (itself included). The right one, min(L·(w − 1) + 1, rn) (the
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


def reach_phrase(t: Translator, res: dict) -> str:
    """How far apart a hop grid's pairs are, as a phrase: the farthest pair in layers, or,
    when some pair is never joined, how many are never joined (never "never layers")."""
    if res["farthest"] is None:
        return t("step4.pairs_never", n=t.int(res["never"]))
    return t("step4.farthest_layers", n=t.int(res["farthest"]))


def distance(t: Translator, res: dict) -> str:
    """The farthest pair in layers, or "never" when some pair is never joined."""
    return t("step4.never_value") if res["farthest"] is None else t.int(res["farthest"])


def step4(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    hubs, w = tuple(sorted(cfg["s4_hubs"])), cfg["s4_w"]
    n = a.n
    cells_h = measures.cells(n, w, hubs, a.causal)
    kept_w, kept_h = measures.kept(text, model_id, w, ()), measures.kept(text, model_id, w, hubs)
    hn = min(n, HOP_TOKENS)
    hop_hubs = tuple(h for h in hubs if h < hn) or (0,)
    hw = min(w, HOP_WINDOW)
    grids = measures.hop_grids(hn, hw, hop_hubs)
    hop_style = dict(x_title=t("common.key_axis"), y_title=t("common.query_axis"), hover=t("step4.hover_hops"),
                     separators=t.separators, colorbar=t("step4.hops_unit"), missing_label=t("step4.never"))
    fig = figures.integer_grid(grids["hubs"]["grid"], a.tokens[:hn], title=t("step4.hops_hubs", w=hw, g=len(hop_hubs)),
                               **hop_style)
    far, alone_far = grids["hubs"]["farthest"], grids["none"]["farthest"]
    options = sorted({1, 2, alone_far if alone_far is not None else hn - 1})
    q = Question(t("predict.q4", w=hw), options, far if far is not None else hn, lambda x: t.int(x),
                 distance(t, grids["hubs"]))
    key = [(t("step4.metric_cells", g=len(hubs)), t.int(cells_h)),
           (t("step4.metric_kept_window"), t.pct(kept_w["mean"])),
           (t("step4.metric_kept_hubs", g=len(hubs)), t.pct(kept_h["mean"])),
           (t("step4.metric_max_hops"), distance(t, grids["hubs"]))]
    params = [(t("step4.pick_hubs"), ", ".join(str(h) for h in hubs) or "—"), (t("step4.pick_w"), t.int(w))]
    return Summary(4, params, key, fig, [q], dict(hubs=hubs, w=w, cells_h=cells_h, kept_w=kept_w, kept_h=kept_h, hn=hn,
                                                hop_hubs=hop_hubs, hw=hw, grids=grids, hop_style=hop_style))


def step5(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, feature, causal = cfg["s5_layer"], cfg["s5_feature"], cfg["s5_causal"]
    r = measures.linear_orders(text, model_id, layer, feature, causal)
    ns = [2 ** e for e in range(8, 18)]
    series = [
        {"name": t("step5.series_grid"), "x": ns, "y": [n * (n + 1) // 2 if causal else n * n for n in ns],
         "hover": t("step5.hover_numbers")},
        {"name": t("step5.series_summary", m=r["m"], d=r["d"]), "x": ns, "y": [r["summary_numbers"]] * len(ns),
         "hover": t("step5.hover_numbers")},
        {"name": t("step5.series_features"), "x": ns, "y": [n * r["m"] for n in ns], "dash": "dot",
         "hover": t("step5.hover_numbers")},
    ]
    fig = figures.lines(series, title=t("step5.sizes_title"), x_title=t("common.n_axis"),
                        y_title=t("step5.numbers_axis"), separators=t.separators, log_x=True, log_y=True,
                        x_ticks=(ns[::2], [t.int(n) for n in ns[::2]]))
    smaller = "grid" if r["grid_numbers"] < r["summary_numbers"] else "summary"
    q = Question(t("predict.q5"), ["grid", "summary"], smaller, lambda o: t(f"predict.opt_{o}"),
                 t(f"predict.opt_{smaller}"))
    grid_label = t("step5.metric_grid_causal" if causal else "step5.metric_grid", n=t.int(r["n"]))
    key = [(grid_label, t.int(r["grid_numbers"])),
           (t("step5.metric_summary", m=t.int(r["m"]), d=t.int(r["d"])), t.int(r["summary_numbers"])),
           (t("step5.metric_diff"), t.sci(r["rel_diff"]))]
    params = [(t("common.layer"), layer_label(t, a, layer)), (t("step5.pick_feature"), t(f"features.{feature}")),
              (t("step5.causal"), "✓" if causal else "✗")]
    return Summary(5, params, key, fig, [q], dict(layer=layer, feature=feature, causal=causal, r=r))


def step6(t: Translator, a, text: str, model_id: str, cfg: dict) -> Summary:
    layer, head, w = cfg["s6_layer"], int(cfg["s6_head"]), cfg["s6_w"]
    hubs = tuple(sorted(cfg["s6_hubs"]))
    err = measures.errors(text, model_id, layer, w, hubs)
    mean = err["mean"]
    shown = methods.tagged(methods.ERRORS)
    order = [m.name for m in shown]
    # the layer's own pattern is drawn as what it is here: the fused kernel, in its dtype
    own, own32 = methods.own().name, methods.in_float32(methods.own().name)
    names = [t("step6.name_fused", dtype=err["dtype"]) if m.name == own else t(m.label_key, w=w, g=len(hubs))
             for m in shown]
    if own32 in mean:  # on a GPU: the same fused kernel in float32 too
        order.insert(1, own32)
        names.insert(1, t("step6.name_fused32"))
    values = [max(mean[k], 1e-12) for k in order]

    def label(v):  # a bar and the axis say an error alike: a percentage, or a power of ten when tiny
        return t.pct(v, 0 if v >= 0.01 else 1) if v >= 1e-3 else t.sci(v)

    uniform_name = t("step6.uniform_line" if a.causal else "step6.uniform_line_both")  # both ways on an encoder
    fig = figures.bars(names, values, title=t("step6.errors_title", layer=layer), y_title=t("step6.error_axis"),
                       separators=t.separators, log_y=True, hover=t("step6.hover_error"),
                       reference=mean["uniform"], reference_name=uniform_name,
                       text=[t.pct(v, 1) if v >= 1e-3 else t.sci(v) for v in values], tick_text=label)
    label_of = dict(zip(order, names))
    shortcuts = [name for name in order if name not in (own, own32)]
    closest = min(shortcuts, key=lambda name: mean[name])
    q = Question(t("predict.q6"), shortcuts, closest, lambda name: label_of[name],
                 f"{label_of[closest]} ({t.pct(mean[closest])})")
    best_linear = min((m for m in shown if m.family == "linear"), key=lambda m: mean[m.name])
    key = [(t("step6.metric_fused"), t.sci(mean[own])),
           (t("step6.metric_window_hubs", w=w, g=len(hubs)), t.pct(mean[methods.window(hubs=True).name])),
           (t("step6.metric_best_linear", f=t(f"features.{best_linear.feature}")), t.pct(mean[best_linear.name]))]
    params = [(t("common.layer"), layer_label(t, a, layer)), (t("common.head"), head_label(t, head)),
              (t("step6.pick_w"), t.int(w)), (t("step6.pick_hubs"), ", ".join(str(h) for h in hubs) or "—")]
    return Summary(6, params, key, fig, [q], dict(layer=layer, head=head, w=w, hubs=hubs, err=err, shown=shown,
                                                order=order, names=names, values=values, best_linear=best_linear,
                                                shortcuts=shortcuts))


def step7(t: Translator, a, text: str, model_id: str, cfg: dict, live_rows: list | None = None,
          live_last: int | None = None) -> Summary:
    """The cost model always; the live run's ratio when ``live_rows`` were measured
    (at sizes up to ``live_last``)."""
    from attn import bench

    from . import live_bench

    s = Shape()
    ns = STEP7_SIZES
    costs = methods.operations(ns, s)
    series = [{"name": live_bench.method_name(t, m, s), "x": ns, "y": costs[m], "hover": t("step7.hover_flops")}
              for m in costs]
    full, window = methods.exact().name, methods.window().name
    series.append({"name": t("step7.ref_n2"), "x": ns, "y": [costs[full][0] * (n / ns[0]) ** 2 for n in ns],
                   "dash": "dot", "colour": "#999999", "mode": "lines", "hover": t("step7.hover_flops")})
    series.append({"name": t("step7.ref_n"), "x": ns, "y": [costs[window][0] * (n / ns[0]) for n in ns],
                   "dash": "dash", "colour": "#999999", "mode": "lines", "hover": t("step7.hover_flops")})
    fig = figures.lines(series, title=t("step7.model_title"), x_title=t("common.n_axis"), y_title=t("step7.flops_axis"),
                        separators=t.separators, log_x=True, log_y=True, height=460,
                        x_ticks=(ns[::2], [t.int(n) for n in ns[::2]]))
    live_ratio = bench.ratios(live_rows).get((window, live_last)) if live_rows else None
    # the question asks what the lesson teaches, so the cost model grades it; one live timing
    # (0.98 or 3.1 on a busy machine) is shown beside it as what this device measured
    ratio = costs[window][-1] / costs[window][-2]
    note = (t("predict.from_live", value=t.float(live_ratio, 2), n=t.int(live_last // 2), n2=t.int(live_last))
            if live_ratio is not None else t("predict.from_model"))
    q = Question(t("predict.q7"), [1, 2, 4], ratio, lambda x: t.int(x), t.float(ratio, 2), note, source="model")
    key = [(t("step7.metric_model_ratio", m=live_bench.method_name(t, m, s)), t.float(costs[m][-1] / costs[m][-2], 2))
           for m in costs]
    params = [("w", t.int(s.window)), ("g", t.int(s.hubs)), ("d", t.int(s.d)), ("h", t.int(s.heads))]
    return Summary(7, params, key, fig, [q], dict(shape=s, ns=ns, costs=costs, live_ratio=live_ratio))


STEP_SUMMARIES = {1: step1, 2: step2, 3: step3, 4: step4, 5: step5, 6: step6, 7: step7}


def build(step: int, t: Translator, a, text: str, model_id: str, cfg: dict, **extra) -> Summary:
    """A step's summary, built here (uncached: ``get`` shares one), its questions named by
    the ids the step declares — as many as it declares, or a ValueError."""
    made = STEP_SUMMARIES[step](t, a, text, model_id, cfg, **extra)
    ids = page_of(step).questions
    if len(ids) != len(made.questions):
        raise ValueError(f"step {step} declares {len(ids)} questions and its summary asks {len(made.questions)}")
    for qid, q in zip(ids, made.questions):
        q.id = qid
    return made


def question(sm: Summary, qid: str) -> Question:
    """The question ``qid`` of a summary."""
    found = next((q for q in sm.questions if q.id == qid), None)
    if found is None:
        raise KeyError(f"step {sm.step} asks no question {qid!r}")
    return found



SUMMARIES = 64  # summaries kept for every reader (a step's figure of 372 tokens is ≈ 1–2 MB)


def _frozen(cfg: dict) -> tuple:
    """The settings as a cache key; a set of positions (hubs) in one order whatever the
    order it was picked or defaulted in."""
    def one(k, v):
        if k in setting_table.ROWS and setting_table.row(k).kind == "many":
            return tuple(sorted(v))
        return tuple(v) if isinstance(v, list) else v

    return tuple(sorted((k, one(k, v)) for k, v in cfg.items()))


BUILT: Counter = Counter()  # summaries built by this process, by step (the cache's misses)


@st.cache_resource(max_entries=SUMMARIES, show_spinner=False)
def _cached_summary(step: int, lang: str, text: str, model_id: str, cfg: tuple, live: tuple, _a, _live_rows):
    BUILT[step] += 1
    extra = {"live_rows": _live_rows, "live_last": live[0]} if step == 7 and _live_rows else {}
    made = build(step, Translator(lang), _a, text, model_id, dict(cfg), **extra)
    made.figure, made.measured = figures.frozen(made.figure), figures.frozen(made.measured)
    return made


def get(step: int, t: Translator, a, text: str, model_id: str, cfg: dict, live_rows: list | None = None,
        live_last: int | None = None) -> Summary:
    """A step's summary, built once per text, language and settings and shared by every
    reader (read-only: a page that changes a figure copies it first)."""
    if set(cfg) != set(page_of(step).summary_from):  # one list of them: the step's declaration
        raise ValueError(f"step {step}'s summary is built from {page_of(step).summary_from}, given {tuple(cfg)}")
    live = (live_last, tuple(r.seconds for r in live_rows)) if live_rows else ()
    cfg = {k: (v if v is not None else AVERAGE) if k.endswith("_head") else v for k, v in cfg.items()}
    return _cached_summary(step, t.lang, text, model_id, _frozen(cfg), live, a, live_rows)


def inputs(step: int, cfg: dict) -> dict:
    """The settings a step's summary is built from (its declaration's ``summary_from``),
    taken from ``cfg``: the page gives the same ones, so that it finds what was built."""
    return {k: cfg[k] for k in page_of(step).summary_from}


def build_all(a, text: str, model_id: str, settings: dict, langs=LANGS, stop=lambda: False, live_rows=None,
              live_last: int | None = None) -> int:
    """Every step's summary for this text and these settings (each page's defaults where
    a setting is not given or does not fit), in every language, into the cache the pages
    read — with no reader's session: the language is given. Step 7's is built on the
    live rows its page would show (``live_rows``, ``live_last``: ui.live_bench.on_this_device).
    Returns how many were built here (0 when all were built already); ``stop()`` true
    ends it early."""
    cfg = setting_table.settings_for(a, measures.setting_context(text, model_id), settings or {})
    made = 0
    for step in STEP_SUMMARIES:
        for lang in langs:
            if stop():
                return made
            before = BUILT[step]
            if step == 7:
                get(7, Translator(lang), None, "", "", {}, live_rows=live_rows, live_last=live_last)
            else:
                get(step, Translator(lang), a, text, model_id, inputs(step, cfg))
            made += BUILT[step] - before
    return made
