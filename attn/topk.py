"""Top-k selection: each query keeps only the k keys it scores highest, and softmax runs
over those alone (the idea behind DeepSeek's sparse attention and Native Sparse
Attention's chosen blocks).

Two ways to choose:

* the **oracle** chooses by the exact scores q·kᵀ: no method that keeps k keys per query
  can keep more of the exact weight, so its error is the floor of every such method. It
  still scores every visible pair (n²·d operations): only the attention over the chosen
  keys (n·k·d) is saved;
* an **indexer** chooses by cheap scores: q and k projected onto a few directions, the
  text's own keys' top principal directions (uncentred: the right singular vectors of the
  head's key matrix; deterministic, no seed). Exact attention then runs over the keys it
  chose. Its *recall*, how many of the oracle's k it found, is its honest number.

Top-k chooses only among the keys the layer itself reads: its direction (``causal``) and,
in a layer that slides a window of its own, that window (``span``: a causal row i reads
keys i − span + 1 … i, a row reading both ways keys i − span + 1 … i + span − 1). A key
the layer never reads has no weight to keep, so choosing it would only waste a slot.

Queries go :data:`ROWS` at a time: at most ``(b, h, ROWS, n)`` scores are held, never an
n×n grid, and the attention over the chosen keys gathers ``(b, h, ROWS, k, d)``.
"""

from __future__ import annotations

import torch

from . import patterns

ROWS = 128  # queries scored at a time
PART_ROWS = 64  # beside fixed parts: the parts' cells are worked out for each block too, so half as many


def check_keep(keep) -> int:
    """The number of keys each query keeps: a whole number ≥ 1 (a row needs a key)."""
    return patterns.whole_number(keep, "k", "each query keeps at least one key")


def for_window(window: int, causal: bool) -> int:
    """The k that keeps as many cells a row as a window of ``window`` tokens does away from
    the text's ends: w looking back only, 2w − 1 both ways."""
    return window if causal else 2 * window - 1


def cells(n: int, keep: int, causal: bool, span: int | None = None) -> int:
    """Cells top-k attention computes the attention over: each row min(k, the keys it may
    see), the keys it may see bounded by the layer's ``span`` where it has one."""
    keep = check_keep(keep)
    if span is None:
        if not causal:
            return n * min(keep, n)
        full = min(keep, n)  # rows 0 … keep-1 see i + 1 keys, the rest keep k
        return full * (full + 1) // 2 + (n - full) * keep
    lo, hi = _reach(torch.arange(n), n, causal, span)
    return int(torch.clamp(hi - lo, max=keep).sum())


def _reach(i: torch.Tensor, n: int, causal: bool, span: int | None):
    """The keys rows ``i`` may see, as half-open bounds [lo, hi) (their direction, their span)."""
    lo = torch.zeros_like(i) if span is None else (i - span + 1).clamp_min(0)
    hi = i + 1 if causal else (torch.full_like(i, n) if span is None else (i + span).clamp_max(n))
    return lo, hi


def _scale(q, scale):
    return q.shape[-1] ** -0.5 if scale is None else scale


def principal_directions(k: torch.Tensor, dims: int) -> torch.Tensor:
    """The indexer's projection: the ``dims`` top right singular vectors of each head's keys
    ``(b, h, n, d)`` → ``(b, h, d, dims)`` (uncentred, so q·k is kept where the keys lie)."""
    if dims < 1:
        raise ValueError(f"the indexer needs at least one dimension, got {dims}")
    dims = min(dims, k.shape[-1], k.shape[-2])
    heads = k.shape[1]
    if heads > 1 and torch.equal(k, k[:, :1].expand_as(k)):  # grouped-query keys repeated to every head: once
        return principal_directions(k[:, :1], dims).expand(-1, heads, -1, -1)
    # the top right singular vectors of k are the top eigenvectors of kᵀk (d × d): an
    # eigendecomposition of that, in float64, instead of an SVD of the n × d keys
    # (bench/room_text.py: the room's indexer error 43 → 16 ms on a 354-token text)
    kd = k.double()
    _, vecs = torch.linalg.eigh(kd.transpose(-1, -2) @ kd)  # eigenvalues ascending
    return vecs[..., vecs.shape[-1] - dims:].flip(-1).to(k.dtype)


