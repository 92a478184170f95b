"""The pattern playground: the reader composes a sparse pattern from the parts of
``attn.composition.PARTS`` and sees, on their own text, what it costs, what it can reach,
what it keeps of the model's attention and what the model loses with it.

The settings are rows like every step's (``pg_*`` keys, kept across pages and carried by a
share link); :func:`composition` turns them into a :class:`attn.composition.Composition`,
or into a message naming the setting that does not fit the text. The numbers are cached
per text and composition, for every reader, each a typed record."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from attn import bench, graph, methods, outputs, patterns, stats
from attn import composition as algebra
from attn import costs as costs_model
from attn.composition import Composition, CompositionError
from attn.costs import Shape
from attn.device import pick_device
from attn.swap import STACK_EVERY, stack_layers
from server.lru import CountLRU

from ui import analyses, measures, model_swaps, row_reads, widgets
from ui.i18n import Translator
from ui.setting_rows import DEFAULT_LAYER, Context, Dims, Setting, first_layer, hubs_row, layers_of
from ui.step_parts import Step
from ui.walk import page_file
from . import topk_part
from .topk_part import TopK

ID = "playground"
PLAY_TOKENS = 96  # reach and hops on the first tokens: dense n×n matrices, drawn
LARGE_N = 8192  # the cost ratio cost(2n)/cost(n) is taken here
PRESETS = algebra.PRESETS
PRESET_WINDOW = algebra.PRESET_WINDOW
ANCHOR_HUBS = 3
RANDOM_BLOCKS = (16, 32, 64, 128)
MAX_SETTING = 100_000  # the number inputs' upper end: anything past the text gets a message
HUB_MODES = ("anchors", "chosen")
SCOPES = ("all", "sliding", "stack")  # "stack": every layer but every k-th, which stays exact
PART_NAMES = (*algebra.PARTS, topk_part.NAME)
SEED_CHARS = 40


def _count(key: str, lo: int, first: int) -> Setting:
    return Setting(key, ID, "int", lambda d, c: first, bounds=lambda d: (lo, MAX_SETTING), widget="number")


SETTINGS: tuple[Setting, ...] = (
    Setting("pg_on", ID, "many", lambda d, c: ["window", "hubs"], choices=lambda d: PART_NAMES, widget="pills"),
    _count("pg_w", 1, algebra.PRESET_WINDOW), _count("pg_dilated", 1, 8), _count("pg_stride", 1, 4),
    Setting("pg_hub_mode", ID, "choice", lambda d, c: "anchors", choices=lambda d: HUB_MODES, widget="radio"),
    hubs_row("pg_hubs", ID, lambda d, c: [0]),
    _count("pg_random", 1, 2),
    Setting("pg_rblock", ID, "choice", lambda d, c: 32, choices=lambda d: RANDOM_BLOCKS, widget="selectbox"),
    Setting("pg_seed", ID, "text", lambda d, c: "0", chars=SEED_CHARS, widget="text"),
    _count("pg_local", 2, 64),
    _count("pg_k", 1, 32),
    Setting("pg_chooser", ID, "choice", lambda d, c: "oracle", choices=lambda d: topk_part.CHOOSERS,
            widget="radio"),
    Setting("pg_causal", ID, "bool", lambda d, c: d.causal, widget="toggle"),
    Setting("pg_scope", ID, "choice", lambda d, c: "all", choices=lambda d: SCOPES, widget="radio"),
    Setting("pg_every", ID, "int", lambda d, c: min(STACK_EVERY, max(2, d.n_layers)),
            bounds=lambda d: (2, max(2, d.n_layers)), widget="number"),
    Setting("pg_layer", ID, "choice", lambda d, c: first_layer(d), choices=layers_of, widget="selectbox",
            names="layer"),
    Setting("pg_rl", ID, "int", lambda d, c: min(2, d.n_layers), bounds=lambda d: (1, d.n_layers), widget="slider"),
)
KEYS = tuple(s.key for s in SETTINGS)
DEFAULTS = {s.key: s.default(Dims(n=1, n_layers=DEFAULT_LAYER + 1, n_heads=1), Context())
            for s in SETTINGS}  # on a model with layer 8


@dataclass(frozen=True)
class Cost:
    """Exact cells against every pair, operations against full attention's, the numbers
    held, and cells(2N)/cells(N) at N = LARGE_N beside full attention's."""

    cells: int
    every: int
    share: float
    flops: float
    full_flops: float
    numbers: int
    ratio: float
    full_ratio: float
    large: int
    doubled: int


