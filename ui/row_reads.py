"""How the pages read an analysis' rows (attn.rows): which rows a statistic reads (every
row, or a long text's stated sample), the tokens a layer's written-out measures read, and
a grid pooled to screen resolution while it is read — never the whole grid. Plain: no
Streamlit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attn import budgets
from attn.rows import BLOCK_CELLS, RowSample

from . import figures

# A text of at most EXACT_ROWS + SAMPLED_ROWS tokens: every statistic reads every row of every
# head. A longer one: its first EXACT_ROWS rows and SAMPLED_ROWS more spread evenly over the
# rest (attn.rows.RowSample), and the page says so, with the spread of such samples.
EXACT_ROWS = 1024
SAMPLED_ROWS = 1024


@dataclass(frozen=True)
class Sampled:
    """Which rows a statistic read: ``rows`` of the text's ``n`` (all of them, or a sample),
    and half the width within which 95 % of such samples' values fall (``spread``, in the
    statistic's own unit; 0 when every row was read)."""

    rows: int
    n: int
    spread: float = 0.0
    first: int = 0  # the text's first rows, every one of them read (the rest: spread evenly)

    @property
    def every_row(self) -> bool:
        return self.rows >= self.n


def row_sample(a) -> RowSample:
    """The rows a statistic of the text reads: every row of a text of at most EXACT_ROWS +
    SAMPLED_ROWS tokens; else the first EXACT_ROWS and SAMPLED_ROWS spread over the rest."""
    return RowSample.spread(a.n, EXACT_ROWS, SAMPLED_ROWS)


# The statistics of the whole model (every head's rows) are the costliest of a long text: step
# 2's k(p) of every head (its model-wide k̄ and the share's trend) and the text's anchors (step
# 4's list, the hubs' default). Where row_sample reads every row, so do they; beyond, the first
# MODEL_FIRST rows and MODEL_SPACED spread over the rest (k(p) of every head: about 1.3 s at
# 8,120 tokens on this project's machines, against 4.4 s on row_sample's 2,048 rows; k̄ 124.0 ±
# 5.1 against 124.5 ± 2.0, the same 18 of 18 layers falling and 65 of 72 heads against 66:
# docs/performance.md). The pages say which rows they read.
MODEL_FIRST = 256
MODEL_SPACED = 256


def model_sample(a) -> RowSample:
    """The rows of the whole model's statistics (every head's: step 2's k(p), the anchors):
    row_sample's where it reads every row, else the first MODEL_FIRST and MODEL_SPACED spread
    over the rest."""
    sample = row_sample(a)
    return sample if sample.every_row else RowSample.spread(a.n, MODEL_FIRST, MODEL_SPACED)


def sampled_weights(a, sample: RowSample | None = None):
    """The analysis' weights on a row sample (row_sample's unless given), and the sample."""
    sample = row_sample(a) if sample is None else sample
    w = a.weights()
    return (w if sample.every_row else w.at(sample.positions)), sample


def sampled(sample: RowSample, spread: float) -> Sampled:
    return Sampled(sample.count, sample.n, spread, min(sample.whole, sample.n))


def causal_view(g: torch.Tensor, causal: bool = True, first_row: int = 0) -> np.ndarray:
    """For drawing: the cells a causal model never computes (above the diagonal) left
    empty rather than drawn as zero weight; an encoder's grid (``causal`` False) whole.
    ``first_row``: the text's position of the block's first row."""
    out = g.clone()
    if causal:
        out[torch.ones_like(out, dtype=torch.bool).triu(1 + first_row)] = torch.nan
    return out.numpy()


def pooled(n: int, rows, causal: bool, reduce: str = "mean") -> np.ndarray:
    """An n×n grid as it is drawn, made a block of rows at a time: ``rows(positions)`` gives
    float rows ``(r, n)`` (NaN: not drawn), pooled into blocks of b×b cells
    (figures.pool_factor: at most figures.MAX_SIDE a side), each the block's mean or largest
    value (``reduce``); a causal grid's cells above the diagonal left empty."""
    f = figures.pool_factor(n)
    step = f * max(1, BLOCK_CELLS // max(1, f * n))  # whole pooled rows at a time
    out = []
    for s in range(0, n, step):
        block = rows(torch.arange(s, min(n, s + step)))
        out.append(figures.pool_rows(causal_view(block, causal, first_row=s), f, reduce))
    return np.concatenate(out, axis=0)


def pooled_grid(a, layer: int, head, reduce: str = "mean", keep=None, window: int | None = None) -> np.ndarray:
    """One head's attention grid (head=None: the layer's heads averaged) as drawn
    (:func:`pooled`); ``keep``: a function of a block's rows giving the cells to draw;
    ``window``: cells at least that far from their row's token (which a layer sliding that
    window never computes) left empty, apart from the cells it computes with a weight near 0."""
    def rows(positions):
        w = a.rows(layer, head, positions)
        if keep is not None:
            w = torch.where(keep(w), w, torch.nan)
        if window is not None:
            far = (positions[:, None] - torch.arange(w.shape[-1])[None, :]).abs() >= window
            w = w.masked_fill(far, torch.nan)
        return w

    return pooled(a.n, rows, a.causal, reduce)


def layer_tokens(a) -> int:
    """The tokens step 5's and step 6's measures of one layer read (budgets.LAYER_TOKENS):
    the whole text, or a long one's first tokens (a causal model's; an encoder's whole)."""
    return min(a.n, budgets.LAYER_TOKENS) if a.causal else a.n


def layer_on(a, layer: int):
    """(q, k, v, bias) of one layer on the tokens its measures read (``layer_tokens``)."""
    return a.layer_on(layer, layer_tokens(a))


BAND_ROWS = 8  # the band around a followed token: its row and 8 on each side …
BAND_KEYS = 128  # … on at most this many keys around it


def band(a, layer: int, head, token: int) -> tuple[np.ndarray, int, int]:
    """The rows around a followed token at full resolution, where the grid is drawn pooled:
    rows token − BAND_ROWS … token + BAND_ROWS, on the BAND_KEYS keys that end with the band's
    last row (an encoder's: centred on the token). (weights ``(rows, keys)``, first row, first key)."""
    first, last = max(0, token - BAND_ROWS), min(a.n, token + BAND_ROWS + 1)
    if a.causal:
        lo = max(0, last - BAND_KEYS)
    else:
        lo = max(0, min(token - BAND_KEYS // 2, a.n - BAND_KEYS))
    hi = min(a.n, lo + BAND_KEYS)
    return a.rows(layer, head, range(first, last))[:, lo:hi].numpy(), first, lo
