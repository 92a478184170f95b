"""Step 7 on the model itself: the reader's text run through the whole model at three
lengths (n/4, n/2, n), four ways —

1. ``full``: full attention in every layer (the fused kernel, every earlier token);
2. ``own``: the model's own layout, its sliding layers through the window kernel
   (never the n×n mask), its full layers as they are;
3. ``hubs``: the same window with hubs (the first token and the text's strongest anchors);
4. ``linear``: linear attention (φ = elu + 1) in the sliding layers, the full ones as they are —

each timed (the wall time of the whole forward pass), with the peak memory of one of its
replaced layers' attention at that length (attn.bench.peak_memory on the model's head
shape: the extra bytes the call holds at its peak), and with its loss against the model's
own output: the mean KL of the
next-token distributions, and both perplexities, on positions spread evenly over the text
(:data:`KL_POSITIONS` at most). The model's own output is its own attention (every
layer's own pattern through the fused kernel), run once at n: a causal model's output on
a text's first m tokens is the first m rows of that run.

A model with no sliding layer gets the window in every layer but its last (said on the
page); an encoder or a folder without a language-model head gets times and memory only
(``loss`` None: nothing is next, or nothing reads the head).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import bench, costs, methods, patterns
from .model import LoadedModel, Replace

KL_POSITIONS = 256  # next-token distributions compared per length, spread over the text
WINDOW = 512  # the window of a model with no sliding layer of its own
WAYS = ("full", "own", "hubs", "linear")
LINEAR = "linear_elu"


@dataclass(frozen=True)
class WayRun:
    """One way at one length: the forward pass's wall time, the peak memory of one replaced
    layer's attention (bytes; None where it cannot be read), what the cost model counts for
    the forward pass (operations), and against the model's own output the mean KL and the
    perplexities (None: not measured, see the module's doc)."""

    way: str
    n: int
    seconds: float
    peak_bytes: int | None
    kl: float | None
    perplexity: float | None
    base_perplexity: float | None
    positions: int  # the positions compared
    operations: float = 0.0  # the cost model's count for the whole forward pass at n


@dataclass(frozen=True)
class FourWays:
    """The run: the lengths, the layers the shortcuts replaced, their window and hubs, and
    every (way, length)."""

    lengths: tuple[int, ...]
    layers: tuple[int, ...]
    window: int
    hubs: tuple[int, ...]
    runs: tuple[WayRun, ...]
    own_sliding: bool  # the layers replaced are the model's own sliding ones

    def of(self, way: str) -> list[WayRun]:
        return [r for r in self.runs if r.way == way]

    def ratio(self, way: str, what=lambda r: r.seconds) -> float | None:
        """time(n) / time(n/2), measured (``what``: another column of the run, e.g. the
        cost model's operations)."""
        rs = {r.n: what(r) for r in self.of(way)}
        n, half = self.lengths[-1], self.lengths[-2]
        return rs[n] / rs[half] if n in rs and half in rs and rs[half] else None


# How long the four ways take, in units of the model's own pace on the text (the analysis'
# seconds a token): a run of m tokens about RUN_LINEAR·m + RUN_SQUARE·m² of them, and a way's
# run RUN_COMPARED more for each position its output is compared at (min(m − 1, KL_POSITIONS):
# each a next-token distribution over the whole vocabulary, its own and the model's). Fitted on
# Gemma-3-270m at 180, 371, 1,024, 2,048, 4,096 and 8,120 tokens (328–330 GFLOP/s: 10.3, 16.0,
# 27.0, 40.8, 72.7 and 192.9 s), every one within 6 %: docs/performance.md, «Step 7's forecast».
RUN_LINEAR = 0.445
RUN_SQUARE = 2.04e-4
RUN_COMPARED = 6.18


def measured(model: LoadedModel) -> bool:
    """Whether the four ways are compared with the model's own output (a causal model with
    its language-model head: the next-token distributions)."""
    return model.causal and model.has_head


def run_units(n: int, compared: bool = True) -> list[float]:
    """Each run's share of the work, in the order :func:`four_ways` runs them (the model's
    own output at n first, where ``compared`` with it: :func:`measured`; then each length's
    four ways, each compared with it then)."""
    def share(m: int, against: bool) -> float:
        return RUN_LINEAR * m + RUN_SQUARE * m * m + (RUN_COMPARED * min(m - 1, KL_POSITIONS) if against else 0.0)

    return ([share(n, False)] if compared else []) + [share(m, compared) for m in lengths_of(n) for _ in WAYS]


# The model's pace a token grows with the text (its full layers read every earlier token):
# measured on Gemma-3-270m, 1.06 ms a token at 371 tokens, 1.15 at 1,024, 1.26 at 2,048, 1.35 at
# 4,096, 1.45 at 8,120 — about (1 + n / PACE_DOUBLES) times its pace on a few tokens
PACE_DOUBLES = 20_000


def base_pace(seconds: float, n: int) -> float:
    """An analysis' pace (``seconds`` for n tokens) brought back to a few tokens' pace."""
    return seconds / max(n, 1) / (1 + n / PACE_DOUBLES)


def pace_at(base: float, n: int) -> float:
    """The seconds a token at n tokens, from a :func:`base_pace`."""
    return base * (1 + n / PACE_DOUBLES)


def forecast(seconds_a_token: float, n: int, compared: bool = True) -> float:
    """About how many seconds :func:`four_ways` takes on n tokens, from the model's own pace
    on the text (an analysis' seconds over its tokens): said before the run starts."""
    return seconds_a_token * sum(run_units(n, compared))


def lengths_of(n: int) -> tuple[int, ...]:
    """n/4, n/2 and n (the shorter ones at least 2 tokens)."""
    return tuple(sorted({max(2, n // 4), max(2, n // 2), n}))


def plan(model: LoadedModel, way: str, window: int, hubs: tuple[int, ...], layers: tuple[int, ...], n: int) -> Replace:
    """The model's attention for one way on a text of n tokens."""
    causal = model.causal
    if way == "full":
        return Replace(methods.window().name, frozenset(range(model.n_layers)), methods.Params(window=n, causal=causal))
    if way == "own":
        return Replace(methods.window().name, frozenset(layers), methods.Params(window=window, causal=causal))
    if way == "hubs":
        return Replace(methods.window(hubs=True).name, frozenset(layers),
                       methods.Params(window=window, hubs=patterns.check_hubs(n, tuple(h for h in hubs if h < n)),
                                      causal=causal))
    if way == "linear":
        return Replace(LINEAR, frozenset(layers), methods.Params(causal=causal))
    raise ValueError(f"unknown way {way!r}; use one of {WAYS}")


def _timed(model: LoadedModel, ids: list[int], run_plan: Replace) -> tuple[torch.Tensor, float]:
    """The last hidden states of ``ids`` under ``run_plan``, and the wall time."""
    x = torch.tensor([ids], device=model.device)
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)
    t0 = time.perf_counter()
    hidden = model.run_plan(run_plan, lambda: model.hidden(x))
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)
    return hidden, time.perf_counter() - t0


def attention_peak(model: LoadedModel, way_plan: Replace, n: int) -> int | None:
    """The extra bytes one replaced layer's attention holds at its peak at n tokens (the
    model's heads and head size; attn.bench.peak_memory): the way's kernel on its
    pattern."""
    arch = model.arch
    layer = min(way_plan.layers)
    q = torch.randn(1, arch.n_heads, n, arch.head_dim, device=model.device)
    k, v = (torch.randn(1, arch.kv_heads, n, arch.head_dim, device=model.device).expand(1, arch.n_heads, n,
                                                                                         arch.head_dim)
            for _ in range(2))
    method = methods.get(way_plan.method)
    params = way_plan.params
    if params.scale is None:
        params = dataclasses.replace(params, scale=arch.scales[layer])
    with torch.no_grad():
        return bench.peak_memory(lambda: method.run(q, k, v, params), model.device)


def operations(model: LoadedModel, way: str, n: int, layers: tuple[int, ...], window: int,
               hubs: tuple[int, ...]) -> float:
    """The cost model's operations of the whole forward pass at n tokens: each layer's
    attention as the way computes it (attn.costs at the model's head shape), plus the
    projections and MLPs (2 operations a weight a token: the parameters outside the
    embeddings)."""
    arch = model.arch
    one = costs.Shape.of_model(arch, window=window, hubs=len(hubs))
    one = costs.Shape(heads=one.heads, d=one.d, window=window, hubs=len(hubs), kv_heads=one.kv_heads,
                      causal=one.causal, layers=1)
    total = 0.0
    for i, layer in enumerate(arch.layers):
        replaced = i in layers
        if way == "full":
            cells = patterns.cells(n, None, (), arch.causal)
        elif replaced and way == "linear":
            total += costs.linear_flops(n, one, "elu")[0]
            continue
        elif replaced:
            cells = patterns.cells(n, min(window, n), tuple(h for h in hubs if h < n) if way == "hubs" else (),
                                   arch.causal)
        else:  # a layer kept as the model has it
            cells = patterns.cells(n, None if layer.window is None else min(layer.window, n), (), arch.causal)
        total += cells * costs.cell_flops(one)
    embeddings = model.model.get_input_embeddings().weight.numel()
    return total + 2.0 * (arch.parameters - embeddings) * n


def compare_at(model: LoadedModel, base: torch.Tensor, hidden: torch.Tensor, ids: list[int],
               positions: torch.Tensor) -> tuple[float, float, float]:
    """Mean KL(own ‖ way), the way's and the model's own perplexity, on the next tokens
    after ``positions``."""
    with torch.no_grad():
        lb = torch.log_softmax(model.logits(base[0, positions]), dim=-1)
        lw = torch.log_softmax(model.logits(hidden[0, positions]), dim=-1)
    targets = torch.tensor([ids[p + 1] for p in positions.tolist()], device=lb.device)[:, None]
    kl = float((lb.exp() * (lb - lw)).sum(dim=-1).mean())
    return kl, math.exp(float(-lw.gather(1, targets).mean())), math.exp(float(-lb.gather(1, targets).mean()))


def spread_positions(m: int, count: int = KL_POSITIONS) -> torch.Tensor:
    """At most ``count`` positions evenly spread over [0, m − 1) (each predicts the next)."""
    if m - 1 <= count:
        return torch.arange(m - 1)
    return torch.linspace(0, m - 2, count).round().to(torch.int64).unique()


def four_ways(model: LoadedModel, ids: list[int], hubs: tuple[int, ...] = (0,),
              progress: Callable[[int, int, str, int], None] | None = None) -> FourWays:
    """The four ways at n/4, n/2 and n = len(ids) (see the module's doc). ``progress``
    is called with (done, total, way, n) before each run."""
    n = len(ids)
    if n < 8:
        raise ValueError(f"the four-way run needs a text of at least 8 tokens, got {n}")
    sliding = tuple(i for i, layer in enumerate(model.arch.layers) if layer.sliding)
    layers = sliding or tuple(range(max(1, model.n_layers - 1)))
    window = model.arch.sliding_window or WINDOW
    lengths = lengths_of(n)
    compared = measured(model)
    total = len(lengths) * len(WAYS) + (1 if compared else 0)
    done = 0
    base = None
    if compared:  # the model's own output, once at n: its first m rows are the run on m tokens
        if progress:
            progress(done, total, "base", n)
        own = Replace(methods.own().name, frozenset(range(model.n_layers)), methods.Params(causal=True))
        base, _ = _timed(model, ids, own)
        done += 1
    runs = []
    for m in lengths:
        for way in WAYS:
            if progress:
                progress(done, total, way, m)
            way_plan = plan(model, way, window, hubs, layers, m)
            hidden, seconds = _timed(model, ids[:m], way_plan)
            kl = ppl = base_ppl = None
            positions = spread_positions(m)
            if compared:
                kl, ppl, base_ppl = compare_at(model, base[:, :m], hidden, ids[:m], positions)
            del hidden
            runs.append(WayRun(way, m, seconds, attention_peak(model, way_plan, m), kl, ppl, base_ppl,
                               int(positions.numel()) if compared else 0,
                               operations(model, way, m, layers, window, hubs)))
            done += 1
    return FourWays(lengths, layers, window, tuple(hubs), tuple(runs), bool(sliding))