def projected(q, k, dims: int | None):
    """What the indexer chooses by: q and k projected on the keys' ``dims`` top principal
    directions (None without an indexer: the oracle chooses by q and k themselves)."""
    if dims is None:
        return None
    p = principal_directions(k, dims)
    return q @ p, k @ p


def rows_chosen(q, k, keep: int, *, causal: bool, r0: int, r1: int, by=None, span: int | None = None) -> torch.Tensor:
    """Which cells rows r0…r1-1 keep, ``(b, h, r, n)`` bool."""
    idx, ok = chosen_keys(q, k, keep, causal=causal, r0=r0, r1=r1, by=by, span=span)
    return torch.zeros(*idx.shape[:3], k.shape[2], dtype=torch.bool, device=q.device).scatter_(-1, idx, ok)


def _visible(r0: int, r1: int, n: int, causal: bool, device, span: int | None = None,
             j0: int = 0) -> torch.Tensor | None:
    """Which of keys j0…n-1 rows r0…r1-1 may see, ``(r, n - j0)`` bool (None: every one)."""
    if not causal and span is None:
        return None
    lo, hi = _reach(torch.arange(r0, r1, device=device), n, causal, span)
    j = torch.arange(j0, n, device=device)[None, :]
    return (j >= lo[:, None]) & (j < hi[:, None])


def chosen_keys(q, k, keep: int, *, causal: bool, r0: int, r1: int, by=None, values: bool = False,
                span: int | None = None):
    """The keys rows r0…r1-1 keep: indices ``(b, h, r, kk)`` (kk = min(k, the keys the block
    reaches)) and a flag for each that it is visible (a causal row near the start, or a row
    whose ``span`` holds fewer than k keys, sees fewer than k); with ``values``, their scores
    too (q·k unscaled, or the indexer's).
    ``by``: (q, k) to choose by instead (the indexer's projections); None: the exact scores."""
    n = k.shape[2]
    # only the keys some row of the block can see are scored: looking back, none from r1 on;
    # in a span, none farther than it from the block's rows
    lo = 0 if span is None else max(0, r0 - span + 1)
    hi = r1 if causal else (n if span is None else min(n, r1 + span - 1))
    sq, sk = (q, k) if by is None else by
    scores = sq[:, :, r0:r1] @ sk[:, :, lo:hi].transpose(-1, -2)  # (b, h, r, hi - lo): every visible pair
    vis = _visible(r0, r1, hi, causal, q.device, span, j0=lo)
    if vis is not None:
        scores.masked_fill_(~vis, float("-inf"))
    kk = min(keep, hi - lo)
    top = scores.topk(kk, dim=-1, sorted=False)  # the order of the chosen keys does not matter
    idx = top.indices + lo if lo else top.indices
    if values:
        return idx, torch.isfinite(top.values), top.values
    return idx, torch.isfinite(top.values)


def top_of_scores(scores: torch.Tensor, keep: int, *, causal: bool, r0: int = 0,
                  span: int | None = None) -> torch.Tensor:
    """The k highest of scores already computed for rows r0… ``(b, h, r, n)`` → bool of the
    same shape (a causal row sees no key after it; no row a key beyond its ``span``)."""
    keep = check_keep(keep)
    r, n = scores.shape[-2:]
    vis = _visible(r0, r0 + r, n, causal, scores.device, span)
    if vis is not None:
        scores = scores.masked_fill(~vis, float("-inf"))
    top = scores.topk(min(keep, n), dim=-1)
    return torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, top.indices, torch.isfinite(top.values))