@dataclass(frozen=True)
class Hops:
    """One direction's hop grid on the first tokens: its farthest pair (None: some pair
    never joined), the pairs never joined, and how many tokens reach the last one."""

    grid: np.ndarray
    farthest: int | None
    never: int
    reach_last: int


@dataclass(frozen=True)
class Reach:
    """Both directions on the first ``m`` tokens, and which one the page draws."""

    m: int
    causal: Hops
    bidirectional: Hops
    shown: str  # "causal" or "bidirectional"

    @property
    def drawn(self) -> Hops:
        return self.causal if self.shown == "causal" else self.bidirectional


@dataclass(frozen=True)
class PatternKept:
    """The share of real weight the pattern keeps, per layer and overall, and the layers it
    is used in (the rest keep their own)."""

    per_layer: np.ndarray
    mean: float
    scoped: tuple[int, ...]


@dataclass(frozen=True)
class PatternError:
    """The pattern's output error in one layer, and equal weights' (the floor), on the
    text's first ``n`` tokens (row_reads.layer_tokens: a long text's first)."""

    mean: float
    uniform: float
    n: int = 0


@dataclass(frozen=True)
class Timing:
    """The composed pattern's time and SDPA's on a layer, the kernel that ran it, and n."""

    pattern: float
    full: float
    backend: str
    n: int


def scoped_layers(n_layers: int, sliding: tuple[int, ...], scope: str, every: int) -> tuple[int, ...]:
    """The layers the pattern replaces: every one, the sliding ones, or a hybrid stack's
    (every layer but each ``every``-th, which keeps its own attention)."""
    if scope == "stack":
        return stack_layers(n_layers, every)
    return tuple(i for i in range(n_layers) if scope == "all" or i in sliding)


def settings(a) -> dict:
    """The playground's settings on this text: each kept value its widget takes, else
    its default (a value that does not fit is dropped, with a notice when it came with
    a link), written back so that every widget starts from it."""
    for key in KEYS:
        widgets.place(key, a, Context())
    return {k: st.session_state[k] for k in KEYS}


def preset(name: str, model_window: int, causal: bool = True) -> dict:
    """The settings a preset (``attn.composition.preset``) puts in place; the layer and the
    parts' other settings stay as they are. The model's own preset reads as the model
    does (``causal``: False on an encoder)."""
    c = algebra.preset(name, (0,), model_window)  # the hubs themselves are set below
    out = {"pg_on": [p.name for p in algebra.PARTS.values() if p.on(c)],
           "pg_w": c.window, "pg_scope": "sliding" if name == "model" else "all"}
    if name == "model":
        out["pg_causal"] = causal
    if name in ("longformer", "bigbird"):
        out["pg_hub_mode"] = "anchors"  # global tokens: the model's own anchors
    if name == "sink":
        out.update(pg_hub_mode="chosen", pg_hubs=list(c.hubs))
    if c.random:
        out.update(pg_random=c.random, pg_rblock=c.random_block)
    return out


def apply_preset(name: str, model_window: int, causal: bool = True) -> None:
    """on_click of a preset's button: its settings replace the widgets' values. (Its
    arguments stay in the reader's session: small values, never the analysis.)"""
    for key, value in preset(name, model_window, causal).items():
        widgets.chosen_by_reader(key, value)  # the reader's own choice, as a widget's change is


def hubs_left_out(t: Translator, c: Composition, m: int) -> str | None:
    """The sentence that names the pattern's hubs past the first ``m`` tokens a measure reads
    (composition_on_prefix drops them), or None when it keeps them all."""
    left = [h for h in c.hubs if h >= m]
    if not left:
        return None
    return t("playground.hubs_left_out", count=len(left), hubs=t.list(str(h) for h in left), m=t.int(m))


