"""The attention methods, each described once: the registry every table, chart,
swap and benchmark reads.

A :class:`Method` knows its stable name, which pairs it computes (a pattern of
:mod:`attn.patterns`: the one definition of "which pairs"), its fast kernel, its
dense reference, its cost model (:mod:`attn.costs`), its label in the locales and
the places it appears (tags). A page that shows a subset selects by tag.

Methods take the same arguments, a :class:`Params`: the window (for ``own``, the
layer's own sliding window, None in a full layer), the hub positions, causality and
the scale of q·kᵀ.

Adding a method: one entry in :data:`METHODS` (its kernel in :mod:`attn.kernels`
beside a dense twin, its label key in every ``locales/*.json``); ``docs/architecture.md``
has the recipe, and ``tests/test_methods.py`` walks the registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import costs, kernels, patterns
from .features import FEATURE_MAPS

# where a method appears (a page selects its subset by tag)
ERRORS = "errors"  # step 6: output error against exact softmax on the model's q, k, v
BENCH = "bench"  # step 7's live run and bench/scaling.py
COST_MODEL = "cost_model"  # step 7's chart of operations against n
SWAP = "swap"  # the model re-run with its attention replaced (step 4, step 6)
MAPS = "maps"  # step 6: the attention map a method implies


@dataclass(frozen=True)
class Composition:
    """The playground's composed pattern: the union of the parts of :data:`PARTS` that
    are on (each off at its neutral value), always with the diagonal. Causality is the
    :class:`Params`' own."""

    window: int = 0  # sliding window w (0: off)
    dilated: int = 0  # dilated window: tokens on each side, itself the first (0: off)
    stride: int = 2  # … every stride-th token
    hubs: tuple[int, ...] = ()  # hub positions (empty: off)
    random: int = 0  # BigBird's random blocks per query block (0: off)
    random_block: int = 16  # … of this many tokens
    seed: int = 0  # … drawn with this seed
    local: int = 0  # block-local: blocks of this many tokens (0: off)


@dataclass(frozen=True)
class Params:
    """What a method is asked for. ``window``: the window of window methods, and for
    ``own`` the layer's own sliding window (None: a full layer). ``parts``: the
    composition of the ``pattern`` method (None: window + hubs as a composition)."""

    window: int | None = None
    hubs: tuple[int, ...] = ()
    causal: bool = True
    scale: float | None = None
    parts: Composition | None = None


# --- the playground's parts: one entry each ------------------------------------------


class CompositionError(ValueError):
    """A setting of a composition that does not fit the text; ``code`` names it for the
    reader's language (``playground.err_<code>``), ``values`` fill its message."""

    def __init__(self, code: str, **values):
        super().__init__(f"{code}: {values}")
        self.code, self.values = code, values


def _count(value, lo: int, hi: int, code: str, **values) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise CompositionError(code, lo=lo, hi=hi, value=value, **values)


@dataclass(frozen=True)
class Part:
    """One part of a composed pattern: its predicate (from :mod:`attn.patterns`, built
    with tensors, neutral when the part is off), the block pairs it may touch, and the
    check of its settings on a text of n tokens."""

    name: str
    label_key: str
    on: Callable[[Composition], bool]
    off: dict  # the settings that switch it off
    mask: Callable[..., patterns.MaskMod]  # (n, composition, device) -> mask_mod
    blocks: Callable[..., torch.Tensor] | None  # (n, composition, q_lo, q_hi, k_lo, k_hi, block) -> bool pairs
    check: Callable[[int, Composition], None]


def _t(x, device):
    return torch.tensor(x, device=device)


def _check_window(n, c):
    # wider than the text is allowed: the model's own window of 512 on a shorter text
    # sees every earlier token, which is the lesson (the page says so)
    _count(c.window, 1, 2**31 - 1, "window", n=n)


