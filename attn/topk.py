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


def cells(n: int, keep: int, causal: bool) -> int:
    """Cells top-k attention computes the attention over: each row min(k, the keys it may see)."""
    keep = check_keep(keep)
    if not causal:
        return n * min(keep, n)
    full = min(keep, n)  # rows 0 … keep-1 see i + 1 keys, the rest keep k
    return full * (full + 1) // 2 + (n - full) * keep


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


def rows_chosen(q, k, keep: int, *, causal: bool, r0: int, r1: int, by=None) -> torch.Tensor:
    """Which cells rows r0…r1-1 keep, ``(b, h, r, n)`` bool."""
    idx, ok = chosen_keys(q, k, keep, causal=causal, r0=r0, r1=r1, by=by)
    return torch.zeros(*idx.shape[:3], k.shape[2], dtype=torch.bool, device=q.device).scatter_(-1, idx, ok)


def _visible(r0: int, r1: int, n: int, causal: bool, device) -> torch.Tensor | None:
    if not causal:
        return None
    i = torch.arange(r0, r1, device=device)[:, None]
    return torch.arange(n, device=device)[None, :] <= i


def chosen_keys(q, k, keep: int, *, causal: bool, r0: int, r1: int, by=None, values: bool = False):
    """The keys rows r0…r1-1 keep: indices ``(b, h, r, kk)`` (kk = min(k, n)) and a flag for
    each that it is visible (a causal row near the start sees fewer than k keys); with
    ``values``, their scores too (q·k unscaled, or the indexer's).
    ``by``: (q, k) to choose by instead (the indexer's projections); None: the exact scores."""
    n = r1 if causal else k.shape[2]  # looking back, rows r0…r1-1 see no key from r1 on
    sq, sk = (q, k) if by is None else by
    scores = sq[:, :, r0:r1] @ sk[:, :, :n].transpose(-1, -2)  # (b, h, r, n): the scoring, every visible pair
    if causal:  # keys before r0 are seen by every row of the block: only its own diagonal square is masked
        i = torch.arange(r0, r1, device=q.device)[:, None]
        scores[..., r0:r1].masked_fill_(torch.arange(r0, r1, device=q.device)[None, :] > i, float("-inf"))
    kk = min(keep, n)
    top = scores.topk(kk, dim=-1, sorted=False)  # the order of the chosen keys does not matter
    if values:
        return top.indices, torch.isfinite(top.values), top.values
    return top.indices, torch.isfinite(top.values)


def top_of_scores(scores: torch.Tensor, keep: int, *, causal: bool, r0: int = 0) -> torch.Tensor:
    """The k highest of scores already computed for rows r0… ``(b, h, r, n)`` → bool of the
    same shape (a causal row sees no key after it)."""
    keep = check_keep(keep)
    r, n = scores.shape[-2:]
    vis = _visible(r0, r0 + r, n, causal, scores.device)
    if vis is not None:
        scores = scores.masked_fill(~vis, float("-inf"))
    top = scores.topk(min(keep, n), dim=-1)
    return torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, top.indices, torch.isfinite(top.values))


def topk_attention(q, k, v, keep: int, *, causal: bool = True, scale: float | None = None,
                   indexer_dims: int | None = None, rows: int = ROWS) -> torch.Tensor:
    """Softmax over each query's top ``keep`` keys (by the exact scores, or with
    ``indexer_dims`` by the indexer's), on ``(b, h, n, d)`` tensors, ``rows`` queries at a
    time: never an n×n tensor."""
    keep = check_keep(keep)
    s = _scale(q, scale)
    n = q.shape[2]
    by = projected(q, k, indexer_dims)
    out = torch.empty(*q.shape[:3], v.shape[-1], dtype=q.dtype, device=q.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        idx, ok, chosen = chosen_keys(q, k, keep, causal=causal, r0=r0, r1=r1, by=by, values=True)
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
                 indexer_dims: int | None = None, rows: int = PART_ROWS) -> torch.Tensor:
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
        chosen = (top_of_scores(scores, keep, causal=causal, r0=r0) if by is None
                  else rows_chosen(q, k, keep, causal=causal, r0=r0, r1=r1, by=by))
        allowed = chosen | fixed(0, 0, i, j[None, :])
        if causal:
            allowed &= j[None, :] <= i
        scores.mul_(s).masked_fill_(~allowed, float("-inf"))  # in place: one block's scores held, not three
        out[:, :, r0:r1] = torch.softmax(scores, dim=-1) @ v
    return out


def selection(q, k, keep: int, *, causal: bool, indexer_dims: int | None = None, rows: int = ROWS) -> torch.Tensor:
    """Which cells top-k keeps, written out ``(b, h, n, n)`` bool (for references and small
    texts; the kernel never builds it)."""
    keep = check_keep(keep)
    b, h, n, _ = q.shape
    by = projected(q, k, indexer_dims)
    grid = torch.zeros(b, h, n, n, dtype=torch.bool, device=q.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        grid[:, :, r0:r1] = rows_chosen(q, k, keep, causal=causal, r0=r0, r1=r1, by=by)
    return grid


def recall(q, k, keep: int, indexer_dims: int, *, causal: bool, rows: int = ROWS) -> float:
    """The indexer's recall: the share of the oracle's chosen keys it chose too, over every
    row and head (``rows`` queries at a time)."""
    keep = check_keep(keep)
    by = projected(q, k, indexer_dims)
    n = q.shape[2]
    hit = total = 0
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        idx, ok = chosen_keys(q, k, keep, causal=causal, r0=r0, r1=r1)
        mark = rows_chosen(q, k, keep, causal=causal, r0=r0, r1=r1, by=by)
        hit += int((mark.gather(-1, idx) & ok).sum())
        total += int(ok.sum())
    return hit / max(1, total)