def topk_attention(q, k, v, keep: int, *, causal: bool = True, scale: float | None = None,
                   indexer_dims: int | None = None, rows: int = ROWS, span: int | None = None) -> torch.Tensor:
    """Softmax over each query's top ``keep`` keys among those it may see (its direction,
    its layer's ``span``), by the exact scores or with ``indexer_dims`` by the indexer's.

    Args:
        q, k: ``[B, H, N, D]``; v: ``[B, H, N, Dv]``.
    Returns ``[B, H, N, Dv]``, ``rows`` queries at a time: never an n×n tensor."""
    keep = check_keep(keep)
    s = _scale(q, scale)
    n = q.shape[2]
    by = projected(q, k, indexer_dims)
    out = torch.empty(*q.shape[:3], v.shape[-1], dtype=q.dtype, device=q.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        idx, ok, chosen = chosen_keys(q, k, keep, causal=causal, r0=r0, r1=r1, by=by, values=True, span=span)
        b, h, r, kk = idx.shape
        flat = idx.reshape(b, h, r * kk, 1)
        vc = v.gather(2, flat.expand(b, h, r * kk, v.shape[-1])).reshape(b, h, r, kk, -1)
        if by is None:  # the oracle chose by the exact scores: they are the chosen keys' scores
            scores = chosen * s
        else:  # the indexer's scores chose: the exact ones of the chosen keys only
            kc = k.gather(2, flat.expand(b, h, r * kk, k.shape[-1])).reshape(b, h, r, kk, -1)
            scores = (q[:, :, r0:r1, None, :] * kc).sum(-1) * s  # (b, h, r, kk)
        w = torch.softmax(scores.masked_fill(~ok, float("-inf")), dim=-1)
        out[:, :, r0:r1] = (w[..., None] * vc).sum(-2)
    return out


def beside_parts(q, k, v, keep: int, fixed, *, causal: bool = True, scale: float | None = None,
                 indexer_dims: int | None = None, rows: int = PART_ROWS, span: int | None = None) -> torch.Tensor:
    """Softmax over each query's top ``keep`` keys *and* the cells of a fixed pattern
    (``fixed``: a mask_mod of :mod:`attn.patterns`, causality its own), as Native Sparse
    Attention keeps a window beside its chosen blocks; ``rows`` queries at a time: the
    block's exact scores ``(b, h, rows, n)`` are held, never an n×n tensor."""
    keep = check_keep(keep)
    s = _scale(q, scale)
    n = q.shape[2]
    by = projected(q, k, indexer_dims)
    j = torch.arange(n, device=q.device)
    out = torch.empty(*q.shape[:3], v.shape[-1], dtype=q.dtype, device=q.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        i = torch.arange(r0, r1, device=q.device)[:, None]
        scores = q[:, :, r0:r1] @ k.transpose(-1, -2)  # the block's exact scores, unscaled: the oracle chooses by them
        chosen = (top_of_scores(scores, keep, causal=causal, r0=r0, span=span) if by is None
                  else rows_chosen(q, k, keep, causal=causal, r0=r0, r1=r1, by=by, span=span))
        allowed = chosen | fixed(0, 0, i, j[None, :])
        if causal:
            allowed &= j[None, :] <= i
        scores.mul_(s).masked_fill_(~allowed, float("-inf"))  # in place: one block's scores held, not three
        out[:, :, r0:r1] = torch.softmax(scores, dim=-1) @ v
    return out


def selection(q, k, keep: int, *, causal: bool, indexer_dims: int | None = None, rows: int = ROWS,
              span: int | None = None) -> torch.Tensor:
    """Which cells top-k keeps, written out ``(b, h, n, n)`` bool (for references and small
    texts; the kernel never builds it)."""
    keep = check_keep(keep)
    b, h, n, _ = q.shape
    by = projected(q, k, indexer_dims)
    grid = torch.zeros(b, h, n, n, dtype=torch.bool, device=q.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        grid[:, :, r0:r1] = rows_chosen(q, k, keep, causal=causal, r0=r0, r1=r1, by=by, span=span)
    return grid


def recall(q, k, keep: int, indexer_dims: int, *, causal: bool, rows: int = ROWS, span: int | None = None) -> float:
    """The indexer's recall: the share of the oracle's chosen keys it chose too, over every
    row and head (``rows`` queries at a time)."""
    keep = check_keep(keep)
    by = projected(q, k, indexer_dims)
    n = q.shape[2]
    hit = total = 0
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        idx, ok = chosen_keys(q, k, keep, causal=causal, r0=r0, r1=r1, span=span)
        mark = rows_chosen(q, k, keep, causal=causal, r0=r0, r1=r1, by=by, span=span)
        hit += int((mark.gather(-1, idx) & ok).sum())
        total += int(ok.sum())
    return hit / max(1, total)
