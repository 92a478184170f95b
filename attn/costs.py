"""What each attention method costs, on paper: floating-point operations and the
numbers it holds besides q, k, v and the output. No timing here (that is
:mod:`attn.bench`), and no tensors: every count follows from the pattern of
:mod:`attn.patterns` and the shapes.

A computed cell (i, j) costs 2d operations for q·k and 2d for its share of p·v.
Linear attention costs 4·m·d per token (its summary update and read) plus the
causal triangles of its chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import patterns
from .composition import Composition, composed_blocks, composed_cells, covers_every_pair, window_and_hubs
from .features import feature_size
from .backend import sparse_plan
from .flex import block_size, computed_cells, returns_lse
from .kernels import blocked_cells
from .linear_kernels import CHUNK, GROUP


@dataclass(frozen=True)
class Shape:
    """The benchmark's kind of call: ``(batch, heads, n, d)`` tensors, a window, a
    number of hubs (spread evenly, the first token among them) and a feature map
    for linear attention — counted over ``layers`` layers, looking back only (``causal``)
    or both ways. The default is the benchmark's one causal layer; :meth:`of_model` is a
    model's own shape (its layers, heads, key/value heads, head size, direction)."""

    heads: int = 4
    d: int = 64
    window: int = 128
    hubs: int = 4
    feature: str = "elu"
    batch: int = 1
    layers: int = 1
    kv_heads: int = 0  # key/value heads (0: one per query head)
    causal: bool = True

    @classmethod
    def of_model(cls, arch, **kw) -> Shape:
        """A model's own shape, from its :class:`attn.arch.Architecture` (``kw``: the window,
        hubs and feature the cost model counts)."""
        return cls(heads=arch.n_heads, d=arch.head_dim, layers=arch.n_layers, kv_heads=arch.kv_heads,
                   causal=arch.causal, **kw)

    def hub_positions(self, n: int) -> tuple[int, ...]:
        if self.hubs <= 0:
            return ()
        return tuple(sorted({int(round(i * (n - 1) / max(1, self.hubs))) for i in range(self.hubs)}))


def cell_flops(s: Shape) -> int:
    """Operations of one computed cell over all batches, heads and layers: 2d (q·k) + 2d (p·v)."""
    return 4 * s.d * s.batch * s.heads * s.layers


def pattern_flops(n: int, s: Shape, window: int | None, hubs: tuple[int, ...]) -> float:
    """Useful operations of softmax attention over a pattern, read as the shape reads
    (causal, or both ways)."""
    return patterns.cells(n, None if window is None else min(window, n), hubs, s.causal) * cell_flops(s)


def blocked_window_flops(n: int, s: Shape, window: int, hubs: tuple[int, ...], device="cpu") -> float:
    """What the blocked kernel computes: each query block against its candidate keys
    (:func:`attn.kernels.blocked_cells`), the hub columns for every query (the merge),
    and the hub rows."""
    return (blocked_cells(n, window, True, device) + 2 * len(hubs) * n) * cell_flops(s)


def flex_window_flops(n: int, s: Shape, window: int, hubs: tuple[int, ...], device="cpu") -> float:
    """What the compiled kernel computes: every cell of its visited blocks, plus the hub
    columns (the merge) and the hub rows."""
    return (computed_cells(n, min(window, n), True, device) + 2 * len(hubs) * n) * cell_flops(s)


def linear_flops(n: int, s: Shape, feature: str) -> tuple[float, float]:
    """(useful, computed) operations of the chunked causal scan; both ways, the summary is
    built once and read by every token (nothing else computed)."""
    m = feature_size(feature, s.d)
    C = min(CHUNK, n)
    per = s.batch * s.heads * s.layers
    useful = n * 4 * m * s.d * per
    computed = useful + (n * C * 2 * (m + s.d) * per if s.causal else 0)
    return useful, computed


def linear_memory(n: int, s: Shape, feature: str) -> int:
    """Numbers held by linear attention: the m×d summary and its m-vector per head,
    plus the features of one group of chunks (GROUP chunks) at a time."""
    m = feature_size(feature, s.d)
    return s.batch * s.heads * s.layers * (patterns.linear_summary_size(m, s.d) + 2 * min(n, GROUP * CHUNK) * m)


def window_memory(n: int, s: Shape, window: int, hubs: tuple[int, ...]) -> int:
    """Numbers held by window (+ hub) attention: the scores of the cells it computes."""
    return s.batch * s.heads * s.layers * patterns.cells(n, min(window, n), hubs, s.causal)


def dense_memory(n: int, s: Shape) -> int:
    """The n×n score grid of full attention written out. (Fused kernels such as SDPA
    on CUDA hold blocks of it only: they remove this memory wall, not the n² work.)"""
    return s.batch * s.heads * s.layers * n * n


@dataclass(frozen=True)
class BreakEven:
    """The text lengths from which linear attention's summary order holds fewer numbers
    (``memory``) and costs fewer operations (``operations``) than the grid order; the
    summary's size, m·d + m."""

    memory: int
    operations: int
    summary: int


