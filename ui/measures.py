"""What the pages show, computed once per text and setting and cached
(``st.cache_data``: small results only — the big tensors stay in the analysis,
cached once as a resource). Each function takes the text and the model's id, so
that the cache key names everything the result depends on; each returns a typed
record (a frozen dataclass), never a dict a page reads by string key."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from attn import graph, hub_stats, methods, outputs, patterns, stats, topk
from attn.rows import BLOCK_CELLS
from server.lru import CountLRU

from . import analyses, figures, row_reads
from .row_reads import Sampled, causal_view, layer_on, pooled_grid, sampled, sampled_weights
from .setting_rows import Context

@dataclass(frozen=True)
class PrefixPoint:
    """Step 2 on the text's first n tokens: k̄, the useful share, and both for a row that
    spreads its weight evenly."""

    n: int
    k: float
    share: float
    uniform_k: float
    uniform_share: float


@dataclass(frozen=True)
class Useful:
    """k̄ at p, the useful cells n·k̄ and their share of the cells the layer computes; the
    cells the drawn mask holds; k̄ of every head; the same on growing prefixes; the
    layer's own window (None: a full layer)."""

    k: float
    useful: float
    share: float
    cells: int
    mask_cells: int
    k_all: float
    prefixes: tuple[PrefixPoint, ...]
    window: int | None
    top_kept: float = 0.0  # the mean share of a row's weight in its round(k̄) largest cells (top-k at k = k̄)
    top_reached: float = 0.0  # the share of rows whose round(k̄) largest cells hold at least p
    sampled: Sampled | None = None  # the rows read (spread: of the useful share)
    mask_spread: float = 0.0  # half the 95 % width of mask_cells, an estimate on a sample (0: counted on every row)


@dataclass(frozen=True)
class ShareTrend:
    """In how many layers (and heads) the useful share fell from the first prefix
    (``first`` tokens) to the whole text (``n``); k̄ over every head."""

    first: int
    n: int
    layers: int
    heads: int
    layers_fell: int
    heads_fell: int
    k_mean: float
    sampled: Sampled | None = None  # the rows read (spread: of k_mean)


@dataclass(frozen=True)
class Kept:
    """The share of the real weight a pattern keeps: per (layer, head), per layer, overall."""

    per_head: np.ndarray
    per_layer: np.ndarray
    mean: float
    sampled: Sampled | None = None  # the rows read (spread: of mean)


@dataclass(frozen=True)
class HopGrid:
    """Hops between every pair (−1: never), the farthest pair (None: some pair is never
    joined) and how many pairs are never joined."""

    grid: np.ndarray
    farthest: int | None
    never: int


@dataclass(frozen=True)
class HopGrids:
    """Step 4's hop grids: both ways without and with hubs, and causal without a hub, with
    the first token as one and with the hubs a span holds (``causal_hubs``, when asked)."""

    none: HopGrid
    hubs: HopGrid
    causal_none: HopGrid
    causal_sink: HopGrid
    causal_hubs: HopGrid | None = None


@dataclass(frozen=True)
class SpecialShare:
    """The weight the tokenizer's own tokens receive (``columns``: their positions), on
    average and per layer, beside an even spread's."""

    columns: tuple[int, ...]
    mean: float
    even: float
    per_layer: tuple[float, ...]
    each: tuple[tuple[int, float, float], ...] = ()  # (column, its own share, its even share)
    sampled: Sampled | None = None  # the rows read (spread: of mean)


@dataclass(frozen=True)
class LinearOrders:
    """Step 5: both orders of one feature map on a layer's q, k, v — their difference, the
    sizes (n, d, the features m), the numbers each order holds and their times."""

    max_diff: float
    rel_diff: float
    n: int
    d: int
    m: int
    grid_numbers: int
    summary_numbers: int
    seconds_linear: float
    seconds_quadratic: float
    runs: int
    faster: str | None = None  # "summary" or "grid" when it ran faster beyond the runs' spread; None: too noisy


@dataclass(frozen=True)
class Errors:
    """Each method's output error against exact softmax (by method name, and ``uniform``:
    equal weights), averaged over the layer's heads; the fused kernel's dtype."""

    mean: dict
    dtype: str
    n: int
    plain: bool = False  # the layer's own attention was written out (a soft cap, a bias, sinks), not fused
    hubs: tuple[int, ...] = ()  # the hubs window + hubs was measured with: those among the n tokens read

    @property
    def uniform(self) -> float:
        return self.mean["uniform"]


