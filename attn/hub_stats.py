"""Where a row's weight lands far from it: the anchors (the positions that receive the most
weight from far away: candidates for hubs) and the share that lands on chosen columns (a set
of hubs, the sink). Weights as in :mod:`attn.stats` (an analysis' Weights or a small grid),
read on a RowSample of the rows where given."""

from __future__ import annotations

import torch

from .layer import LayerAttention
from .rows import RowSample, Weights
from .stats import blocks_of, row_cells, sample_of

ANCHOR_DISTANCE = 8  # an anchor is scored by the rows at least this far after it


def anchors(weights, causal: bool, top: int = 5, min_distance: int = ANCHOR_DISTANCE,
            sample: RowSample | None = None) -> list[tuple[int, float]]:
    """Positions that receive the most weight from far away: for column j, the mean
    weight it gets from rows i ≥ j + min_distance (averaged over layers and heads
    when given ``(L, H, n, n)``), for columns with at least a quarter of the text
    after them. In an encoder (not ``causal``: it reads both ways) rows on both sides count:
    |i − j| ≥ min_distance. A causal grid must hold no weight after its row (as a causal
    layer's rows never do): each column's sum is taken over every row, less the near cells.
    Candidates for hubs: the <bos> sink, an encoder's [CLS] and [SEP], separators, punctuation.
    On a ``sample`` of the rows, each row weighs the rows it stands for. Returns [(position,
    mean far weight)], best first (their spreads on a sample: :func:`anchor_scores`)."""
    return [(p, score) for p, score, _ in anchor_scores(weights, causal, top, min_distance, sample)]


def anchor_scores(weights, causal: bool, top: int = 5, min_distance: int = ANCHOR_DISTANCE,
                  sample: RowSample | None = None) -> list[tuple[int, float, float]]:
    """:func:`anchors`, each with half the width within which 95 % of such samples' scores of
    that position fall (RowSample.spread_95 of each sampled row's far weight on it, scaled as
    the score is: the far rows of the column against the text's rows; 0 when every row is read):
    [(position, mean far weight, spread)], best first."""
    n = weights.shape[-1]
    sample = sample_of(weights, sample)
    rows = sample.positions
    r = rows.numel()
    grids = max(1, (weights.n_grids if isinstance(weights, Weights) else weights.reshape(-1, r, n).shape[0]))
    got = torch.zeros(n, dtype=torch.float64)  # Σ over far rows (weighted) of their weight on j
    first = 0.0  # Σ over every row (weighted) of its weight on the first token
    # each spread row's weight on every column, summed over the grids (its far cells are kept
    # below): what the spread of a column's score is read from; (spread rows, n) in float32
    spaced = None if sample.every_row else torch.zeros(r - sample.whole, n)
    near = torch.arange(-(min_distance - 1), min_distance if not causal else 1)  # j − i of the cells too near
    for s, e, w, lo in blocks_of(weights, narrow=True):
        local = torch.arange(s, e) % r
        c = w.shape[-1]
        wt = sample.weights[local].float()
        # every row's weight on each column (one product), less the few cells too near each row
        # (|i − j| < min_distance; a causal row's are before it): no (rows, columns) mask made
        got[lo:lo + c] += (w.T @ wt).double()
        if spaced is not None and bool((later := local >= sample.whole).any()):
            spaced[:, lo:lo + c].index_add_(0, local[later] - sample.whole, w[later])
        j = rows[local][:, None] + near[None, :] - lo
        inside = (j >= 0) & (j < c)
        j = j.clamp(0, c - 1)
        got.index_add_(0, lo + j[inside], -(w.gather(1, j) * wt[:, None])[inside].double())
        if lo == 0:
            first += float(w[:, 0].double() @ wt.double())
    got /= grids
    if n <= min_distance:
        return [(0, first / grids / float(sample.weights.sum()), 0.0)] if n else []
    jj = torch.arange(n)
    counts = (n - (jj + min_distance)).clamp_min(0)  # the far rows of each column: after it
    if not causal:
        counts = counts + (jj - min_distance + 1).clamp_min(0)  # and before it
    score = got / counts.clamp_min(1)
    # a mean over a handful of rows is noise: a column needs a quarter of the text after it
    eligible = counts >= max(1, min(n - min_distance, max(min_distance, n // 4)))
    score = torch.where(eligible, score, torch.full_like(score, -1.0))
    best = torch.argsort(score, descending=True)[: min(top, int(eligible.sum()))]
    spreads = [0.0] * len(best)
    if spaced is not None:
        later = rows[sample.whole:]
        for x, b in enumerate(best.tolist()):
            far = (later - b).abs() >= min_distance if not causal else later - b >= min_distance
            values = torch.zeros(r, dtype=torch.float64)  # a row's far weight on b (the rows read whole: unused)
            values[sample.whole:] = torch.where(far, spaced[:, b].double() / grids, 0.0)
            # the score is Σ (weighted) far weight / the column's far rows = the sample's mean · n / far rows
            spreads[x] = sample.spread_95(values) * n / max(1, int(counts[b]))
    return [(int(b), float(score[b]), spreads[x]) for x, b in enumerate(best.tolist())]


def share_to(weights, columns, causal: bool, sample: RowSample | None = None) -> dict:
    """The share of each row's weight that lands on ``columns`` (positions), for weights
    ``(L, H, n, n)``: averaged over every row, head and layer (``mean``), per layer
    (``per_layer``), and what rows spreading their weight evenly over the cells they see
    would give those columns (``even``: in an encoder each row sees all n, so g / n);
    each column on its own too (``each``: [(column, mean, even)]);
    ``causal``: the model's direction. On a ``sample`` of the rows, each row weighs the
    rows it stands for."""
    n = weights.shape[-1]
    n_layers = weights.shape[0]
    cols = sorted({int(c) for c in columns if 0 <= int(c) < n})
    if not cols or n == 0:
        return {"mean": 0.0, "per_layer": [0.0] * n_layers, "even": 0.0, "columns": cols, "each": []}
    sample = sample_of(weights, sample)
    got = torch.zeros(*weights.shape[:-1], len(cols)).reshape(-1, len(cols))
    for s, e, w, lo in blocks_of(weights, narrow=True):
        for x, c in enumerate(cols):
            if lo <= c < lo + w.shape[-1]:
                got[s:e, x] = w[:, c - lo]
    got = got.reshape(n_layers, -1, sample.count, len(cols)).double()  # (L, H, rows, columns)
    wt = sample.weights[:, None] / sample.weights.sum()
    i = torch.arange(n)
    seen = row_cells(n, LayerAttention(causal=causal, window=None, scale=1.0)).double()  # each row's cells, full layer
    per_row = ((torch.tensor(cols)[None, :] <= i[:, None]) if causal else torch.ones(n, len(cols), dtype=torch.bool))
    even = float((per_row.sum(dim=-1).double() / seen).mean())
    total = got.sum(dim=-1)  # (L, H, rows)
    per_layer = (total.mean(dim=1) * wt[:, 0]).sum(dim=-1)
    each = [(c, float((got[..., x].mean(dim=(0, 1)) * wt[:, 0]).sum()), float((per_row[:, x].double() / seen).mean()))
            for x, c in enumerate(cols)]
    return {"mean": float(per_layer.mean()), "per_layer": per_layer.tolist(), "even": even, "columns": cols,
            "each": each, "spread": sample.spread_95(total)}
