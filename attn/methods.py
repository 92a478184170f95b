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

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import backend as backends
from . import costs, kernels, linear_kernels, patterns
from .composition import Composition, check_composition, composed_cells, composed_mask
from .features import FEATURE_MAPS

# where a method appears (a page selects its subset by tag)
ERRORS = "errors"  # step 6: output error against exact softmax on the model's q, k, v
BENCH = "bench"  # step 7's live run and bench/scaling.py
COST_MODEL = "cost_model"  # step 7's chart of operations against n
SWAP = "swap"  # the model re-run with its attention replaced (step 4, step 6)
MAPS = "maps"  # step 6: the attention map a method implies


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


@dataclass(frozen=True)
class Method:
    name: str  # stable, used everywhere: URLs, cache keys, swaps, tables
    family: str  # "full", "own", "window", "pattern" (the playground's composition) or "linear"
    label_key: str  # locale key; placeholders {w}, {g}, {dtype} may be filled
    tags: frozenset[str]
    feature: str | None = None  # the feature map φ of a linear method
    fused: bool = False  # runs in the device's compute dtype (bfloat16 on CUDA), as a fused kernel
    reference_label_key: str | None = None  # label when its dense reference is timed
    with_hubs: bool = False  # a window method that adds the hub rows and columns

    @property
    def scan_chunk(self) -> int | None:
        """The chunk of a linear method's causal scan, in tokens (None for the others)."""
        return linear_kernels.CHUNK if self.family == "linear" else None

    @property
    def formula(self) -> str | None:
        """The feature map φ of a linear method, in LaTeX (None for the others)."""
        return FEATURE_MAPS[self.feature].latex if self.feature else None

    # -- which pairs --------------------------------------------------------------

    def window_of(self, n: int, params: Params) -> int | None:
        """The window this method applies to a text of n tokens (None: no window)."""
        if self.family in ("own", "window"):
            if self.family == "window" and params.window is None:
                raise ValueError(f"method {self.name!r} needs a window")
            return params.window
        return None

    def hubs_of(self, n: int, params: Params) -> tuple[int, ...]:
        return patterns.check_hubs(n, params.hubs) if self.with_hubs else ()

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
        (``backend`` picks the window kernel: auto, blocked or flex; attn.backend chooses)."""
        n = kernels.check_qkv(q, k, v)[2]
        if self.family == "linear":
            return linear_kernels.linear_attention(q, k, v, feature=self.feature, causal=params.causal,
                                                   scale=params.scale)
        if self.family == "pattern":
            return backends.composed_attention(q, k, v, self.composition_of(n, params), causal=params.causal,
                                               scale=params.scale, backend=backend)
        w = self.window_of(n, params)
        if w is None:
            return kernels.full_attention(q, k, v, causal=params.causal, scale=params.scale)
        return backends.window_attention(q, k, v, window=w, hubs=self.hubs_of(n, params), causal=params.causal,
                                         scale=params.scale, backend=backend)

    def reference(self, q, k, v, params: Params = Params()) -> torch.Tensor:
        """The plain dense twin of :meth:`run` (builds the n×n grid; for tests and
        small texts)."""
        n = kernels.check_qkv(q, k, v)[2]
        if self.family == "linear":
            return linear_kernels.linear_attention_reference(q, k, v, feature=self.feature, causal=params.causal,
                                                      scale=params.scale)
        allowed = patterns.dense(self.mask(n, params), n, device=q.device)
        return kernels.masked_softmax_reference(q, k, v, allowed, params.scale)

    def backend(self, q, v, params: Params = Params(), backend: str = "auto") -> str:
        """Which kernel :meth:`run` uses for these tensors."""
        if self.family == "linear":
            return "chunked scan"
        n = q.shape[2]
        if self.family == "pattern":
            return backends.composed_backend(q, v, n, self.composition_of(n, params), params.causal, backend)
        w = self.window_of(n, params)
        if w is None or w >= n:
            return "sdpa"
        if backend != "auto":
            return backend
        return backends.window_backend(q, v, params.causal, w, self.hubs_of(n, params))

    def compiled(self, device) -> bool:
        """Whether a compiled FlexAttention kernel for this method is warm on device (a
        window or a composition; the other methods have none)."""
        return self.family in ("window", "pattern") and backends.compiled(
            "pattern" if self.family == "pattern" else "window", device)

    # -- cost model -----------------------------------------------------------------

    def flops(self, n: int, shape: costs.Shape, backend: str = "model", device="cpu") -> tuple[float, float]:
        """(useful, computed) floating-point operations at length n for a shape (the
        benchmark's, or a model's own: :meth:`attn.costs.Shape.of_model`). ``backend``: what
        ran ("flex", "blocked", "sdpa", "reference"), or "model" for the pattern's cells alone; ``device``: where (the
        kernels' blocks differ)."""
        if self.family == "linear":
            return costs.linear_flops(n, shape, self.feature)
        if self.family == "pattern":
            return costs.composed_flops(n, shape, costs.shape_composition(n, shape), backend, causal=shape.causal,
                                        device=device)
        window = None if self.family == "full" else shape.window
        hubs = shape.hub_positions(n) if self.with_hubs else ()
        return costs.window_flops(n, shape, window, hubs, backend, device)

    def memory(self, n: int, shape: costs.Shape) -> int:
        """Numbers the method holds besides q, k, v and the output (see :mod:`attn.costs`)."""
        if self.family == "linear":
            return costs.linear_memory(n, shape, self.feature)
        if self.family == "full":
            return costs.dense_memory(n, shape)
        if self.family == "pattern":
            return costs.composed_memory(n, shape, costs.shape_composition(n, shape), shape.causal)
        hubs = shape.hub_positions(n) if self.with_hubs else ()
        return costs.window_memory(n, shape, shape.window, hubs)


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
        Method("window_hubs", "window", "methods.window_hubs", frozenset({ERRORS, BENCH, COST_MODEL, SWAP, MAPS}),
               with_hubs=True),
        Method("pattern", "pattern", "methods.pattern", frozenset({SWAP})),
        *[_linear(f) for f in FEATURE_MAPS],
    ]
}


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}") from None


