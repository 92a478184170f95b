"""How a row's attention weight is spread: k(p) and the useful share (on growing
prefixes too), the share a pattern keeps and the first token's share (the anchors and the
share that lands on chosen columns: :mod:`attn.hub_stats`).
What each shortcut's output costs against exact softmax is :mod:`attn.outputs`.

Weights are an :class:`attn.rows.Weights` (an analysis' weights, recomputed a block of
rows at a time and never held whole) or a tensor ``(..., n, n)`` (a small grid: the tests'
references), with rows summing to 1; sums run in float32. A statistic read on a
:class:`attn.rows.RowSample` of the rows weighs each row by the rows it stands for.
"""

from __future__ import annotations


from collections.abc import Sequence

import torch

from . import patterns
from .layer import LayerAttention
from .rows import RowSample, Weights


_CHUNK = 1 << 22  # weights handled at once (in float32: 16 MB), so all layers of a long text fit
_FIRST_CELLS = 32  # k(p) looks first among a row's 32 largest cells (7 rows in 10 of the model's need no more)
# rows that need more: their 128 largest cells, then 512, then 2,048, then a sort of the whole
# row (of a 1,024-token text's rows of every head, 54 % need at most 32 cells, 34 % 33–128,
# 12 % 129–512; a topk of 128 costs 45 % of one of 512: the first 32 then the 512 largest,
# 0.65 → 0.53 s. An 8,120-token text's full layers: 10–25 % of their sampled rows need more than
# 512 of up to 8,120 cells and nearly all of those at most 2,048, whose topk costs a third of a
# sort: the sorts then the 2,048 look 0.47 s where the sorts alone were 0.66 s, of a k(p) of
# about 4 s whose change between runs is larger — docs/performance.md, stop 71)
_LOOKS = (128, 512, 2048, None)
_TOP_CELLS = 64  # k_and_top: a keep up to this many cells a row is read off one sorted selection