def _check_dilated(n, c):
    _count(c.stride, 1, n, "stride", n=n)
    _count(c.dilated, 1, max(1, (n - 1) // c.stride + 1), "dilated", n=n, stride=c.stride)


def _check_hubs(n, c):
    for h in c.hubs:
        _count(h, 0, n - 1, "hub", n=n)


def _check_random(n, c):
    _count(c.random_block, 1, n, "random_block", n=n)
    others = max(1, -(-n // c.random_block) - 1)
    _count(c.random, 1, others, "random", n=n, block=c.random_block)
    _count(c.seed, 0, 2**32 - 1, "seed")


def _check_local(n, c):
    _count(c.local, 2, max(2, n), "local", n=n)


def _dynamic(t: torch.Tensor) -> torch.Tensor:
    """A tensor a mask closes over, its sizes dynamic for the compiler from the first
    compile (else a text of another length recompiles the kernel)."""
    for dim in range(t.dim()):
        torch._dynamo.maybe_mark_dynamic(t, dim)
    return t


def _random_mask(n, c, device):
    table = _dynamic(patterns.random_table(n, max(1, c.random_block), c.random, c.seed, device=device))
    return patterns.random_block_mask(table, _t(max(1, c.random_block), device))


def _random_pairs(n, c, q_lo, q_hi, k_lo, k_hi, block):
    table = patterns.random_table(n, c.random_block, c.random, c.seed, device=q_lo.device)
    return patterns.random_blocks(table, c.random_block, n, block)


PARTS: dict[str, Part] = {p.name: p for p in [
    Part("window", "parts.window", lambda c: c.window > 0, {"window": 0},
         lambda n, c, dev: patterns.window_mask(_t(c.window, dev)),
         lambda n, c, ql, qh, kl, kh, b: patterns.band_blocks(ql, qh, kl, kh, c.window), _check_window),
    Part("dilated", "parts.dilated", lambda c: c.dilated > 0, {"dilated": 0},
         lambda n, c, dev: patterns.dilated_mask(_t(c.dilated, dev), _t(max(1, c.stride), dev)),
         lambda n, c, ql, qh, kl, kh, b: patterns.dilated_blocks(ql, qh, kl, kh, c.dilated, c.stride), _check_dilated),
    Part("hubs", "parts.hubs", lambda c: bool(c.hubs), {"hubs": ()},
         lambda n, c, dev: patterns.hub_mask(_dynamic(patterns.hub_flags(n, c.hubs, device=dev))),
         None, _check_hubs),  # hub rows and columns: whole rows and columns, handled by the kernels
    Part("random", "parts.random", lambda c: c.random > 0, {"random": 0},
         _random_mask, _random_pairs, _check_random),
    Part("local", "parts.local", lambda c: c.local > 1, {"local": 0},
         lambda n, c, dev: patterns.block_local_mask(_t(max(1, c.local), dev)),
         lambda n, c, ql, qh, kl, kh, b: patterns.local_blocks(ql, qh, kl, kh, c.local), _check_local),
]}


def check_composition(n: int, c: Composition) -> Composition:
    """The composition, when every part that is on fits a text of n tokens; else a
    :class:`CompositionError` naming the first setting that does not."""
    if not isinstance(c, Composition):
        raise ValueError(f"a composition must be a Composition, got {c!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for f in dataclasses.fields(c):
        values = getattr(c, f.name)
        for v in values if isinstance(values, tuple) else (values,):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{f.name} must hold whole numbers >= 0, got {values!r}")
    for part in PARTS.values():
        if part.on(c):
            part.check(n, c)
    return c


# the playground's presets: known designs in one click (the page and bench/scaling.py)
PRESETS = ("longformer", "bigbird", "model", "sink")
PRESET_WINDOW = 32


def preset(name: str, hubs: tuple[int, ...], model_window: int) -> Composition:
    """Longformer: a window and global tokens (``hubs``); BigBird: the same plus two
    random blocks of 32 per query block; the model's own: its sliding window (applied to
    its sliding layers); the sink lesson: a window and the first token alone as hub."""
    if name == "longformer":
        return Composition(window=PRESET_WINDOW, hubs=tuple(hubs))
    if name == "bigbird":
        return Composition(window=PRESET_WINDOW, hubs=tuple(hubs), random=2, random_block=32)
    if name == "model":
        return Composition(window=model_window)
    if name == "sink":
        return Composition(window=PRESET_WINDOW, hubs=(0,))
    raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")


def composition_on_prefix(n: int, c: Composition) -> Composition:
    """The composition on a text's first n tokens (the reach grids, the swap's token
    budget): hubs past them dropped, every size at most n, as many random blocks as
    the shorter text has; the random blocks are drawn again for n tokens."""
    from dataclasses import replace as _replace

    block = min(c.random_block, n)
    others = max(0, -(-n // max(1, block)) - 1)
    return _replace(c, window=min(c.window, n), hubs=tuple(h for h in c.hubs if h < n),
                    dilated=min(c.dilated, max(1, (n - 1) // max(1, c.stride) + 1)) if c.dilated else 0,
                    stride=min(c.stride, n), random=min(c.random, others), random_block=block,
                    local=min(c.local, n) if c.local > 1 else c.local)


def composed_mask(n: int, c: Composition, causal: bool = True, device=None) -> patterns.MaskMod:
    """The union of every part (those off are empty), the diagonal, then causality
    when on: one code path for every composition, its settings in tensors."""
    visible = patterns.or_masks(patterns.diagonal_mask, *(p.mask(n, c, device) for p in PARTS.values()))
    return patterns.and_masks(visible, patterns.causal_switch(_t(bool(causal), device)))


def composed_blocks(n: int, c: Composition, causal: bool, block: int, device=None, hub_lines: bool = True):
    """bool (blocks × blocks): the block pairs of ``block`` tokens holding the pattern's
    cells. ``hub_lines=False`` leaves out the whole rows and columns of the hubs (the
    blocked kernel adds those itself)."""
    starts, ends = patterns.block_bounds(n, block, device)
    q_lo, q_hi, k_lo, k_hi = starts[:, None], ends[:, None], starts[None, :], ends[None, :]
    visit = torch.eye(len(starts), dtype=torch.bool, device=device)
    for p in PARTS.values():
        if p.on(c) and p.blocks is not None:
            visit |= p.blocks(n, c, q_lo, q_hi, k_lo, k_hi, block)
    if hub_lines and c.hubs:
        hub_blocks = torch.zeros(len(starts), dtype=torch.bool, device=device)
        hub_blocks[torch.tensor(c.hubs, device=device) // block] = True
        visit |= hub_blocks[None, :] | hub_blocks[:, None]
    if causal:
        visit &= k_lo <= q_hi
    return visit


def covers_every_pair(n: int, c: Composition) -> bool:
    """A composition that sees every pair (a window, a stride-1 dilated window or a
    local block as long as the text): run as full attention."""
    return c.window >= n or (c.stride == 1 and c.dilated >= n) or c.local >= n


def composed_cells(n: int, c: Composition, causal: bool = True, block: int = 64) -> int:
    """Exact count of the composed pattern's cells (the predicate on every cell of the
    block pairs that can hold one)."""
    check_composition(n, c)
    full = n * (n + 1) // 2 if causal else n * n
    if covers_every_pair(n, c):
        return full
    return patterns.count_cells(n, composed_mask(n, c, causal), composed_blocks(n, c, causal, block), block)


@dataclass(frozen=True)
class Method:
    name: str  # stable, used everywhere: URLs, cache keys, swaps, tables
    family: str  # "full", "own", "window", "pattern" (the playground's composition) or "linear"
    label_key: str  # locale key; placeholders {w}, {g}, {dtype} may be filled
    tags: frozenset[str]
    feature: str | None = None  # the feature map φ of a linear method
    fused: bool = False  # runs in the device's compute dtype (bfloat16 on CUDA), as a fused kernel
    reference_label_key: str | None = None  # label when its dense reference is timed

    # -- which pairs --------------------------------------------------------------

    def window_of(self, n: int, params: Params) -> int | None:
        """The window this method applies to a text of n tokens (None: no window)."""
        if self.family in ("own", "window"):
            if self.family == "window" and params.window is None:
                raise ValueError(f"method {self.name!r} needs a window")
            return params.window
        return None

    def hubs_of(self, n: int, params: Params) -> tuple[int, ...]:
        return patterns.check_hubs(n, params.hubs) if self.name == "window_hubs" else ()

    def composition_of(self, n: int, params: Params) -> Composition:
        """The ``pattern`` method's parts: ``params.parts``, else window + hubs."""
        c = params.parts or Composition(window=params.window or 0, hubs=tuple(params.hubs))
        return check_composition(n, c)

    def mask(self, n: int, params: Params = Params()) -> patterns.MaskMod:
        """The pattern (mask_mod) of the pairs this method lets each query see. Linear
        attention sees every (causal) pair, its weights blurred by φ."""
        if self.family == "pattern":
            return composed_mask(n, self.composition_of(n, params), params.causal)
        return patterns.pattern(n, self.window_of(n, params), self.hubs_of(n, params), params.causal)

    def cells(self, n: int, params: Params = Params()) -> int:
        if self.family == "pattern":
            return composed_cells(n, self.composition_of(n, params), params.causal) if n else 0
        w = self.window_of(n, params)
        return patterns.cells(n, w, self.hubs_of(n, params), params.causal)

    # -- computing ----------------------------------------------------------------

    def run(self, q, k, v, params: Params = Params(), backend: str = "auto") -> torch.Tensor:
        """The fast kernel on ``(b, h, n, d)`` tensors; never builds an n×n tensor
        (``backend`` picks the window kernel: auto, blocked or flex)."""
        n = kernels.check_qkv(q, k, v)[2]
        if self.family == "linear":
            return kernels.linear_attention(q, k, v, feature=self.feature, causal=params.causal, scale=params.scale)
        if self.family == "pattern":
            return self._run_composed(q, k, v, n, params, backend)
        w = self.window_of(n, params)
        if w is None:
            return kernels.full_attention(q, k, v, causal=params.causal, scale=params.scale)
        return kernels.window_attention(q, k, v, window=w, hubs=self.hubs_of(n, params), causal=params.causal,
                                        scale=params.scale, backend=backend)

    def _run_composed(self, q, k, v, n, params, backend):
        c = self.composition_of(n, params)
        if covers_every_pair(n, c):
            return kernels.full_attention(q, k, v, causal=params.causal, scale=params.scale)  # every pair
        mask_mod = composed_mask(n, c, params.causal, device=q.device)
        from . import flex

        if backend == "flex" or (backend == "auto" and _composed_flex(q, v, params)):
            visit = composed_blocks(n, c, params.causal, flex.FLEX_BLOCK, device=q.device)
            scale = kernels.scale_of(q, params.scale)  # a float, as the warm-up compiled it
            if backend == "flex":
                return flex.sparse_attention(q, k, v, mask_mod, visit, scale=scale)
            try:  # None while a warm-up compiles: the blocked kernel answers instead
                out = flex.try_sparse_attention(q, k, v, mask_mod, visit, scale=scale)
                if out is not None:
                    return out
            except Exception as exc:  # a compile problem never fails a request
                flex.mark_failed(q, v, params.causal, False, exc, kind="pattern")
        visit = composed_blocks(n, c, params.causal, kernels.BLOCK, device=q.device, hub_lines=False)
        return kernels.sparse_attention(q, k, v, mask_mod, visit, c.hubs, scale=params.scale)

    def reference(self, q, k, v, params: Params = Params()) -> torch.Tensor:
        """The plain dense twin of :meth:`run` (builds the n×n grid; for tests and
        small texts)."""
        n = kernels.check_qkv(q, k, v)[2]
        if self.family == "linear":
            return kernels.linear_attention_reference(q, k, v, feature=self.feature, causal=params.causal,
                                                      scale=params.scale)
        allowed = patterns.dense(self.mask(n, params), n, device=q.device)
        return kernels.masked_softmax_reference(q, k, v, allowed, params.scale)

    def backend(self, q, v, params: Params = Params(), backend: str = "auto") -> str:
        """Which kernel :meth:`run` uses for these tensors."""
        if self.family == "linear":
            return "chunked scan"
        n = q.shape[2]
        if self.family == "pattern":
            if covers_every_pair(n, self.composition_of(n, params)):
                return "sdpa"
            if backend != "auto":
                return backend

            return "flex" if _composed_flex(q, v, params) else "blocked"
        w = self.window_of(n, params)
        if w is None or w >= n:
            return "sdpa"
        if backend != "auto":
            return backend
        return kernels.window_backend(q, v, params.causal, w, self.hubs_of(n, params))

    # -- cost model -----------------------------------------------------------------

    def flops(self, n: int, shape: costs.Shape, backend: str = "model") -> tuple[float, float]:
        """(useful, computed) floating-point operations at length n for the benchmark's
        shape (causal). ``backend``: what ran ("flex", "blocked", "sdpa",
        "reference"), or "model" for the pattern's cells alone."""
        if self.family == "linear":
            return costs.linear_flops(n, shape, self.feature)
        if self.family == "pattern":
            return composed_flops(n, shape, shape_composition(n, shape), backend)
        window = None if self.family == "full" else shape.window
        hubs = shape.hub_positions(n) if self.name == "window_hubs" else ()
        useful = costs.pattern_flops(n, shape, window, hubs)
        if backend == "reference":
            return useful, n * n * costs.cell_flops(shape)
        if window is None or window >= n or backend in ("model", "sdpa"):
            return useful, useful
        if backend == "flex":
            from . import flex

            counts, _ = flex.block_lists(n, min(window, n), hubs, True)
            return useful, int(counts.sum()) * flex.FLEX_BLOCK**2 * costs.cell_flops(shape)
        return useful, costs.blocked_window_flops(n, shape, window, hubs)

    def memory(self, n: int, shape: costs.Shape) -> int:
        """Numbers the method holds besides q, k, v and the output (see :mod:`attn.costs`)."""
        if self.family == "linear":
            return costs.linear_memory(n, shape, self.feature)
        if self.family == "full":
            return costs.dense_memory(n, shape)
        if self.family == "pattern":
            return composed_memory(n, shape, shape_composition(n, shape))
        hubs = shape.hub_positions(n) if self.name == "window_hubs" else ()
        return costs.window_memory(n, shape, shape.window, hubs)


def shape_composition(n: int, shape: costs.Shape) -> Composition:
    """The benchmark shape's window and hubs as a composition (the cost model of ``pattern``)."""
    return Composition(window=min(shape.window, n), hubs=shape.hub_positions(n))


def composed_memory(n: int, shape: costs.Shape, c: Composition, causal: bool = True) -> int:
    """Numbers a composition holds besides q, k, v and the output: the scores of its cells."""
    return shape.batch * shape.heads * composed_cells(n, c, causal)


def _composed_flex(q, v, params) -> bool:
    """Whether ``auto`` runs a composition through compiled FlexAttention: on CUDA once
    warm. On the CPU the block-sparse pure-torch kernel was as fast or faster for every
    preset at every n measured (bench/scaling.py, docs/performance.md), so it runs there."""
    from . import flex

    return q.device.type == "cuda" and flex.is_ready(q, v, params.causal, kind="pattern")


def composed_flops(n: int, shape: costs.Shape, c: Composition, backend: str = "model",
                   causal: bool = True) -> tuple[float, float]:
    """(useful, computed) operations of softmax attention over a composition:
    useful, its cells; computed, what the kernel that ran touches (flex: every cell of
    the visited 64-blocks; blocked: the same blocks without the hub lines, plus the hub
    columns for every query and the hub rows; reference and sdpa: every pair)."""
    cell = costs.cell_flops(shape)
    useful = composed_cells(n, c, causal) * cell
    full = n * (n + 1) // 2 if causal else n * n
    if backend == "model" or covers_every_pair(n, c):
        return useful, useful
    if backend in ("reference", "sdpa"):
        return useful, (n * n if backend == "reference" else full) * cell
    from .flex import FLEX_BLOCK

    block = FLEX_BLOCK if backend == "flex" else costs.BLOCK
    visited = int(composed_blocks(n, c, causal, block, hub_lines=backend == "flex").sum()) * block * block
    lines = 0 if backend == "flex" else len(c.hubs) * 2 * n
    return useful, max(useful, (visited + lines) * cell)


def _linear(feature: str) -> Method:
    tags = {ERRORS, SWAP, MAPS} | ({BENCH, COST_MODEL} if feature == "elu" else set())
    return Method(f"linear_{feature}", "linear", f"methods.linear_{feature}", frozenset(tags), feature=feature)


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("full", "full", "methods.full", frozenset({BENCH, COST_MODEL}), fused=True,
               reference_label_key="methods.full_reference"),
        Method("own", "own", "methods.own", frozenset({ERRORS, SWAP, MAPS}), fused=True),
        Method("window", "window", "methods.window", frozenset({ERRORS, BENCH, COST_MODEL, SWAP, MAPS})),
        Method("window_hubs", "window", "methods.window_hubs", frozenset({ERRORS, BENCH, COST_MODEL, SWAP, MAPS})),
        Method("pattern", "pattern", "methods.pattern", frozenset({SWAP})),
        *[_linear(f) for f in FEATURE_MAPS],
    ]
}


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}") from None


def tagged(tag: str, where: Callable[[Method], bool] | None = None) -> list[Method]:
    """The methods that appear in one place, in registry order."""
    return [m for m in METHODS.values() if tag in m.tags and (where is None or where(m))]


def linear(feature: str) -> Method:
    """The linear-attention method of one feature map φ."""
    return get(f"linear_{feature}")


def operations(ns: list[int], shape: costs.Shape, tag: str = COST_MODEL) -> dict[str, list[float]]:
    """Useful floating-point operations of each method with ``tag`` at each n (no timing)."""
    return {m.name: [m.flops(n, shape)[0] for n in ns] for m in tagged(tag)}