def hub_positions(cfg: dict, anchors: list[int]) -> tuple[int, ...]:
    return tuple(sorted(set(anchors if cfg["pg_hub_mode"] == "anchors" else cfg["pg_hubs"])))


def composition(cfg: dict, n: int, anchors: list[int]) -> tuple[Composition | None, CompositionError | None]:
    """The composition the settings describe on a text of n tokens, or the first setting
    that does not fit it."""
    on = set(cfg["pg_on"])
    seed_text = str(cfg["pg_seed"]).strip()
    if "random" in on and not (seed_text.isascii() and seed_text.isdigit()):
        return None, CompositionError("seed_text", value=seed_text)
    c = Composition(
        window=cfg["pg_w"] if "window" in on else 0,
        dilated=cfg["pg_dilated"] if "dilated" in on else 0, stride=cfg["pg_stride"] if "dilated" in on else 2,
        hubs=hub_positions(cfg, anchors) if "hubs" in on else (),
        random=cfg["pg_random"] if "random" in on else 0,
        random_block=cfg["pg_rblock"] if "random" in on else Composition.random_block,
        seed=int(seed_text) if "random" in on else 0, local=cfg["pg_local"] if "local" in on else 0,
    )
    try:
        return algebra.check_composition(n, c), None
    except CompositionError as exc:
        return None, exc


