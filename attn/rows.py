"""The attention weights of an analysis, read a block of rows at a time and never held
whole: each block is recomputed from the layer's own q and k by its own rule
(:meth:`attn.layer.LayerAttention.score`: scale, soft cap, bias; then its pattern:
direction and window; then a softmax in float32, with its learned sinks where it has
them). A :class:`Weights` stands for a ``(layers, heads, rows, columns)`` grid the way a
tensor would — ``shape``, indexing by layer and head, a prefix — and yields its rows in
blocks (:meth:`Weights.blocks`); :mod:`attn.stats` reads nothing else.

Its rows may be every row of the text, or a stated sample of them (:class:`RowSample`:
the first rows whole, evenly spaced rows after them, each standing for the rows around
it), for the statistics that would take too long on every row of a long text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import patterns
from .layer import LayerAttention

BLOCK_CELLS = 1 << 21  # weights recomputed at once (8 MB in float32): one block of rows of one (layer, head)
ROWS_AT_ONCE = 128  # rows of a block at most (fewer where BLOCK_CELLS says: 64 at 8,192 tokens of 4 heads)


@dataclass(frozen=True)
class RowSample:
    """Which rows a statistic reads, and how many rows of the text each stands for: the
    first ``whole`` rows all of them (weight 1), then ``spaced`` rows evenly spread over
    the rest (each standing for its share of them). Every row when ``whole`` ≥ n."""

    n: int
    positions: torch.Tensor  # int64 (R,): ascending
    weights: torch.Tensor  # float64 (R,): the rows each stands for (summing to n)
    whole: int  # rows [0, whole) are all read

    @property
    def every_row(self) -> bool:
        return self.whole >= self.n

    @property
    def count(self) -> int:
        return int(self.positions.numel())

    @staticmethod
    def all(n: int) -> RowSample:
        return RowSample(n, torch.arange(n), torch.ones(n, dtype=torch.float64), n)

    @staticmethod
    def spread(n: int, whole: int, spaced: int) -> RowSample:
        """The first ``whole`` rows, then ``spaced`` rows at even steps over the others (each
        in the middle of its stretch); every row when that is no fewer."""
        if n <= whole + spaced:
            return RowSample.all(n)
        rest = n - whole
        step = rest / spaced
        later = whole + (torch.arange(spaced, dtype=torch.float64) * step + step / 2).floor().to(torch.int64)
        positions = torch.cat([torch.arange(whole), later])
        weights = torch.cat([torch.ones(whole, dtype=torch.float64),
                             torch.full((spaced,), rest / spaced, dtype=torch.float64)])
        return RowSample(n, positions, weights, whole)

    def mean(self, values: torch.Tensor, below: int | None = None) -> float:
        """The text's mean of a per-row value given at the sample's rows (last dimension; any
        leading ones averaged too), over the rows before ``below`` (default every row)."""
        v = values.double().reshape(-1, self.count).mean(dim=0)
        w = self.weights
        if below is not None:
            keep = self.positions < below
            v, w = v[keep], w[keep]
        return float((v * w).sum() / w.sum()) if w.numel() else 0.0

    def spread_95(self, values: torch.Tensor) -> float:
        """Half the width within which 95 % of such samples' means fall (1.96 standard errors
        of the spaced part, with the finite-population correction; 0 when every row is read)."""
        if self.every_row:
            return 0.0
        v = values.double().reshape(-1, self.count).mean(dim=0)[self.whole:]
        m, rest = v.numel(), self.n - self.whole
        if m < 2:
            return 0.0
        se = float(v.std()) / math.sqrt(m) * math.sqrt(max(0.0, 1 - m / rest))
        return 1.96 * se * rest / self.n


class RowNorms:
    """Each row's log-sum-exp (its softmax's normaliser), per (layer, head), kept as the rows
    are made: n numbers a head, linear in the text. A row whose normaliser is known gives
    its weight on any cell from that cell's score alone, exp(s − lse), so a measure that
    reads a few cells a row (a narrow window, a few hub columns, the first token) needs no
    pass over whole rows once a pass has been made (:meth:`Weights.kept_near`). Filled by
    every block :meth:`Weights.narrow_heads` makes of a whole row (all of its columns)."""

    def __init__(self, layers: int, heads: int, n: int):
        self.values = torch.zeros(layers, heads, n)
        self.known = torch.zeros(layers, heads, n, dtype=torch.bool)

    @property
    def nbytes(self) -> int:
        return self.values.numel() * 5

    def put(self, layer: int, heads: list[int], positions: torch.Tensor, lse: torch.Tensor) -> None:
        h = torch.as_tensor(heads)[:, None]
        self.values[layer][h, positions[None, :]] = lse
        self.known[layer][h, positions[None, :]] = True

    def get(self, layer: int, heads: list[int], positions: torch.Tensor) -> torch.Tensor | None:
        """``(heads, rows)``, or None when some of them are not known yet."""
        h = torch.as_tensor(heads)[:, None]
        if not bool(self.known[layer][h, positions[None, :]].all()):
            return None
        return self.values[layer][h, positions[None, :]]


NEAR_CELLS = 1 << 22  # gathered keys' elements at once in kept_near (16 MB in float32)
NEAR_WIDTH = 256  # kept_near reads windows up to this many cells a row; a wider one makes a pass


class Weights:
    """A ``(layers, heads, rows, columns)`` grid of attention weights that is never held:
    ``q`` ``(L, 1, H, n, d)`` and ``k`` ``(L, 1, KV, n, d)`` float32 (the model's own heads),
    each layer's rule ``layers``, its additive ``biases`` (layer → ``(H or 1, n, n)``), the
    layers and heads chosen, the rows (positions) and the columns (the first ``cols`` keys:
    a causal prefix reads only those). ``int`` indices drop their dimension, as a tensor's do."""

    def __init__(self, q, k, layers: tuple[LayerAttention, ...], biases: dict | None = None, *,
                 layer_ids=None, head_ids=None, rows: torch.Tensor | None = None, cols: int | None = None,
                 keep: tuple[bool, bool] = (True, True), norms: RowNorms | None = None):
        self.q, self.k, self.layers, self.biases = q, k, layers, biases or {}
        self.norms = norms  # the analysis' rows' normalisers, kept as rows are made (None: not kept)
        n = q.shape[3]
        self.layer_ids = list(range(q.shape[0])) if layer_ids is None else list(layer_ids)
        self.head_ids = list(range(q.shape[2])) if head_ids is None else list(head_ids)
        self.rows = torch.arange(n) if rows is None else rows
        self.cols = n if cols is None else int(cols)
        self._keep = keep  # whether the layer and head dimensions are shown

    # -- a tensor's face -----------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        dims = []
        if self._keep[0]:
            dims.append(len(self.layer_ids))
        if self._keep[1]:
            dims.append(len(self.head_ids))
        return (*dims, int(self.rows.numel()), self.cols)

    @property
    def n_grids(self) -> int:
        return len(self.layer_ids) * len(self.head_ids)

    def _with(self, **kw) -> Weights:
        args = {"layer_ids": self.layer_ids, "head_ids": self.head_ids, "rows": self.rows, "cols": self.cols,
                "keep": self._keep, "norms": self.norms}
        args.update(kw)
        return Weights(self.q, self.k, self.layers, self.biases, **args)

    def __getitem__(self, key) -> Weights:
        """``w[layer]``, ``w[layer, head]``, ``w[:, head]``: a layer or a head picked (an int
        drops the dimension) — the dimensions shown first."""
        key = key if isinstance(key, tuple) else (key,)
        shown = [d for d, kept in enumerate(self._keep) if kept]
        if len(key) > len(shown):
            raise IndexError("a Weights is indexed by its layer and head only")
        ids = [self.layer_ids, self.head_ids]
        keep = list(self._keep)
        for dim, k in zip(shown, key):
            if isinstance(k, slice):
                ids[dim] = ids[dim][k]
            elif isinstance(k, (list, tuple)):
                ids[dim] = [ids[dim][int(x)] for x in k]
            else:
                ids[dim] = [ids[dim][int(k)]]
                keep[dim] = False
        return self._with(layer_ids=ids[0], head_ids=ids[1], keep=tuple(keep))

    def prefix(self, m: int) -> Weights:
        """The first m rows and columns: a causal model's attention on the text's first m
        tokens (no row sees a later token)."""
        if not 1 <= m <= self.cols:
            raise ValueError(f"a prefix of 1..{self.cols} tokens, got {m}")
        return self._with(rows=self.rows[self.rows < m], cols=m)

    def at(self, positions: torch.Tensor) -> Weights:
        """Only the rows at ``positions`` (a sample: :class:`RowSample`)."""
        return self._with(rows=positions.to(torch.int64))

    # -- the rows ------------------------------------------------------------------

    def block(self, layer: int, head: int, positions: torch.Tensor) -> torch.Tensor:
        """float32 ``(len(positions), cols)``: the weights of one head's rows at ``positions``
        (ascending), recomputed from its q and k by the layer's own rule."""
        w, lo = self.narrow_block(layer, head, positions)
        if lo == 0 and w.shape[1] == self.cols:
            return w
        out = torch.zeros(len(positions), self.cols)
        out[:, lo:lo + w.shape[1]] = w
        return out

    def narrow_block(self, layer: int, head: int, positions: torch.Tensor) -> tuple[torch.Tensor, int]:
        """The rows at ``positions`` (ascending) of one head on the columns any of them can
        reach, and the first of those columns: ``(float32 (r, c), lo)`` — every weight
        outside columns [lo, lo + c) is zero (beyond a window, after a causal row)."""
        w, lo = self.narrow_heads(layer, [head], positions)
        return w[0], lo

    def narrow_heads(self, layer: int, heads: list[int], positions: torch.Tensor) -> tuple[torch.Tensor, int]:
        """``narrow_block`` for several heads of one layer at once: ``(float32 (h, r, c), lo)``
        (one product for the heads that share a key head, one mask for all)."""
        rule = self.layers[layer]
        n_cols = self.cols
        lo_row, hi_row = int(positions[0]), int(positions[-1])
        lo, hi = 0, n_cols
        if rule.window is not None:
            lo = max(0, lo_row - rule.window + 1)
            if not rule.causal:
                hi = min(n_cols, hi_row + rule.window)
        if rule.causal:
            hi = min(hi, hi_row + 1)
        kv, n_heads = self.k.shape[2], self.q.shape[2]
        h = torch.as_tensor(heads)
        q = self.q[layer, 0, :, positions]  # (H, r, d): only these rows copied
        if len(heads) != n_heads or heads != list(range(n_heads)):
            q = q[h]
        keys = self.k[layer, 0, :, lo:hi]  # (KV, c, d): a view, never copied per head
        head_kv = [x * kv // n_heads for x in heads]  # each head's key head (grouped-query attention)
        if len(set(head_kv)) == 1:  # one key head for them all (Gemma's): one product
            raw = q @ keys[head_kv[0]].T
        else:
            raw = torch.empty(len(heads), len(positions), hi - lo)
            for g in sorted(set(head_kv)):
                mine = [i for i, x in enumerate(head_kv) if x == g]
                raw[mine] = q[mine] @ keys[g].T
        bias = self.biases.get(layer)
        if bias is not None:
            bias = bias[h if bias.shape[0] > 1 else torch.zeros_like(h)][:, positions][..., lo:hi]
        scores = rule.score(raw, bias)
        i, j = positions[:, None], torch.arange(lo, hi)[None, :]
        allowed = (j <= i) if rule.causal else torch.ones(len(positions), hi - lo, dtype=torch.bool)
        if rule.window is not None:
            allowed = allowed & ((i - j).abs() < rule.window)
        scores = scores.masked_fill(~allowed, float("-inf"))
        if rule.sinks is not None:  # learned sink logits: a column of their own, with no value
            sink = torch.tensor([rule.sinks[x] for x in heads], dtype=scores.dtype)[:, None, None]
            full = torch.cat([scores, sink.expand(*scores.shape[:-1], 1)], dim=-1)
            return torch.softmax(full, dim=-1, dtype=torch.float32)[..., :-1], lo
        w = torch.softmax(scores, dim=-1, dtype=torch.float32)
        if self.norms is not None and self.cols == self.q.shape[3]:  # whole rows: keep their normalisers
            # lse = m − log w(m) at each row's largest score m, whose weight is the row's largest
            # (at least 1/n: no underflow)
            self.norms.put(layer, heads, positions, scores.amax(dim=-1) - w.amax(dim=-1).log())
        return w, lo

    def kept_near(self, window: int, hub_sets, causal: bool) -> tuple[list[torch.Tensor], torch.Tensor] | None:
        """What :func:`attn.stats.shares_kept_and_sink` reads, from the rows' normalisers
        (:class:`RowNorms`) instead of a pass over whole rows: each row's weight kept by the
        pattern of a window of ``window`` with each of ``hub_sets`` (attn.patterns.pattern,
        looking back only when ``causal``) — ``(layers, heads, rows)`` each, as its pass would
        give — and each row's weight on the first token. Only the cells such a pattern can
        keep in a row are scored: the window's band and the hub columns (a hub row, which
        may keep its whole row, is read whole), each weight exp(s − lse) from its score by
        the layer's own rule. None when a normaliser is not known yet, the window is wider
        than NEAR_WIDTH, or a layer has learned sinks or a bias (then: the pass)."""
        n = self.q.shape[3]
        if self.norms is None or self.cols != n or window > NEAR_WIDTH:
            return None
        if any(self.layers[x].sinks is not None or self.biases.get(x) is not None for x in self.layer_ids):
            return None
        lses = [self.norms.get(x, self.head_ids, self.rows) for x in self.layer_ids]
        if any(x is None for x in lses):
            return None
        sets = [tuple(sorted({int(h) for h in hubs})) for hubs in hub_sets]
        mods = [patterns.pattern(n, window, hubs, causal) for hubs in sets]
        hub_rows = torch.tensor(sorted({h for hubs in sets for h in hubs}), dtype=torch.int64)
        columns = torch.tensor(sorted({0, *hub_rows.tolist()}), dtype=torch.int64)
        offsets = torch.arange(window) if causal else torch.arange(-(window - 1), window)  # the band, past to future
        kept = [torch.empty(len(self.layer_ids), len(self.head_ids), self.rows.numel()) for _ in sets]
        first = torch.empty(len(self.layer_ids), len(self.head_ids), self.rows.numel())
        chunk = max(1, NEAR_CELLS // ((offsets.numel() + columns.numel()) * self.q.shape[-1]))
        for li, layer in enumerate(self.layer_ids):
            for s in range(0, self.rows.numel(), chunk):
                pos = self.rows[s:s + chunk]
                lse = lses[li][:, s:s + chunk, None]  # (H, r, 1)
                near = pos[:, None] - offsets[None, :]  # (r, band): each row's band of cells
                cols = columns[None, :].expand(pos.numel(), -1)
                cells = torch.cat([near.clamp(0, n - 1), cols], dim=1)
                w = self._cell_weights(layer, pos, cells, lse)  # (H, r, band + columns)
                first[li, :, s:s + chunk] = w[..., offsets.numel()]  # column 0, the first of the columns
                # each cell once: a band cell inside the text, a hub column outside the row's band
                once = torch.cat([(near >= 0) & (near < n), ~(cols[:, :, None] == near[:, None, :]).any(-1)], dim=1)
                whole = torch.isin(pos, hub_rows)
                if bool(whole.any()):  # a hub row's pattern may reach any cell: read it whole, once for every pattern
                    row_cells = torch.arange(n)[None, :].expand(int(whole.sum()), -1)
                    row_w = self._cell_weights(layer, pos[whole], row_cells, lses[li][:, s:s + chunk][:, whole, None])
                for x, mod in enumerate(mods):
                    got = (w * (mod(0, 0, pos[:, None], cells) & once)).sum(dim=-1)
                    if bool(whole.any()):
                        got[:, whole] = (row_w * mod(0, 0, pos[whole][:, None], row_cells)).sum(dim=-1)
                    kept[x][li, :, s:s + chunk] = got
        shape = tuple(d for d, shown in zip((len(self.layer_ids), len(self.head_ids)), self._keep) if shown)
        return [k.reshape(*shape, -1) for k in kept], first.reshape(*shape, -1)

    def _cell_weights(self, layer: int, positions: torch.Tensor, cols: torch.Tensor, lse: torch.Tensor):
        """float32 ``(heads, r, c)``: the weights of the cells (positions[i], cols[i, c]) of the
        chosen heads, each exp(s − lse) from its score by the layer's rule (0 where the layer
        does not read it: its own pattern, attn.patterns.pattern of its window and direction)."""
        rule = self.layers[layer]
        kv, n_heads = self.k.shape[2], self.q.shape[2]
        q = self.q[layer, 0, :, positions][self.head_ids]  # (H, r, d)
        raw = torch.empty(len(self.head_ids), *cols.shape)
        for g in sorted({x * kv // n_heads for x in self.head_ids}):
            mine = [i for i, x in enumerate(self.head_ids) if x * kv // n_heads == g]
            raw[mine] = torch.einsum("hrd,rcd->hrc", q[mine], self.k[layer, 0, g][cols])
        reads = patterns.pattern(self.q.shape[3], rule.window, (), rule.causal)(0, 0, positions[:, None], cols)
        return (rule.score(raw) - lse).exp() * reads

    def _groups(self, layer: int, positions: torch.Tensor):
        """The positions of a block split where a window layer's rows lie far apart (a sample
        spread over the text): each part's rows then reach a narrow band of columns.
        Yields (offset, positions)."""
        window = self.layers[layer].window
        if window is None or positions.numel() < 2 or int(positions[-1] - positions[0]) < window:
            yield 0, positions
            return
        _, counts = torch.unique_consecutive((positions - positions[0]) // window, return_counts=True)
        start = 0
        for c in counts.tolist():
            yield start, positions[start:start + c]
            start += c

    def blocks(self, cells: int = BLOCK_CELLS, narrow: bool = False):
        """Every row, each once: yields ``(start, stop, float32 rows (r, columns))`` where
        start and stop index the rows as a tensor's ``reshape(-1, columns)`` would (layers,
        then heads, then rows) — in whatever order they are made: a block of rows of every
        chosen head of one layer at a time. ``narrow``: ``(start, stop, rows, lo)`` with only
        the columns [lo, lo + width) the block's rows can reach (the others are 0)."""
        heads = len(self.head_ids)
        # at most ROWS_AT_ONCE rows: a causal block then reaches only the columns up to its last
        # row, and a window block only its band (fewer cells computed and thrown away)
        step = max(1, min(ROWS_AT_ONCE, cells // max(self.cols * heads, 1)))
        r = self.rows.numel()
        for li, layer in enumerate(self.layer_ids):
            for s in range(0, r, step):
                for off, pos in self._groups(layer, self.rows[s:s + step]):
                    w, lo = self.narrow_heads(layer, self.head_ids, pos)
                    for hi in range(heads):
                        start = (li * heads + hi) * r + s + off
                        if narrow:
                            yield start, start + pos.numel(), w[hi], lo
                        elif lo == 0 and w.shape[-1] == self.cols:
                            yield start, start + pos.numel(), w[hi]
                        else:
                            out = torch.zeros(pos.numel(), self.cols)
                            out[:, lo:lo + w.shape[-1]] = w[hi]
                            yield start, start + pos.numel(), out

    def mean_rows(self, positions: torch.Tensor) -> torch.Tensor:
        """float32 ``(len(positions), cols)``: the rows at ``positions`` averaged over the
        layers and heads chosen (a layer's heads: head=None)."""
        out = torch.zeros(positions.numel(), self.cols)
        for layer in self.layer_ids:
            for head in self.head_ids:
                out += self.block(layer, head, positions)
        return out / self.n_grids

    def dense(self) -> torch.Tensor:
        """The grid as a tensor: for tests and small texts only (it is what the app never holds)."""
        out = torch.empty(self.n_grids * self.rows.numel(), self.cols)
        for s, e, w in self.blocks():
            out[s:e] = w
        return out.reshape(self.shape)
