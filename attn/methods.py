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
from . import costs, kernels, linear_kernels, patterns, topk
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
    composition of the ``pattern`` method (None: window + hubs as a composition), and for
    top-k the fixed cells kept beside each query's chosen keys (None: the chosen keys alone)."""

    window: int | None = None
    hubs: tuple[int, ...] = ()
    causal: bool = True
    scale: float | None = None
    parts: Composition | None = None
    k: int | None = None  # keys each query keeps (top-k); None: as many cells a row as the window
    span: int | None = None  # the layer's own window: top-k chooses only keys within it (None: no window)


@dataclass(frozen=True)
class Method:
    name: str  # stable, used everywhere: URLs, cache keys, swaps, tables
    family: str  # "full", "own", "window", "pattern" (the playground's composition), "topk" or "linear"
    label_key: str  # locale key; placeholders {w}, {g}, {dtype} may be filled
    tags: frozenset[str]
    feature: str | None = None  # the feature map φ of a linear method
    fused: bool = False  # runs in the device's compute dtype (bfloat16 on CUDA), as a fused kernel
    reference_label_key: str | None = None  # label when its dense reference is timed
    with_hubs: bool = False  # a window method that adds the hub rows and columns
    indexer_dims: int | None = None  # top-k: choose by scores projected to this many dimensions (None: the oracle)

    @property
    def data_dependent(self) -> bool:
        """Whether its pairs depend on q and k (top-k), not on n and the parameters alone."""
        return self.family == "topk"

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

    def keep_of(self, params: Params) -> int:
        """Top-k's k: ``params.k``, else as many cells a row as the window
        (:func:`attn.topk.for_window`)."""
        if params.k is not None:
            return topk.check_keep(params.k)
        if params.window is None:
            raise ValueError(f"method {self.name!r} needs k or a window")
        return topk.for_window(patterns.check_window(params.window), params.causal)

    def hubs_of(self, n: int, params: Params) -> tuple[int, ...]:
        return patterns.check_hubs(n, params.hubs) if self.with_hubs else ()

    def composition_of(self, n: int, params: Params) -> Composition:
        """The ``pattern`` method's parts: ``params.parts``, else window + hubs."""
        c = params.parts or Composition(window=params.window or 0, hubs=tuple(params.hubs))
        return check_composition(n, c)

    def mask(self, n: int, params: Params = Params()) -> patterns.MaskMod:
        """The pattern (mask_mod) of the pairs this method lets each query see. Linear
        attention sees every (causal) pair, its weights blurred by φ. Top-k has none
        (its pairs depend on q and k): see :meth:`allowed`."""
        if self.data_dependent:
            raise ValueError(f"method {self.name!r} chooses its pairs from q and k: use allowed(q, k, params)")
        if self.family == "pattern":
            return composed_mask(n, self.composition_of(n, params), params.causal)
        return patterns.pattern(n, self.window_of(n, params), self.hubs_of(n, params), params.causal)

    def allowed(self, q, k, params: Params = Params()) -> torch.Tensor:
        """The pairs each query sees on these tensors, written out: ``(b, h, n, n)`` for
        top-k, ``(n, n)`` for the others (for references, small texts and drawing)."""
        n = q.shape[2]
        if self.data_dependent:
            chosen = topk.selection(q, k, self.keep_of(params), causal=params.causal, indexer_dims=self.indexer_dims,
                                    span=params.span)
            fixed = self._fixed(n, params)
            return chosen if fixed is None else chosen | patterns.dense(fixed, n, device=q.device)
        return patterns.dense(self.mask(n, params), n, device=q.device)

    def _fixed(self, n: int, params: Params) -> patterns.MaskMod | None:
        """Top-k's fixed cells beside the chosen keys (``params.parts``, with its diagonal),
        None without parts."""
        if not self.data_dependent or params.parts is None:
            return None
        return composed_mask(n, check_composition(n, params.parts), params.causal)

    def _with_fixed(self, chosen: torch.Tensor, n: int, params: Params, r0: int) -> torch.Tensor:
        fixed = self._fixed(n, params)
        if fixed is None:
            return chosen
        i = torch.arange(r0, r0 + chosen.shape[-2], device=chosen.device)[:, None]
        return chosen | fixed(0, 0, i, torch.arange(n, device=chosen.device)[None, :])

    def allowed_rows(self, q, k, params: Params, r0: int, r1: int, by=None) -> torch.Tensor:
        """The same for queries r0…r1-1 only: ``(b, h, r, n)`` or ``(r, n)``. ``by``: the
        indexer's projections of these q and k (``topk.projected``), where a caller reading
        block after block made them once."""
        n = k.shape[2]
        if self.data_dependent:
            by = topk.projected(q, k, self.indexer_dims) if by is None else by
            return self._with_fixed(topk.rows_chosen(q, k, self.keep_of(params), causal=params.causal, r0=r0, r1=r1,
                                                     by=by, span=params.span), n, params, r0)
        i, j = torch.arange(r0, r1, device=q.device), torch.arange(n, device=q.device)
        return torch.broadcast_to(self.mask(n, params)(0, 0, i[:, None], j[None, :]), (r1 - r0, n))

    def allowed_scored(self, q, k, params: Params, scores: torch.Tensor, r0: int = 0) -> torch.Tensor:
        """The pairs rows r0… see when the layer's own scores for them (its cap and bias
        applied, ``(b, h, r, n)``) are at hand: top-k's oracle chooses by those; the others
        as :meth:`allowed_rows`."""
        if self.data_dependent and self.indexer_dims is None:
            chosen = topk.top_of_scores(scores, self.keep_of(params), causal=params.causal, r0=r0, span=params.span)
            return self._with_fixed(chosen, k.shape[2], params, r0)
        return self.allowed_rows(q, k, params, r0, r0 + scores.shape[-2])

    def cells(self, n: int, params: Params = Params()) -> int:
        if self.data_dependent:
            if params.parts is not None:
                raise ValueError("top-k beside fixed parts: its cells depend on the text; count them on it (allowed)")
            return topk.cells(n, self.keep_of(params), params.causal, params.span) if n else 0
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
        if self.data_dependent:
            fixed = self._fixed(n, params)
            if fixed is not None:
                return topk.beside_parts(q, k, v, self.keep_of(params), fixed, causal=params.causal,
                                         scale=params.scale, indexer_dims=self.indexer_dims, span=params.span)
            return topk.topk_attention(q, k, v, self.keep_of(params), causal=params.causal, scale=params.scale,
                                       indexer_dims=self.indexer_dims, span=params.span)
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
        kernels.check_qkv(q, k, v)
        if self.family == "linear":
            return linear_kernels.linear_attention_reference(q, k, v, feature=self.feature, causal=params.causal,
                                                      scale=params.scale)
        return kernels.masked_softmax_reference(q, k, v, self.allowed(q, k, params), params.scale)

    def backend(self, q, v, params: Params = Params(), backend: str = "auto") -> str:
        """Which kernel :meth:`run` uses for these tensors."""
        if self.family == "linear":
            return "chunked scan"
        if self.data_dependent:
            return "gather" if params.parts is None else "blocked"  # beside parts: a block of queries' scores
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
        if self.data_dependent:
            useful = self.cells(n, Params(window=shape.window, causal=shape.causal)) * costs.cell_flops(shape)
            return useful, useful + self.scoring_flops(n, shape)
        if self.family == "pattern":
            return costs.composed_flops(n, shape, costs.shape_composition(n, shape), backend, causal=shape.causal,
                                        device=device)
        window = None if self.family == "full" else shape.window
        hubs = shape.hub_positions(n) if self.with_hubs else ()
        return costs.window_flops(n, shape, window, hubs, backend, device)

    def scoring_flops(self, n: int, shape: costs.Shape) -> float:
        """Top-k's choosing, counted apart from the attention over the chosen keys: a
        score for every visible pair (2d each for the oracle, 2·dims for an indexer, plus
        projecting q and k: 4·n·d·dims); 0 for the others."""
        if not self.data_dependent:
            return 0.0
        per = shape.batch * shape.heads * shape.layers
        pairs = patterns.cells(n, None, (), shape.causal)
        if self.indexer_dims is None:
            return float(pairs * 2 * shape.d * per)
        dims = min(self.indexer_dims, shape.d)
        return float((pairs * 2 * dims + 4 * n * shape.d * dims) * per)

    def memory(self, n: int, shape: costs.Shape) -> int:
        """Numbers the method holds besides q, k, v and the output (see :mod:`attn.costs`)."""
        if self.family == "linear":
            return costs.linear_memory(n, shape, self.feature)
        if self.family == "full":
            return costs.dense_memory(n, shape)
        if self.data_dependent:  # one block of queries' scores, and the chosen keys' weights
            per = shape.batch * shape.heads * shape.layers
            return per * (min(topk.ROWS, n) * n + self.cells(n, Params(window=shape.window, causal=shape.causal)))
        if self.family == "pattern":
            return costs.composed_memory(n, shape, costs.shape_composition(n, shape), shape.causal)
        hubs = shape.hub_positions(n) if self.with_hubs else ()
        return costs.window_memory(n, shape, shape.window, hubs)


def _linear(feature: str) -> Method:
    tags = {ERRORS, SWAP, MAPS} | ({BENCH, COST_MODEL} if feature == "elu" else set())
    return Method(f"linear_{feature}", "linear", f"methods.linear_{feature}", frozenset(tags), feature=feature)


INDEXER_DIMS = 16  # the indexer's directions (its label says so)

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
        Method("topk", "topk", "methods.topk", frozenset({ERRORS, SWAP, BENCH})),
        Method("topk_indexer", "topk", "methods.topk_indexer", frozenset({ERRORS, SWAP, BENCH}),
               indexer_dims=INDEXER_DIMS),
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


def top_k(indexer: bool = False) -> Method:
    """Top-k selection: the oracle (exact scores), or the indexer."""
    return _one("top-k method", lambda m: m.family == "topk" and (m.indexer_dims is not None) == indexer)


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
