"""How far information travels through stacked attention layers.

Each layer is a graph on the tokens: an edge j → i when query i may look at key j
(the pattern of :mod:`attn.patterns`). After L layers, j can influence i when a
path of L edges joins them (each token also keeps its own state: every pattern
here includes the diagonal). These grids are n×n by nature: they are drawn, so n
stays small (a few hundred tokens).
"""

from __future__ import annotations

import torch

from . import patterns


def _adjacency(n: int, window: int, hubs=(), causal: bool = True) -> torch.Tensor:
    """float (n, n): 1 where query i sees key j."""
    return patterns.pattern_grid(n, window, patterns.check_hubs(n, hubs), causal).to(torch.float32)


def reach_of(adjacency: torch.Tensor, layers: int) -> torch.Tensor:
    """bool (n, n): ``reach[i, j]`` when j can influence i after ``layers`` layers of a
    pattern given as its one-layer edges (bool n×n, diagonal included)."""
    if layers < 0 or int(layers) != layers:
        raise ValueError(f"layers must be a whole number >= 0, got {layers!r}")
    a = adjacency.to(torch.float32)
    reach = torch.eye(a.shape[0])
    for _ in range(int(layers)):
        reach = ((a @ reach) > 0).to(torch.float32)
    return reach > 0


def hops_of(adjacency: torch.Tensor, max_layers: int | None = None) -> torch.Tensor:
    """int (n, n): the fewest layers of a pattern (its one-layer edges, bool n×n) in
    which j reaches i; 0 on the diagonal, −1 when it never does."""
    n = adjacency.shape[0]
    a = adjacency.to(torch.float32)
    out = torch.full((n, n), -1, dtype=torch.int64)
    reach = torch.eye(n)
    out[reach > 0] = 0
    limit = n if max_layers is None else int(max_layers)
    for layer in range(1, limit + 1):
        new = ((a @ reach) > 0).to(torch.float32)
        fresh = (new > 0) & (out < 0)
        if not fresh.any():
            break
        out[fresh] = layer
        reach = new
    return out


def reach_after_layers(n: int, window: int, layers: int, causal: bool = True, hubs=()) -> torch.Tensor:
    """bool (n, n): ``reach[i, j]`` is True when token j can influence token i after
    ``layers`` stacked layers of the pattern (A^L > 0).

    Causal window including itself: row i reaches ``min(i + 1, L·(w − 1) + 1)`` tokens."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return reach_of(_adjacency(n, window, hubs, causal), layers)


def reach_size(window: int, layers: int) -> int:
    """L·(w − 1) + 1: tokens a causal window (itself included) reaches after L layers,
    far enough from the start."""
    return layers * (window - 1) + 1


def hops(n: int, window: int, hubs=(), causal: bool = False, max_layers: int | None = None) -> torch.Tensor:
    """int (n, n): the fewest layers in which information from j reaches i; 0 on the
    diagonal, −1 when it never does (within ``max_layers``, default n).

    Bidirectional with at least one hub (Longformer's setting): every pair is within 2
    (j → hub → i). Causal: a hub at position 0 only sees itself, so it cannot carry a
    later token forward — it is a sink, not a relay."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return hops_of(_adjacency(n, window, hubs, causal), max_layers)


def route(hop_grid: torch.Tensor, adjacency: torch.Tensor, i: int, j: int) -> list[int]:
    """One shortest path j → … → i (token positions, j first), [] when none."""
    if hop_grid[i, j] < 0:
        return []
    path = [i]
    cur = i
    # walk back: from cur pick a key it sees that is one hop closer to j
    while cur != j:
        need = int(hop_grid[cur, j]) - 1
        prev = next(
            int(p) for p in torch.nonzero(adjacency[cur] > 0).flatten().tolist()
            if int(hop_grid[p, j]) == need
        )
        path.append(prev)
        cur = prev
    return path[::-1]


def adjacency(n: int, window: int, hubs=(), causal: bool = True) -> torch.Tensor:
    """bool (n, n) edges of one layer (for :func:`route` and drawing)."""
    return _adjacency(n, window, hubs, causal) > 0


def pairs_never_joined(hop_grid: torch.Tensor, causal: bool) -> int:
    """Pairs that no number of layers joins (−1 in :func:`hops`). In the causal setting
    only pairs j ≤ i count: a later token is out of sight by design, not cut off."""
    never = hop_grid < 0
    if causal:
        never = never.tril()
    return int(never.sum())


def farthest_pair(hop_grid: torch.Tensor, causal: bool) -> int | None:
    """The most layers any pair needs, or None ("never") when some pair is never
    joined: a maximum that skipped those would understate the distance."""
    if pairs_never_joined(hop_grid, causal):
        return None
    grid = hop_grid.tril() if causal else hop_grid
    return int(grid.max())
