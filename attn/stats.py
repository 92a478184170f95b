"""How a row's attention weight is spread: k(p) and the useful share (on growing
prefixes too), the share a pattern keeps, the anchors and the first token's share.
What each shortcut's output costs against exact softmax is :mod:`attn.outputs`.

Weights are ``(..., n, n)`` with rows summing to 1 (float16 is fine: the sums
here run in float32).
"""

from __future__ import annotations


import dataclasses
from collections.abc import Sequence

import torch

from . import patterns
from .layer import LayerAttention


_CHUNK = 1 << 22  # weights handled at once (in float32: 16 MB), so all layers of a long text fit
_FIRST_CELLS = 32  # k(p) looks first among a row's 32 largest cells (7 rows in 10 of the model's need no more)
_TOP_CELLS = 64  # k_and_top: a keep up to this many cells a row is read off one sorted selection


def _rows(weights: torch.Tensor):
    """The grid's rows in chunks: yields (start, stop, float32 rows ``(r, n)``)."""
    n = weights.shape[-1]
    flat = weights.reshape(-1, n)
    step = max(1, _CHUNK // max(n, 1))
    for s in range(0, flat.shape[0], step):
        yield s, min(flat.shape[0], s + step), flat[s:s + step].float()


def k_for_share(weights: torch.Tensor, p: float) -> torch.Tensor:
    """k(p) per row: the fewest cells whose weights add up to at least a share p of
    the row (largest first). int64 ``(..., n)``."""
    return k_and_top(weights, p)[0]


def k_and_top(weights: torch.Tensor, p: float, keeps: Sequence[int] = ()) -> tuple[torch.Tensor, dict]:
    """k(p) per row (``k_for_share``) and, for each of ``keeps``, the weight each row's
    ``keep`` largest cells hold (float32 ``(..., n)``; a row of fewer cells, all of them):
    one selection of each row's largest cells serves both (the room reads k(p) and the top
    cells at four windows' counts on every layer of a text: 77 + 74 → 84 ms, bench/room_text.py)."""
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    n = weights.shape[-1]
    keeps = sorted({max(1, int(kk)) for kk in keeps})
    # the largest cells taken sorted at once: k(p)'s first look, and every keep up to _TOP_CELLS
    first = min(n, max([_FIRST_CELLS, *(kk for kk in keeps if kk <= _TOP_CELLS)]))
    out = torch.empty(weights.shape[:-1], dtype=torch.int64).reshape(-1)
    tops = {kk: torch.empty(weights.shape[:-1]).reshape(-1) for kk in keeps}
    for s, e, w in _rows(weights):
        target = p * w.sum(dim=-1) - 1e-6  # (float slack 1e-6)
        # most rows reach the target within their largest few cells: those cells alone
        # (topk, sorted) give the same running sums as a sort of the whole row, and only
        # the rows that do not reach it are sorted whole (bench/room_text.py, every layer of
        # a 354-token text: 156 → 104 ms)
        top = torch.topk(w, first, dim=-1).values.cumsum(dim=-1)
        k = (top < target[:, None]).sum(dim=-1) + 1  # cells strictly below it, plus the one that reaches it
        longer = top[:, -1] < target
        if first < n and bool(longer.any()):
            whole = torch.sort(w[longer], dim=-1, descending=True).values.cumsum(dim=-1)
            k[longer] = (whole < target[longer, None]).sum(dim=-1) + 1
        out[s:e] = k.clamp_max(n)
        for kk in keeps:
            if kk <= first:
                tops[kk][s:e] = top[:, kk - 1]
            elif kk >= n:
                tops[kk][s:e] = w.sum(dim=-1)
            else:
                tops[kk][s:e] = w.topk(kk, dim=-1, sorted=False).values.sum(dim=-1)
    shape = weights.shape[:-1]
    return out.reshape(shape), {kk: t.reshape(shape) for kk, t in tops.items()}


def top_share_mask(weights: torch.Tensor, p: float) -> torch.Tensor:
    """bool, same shape: the cells that make up share p of each row (largest first)."""
    w = weights.float()
    k = k_for_share(w, p)
    order = torch.argsort(w, dim=-1, descending=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(w.shape[-1]).expand_as(order).contiguous())
    return ranks < k[..., None]


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


def useful_summary(weights: torch.Tensor, p: float, layer: LayerAttention) -> dict:
    """For one head ``(n, n)`` or the heads of one layer ``(H, n, n)`` of ``layer`` (its own
    window, None: a full layer; causal or both ways):

    k̄ = k(p) averaged over the rows of every head given (for several heads, the mean
    of each head's own k̄ — never k of their averaged grid, which matches no head);
    useful ≈ n·k̄; cells = the cells the layer computes (``row_cells`` summed: Σ min(i+1,
    window) in a causal layer, n² in a full bidirectional one);
    share = useful / cells: the one denominator of step 2."""
    n = weights.shape[-1]
    k = k_for_share(weights, p).float()
    mean_k = float(k.mean())
    cells = int(row_cells(n, layer).sum())
    return {"n": n, "k": mean_k, "useful": n * mean_k, "cells": cells, "share": n * mean_k / cells,
            "k_rows": k}


def useful_share_by_prefix(weights: torch.Tensor, p: float, lengths: list[int], layer: LayerAttention,
                           prefix=None, k_rows: torch.Tensor | None = None) -> list:
    """k̄, useful share and the no-preference reference on growing prefixes of the text.
    In a causal model the attention of a prefix is the top-left block of the whole
    text's grid (no row sees later tokens), so each prefix is read off the one run — and
    a row's k(p) is the same in every prefix that holds it (its weights past the diagonal
    are zero), so k is counted once, on the whole grid, and averaged over each prefix's
    rows (as ``useful_summary`` averages: each head's own k̄, then their mean).

    In an encoder (the layer reads both ways) every row sees the tokens after it, so a
    prefix's attention is its own run: ``prefix(m)`` gives the weights ``(..., m, m)`` of
    the model run on the first m tokens (Analysis.prefix), and each prefix's k is counted
    on those. ``k_rows``: k(p) of the whole grid's rows, when counted already (useful_summary, k_and_top)."""
    causal = layer.causal
    if not causal and prefix is None:
        raise ValueError("an encoder's prefixes are runs of their own: give prefix(m)")
    n = weights.shape[-1]
    if k_rows is None and (causal or n in lengths):  # an encoder's whole grid is needed only as its last prefix
        k_rows = k_for_share(weights, p)  # (..., n): one sort of every row
    k_rows = None if k_rows is None else k_rows.double()
    out = []
    for m in lengths:
        if 1 <= m <= n:
            if causal:
                k = float(k_rows[..., :m].mean())
            else:  # the whole text is the run given; a shorter prefix, its own run
                k = float((k_rows if m == n else k_for_share(prefix(m), p).double()).mean())
            cells = int(row_cells(m, layer).sum())
            u = uniform_k(m, p, layer).double()
            out.append({"n": m, "k": k, "share": m * k / cells, "cells": cells,
                        "uniform_k": float(u.mean()), "uniform_share": float(u.sum()) / cells})
    return out


def share_trend(attentions: torch.Tensor, p: float, first: int, layers: Sequence[LayerAttention],
                first_attentions: torch.Tensor | None = None) -> dict:
    """Whether the useful share (step 2's k̄·n / cells) falls from the first ``first``
    tokens to the whole text, for every layer (its heads' k̄ averaged, as
    ``useful_summary`` does) and for every head of every layer. ``attentions``:
    ``(L, H, n, n)``; ``layers[l]``: how layer l attends. Returns the
    counts that fell, the totals, each layer's and head's two shares, and k̄ over every
    row of every head (``k_mean``). In an encoder the first tokens' attention is a run
    of its own (``first_attentions``, ``(L, H, first, first)``: Analysis.prefix)."""
    n_layers, n_heads, n, _ = attentions.shape
    causal = layers[0].causal
    if not causal and first_attentions is None:
        raise ValueError("an encoder's first tokens are a run of their own: give first_attentions")
    k_all = k_for_share(attentions, p).double()  # (L, H, n)
    head = attentions[..., :first, :first] if causal else first_attentions
    k_first = k_for_share(head, p).double()  # (L, H, first)
    share_first = torch.empty(n_layers, n_heads, dtype=torch.float64)
    share_all = torch.empty_like(share_first)
    for i, layer in enumerate(layers):
        share_first[i] = k_first[i].sum(-1) / row_cells(first, layer).sum()
        share_all[i] = k_all[i].sum(-1) / row_cells(n, layer).sum()
    layer_first, layer_all = share_first.mean(-1), share_all.mean(-1)
    return {"first": first, "n": n, "layers": n_layers, "heads": n_layers * n_heads, "k_mean": float(k_all.mean()),
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


def share_kept(weights: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Share of each row's weight on the allowed cells, averaged over rows:
    ``(...)`` from weights ``(..., n, n)`` and a bool pattern ``(n, n)``."""
    n = weights.shape[-1]
    kept = torch.empty(weights.shape[:-1]).reshape(-1)
    allowed_rows = allowed.reshape(-1, n)
    for s, e, w in _rows(weights):
        rows = torch.arange(s, e) % allowed_rows.shape[0]  # which row of the pattern each is
        kept[s:e] = (w * allowed_rows[rows]).sum(dim=-1)
    return kept.reshape(weights.shape[:-1]).mean(dim=-1)


def share_kept_by_pattern(weights: torch.Tensor, window: int, hubs, reads: LayerAttention) -> dict:
    """The share of the real weight a window (+ hubs) keeps, read as the model reads
    (``reads``: a layer of it, for its direction): per layer and head (``(L, H)``), per
    layer and overall, for weights ``(L, H, n, n)``."""
    n = weights.shape[-1]
    allowed = patterns.pattern_grid(n, window, patterns.check_hubs(n, hubs), reads.causal)
    per = share_kept(weights, allowed)
    return {"per_head": per, "per_layer": per.mean(dim=-1), "mean": float(per.mean())}


def kept_by_rows(kept: torch.Tensor) -> dict:
    """What each row keeps ``(L, H, n)`` (e.g. the weight of its top cells, ``k_and_top``: top-k
    by the exact weights, the oracle — no choice of as many cells holds more) averaged over
    rows: per layer and head (``(L, H)``), per layer and overall."""
    per = kept.mean(dim=-1)
    return {"per_head": per, "per_layer": per.mean(dim=-1), "mean": float(per.mean())}


ANCHOR_DISTANCE = 8  # an anchor is scored by the rows at least this far after it


def anchors(weights: torch.Tensor, reads: LayerAttention, top: int = 5,
            min_distance: int = ANCHOR_DISTANCE) -> list[tuple[int, float]]:
    """Positions that receive the most weight from far away: for column j, the mean
    weight it gets from rows i ≥ j + min_distance (averaged over layers and heads
    when given ``(L, H, n, n)``), for columns with at least a quarter of the text
    after them. In an encoder (``reads``, a layer of it, reads both ways) rows on both sides count:
    |i − j| ≥ min_distance. Candidates for hubs: the <bos> sink, an encoder's [CLS]
    and [SEP], separators, punctuation.
    Returns [(position, mean far weight)], best first."""
    n = weights.shape[-1]
    causal = reads.causal
    grids = weights.reshape(-1, n, n)
    w = torch.zeros(n, n)
    for g in grids:  # the mean over layers and heads, one grid at a time
        w += g.float()
    w /= max(1, grids.shape[0])
    if n <= min_distance:
        return [(0, float(w[:, 0].mean()))] if n else []
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    far = ((i - j) if causal else (i - j).abs()) >= min_distance
    counts = far.sum(dim=0)
    score = (w * far).sum(dim=0) / counts.clamp_min(1)
    # a mean over a handful of rows is noise: a column needs a quarter of the text after it
    eligible = counts >= max(1, min(n - min_distance, max(min_distance, n // 4)))
    score = torch.where(eligible, score, torch.full_like(score, -1.0))
    best = torch.argsort(score, descending=True)[: min(top, int(eligible.sum()))]
    return [(int(b), float(score[b])) for b in best]


def sink_share(weights: torch.Tensor) -> float:
    """Mean weight that each row after the first puts on the first token, over all
    layers and heads of ``(L, H, n, n)``: how much the sink soaks up."""
    if weights.shape[-1] < 2:
        return 0.0
    return float(weights[..., 1:, 0].float().mean())


def share_to(weights: torch.Tensor, columns, reads: LayerAttention) -> dict:
    """The share of each row's weight that lands on ``columns`` (positions), for weights
    ``(L, H, n, n)``: averaged over every row, head and layer (``mean``), per layer
    (``per_layer``), and what rows spreading their weight evenly over the cells they see
    would give those columns (``even``: in an encoder each row sees all n, so g / n);
    each column on its own too (``each``: [(column, mean, even)]);
    ``reads``: a layer of the model, for its direction."""
    n = weights.shape[-1]
    causal = reads.causal
    cols = sorted({int(c) for c in columns if 0 <= int(c) < n})
    if not cols or n == 0:
        return {"mean": 0.0, "per_layer": [0.0] * weights.shape[0], "even": 0.0, "columns": cols, "each": []}
    got = weights[..., cols].float().sum(dim=-1)  # (L, H, n): each row's weight on those columns
    i = torch.arange(n)
    seen = row_cells(n, dataclasses.replace(reads, window=None)).double()  # cells each row sees in a full layer
    per_row = ((torch.tensor(cols)[None, :] <= i[:, None]) if causal else torch.ones(n, len(cols), dtype=torch.bool))
    even = float((per_row.sum(dim=-1).double() / seen).mean())
    each = [(c, float(weights[..., c].float().mean()), float((per_row[:, x].double() / seen).mean()))
            for x, c in enumerate(cols)]
    return {"mean": float(got.mean()), "per_layer": got.mean(dim=(1, 2)).tolist(), "even": even, "columns": cols,
            "each": each}