def error_text(t: Translator, exc: CompositionError) -> str:
    values = {k: (t.int(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in exc.values.items()}
    return t(f"playground.err_{exc.code}", **values)


def any_part(c: Composition) -> bool:
    """Whether any part is on (else the pattern is the diagonal alone)."""
    return bool(c.window or c.dilated or c.hubs or c.random or c.local > 1)


def parts_label(t: Translator, c: Composition, top: TopK | None = None) -> str:
    """The parts that are on, in the reader's language, with their settings."""
    out = []
    if c.window:
        out.append(t("parts.window_n", w=t.int(c.window)))
    if c.dilated:
        out.append(t("parts.dilated_n", k=t.int(c.dilated), s=t.int(c.stride)))
    if c.hubs:
        out.append(t("parts.hubs_n", hubs=t.list(str(h) for h in c.hubs)))
    if c.random:
        out.append(t("parts.random_n", r=t.int(c.random), b=t.int(c.random_block), seed=c.seed))
    if c.local > 1:
        out.append(t("parts.local_n", b=t.int(c.local)))
    if top is not None:
        out.append(t("parts.topk_indexer_n" if top.indexer else "parts.topk_n", k=top.keep,
                     dims=methods.INDEXER_DIMS))
    return " + ".join(out) or t("parts.diagonal_only")


def key_of(c: Composition) -> tuple:
    """A composition as a plain tuple (a cache key)."""
    return dataclasses.astuple(c)


def _comp(key: tuple) -> Composition:
    values = dict(zip((f.name for f in dataclasses.fields(Composition)), key))
    return Composition(**{**values, "hubs": tuple(values["hubs"])})


# --- what it costs ----------------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def grid(n: int, key: tuple, causal: bool) -> np.ndarray:
    """The pattern over the text: 1 where a cell is computed, 0 where it is skipped,
    empty above the diagonal of a causal pattern; pooled to screen resolution (each drawn
    cell the share of its block computed), a block of rows at a time."""
    allowed = patterns.rows_of(algebra.composed_mask(n, _comp(key), causal), n)
    return row_reads.pooled(n, lambda positions: allowed(positions).float(), causal)


@st.cache_data(max_entries=32, show_spinner=False)
def top_grid(text: str, model_id: str, key: tuple, top_key_: tuple, layer: int, causal: bool) -> np.ndarray:
    """The cells top-k beside the parts computes in one layer's first head, chosen on the
    layer's own q and k: as :func:`grid`."""
    a = analyses.get_analysis(text, model_id)
    return _grid_of(topk_part.cells(a, _comp(key), topk_part.of_key(top_key_), layer, causal)[0, 0], causal)


def _grid_of(allowed: torch.Tensor, causal: bool) -> np.ndarray:
    n = allowed.shape[-1]
    g = allowed.float()
    if causal:
        g[torch.ones(n, n, dtype=torch.bool).triu(1)] = torch.nan
    return g.numpy()


@st.cache_data(max_entries=64, show_spinner=False)
def costs(n: int, key: tuple, causal: bool, heads: int, d: int) -> Cost:
    """Exact cells against every pair, operations and numbers held (the registry's cost
    model at the model's shape), and cells(2N)/cells(N) at N = LARGE_N, beside full
    attention's, with the same parts (hubs where the reader put them)."""
    c = _comp(key)
    shape = Shape(heads=heads, d=d)
    cells = algebra.composed_cells(n, c, causal)
    every = topk_part.every_pair(n, causal)
    flops = costs_model.composed_flops(n, shape, c, causal=causal)[0]  # the registry's cost model
    full_flops = methods.exact().flops(n, shape)[0] if causal else every * costs_model.cell_flops(shape)
    large = algebra.composed_cells(LARGE_N, algebra.composition_on_prefix(LARGE_N, c), causal)
    doubled = algebra.composed_cells(2 * LARGE_N, algebra.composition_on_prefix(2 * LARGE_N, c), causal)
    return Cost(cells=cells, every=every, share=cells / every, flops=flops, full_flops=full_flops,
                numbers=costs_model.composed_memory(n, shape, c, causal), ratio=doubled / large,
                full_ratio=topk_part.every_pair(2 * LARGE_N, causal) / topk_part.every_pair(LARGE_N, causal),
                large=large, doubled=doubled)


@st.cache_data(max_entries=64, show_spinner=False)
def top_costs(text: str, model_id: str, key: tuple, top_key_: tuple, layer: int, causal: bool) -> topk_part.TopKCost:
    """Top-k beside the parts on one layer of the text (``topk_part.cost``), at N = LARGE_N."""
    a = analyses.get_analysis(text, model_id)
    return topk_part.cost(a, _comp(key), topk_part.of_key(top_key_), layer, causal, LARGE_N)


# --- what it can reach ------------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def reach(n: int, key: tuple, layers: int, causal: bool) -> Reach:
    """On the first PLAY_TOKENS tokens, causal and bidirectional: the hop grids (−1:
    never), the farthest pair, the pairs never joined, and how many tokens reach the
    last one after ``layers`` layers."""
    m = min(n, PLAY_TOKENS)
    c = algebra.composition_on_prefix(m, _comp(key))

    def hops(causal_: bool) -> Hops:
        adj = patterns.dense(algebra.composed_mask(m, c, causal_), m)
        hop = graph.hops_of(adj)
        return Hops(hop.numpy(), graph.farthest_pair(hop, causal_), graph.pairs_never_joined(hop, causal_),
                    int(graph.reach_of(adj, layers)[m - 1].sum()))

    return Reach(m, hops(True), hops(False), "causal" if causal else "bidirectional")


# --- what it keeps ----------------------------------------------------------------------


def scoped(a, scope: str, every: int) -> tuple[int, ...]:
    """The layers of this model the pattern replaces (:func:`scoped_layers`)."""
    return scoped_layers(a.n_layers, tuple(i for i in range(a.n_layers) if a.layers[i].sliding), scope, every)


@st.cache_data(max_entries=64, show_spinner=False)
def kept(text: str, model_id: str, key: tuple, scope: str, top_key_: tuple | None = None,
         every: int = STACK_EVERY) -> PatternKept:
    """Share of the model's real attention weight inside the pattern (read as the model
    reads: causal, or both ways on an encoder), per layer and overall; layers outside the
    scope keep their own pattern, so all of their weight. With top-k, each layer's own
    chosen keys beside the parts."""
    a = analyses.get_analysis(text, model_id)
    allowed = patterns.rows_of(algebra.composed_mask(a.n, _comp(key), a.causal), a.n)  # a block of rows at a time
    inside = list(scoped(a, scope, every))
    per_layer = np.ones(a.n_layers)
    top = topk_part.of_key(top_key_)
    weights = a.weights()
    for i in inside if top is not None else ():
        cells = topk_part.cells(a, _comp(key), top, i, a.causal)[0]  # (heads, m, m): each head's chosen cells
        m = cells.shape[-1]  # a long text's first tokens (topk_part.cells)
        per_layer[i] = float(stats.share_kept(weights[i] if m == a.n else weights[i].prefix(m), cells).mean())
    if inside and top is None:
        per_layer[inside] = stats.share_kept(weights[inside], allowed).mean(dim=-1).numpy()
    return PatternKept(per_layer, float(per_layer.mean()), tuple(inside))


@st.cache_data(max_entries=64, show_spinner=False)
def error(text: str, model_id: str, key: tuple, layer: int, top_key_: tuple | None = None) -> PatternError:
    """Output error of the pattern (with top-k's chosen keys, when on) on one layer's own
    q, k, v against exact softmax."""
    a = analyses.get_analysis(text, model_id)
    q, k, v, bias = row_reads.layer_on(a, layer)  # a long text's first tokens (the exact reference is n×n)
    m = q.shape[2]
    comp = _comp(key) if m == a.n else algebra.composition_on_prefix(m, _comp(key))
    top = topk_part.of_key(top_key_)
    r = outputs.pattern_error(q, k, v, a.layers[layer], comp, bias=bias,
                              method=None if top is None else top.method, keep=None if top is None else top.keep)
    return PatternError(r["mean"], r["uniform"], m)


def swap_settings(a, c: Composition, scope: str, top: TopK | None = None, every: int = STACK_EVERY) -> list:
    """The swap's two runs on the first tokens a swap reads: the control (the
    model's own attention in the same layers) and the pattern (with top-k's chosen keys
    when on), made causal."""
    from attn.swap import Swap

    m = min(a.n, model_swaps.swap_budget())
    layers = scoped(a, scope, every) if scope == "stack" else scope
    parts = algebra.composition_on_prefix(m, c)
    pattern = (Swap(methods.composed().name, layers, parts=parts, series="pattern") if top is None else
               Swap(top.method.name, layers, parts=parts, k=top.keep, series="pattern"))
    return [Swap(methods.own().name, layers, series="control"), pattern]


# --- the fast path, timed on a button -------------------------------------------------------


TIMINGS = 64  # finished timings kept per process


def _timings() -> CountLRU:
    """Finished timings by text, composition and layer, shared by readers."""
    return measures.finished_results("timings", TIMINGS)


def timing(text: str, model_id: str, key: tuple, layer: int, top_key_: tuple | None = None) -> Timing | None:
    return _timings().get((model_id, text, key, layer, top_key_))


def time_it(t: Translator, text: str, model_id: str, key: tuple, layer: int, top_key_: tuple | None = None) -> Timing:
    """The composed pattern (with top-k's chosen keys, when on) against causal SDPA on the
    layer's own q, k, v (median of a few runs), through the queue."""
    a = analyses.get_analysis(text, model_id)
    q, k, v = a.qkv(layer)
    q, k, v = (x.contiguous() for x in (q, k, v))
    top = topk_part.of_key(top_key_)
    pattern, full = (methods.composed() if top is None else top.method), methods.exact()
    scale = a.layers[layer].scale  # a timing: the soft cap or bias a layer may add is left out of both
    params = methods.Params(parts=_comp(key), causal=a.causal, scale=scale, k=None if top is None else top.keep)
    full_params = methods.Params(scale=scale, causal=a.causal)
    device = pick_device()

    def work():
        return Timing(
            pattern=bench.median_time(lambda: pattern.run(q, k, v, params), device, repeats=5, max_seconds=3.0),
            full=bench.median_time(lambda: full.run(q, k, v, full_params), device, repeats=5, max_seconds=3.0),
            backend=pattern.backend(q, v, params), n=a.n)

    with st.spinner(t("playground.timing_running")):
        res = analyses.in_line("bench", work)
    _timings()[(model_id, text, key, layer, top_key_)] = res
    return res


STEP = Step(ID, order=90, icon=":material/science:", page=page_file(__file__), is_step=False, settings=SETTINGS)