def blocks_of(weights, narrow: bool = False):
    """The grid's rows in chunks: yields (start, stop, float32 rows ``(r, n)``); ``narrow``:
    (start, stop, rows, lo), the rows on the columns [lo, lo + width) that can hold weight
    (an analysis' rows: attn.rows.Weights.blocks; a tensor's are whole, lo = 0)."""
    if isinstance(weights, Weights):
        yield from weights.blocks(narrow=narrow)
        return
    n = weights.shape[-1]
    flat = weights.reshape(-1, n)
    step = max(1, _CHUNK // max(n, 1))
    for s in range(0, flat.shape[0], step):
        rows = flat[s:s + step].float()
        yield (s, min(flat.shape[0], s + step), rows, 0) if narrow else (s, min(flat.shape[0], s + step), rows)


def k_for_share(weights: torch.Tensor, p: float) -> torch.Tensor:
    """k(p) per row: the fewest cells whose weights add up to at least a share p of
    the row (largest first). int64 ``(..., n)``."""
    return k_and_top(weights, p)[0]


def k_and_top(weights: torch.Tensor, p: float, keeps: Sequence[int] = ()) -> tuple[torch.Tensor, dict]:
    """k(p) per row (``k_for_share``) and, for each of ``keeps``, the weight each row's
    ``keep`` largest cells hold (float32 ``(..., n)``; a row of fewer cells, all of them):
    one selection of each row's largest cells serves both (the room reads k(p) and the top
    cells at four windows' counts on every layer of a text: 77 + 74 → 84 ms, bench/room_text.py)."""
    k, tops, _ = _k_top_kth(weights, p, keeps)
    return k, tops


def k_and_kth(weights: torch.Tensor, p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """k(p) per row and the weight of the row's k-th largest cell (the smallest that share
    p needs): int64 and float32 ``(..., n)``."""
    k, _, kth = _k_top_kth(weights, p, ())
    return k, kth


def _k_top_kth(weights, p: float, keeps: Sequence[int]) -> tuple[torch.Tensor, dict, torch.Tensor]:
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    n = weights.shape[-1]
    keeps = sorted({max(1, int(kk)) for kk in keeps})
    # the largest cells taken sorted at once: k(p)'s first look, and every keep up to _TOP_CELLS
    first = min(n, max([_FIRST_CELLS, *(kk for kk in keeps if kk <= _TOP_CELLS)]))
    out = torch.empty(weights.shape[:-1], dtype=torch.int64).reshape(-1)
    kth = torch.empty(weights.shape[:-1]).reshape(-1)
    tops = {kk: torch.empty(weights.shape[:-1]).reshape(-1) for kk in keeps}
    for s, e, w, _ in blocks_of(weights, narrow=True):  # only the columns that can hold weight
        c = w.shape[-1]
        look = min(c, first)
        target = p * w.sum(dim=-1) - 1e-6  # (float slack 1e-6)
        # most rows reach the target within their largest few cells: those cells alone
        # (topk, sorted) give the same running sums as a sort of the whole row, and only
        # the rows that do not reach it are sorted whole (bench/room_text.py, every layer of
        # a 354-token text: 156 → 104 ms)
        largest = torch.topk(w, look, dim=-1).values
        top = largest.cumsum(dim=-1)
        k = (top < target[:, None]).sum(dim=-1) + 1  # cells strictly below it, plus the one that reaches it
        kth[s:e] = largest.gather(-1, (k - 1).clamp_max(look - 1)[:, None])[:, 0]
        short = (top[:, -1] < target).nonzero()[:, 0]  # the rows their largest cells leave short of it
        seen = look
        for wide in _LOOKS:  # then wider looks at only those rows, the last a sort of each whole row
            if seen >= c or short.numel() == 0:
                break
            seen = c if wide is None else min(c, wide)
            values = (torch.topk(w[short], seen, dim=-1) if seen < c
                      else torch.sort(w[short], dim=-1, descending=True)).values
            more = values.cumsum(dim=-1)
            k[short] = (more < target[short, None]).sum(dim=-1) + 1
            kth[s + short] = values.gather(-1, (k[short] - 1).clamp_max(seen - 1)[:, None])[:, 0]
            short = short[more[:, -1] < target[short]]
        out[s:e] = k.clamp_max(n)
        for kk in keeps:
            if kk <= look:
                tops[kk][s:e] = top[:, kk - 1]
            elif kk >= c:
                tops[kk][s:e] = w.sum(dim=-1)
            else:
                tops[kk][s:e] = w.topk(kk, dim=-1, sorted=False).values.sum(dim=-1)
    shape = weights.shape[:-1]
    return out.reshape(shape), {kk: t.reshape(shape) for kk, t in tops.items()}, kth.reshape(shape)


def top_share_mask(weights: torch.Tensor, p: float) -> torch.Tensor:
    """bool, same shape: the k(p) cells that make up share p of each row, largest first:
    every cell above the row's k-th largest weight, and of the cells equal to it the first
    ones (by column) up to k — no sort of whole rows (step 2's drawn grid of an 8,120-token
    text: 0.6 → 0.3 s under cProfile)."""
    w = weights.float()
    k, kth = k_and_kth(w, p)
    above = w > kth[..., None]
    ties = w == kth[..., None]
    need = k - above.sum(dim=-1)
    return above | (ties & (ties.cumsum(dim=-1) <= need[..., None]))


def row_cells(n: int, layer: LayerAttention) -> torch.Tensor:
    """int64 ``(n,)``: the cells row i of the layer computes — in a causal layer
    min(i + 1, window); in a bidirectional one (an encoder) n, or with a window the band
    |i − j| < window: min(i, window − 1) + min(n − 1 − i, window − 1) + 1."""
    window, causal = layer.window, layer.causal
    i = torch.arange(n, dtype=torch.int64)
    if causal:
        return (i + 1) if window is None else (i + 1).clamp_max(window)
    if window is None:
        return torch.full((n,), n, dtype=torch.int64)
    return i.clamp_max(window - 1) + (n - 1 - i).clamp_max(window - 1) + 1


def uniform_k(n: int, p: float, layer: LayerAttention) -> torch.Tensor:
    """k(p) of a row of the layer with no preference (equal weight on each of its c cells):
    ⌈p·c⌉ per row ``(n,)``. Its share of the computed cells stays ≈ p whatever n: the
    reference that shows the fall of the real k/n is no artefact of counting."""
    c = row_cells(n, layer).double()
    return torch.ceil(p * c - 1e-9).clamp_min(1).to(torch.int64)


def sample_of(weights, sample: RowSample | None) -> RowSample:
    """The rows the weights hold, as a sample: every row when none is given."""
    if sample is None:
        return RowSample.all(weights.shape[-2])
    if sample.count != weights.shape[-2]:
        raise ValueError(f"the sample names {sample.count} rows, the weights hold {weights.shape[-2]}")
    return sample


def useful_summary(weights, p: float, layer: LayerAttention, sample: RowSample | None = None) -> dict:
    """For one head ``(n, n)`` or the heads of one layer ``(H, n, n)`` of ``layer`` (its own
    window, None: a full layer; causal or both ways):

    k̄ = k(p) averaged over the rows of every head given (for several heads, the mean
    of each head's own k̄ — never k of their averaged grid, which matches no head);
    useful ≈ n·k̄; cells = the cells the layer computes (``row_cells`` summed: Σ min(i+1,
    window) in a causal layer, n² in a full bidirectional one);
    share = useful / cells: the one denominator of step 2. On a ``sample`` of the rows
    (the weights hold those rows), k̄ is the sample's weighted mean and ``spread`` half the
    width within which 95 % of such samples' k̄ fall."""
    n = weights.shape[-1]
    sample = sample_of(weights, sample)
    k = k_for_share(weights, p).float()
    mean_k = sample.mean(k)
    cells = int(row_cells(n, layer).sum())
    return {"n": n, "k": mean_k, "useful": n * mean_k, "cells": cells, "share": n * mean_k / cells,
            "k_rows": k, "spread": sample.spread_95(k)}


def useful_share_by_prefix(weights, p: float, lengths: list[int], layer: LayerAttention,
                           prefix=None, k_rows: torch.Tensor | None = None,
                           sample: RowSample | None = None) -> list:
    """k̄, useful share and the no-preference reference on growing prefixes of the text.
    In a causal model the attention of a prefix is the top-left block of the whole
    text's grid (no row sees later tokens), so each prefix is read off the one run — and
    a row's k(p) is the same in every prefix that holds it (its weights past the diagonal
    are zero), so k is counted once, on the whole grid, and averaged over each prefix's
    rows (as ``useful_summary`` averages: each head's own k̄, then their mean; on a
    ``sample``, the sample's rows in the prefix, weighted).

    In an encoder (the layer reads both ways) every row sees the tokens after it, so a
    prefix's attention is its own run: ``prefix(m)`` gives the weights ``(..., m, m)`` of
    the model run on the first m tokens (Analysis.prefix), and each prefix's k is counted
    on those. ``k_rows``: k(p) of the whole grid's rows, when counted already (useful_summary, k_and_top)."""
    causal = layer.causal
    if not causal and prefix is None:
        raise ValueError("an encoder's prefixes are runs of their own: give prefix(m)")
    n = weights.shape[-1]
    sample = sample_of(weights, sample)
    if k_rows is None and (causal or n in lengths):  # an encoder's whole grid is needed only as its last prefix
        k_rows = k_for_share(weights, p)  # (..., n): one sort of every row
    k_rows = None if k_rows is None else k_rows.double()
    out = []
    for m in lengths:
        if 1 <= m <= n:
            if causal:
                k = sample.mean(k_rows, below=m)
            else:  # the whole text is the run given; a shorter prefix, its own run
                k = sample.mean(k_rows) if m == n else float(k_for_share(prefix(m), p).double().mean())
            cells = int(row_cells(m, layer).sum())
            u = uniform_k(m, p, layer).double()
            out.append({"n": m, "k": k, "share": m * k / cells, "cells": cells,
                        "uniform_k": float(u.mean()), "uniform_share": float(u.sum()) / cells})
    return out


def share_trend(attentions, p: float, first: int, layers: Sequence[LayerAttention],
                first_attentions=None, sample: RowSample | None = None) -> dict:
    """Whether the useful share (step 2's k̄·n / cells) falls from the first ``first``
    tokens to the whole text, for every layer (its heads' k̄ averaged, as
    ``useful_summary`` does) and for every head of every layer. ``attentions``:
    ``(L, H, n, n)`` (or the rows of a ``sample``, holding every one of the first
    ``first`` rows); ``layers[l]``: how layer l attends. Returns the
    counts that fell, the totals, each layer's and head's two shares, and k̄ over every
    row of every head (``k_mean``). In an encoder the first tokens' attention is a run
    of its own (``first_attentions``, ``(L, H, first, first)``: Analysis.prefix)."""
    n_layers, n_heads, _, n = attentions.shape
    causal = layers[0].causal
    sample = sample_of(attentions, sample)
    if not causal and first_attentions is None:
        raise ValueError("an encoder's first tokens are a run of their own: give first_attentions")
    if causal and sample.whole < first:
        raise ValueError(f"the sample must read each of the first {first} rows")
    k_all = k_for_share(attentions, p).double()  # (L, H, rows)
    if causal:
        k_first = k_all[..., :first]  # a row's k is the same in every prefix that holds it
    else:
        k_first = k_for_share(first_attentions, p).double()  # (L, H, first)
    share_first = torch.empty(n_layers, n_heads, dtype=torch.float64)
    share_all = torch.empty_like(share_first)
    for i, layer in enumerate(layers):
        share_first[i] = k_first[i].sum(-1) / row_cells(first, layer).sum()
        share_all[i] = (k_all[i] * sample.weights).sum(-1) / row_cells(n, layer).sum()
    layer_first, layer_all = share_first.mean(-1), share_all.mean(-1)
    return {"first": first, "n": n, "layers": n_layers, "heads": n_layers * n_heads, "k_mean": sample.mean(k_all),
            "k_spread": sample.spread_95(k_all),
            "layers_fell": int((layer_all < layer_first).sum()), "heads_fell": int((share_all < share_first).sum()),
            "layer_first": layer_first.tolist(), "layer_all": layer_all.tolist(),
            "head_first": share_first.tolist(), "head_all": share_all.tolist()}


def prefix_lengths(n: int, start: int = 16) -> list[int]:
    """Doubling lengths up to n (n itself last)."""
    out, m = [], start
    while m < n:
        out.append(m)
        m *= 2
    if n >= 1:
        out.append(n)
    return out


def kept_rows(weights, allowed) -> torch.Tensor:
    """Each row's weight on the allowed cells, ``(...)`` for weights ``(..., rows, n)``:
    ``allowed`` a bool pattern ``(rows, n)`` (a small grid) or a function of a block's row
    positions giving its bool rows (``patterns.rows_of``: never the whole grid)."""
    return kept_rows_many(weights, [allowed])[0]


def kept_rows_many(weights, alloweds: Sequence) -> list[torch.Tensor]:
    """:func:`kept_rows` for several patterns in one pass over the rows: each block of
    weights is recomputed once (on a long text the pass is most of the cost), then read
    against every pattern."""
    n = weights.shape[-1]
    out = [torch.empty(weights.shape[:-1]).reshape(-1) for _ in alloweds]
    positions = weights.rows if isinstance(weights, Weights) else torch.arange(weights.shape[-2])
    r = positions.numel()
    made = {}  # each pattern's bool rows of a block, the same in every layer and head: made once
    grids = [None if callable(a) else a.reshape(-1, n) for a in alloweds]
    for s, e, w, lo in blocks_of(weights, narrow=True):
        for x, allowed in enumerate(alloweds):
            if grids[x] is not None:  # a small grid of bools
                rows = torch.arange(s, e) % grids[x].shape[0]  # which row of the pattern each is
                out[x][s:e] = (w * grids[x][rows][:, lo:lo + w.shape[-1]]).sum(dim=-1)
            elif not isinstance(weights, Weights):  # a small grid's chunks may span heads: row by row
                out[x][s:e] = (w * allowed(positions[torch.arange(s, e) % r], lo, lo + w.shape[-1])).sum(dim=-1)
            else:  # a Weights block stays within one (layer, head)
                where = (x, s % r, e - s, lo, w.shape[-1])
                if where not in made:
                    made[where] = allowed(positions[where[1]:where[1] + where[2]], lo, lo + w.shape[-1])
                out[x][s:e] = (w * made[where]).sum(dim=-1)
    return [k.reshape(weights.shape[:-1]) for k in out]


def share_kept(weights, allowed) -> torch.Tensor:
    """Share of each row's weight on the allowed cells, averaged over rows:
    ``(...)`` from weights ``(..., n, n)`` and a bool pattern ``(n, n)`` (or a function of
    row positions: :func:`kept_rows`)."""
    return kept_rows(weights, allowed).mean(dim=-1)


def share_kept_by_pattern(weights, window: int, hubs, causal: bool, sample: RowSample | None = None) -> dict:
    """The share of the real weight a window (+ hubs) keeps, read in the model's direction
    (``causal``: each token looks back only): per layer and head (``(L, H)``), per
    layer and overall, for weights ``(L, H, n, n)`` (or a ``sample`` of their rows)."""
    n = weights.shape[-1]
    hubs = patterns.check_hubs(n, hubs)
    near = _near(weights, window, [hubs], causal)
    if near is not None:  # the rows' normalisers are known: the window's cells and the hubs' alone
        return kept_by_rows(near[0][0], sample_of(weights, sample))
    mod = patterns.pattern(n, window, hubs, causal)
    return kept_by_rows(kept_rows(weights, patterns.rows_of(mod, n)), sample_of(weights, sample))


def _near(weights, window: int, hub_sets: Sequence, causal: bool):
    """Each row's kept weight for a window with each hub set, and its weight on the first
    token, read from the rows' normalisers (attn.rows.Weights.kept_near) — None where they
    are not known, or for a plain tensor (then: a pass over the rows)."""
    if not isinstance(weights, Weights):
        return None
    return weights.kept_near(patterns.check_window(window), hub_sets, causal)


def shares_kept_and_sink(weights, window: int, hub_sets: Sequence, causal: bool,
                         sample: RowSample | None = None) -> tuple[list[dict], tuple[float, float]]:
    """:func:`share_kept_by_pattern` for a window with each of ``hub_sets``, and the sink
    (:func:`sink_rows`: the first token's share), read in one pass over the rows."""
    n = weights.shape[-1]
    hub_sets = [patterns.check_hubs(n, hubs) for hubs in hub_sets]
    near = _near(weights, window, hub_sets, causal)
    if near is not None:  # the rows' normalisers are known: no second pass over whole rows
        kept, first = near
    else:
        mods = [patterns.rows_of(patterns.pattern(n, window, hubs, causal), n) for hubs in hub_sets]
        *kept, first = kept_rows_many(weights, [*mods, _first_column])
    sample = sample_of(weights, sample)
    return [kept_by_rows(k, sample) for k in kept], _sink_of(first, sample)


def kept_by_rows(kept: torch.Tensor, sample: RowSample | None = None) -> dict:
    """What each row keeps ``(L, H, rows)`` (e.g. the weight of its top cells, ``k_and_top``: top-k
    by the exact weights, the oracle — no choice of as many cells holds more) averaged over
    rows (weighted, on a ``sample``): per layer and head (``(L, H)``), per layer and overall;
    ``spread``: half the width within which 95 % of such samples' overall mean fall."""
    sample = RowSample.all(kept.shape[-1]) if sample is None else sample
    per = (kept.double() * sample.weights).sum(dim=-1) / sample.weights.sum()
    per = per.float()
    return {"per_head": per, "per_layer": per.mean(dim=-1), "mean": float(per.mean()),
            "spread": sample.spread_95(kept)}


def sink_share(weights, sample: RowSample | None = None) -> float:
    """Mean weight that each row after the first puts on the first token, over all
    layers and heads of ``(L, H, n, n)`` (weighted, on a ``sample`` of the rows): how
    much the sink soaks up."""
    return sink_rows(weights, sample)[0]


def sink_rows(weights, sample: RowSample | None = None) -> tuple[float, float]:
    """The sink's share (``sink_share``) and half the width within which 95 % of such
    samples' shares fall (0 when every row is read)."""
    if weights.shape[-1] < 2:
        return 0.0, 0.0
    return _sink_of(kept_rows(weights, _first_column), sample_of(weights, sample))


def _first_column(rows: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """The pattern of the first token's column alone, on a block's columns [lo, hi)."""
    return (torch.arange(lo, hi) == 0).expand(rows.numel(), -1)


def _sink_of(first: torch.Tensor, sample: RowSample) -> tuple[float, float]:
    """The sink's share and spread from each row's weight on the first token."""
    if sample.n < 2:
        return 0.0, 0.0
    first = first.reshape(-1, sample.count)
    later = sample.positions >= 1
    sub = RowSample(sample.n - 1, sample.positions[later], sample.weights[later], max(0, sample.whole - 1))
    return sub.mean(first[:, later]), sub.spread_95(first[:, later])