@dataclass(frozen=True)
class Norms:
    q: float
    k: float
    q_scaled: float
    k_scaled: float


@dataclass(frozen=True)
class Sharpness:
    """Each method's mean largest weight of a row (by name; ``uniform``: equal weights), and
    the layer's median ‖q‖, ‖k‖."""

    peak: dict
    norms: Norms
    n: int = 0  # the tokens read (a long text's first: layer_tokens)

    @property
    def uniform(self) -> float:
        return self.peak["uniform"]


def _analysis(text: str, model_id: str):
    return analyses.get_analysis(text, model_id)


# few: a summary (kept for every reader) draws each grid once; at most 384² cells each
@st.cache_data(max_entries=8, show_spinner=False)
def grid(text: str, model_id: str, layer: int, head) -> np.ndarray:
    """The grid as drawn: every cell, or on a long text pooled to screen resolution
    (figures.pool_factor), each block its largest weight (a block's mean would fade the band
    along the diagonal and the sink's column into the average), and the cells the layer never
    computes (beyond its own window) left empty (drawing.downsample_note says both)."""
    a = _analysis(text, model_id)
    if figures.pool_factor(a.n) == 1:
        return pooled_grid(a, layer, head)
    return pooled_grid(a, layer, head, reduce="max", window=a.layers[layer].window)


@st.cache_data(max_entries=64, show_spinner=False)
def row(text: str, model_id: str, layer: int, head, token: int) -> np.ndarray:
    """One token's row of the grid at full resolution: its weight on itself and every
    earlier token (on an encoder, on every token)."""
    a = _analysis(text, model_id)
    return a.rows(layer, head, [token])[0, : token + 1 if a.causal else a.n].numpy()


@st.cache_data(max_entries=32, show_spinner=False)
def band(text: str, model_id: str, layer: int, head, token: int) -> tuple[np.ndarray, int, int]:
    """The rows around a followed token at full resolution (row_reads.band)."""
    return row_reads.band(_analysis(text, model_id), layer, head, token)