def linear_break_even(m: int, d: int, causal: bool = True) -> BreakEven:
    """The text lengths from which linear attention's summary order is cheaper than the
    grid order, for one head with feature size m and value size d:

    * memory: the grid's numbers (n(n+1)/2 causal, n² not) exceed the summary's m·d + m;
    * operations: the grid order costs m + d per grid cell (its score φ(q)·φ(k), then
      weighting the values), the summary order 2·m·d per token (folding it in, reading
      it): cheaper once cells(n)·(m + d) > n·2md, i.e. from n = ⌊4md / (m + d)⌋ causal
      (2m when m = d) and ⌊2md / (m + d)⌋ + 1 not (m + 1 when m = d).
    """
    summary = patterns.linear_summary_size(m, d)
    if causal:
        memory = math.ceil((math.sqrt(1 + 8 * summary) - 1) / 2)  # smallest n with n(n+1)/2 >= summary …
        while memory * (memory + 1) // 2 <= summary:  # … strictly more than it
            memory += 1
        operations = 4 * m * d // (m + d)  # the smallest n with (n + 1)(m + d) > 4md
    else:
        memory = math.isqrt(summary) + 1
        operations = 2 * m * d // (m + d) + 1  # the smallest n with n(m + d) > 2md
    return BreakEven(memory, operations, summary)


# --- the composed patterns' cost model ---------------------------------------------------------


def shape_composition(n: int, shape: Shape) -> Composition:
    """The benchmark shape's window and hubs as a composition (the cost model of ``pattern``)."""
    return Composition(window=min(shape.window, n), hubs=shape.hub_positions(n))


def composed_memory(n: int, shape: Shape, c: Composition, causal: bool = True) -> int:
    """Numbers a composition holds besides q, k, v and the output: the scores of its cells."""
    return shape.batch * shape.heads * shape.layers * composed_cells(n, c, causal)


def composed_flops(n: int, shape: Shape, c: Composition, backend: str = "model",
                   causal: bool = True, device="cpu") -> tuple[float, float]:
    """(useful, computed) operations of softmax attention over a composition:
    useful, its cells; computed, what the kernel that ran touches (a window with or
    without hubs: the window kernels'; flex: every cell of the visited blocks, the hub
    lines among them where the compiled kernel has no log-sum-exp (the CPU), else
    without them plus the merged hub columns and the hub rows; blocked: the blocks of
    its plan (backend.sparse_plan) without the hub lines, plus the hub columns for every
    query and the hub rows; reference and sdpa: every pair)."""
    cell = cell_flops(shape)
    useful = composed_cells(n, c, causal) * cell
    full = n * (n + 1) // 2 if causal else n * n
    if backend == "model" or covers_every_pair(n, c):
        return useful, useful
    if backend in ("reference", "sdpa"):
        return useful, (n * n if backend == "reference" else full) * cell
    if causal and window_and_hubs(c):  # run by the window kernels
        return useful, window_flops(n, shape, c.window, c.hubs, backend, device)[1]
    merged = backend != "flex" or returns_lse(device)  # hub lines computed apart, not as blocks
    if backend == "flex":
        block = block_size(device)
        visited = int(composed_blocks(n, c, causal, block, hub_lines=not merged).sum()) * block**2
    else:
        block, visit = sparse_plan(n, c, causal)
        visited = int(visit.sum()) * block * block
    lines = len(c.hubs) * 2 * n if merged else 0
    return useful, max(useful, (visited + lines) * cell)


def window_flops(n: int, shape: Shape, window: int | None, hubs: tuple[int, ...], backend: str = "model",
                 device="cpu") -> tuple[float, float]:
    """(useful, computed) operations of softmax attention over a window (+ hubs), or
    full attention (``window`` None), causal, for what ran: "model" (the pattern's
    cells alone), "sdpa", "reference" (every pair), "flex" (every cell of the visited
    blocks) or "blocked"."""
    useful = pattern_flops(n, shape, window, hubs)
    if backend == "reference":
        return useful, n * n * cell_flops(shape)
    if window is None or window >= n or backend in ("model", "sdpa"):
        return useful, useful
    if backend == "flex":
        return useful, flex_window_flops(n, shape, window, hubs, device)
    return useful, blocked_window_flops(n, shape, window, hubs, device)


# --- the memory a long text keeps: the key/value cache ---------------------------


def kv_cache(n: int, windows, kv_heads: int, d: int, batch: int = 1) -> int:
    """Numbers a decoder keeps to write the token after ``n``: each layer's keys and
    values (2·kv_heads·d a token) for the tokens it still reads — all n in a full layer
    (``None`` in ``windows``), the last w in a layer sliding a window of w."""
    return batch * sum(2 * kv_heads * d * (n if w is None else min(n, w)) for w in windows)


def linear_state(layers: int, kv_heads: int, d: int, feature: str = "elu", batch: int = 1) -> int:
    """Numbers linear attention keeps instead, whatever n: for each layer and key/value
    head, the summary Σφ(k)vᵀ and its normaliser Σφ(k) (``patterns.linear_summary_size``)."""
    return batch * layers * kv_heads * patterns.linear_summary_size(feature_size(feature, d), d)
