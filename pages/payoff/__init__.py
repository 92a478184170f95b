"""Step 7 — length stops being a wall: the cost model as n doubles (cost(2n)/cost(n) → 4
for the square, 2 for a line), and a live benchmark on this device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn import bench, costs as cost_model, methods, swap
from attn.costs import Shape
from attn.device import pick_device

from ui import figures, live_bench, served_model
from ui.i18n import Translator
from ui.step_parts import Estimate, Matched, Question, Step, Summary
from ui.walk import page_file

ID = "payoff"
SIZES = [2 ** e for e in range(9, 21)]  # the cost model: n = 512 … 2²⁰
CACHE_AT = 2 ** 17  # the cache's figures said at 131,072 tokens, a long context of 2026, or at the model's own
BENCH_SHAPE = Shape()  # the live run: one causal layer of the benchmark's shape, on random q, k, v


@dataclass(frozen=True)
class Numbers:
    """The shape the cost model counts (heads, head size, window, hubs), the lengths, each
    method's operations at each length, and the live run's ratio when it was measured."""

    shape: Shape
    ns: list[int]
    costs: dict
    live_ratio: float | None


def model_shape(model_id: str) -> Shape:
    """The cost model's shape: the model's own (attn.costs.Shape.of_model) with the
    benchmark's window, hubs and feature map; the benchmark's alone when no model is named."""
    if not model_id:
        return Shape()
    return Shape.of_model(served_model.get_model(model_id).arch)


def cache_number(model) -> tuple[int, str]:
    """The bytes a cached number takes in the dtype the app runs the served model in (its
    own parameters' dtype: float32, 4 bytes, as loaded on every device), and that dtype's name."""
    dtype = model.model.dtype
    return torch.empty((), dtype=dtype).element_size(), str(dtype).replace("torch.", "")


def cache_ns(arch) -> list[int]:
    """The lengths the cache's chart runs over: SIZES up to the model's own positions (its
    last, those positions, where they are no power of two); every one of SIZES when the
    model names no limit."""
    top = arch.max_positions
    if not top:
        return list(SIZES)
    ns = [n for n in SIZES if n <= top]
    return ns + [top] if not ns or ns[-1] < top and top < SIZES[-1] else ns


@dataclass(frozen=True)
class Cache:
    """The key/value cache of the served model at each of ``cache_ns`` (never past the
    positions it reads), in MB (``per`` bytes a number): as it is (its sliding layers keep
    their window), with every layer full, with every layer a window of ``window``, and
    linear attention's fixed state."""

    ns: tuple[int, ...]
    model: tuple[float, ...]
    full: tuple[float, ...]
    window: tuple[float, ...]
    linear: tuple[float, ...]
    window_size: int
    full_layers: int
    sliding_layers: int


def cache(arch, window: int, per: int) -> Cache:
    """The served model's cache, counted from its own layers (attn.costs.kv_cache), ``per``
    bytes a number (``cache_number``)."""
    mb = per / 1e6
    windows = tuple(arch.windows)
    ns = cache_ns(arch)

    def of(ws):
        return tuple(cost_model.kv_cache(n, ws, arch.kv_heads, arch.head_dim) * mb for n in ns)

    state = cost_model.linear_state(arch.n_layers, arch.kv_heads, arch.head_dim) * mb
    return Cache(tuple(ns), of(windows), of((None,) * arch.n_layers), of((window,) * arch.n_layers),
                 (state,) * len(ns), window, sum(w is None for w in windows), sum(w is not None for w in windows))


CACHE_TABLE_NS = (4096, 2 ** 17, 2 ** 20)  # the table's lengths: 4,096, 131,072 and 1,048,576 tokens


def cache_lengths(arch) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The table's lengths: (the model's own — those of CACHE_TABLE_NS below its positions,
    then its positions themselves —, those past them: what another model of its shape, with
    a longer context, would keep, shown apart). All of CACHE_TABLE_NS its own when the model
    reads at least as far, or names no limit."""
    top = arch.max_positions
    if not top or top >= CACHE_TABLE_NS[-1]:
        return CACHE_TABLE_NS, ()
    return (tuple(n for n in CACHE_TABLE_NS if n < top) + (top,), tuple(n for n in CACHE_TABLE_NS if n > top))


def cache_at(arch) -> int:
    """The length the cache's metrics are said at: CACHE_AT, or the longest length of the
    chart (``cache_ns``) when the model reads fewer positions (Gemma 3 270m: 32,768)."""
    top = arch.max_positions
    return CACHE_AT if not top or top >= CACHE_AT else cache_ns(arch)[-1]


def cache_rows(t: Translator, arch, shape: Shape, lengths: tuple[int, ...], per: int) -> list[dict]:
    """The cache each way of attending keeps, in MB at ``lengths`` (``cache_lengths``),
    ``per`` bytes a number, counted in the model's own shape: every layer full; the model
    as it is; a window; the window with the shape's hubs (their keys and values kept too);
    top-k (every key, since any may be chosen); linear attention; the 3-in-4 hybrid stack
    (linear, every fourth layer full)."""
    mb = per / 1e6
    kv, d, layers = arch.kv_heads, arch.head_dim, arch.n_layers
    exact = len(swap.kept_exact(layers, swap.STACK_EVERY))

    def full(n, count=layers):
        return cost_model.kv_cache(n, (None,) * count, kv, d)

    ways = [
        (t("payoff.cache_full"), lambda n: full(n)),
        (t("payoff.cache_model_short"), lambda n: cost_model.kv_cache(n, arch.windows, kv, d)),
        (t("payoff.cache_window", w=t.int(shape.window)), lambda n: cost_model.kv_cache(n, (shape.window,) * layers,
                                                                                       kv, d)),
        (t("payoff.cache_window_hubs", w=t.int(shape.window), g=shape.hubs),
         lambda n: cost_model.kv_cache(n, (shape.window + shape.hubs,) * layers, kv, d)),
        (t("payoff.cache_topk"), lambda n: full(n)),
        (t("payoff.cache_linear"), lambda n: cost_model.linear_state(layers, kv, d)),
        (t("payoff.cache_hybrid", exact=exact, layers=layers),
         lambda n: full(n, exact) + cost_model.linear_state(layers - exact, kv, d)),
    ]
    head = t("payoff.cache_col_way")
    return [{head: name, **{t("payoff.cache_col_n", n=t.int(n)): t.float(f(n) * mb, 1) for n in lengths}}
            for name, f in ways]


def cache_figure(t: Translator, c: Cache):
    """The cache against n, one line each way (log scales)."""
    series = [
        {"name": t("payoff.cache_model", full=c.full_layers, sliding=c.sliding_layers), "x": list(c.ns),
         "y": list(c.model), "hover": t("payoff.hover_cache")},
        {"name": t("payoff.cache_full"), "x": list(c.ns), "y": list(c.full), "hover": t("payoff.hover_cache")},
        {"name": t("payoff.cache_window", w=t.int(c.window_size)), "x": list(c.ns), "y": list(c.window),
         "hover": t("payoff.hover_cache"), "dash": "dash"},
        {"name": t("payoff.cache_linear"), "x": list(c.ns), "y": list(c.linear), "hover": t("payoff.hover_cache"),
         "dash": "dot"},
    ]
    return figures.lines(series, title=t("payoff.cache_title"), x_title=t("common.n_axis"),
                         y_title=t("payoff.cache_axis"), separators=t.separators, log_x=True, log_y=True, height=420,
                         x_ticks=(list(c.ns[::2]), [t.int(n) for n in c.ns[::2]]))


def inputs() -> dict:
    """What the summary reads besides the settings: this device's live run, where it was
    run (its rows and largest length) — the page shows it, so the prebuild uses it too."""
    rows, last = live_bench.on_this_device()
    return {"live_rows": rows, "live_last": last} if rows else {}


def summary(t: Translator, a, text: str, model_id: str, cfg: dict, live_rows: list | None = None,
            live_last: int | None = None) -> Summary:
    """The cost model, counted in the served model's own shape (its layers, heads, head
    size, direction), always; the live run's ratio when ``live_rows`` were measured (at
    sizes up to ``live_last``)."""
    s = model_shape(model_id)
    ns = SIZES
    costs = methods.operations(ns, s)
    series = [{"name": live_bench.method_name(t, m, s), "x": ns, "y": costs[m], "hover": t("payoff.hover_flops")}
              for m in costs]
    # top-k: the attention over the chosen keys grows like the window's, the choosing does
    # not (the oracle scores every pair; an indexer every pair too, in fewer dimensions)
    oracle, indexer = methods.top_k(), methods.top_k(indexer=True)
    keep = oracle.keep_of(methods.Params(window=s.window, causal=s.causal))
    series.append({"name": t("payoff.topk_attention", k=t.int(keep)), "x": ns,
                   "y": [oracle.flops(n, s)[0] for n in ns], "hover": t("payoff.hover_flops")})
    series.append({"name": t("payoff.topk_oracle_scoring"), "x": ns, "y": [oracle.scoring_flops(n, s) for n in ns],
                   "hover": t("payoff.hover_flops"), "dash": "dashdot"})
    series.append({"name": t("payoff.topk_indexer_scoring", dims=indexer.indexer_dims), "x": ns,
                   "y": [indexer.scoring_flops(n, s) for n in ns], "hover": t("payoff.hover_flops"), "dash": "dashdot"})
    full, window = methods.exact().name, methods.window().name
    series.append({"name": t("payoff.ref_n2"), "x": ns, "y": [costs[full][0] * (n / ns[0]) ** 2 for n in ns],
                   "dash": "dot", "colour": "#999999", "mode": "lines", "hover": t("payoff.hover_flops")})
    series.append({"name": t("payoff.ref_n"), "x": ns, "y": [costs[window][0] * (n / ns[0]) for n in ns],
                   "dash": "dash", "colour": "#999999", "mode": "lines", "hover": t("payoff.hover_flops")})
    fig = figures.lines(series, title=t("payoff.model_title"), x_title=t("common.n_axis"),
                        y_title=t("payoff.flops_axis"), separators=t.separators, log_x=True, log_y=True, height=460,
                        x_ticks=(ns[::2], [t.int(n) for n in ns[::2]]))
    live_ratio = bench.ratios(live_rows).get((window, live_last)) if live_rows else None
    # the question asks what the lesson teaches, so the cost model grades it; one live timing
    # (0.98 or 3.1 on a busy machine) is shown beside it as what this device measured
    ratio = costs[window][-1] / costs[window][-2]
    note = (t("predict.from_live", value=t.float(live_ratio, 2), n=t.int(live_last // 2), n2=t.int(live_last))
            if live_ratio is not None else t("predict.from_model"))
    q = Question(t("payoff.question"), [1, 2, 4], ratio, lambda x: t.int(x), t.float(ratio, 2), note, source="model")
    key = [(t("payoff.metric_model_ratio", m=live_bench.method_name(t, m, s)), t.float(costs[m][-1] / costs[m][-2], 2))
           for m in costs]
    params = [("w", t.int(s.window)), ("g", t.int(s.hubs)), ("d", t.int(s.d)), ("h", t.int(s.heads)),
              ("L", t.int(s.layers))]
    return Summary(ID, params, key, fig, [q], Numbers(s, ns, costs, live_ratio))


def measured(t: Translator, a, text: str, model_id: str, cfg: dict):
    """The handout's live run on this device, where it was run: (its heading's key, its
    time and memory figures), or the key of the note that says it was not."""
    rows, _ = live_bench.on_this_device()
    if not rows:
        return "handout.live_not_run"
    return "payoff.live_heading", list(live_bench.figures_of(t, rows, bench.live_sizes(pick_device()), BENCH_SHAPE))


def for_full(t: Translator, a, text: str, model_id: str, cfg: dict) -> Question:
    """The matched question: the same doubling for full attention, by the same cost model."""
    costs = methods.operations(SIZES, model_shape(model_id))
    full = costs[methods.exact().name]
    ratio = full[-1] / full[-2]
    return Question(t("payoff.question_matched"), [1, 2, 4], ratio, lambda x: t.int(x), t.float(ratio, 2),
                    source="model")


STEP = Step(ID, order=70, icon=":material/speed:", page=page_file(__file__), questions=("s7.ratio",),
            summary=summary, inputs=inputs, needs_text=False, measured=measured,
            matched=(Matched("s7.ratio", "s7.ratio_full", ask=for_full),),
            estimates=(Estimate("s7.ratio", "s7.ratio_estimate"),))