@st.cache_data(max_entries=64, show_spinner=False)
def useful(text: str, model_id: str, layer: int, head, p: float) -> Useful:
    """k̄, useful cells and their share of the cells the layer computes, for one head or
    (head=None) the heads of the layer, each head's own k averaged; on prefixes too. On a
    long text, read on its row sample (``row_sample``: the page says so)."""
    a = _analysis(text, model_id)
    reads = a.layers[layer]
    window = reads.window
    every, sample = sampled_weights(a)
    weights = every[layer] if head is None else every[layer, head]  # (H, rows, n) or (rows, n)
    s = stats.useful_summary(weights, p, reads, sample=sample)
    # the drawn mask holds exactly k cells per row of the grid drawn (the averaged one for head=None)
    # (on a long text's sample, an estimate of the whole grid's count: its spread goes with it)
    if head is not None:
        mask_k = s["k_rows"]
    else:
        mask_k = torch.cat([stats.k_for_share(a.rows(layer, None, pos), p)
                            for pos in sample.positions.split(max(1, BLOCK_CELLS // a.n))])
    mask_cells, mask_spread = sample.mean(mask_k) * a.n, sample.spread_95(mask_k) * a.n
    prefixes = stats.useful_share_by_prefix(
        weights, p, stats.prefix_lengths(a.n), reads, k_rows=s["k_rows"], sample=sample,  # k of the rows, counted above
        prefix=lambda m: a.prefix(m)[layer] if head is None else a.prefix(m)[layer, head])
    # top-k at k = k̄, measured: k̄ is an average of the rows' k(p), so the rows that need more
    # cells than k̄ fall short of p and those that need fewer keep more
    _, tops = stats.k_and_top(weights, p, keeps=(max(1, round(s["k"])),))
    top = next(iter(tops.values()))
    cells = s["cells"]
    return Useful(k=s["k"], useful=s["useful"], share=s["share"], cells=cells, mask_cells=int(round(mask_cells)),
                  top_kept=sample.mean(top), top_reached=sample.mean((top >= p - 1e-6).float()),
                  k_all=share_trend(text, model_id, p).k_mean,  # k(p) of every head once per text and p, shared
                  prefixes=tuple(PrefixPoint(r["n"], r["k"], r["share"], r["uniform_k"], r["uniform_share"])
                                 for r in prefixes),
                  window=window, sampled=sampled(sample, s["spread"] * a.n / cells), mask_spread=mask_spread)


@st.cache_data(max_entries=16, show_spinner=False)
def share_trend(text: str, model_id: str, p: float) -> ShareTrend:
    """In how many layers (and heads) the useful share falls from the first prefix step 2
    draws to the whole text (stats.share_trend), and k̄ over every head, on the rows of
    ``row_reads.model_sample`` (``sampled`` says which)."""
    a = _analysis(text, model_id)
    first = stats.prefix_lengths(a.n)[0]
    weights, sample = sampled_weights(a, row_reads.model_sample(a))
    r = stats.share_trend(weights, p, first, a.layers, first_attentions=None if a.causal else a.prefix(first),
                          sample=sample)
    return ShareTrend(first=r["first"], n=r["n"], layers=r["layers"], heads=r["heads"], layers_fell=r["layers_fell"],
                      heads_fell=r["heads_fell"], k_mean=r["k_mean"], sampled=sampled(sample, r["k_spread"]))


@st.cache_data(max_entries=64, show_spinner=False)
def kept(text: str, model_id: str, window: int, hubs: tuple) -> Kept:
    """Share of the real weight a window (+ hubs) keeps, per layer and head."""
    a = _analysis(text, model_id)
    weights, sample = sampled_weights(a)
    return _kept(stats.share_kept_by_pattern(weights, window, hubs, a.causal, sample=sample), sample)


def _kept(r: dict, sample) -> Kept:
    """A kept share as stats gives it (per head, per layer, mean, spread), as a record."""
    return Kept(r["per_head"].numpy(), r["per_layer"].numpy(), r["mean"], sampled(sample, r["spread"]))


@st.cache_data(max_entries=32, show_spinner=False)
def kept_and_sink(text: str, model_id: str, window: int, hub_sets: tuple) -> tuple[tuple[Kept, ...], float, Sampled]:
    """:func:`kept` for a window with each of ``hub_sets``, and the sink's share and the rows
    it was read on (:func:`sink_estimate`), in one pass over the weights (step 4 reads all of
    them: one pass instead of four)."""
    a = _analysis(text, model_id)
    weights, sample = sampled_weights(a)
    got, (sink, spread) = stats.shares_kept_and_sink(weights, window, hub_sets, a.causal, sample=sample)
    return tuple(_kept(r, sample) for r in got), sink, sampled(sample, spread)


ANCHOR_DISTANCE = hub_stats.ANCHOR_DISTANCE  # an anchor is scored by rows at least this far after it


ANCHORS_READ = 8  # anchors found in one pass over the weights: every page's count is a prefix of them


def anchors(text: str, model_id: str, top: int = 5) -> list[tuple[int, float]]:
    """The text's ``top`` anchors, strongest first (hub_stats.anchors, on the rows of
    ``row_reads.model_sample``): the first ``top`` of one cached pass that keeps ANCHORS_READ
    (step 4 asks for 5, step 6 and 7 for 3)."""
    return [(p, score) for p, score, _ in anchor_scores(text, model_id, top)]


def anchor_scores(text: str, model_id: str, top: int = ANCHORS_READ) -> list[tuple[int, float, float]]:
    """:func:`anchors` with each score's spread on the row sample (hub_stats.anchor_scores; 0 when
    every row is read): [(position, score, spread)]."""
    if top <= ANCHORS_READ:
        return _anchors(text, model_id, ANCHORS_READ)[:top]
    return _anchors(text, model_id, top)


@st.cache_data(max_entries=16, show_spinner=False)
def _anchors(text: str, model_id: str, top: int) -> list[tuple[int, float, float]]:
    a = _analysis(text, model_id)
    weights, sample = sampled_weights(a, row_reads.model_sample(a))  # said on step 4
    return hub_stats.anchor_scores(weights, a.causal, top=top, sample=sample)


@st.cache_data(max_entries=16, show_spinner=False)
def reach_frames(n: int, window: int, layers: int, causal: bool) -> list[np.ndarray]:
    """Which tokens reach which after 0…layers stacked windows, looking back only (``causal``)
    or both ways."""
    return [graph.reach_after_layers(n, window, L, causal=causal).numpy() for L in range(layers + 1)]


@st.cache_data(max_entries=16, show_spinner=False)
def hop_grids(n: int, window: int, hubs: tuple, causal_hubs: tuple = ()) -> HopGrids:
    """Hop grids (−1: never) and, per grid, its farthest pair (None: some pair is
    never joined) and the count of pairs never joined."""
    def of(g: torch.Tensor, causal: bool) -> HopGrid:
        return HopGrid(g.numpy(), graph.farthest_pair(g, causal), graph.pairs_never_joined(g, causal))

    return HopGrids(
        none=of(graph.hops(n, window, (), causal=False), False),
        hubs=of(graph.hops(n, window, hubs, causal=False), False),
        causal_none=of(graph.hops(n, window, (), causal=True), True),
        causal_sink=of(graph.hops(n, window, (0,), causal=True), True),
        causal_hubs=of(graph.hops(n, window, causal_hubs, causal=True), True) if causal_hubs else None)


@st.cache_data(max_entries=16, show_spinner=False)
def route(n: int, window: int, hubs: tuple, i: int, j: int) -> list[int]:
    """One shortest route j → … → i in the bidirectional setting with hubs (cached per
    text's sizes and setting: the hop grids are)."""
    hop = hop_grids(n, window, hubs).hubs.grid
    return graph.route(torch.from_numpy(hop), graph.adjacency(n, window, hubs, False), i, j)


def cells(n: int, causal: bool, window=None, hubs=()) -> int:
    """Cells of a window (None: every pair) with hubs on n tokens, looking back only
    (``causal``) or both ways."""
    return patterns.cells(n, window, hubs, causal)


@st.cache_data(max_entries=16, show_spinner=False)
def sink_share(text: str, model_id: str) -> float:
    """Mean weight every row after the first gives to the first token (all layers, heads)."""
    return sink_estimate(text, model_id)[0]


@st.cache_data(max_entries=16, show_spinner=False)
def sink_estimate(text: str, model_id: str) -> tuple[float, Sampled]:
    """The sink's share (``sink_share``) and the rows it was read on."""
    weights, sample = sampled_weights(_analysis(text, model_id))
    share, spread = stats.sink_rows(weights, sample)
    return share, sampled(sample, spread)


@st.cache_data(max_entries=16, show_spinner=False)
def special_share(text: str, model_id: str) -> SpecialShare:
    """The weight the tokenizer's own tokens ([CLS], [SEP], <bos>) receive: their columns'
    share of each row, averaged over every row, layer and head (hub_stats.share_to), per
    layer too, beside what an even spread over each row's cells would give them."""
    a = _analysis(text, model_id)
    weights, sample = sampled_weights(a)
    r = hub_stats.share_to(weights, a.specials, a.causal, sample=sample)
    return SpecialShare(tuple(r["columns"]), r["mean"], r["even"], tuple(r["per_layer"]), tuple(r["each"]),
                        sampled(sample, r.get("spread", 0.0)))


@st.cache_data(max_entries=32, show_spinner=False)
def top_share_view(text: str, model_id: str, layer: int, head, p: float) -> np.ndarray:
    """The grid with only the cells that make up share p of each row (others NaN)."""
    a = _analysis(text, model_id)
    return pooled_grid(a, layer, head, reduce="max", keep=lambda rows: stats.top_share_mask(rows, p))


@st.cache_data(max_entries=32, show_spinner=False)
def linear_orders(text: str, model_id: str, layer: int, feature: str, causal: bool) -> LinearOrders:
    """Both multiplication orders of one φ on the model's own q, k, v of a layer (on a long
    text's first tokens: ``layer_tokens``; ``n`` says how many)."""
    a = _analysis(text, model_id)
    q, k, v, _ = layer_on(a, layer)
    r = outputs.linear_orders(q, k, v, a.layers[layer], feature=feature, causal=causal)
    return LinearOrders(**{f: r[f] for f in LinearOrders.__dataclass_fields__})


@st.cache_data(max_entries=32, show_spinner=False)
def errors(text: str, model_id: str, layer: int, window: int, hubs: tuple) -> Errors:
    """Each method's output error on one layer (on a long text's first tokens:
    ``layer_tokens``; ``n`` says how many)."""
    a = _analysis(text, model_id)
    q, k, v, bias = layer_on(a, layer)
    hubs = tuple(h for h in hubs if h < q.shape[2])  # the hubs among the tokens read
    r = outputs.output_errors(q, k, v, a.layers[layer], window=window, hubs=hubs, bias=bias)
    return Errors(r["mean"], r["dtype"], r["n"], r["plain"], hubs)


@st.cache_data(max_entries=32, show_spinner=False)
def topk_recall(text: str, model_id: str, layer: int, window: int) -> float:
    """Top-k's indexer on one layer: the share of the oracle's keys it chose too, at the
    window's cells a row (k of :meth:`attn.methods.Method.keep_of`), on the tokens the
    layer's other measures read (``layer_on``: a long text's first ones, as the errors beside it)."""
    a = _analysis(text, model_id)
    q, k, _, _ = layer_on(a, layer)
    m = methods.top_k(indexer=True)
    keep = m.keep_of(methods.Params(window=window, causal=a.causal))
    return topk.recall(q.float(), k.float(), keep, m.indexer_dims, causal=a.causal, span=a.layers[layer].window)


MAP_TOKENS = 64  # the implied maps: small multiples, their tokens named on category axes


@st.cache_data(max_entries=32, show_spinner=False)
def implied_maps(text: str, model_id: str, layer: int, head: int, window: int, hubs: tuple, feature: str) -> dict:
    """The attention each method tagged ``maps`` implies on the first MAP_TOKENS
    tokens of one head (of the linear methods, the chosen φ only), keyed by method."""
    a = _analysis(text, model_id)
    m = min(a.n, MAP_TOKENS)
    q, k, _ = a.qkv(layer)
    q, k = q[:, head:head + 1, :m], k[:, head:head + 1, :m]
    small_hubs = tuple(h for h in hubs if h < m)
    out = {}
    for method in methods.tagged(methods.MAPS, lambda x: x.family != "linear" or x.feature == feature):
        params = methods.Params(window=a.layers[layer].window if method.family == "own" else window,
                                hubs=small_hubs, causal=a.causal)
        bias = a.bias(layer)
        if bias is not None:  # (heads or 1, n, n): this head's, on the drawn tokens
            h = head if bias.shape[0] > 1 else 0
            bias = bias[h:h + 1, :m, :m]
        w = outputs.implied_weights(q, k, a.layers[layer], method=method.name, params=params, bias=bias)[0]
        if method.family == "window":  # cells the method skips: drawn empty
            w = torch.where(patterns.dense(method.mask(m, params), m), w, torch.nan)
        out[method.name] = causal_view(w, a.causal)
    return out


@st.cache_data(max_entries=32, show_spinner=False)
def sharpness(text: str, model_id: str, layer: int, window: int, hubs: tuple) -> Sharpness:
    """Mean largest weight per row of each method, and the layer's median ‖q‖, ‖k‖."""
    a = _analysis(text, model_id)
    q, k, _, bias = layer_on(a, layer)
    reads = a.layers[layer]
    hubs = tuple(h for h in hubs if h < q.shape[2])  # the hubs among the tokens read
    peak = outputs.peak_weights(q, k, reads, window=window, hubs=hubs, bias=bias)
    return Sharpness(peak, Norms(**outputs.median_norms(q, k, reads)), q.shape[2])


@st.cache_resource(show_spinner=False)
def finished_results(name: str, entries: int) -> CountLRU:
    """Finished results of one kind (step 7's live runs, the swaps' sweeps, the
    playground's timings), at most ``entries`` of them, shared by every reader of the
    process: one bounded, locked store a kind (st.cache_resource hands every session the
    same object)."""
    return CountLRU(entries)


def setting_context(text: str, model_id: str) -> Context:
    """What the settings' defaults need of a text besides its sizes: its anchors, found
    once and only when a default asks for them."""
    def strongest(k: int) -> list[int]:
        return [p for p, _ in anchors(text, model_id, k)]

    return Context(strongest)