def _one(what: str, where: Callable[[Method], bool]) -> Method:
    found = [m for m in METHODS.values() if where(m)]
    if len(found) != 1:
        raise LookupError(f"the registry must hold exactly one {what}, holds {len(found)}")
    return found[0]


def own() -> Method:
    """The layer's own attention (causal, its own sliding window): the control."""
    return _one("own method", lambda m: m.family == "own")


def exact() -> Method:
    """Full softmax attention over every (causal) pair: the n² the lesson starts from."""
    return _one("full method", lambda m: m.family == "full")


def window(hubs: bool = False) -> Method:
    """The sliding window, alone or with hub tokens."""
    return _one("window method", lambda m: m.family == "window" and m.with_hubs == hubs)


def composed() -> Method:
    """The playground's composition of parts."""
    return _one("composed method", lambda m: m.family == "pattern")


def in_float32(name: str) -> str:
    """The key of a fused method's output computed again in float32 (on a GPU, where it
    runs in bfloat16): fusion and precision told apart."""
    return f"{name}_float32"


def tagged(tag: str, where: Callable[[Method], bool] | None = None) -> list[Method]:
    """The methods that appear in one place, in registry order."""
    return [m for m in METHODS.values() if tag in m.tags and (where is None or where(m))]


def linear(feature: str) -> Method:
    """The linear-attention method of one feature map φ."""
    return get(f"linear_{feature}")


def operations(ns: list[int], shape: costs.Shape, tag: str = COST_MODEL) -> dict[str, list[float]]:
    """Useful floating-point operations of each method with ``tag`` at each n (no timing)."""
    return {m.name: [m.flops(n, shape)[0] for n in ns] for m in tagged(tag)}
