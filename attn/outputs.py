"""What each shortcut costs on the model's own q, k, v: both orders of linear attention
(the same numbers, the other grouping), every method's output error against exact
softmax (and equal weights'), the weights each method implies and their peaks, the
layer's q and k norms. How the real weights are spread is :mod:`attn.stats`.

Every function takes the layer's :class:`attn.arch.LayerAttention`: which pairs it reads
(its direction, its window) and what it does to a score (its scale, its soft cap; a
``bias`` the model passed in its mask, where the analysis has one). The exact reference
is softmax over the layer's own pattern with its own scores, as the model computes it; a
softmax shortcut keeps the layer's scores and drops pairs; a linear one replaces the
softmax (and with it the soft cap and the bias) by φ(q)·φ(k).

q, k, v are ``(batch, heads, n, d)``; each output is compared in float64.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from . import composition, linear_kernels, methods, patterns, topk
from .bench import clearly_faster
from .layer import LayerAttention
from .stats import row_cells
from .device import compute_dtype
from .features import FEATURE_MAPS, apply_feature_map, feature_size, working_dtype


ORDER_RUNS = 5  # each order is timed this many times, in turn; the median is shown


def linear_orders(q, k, v, layer: LayerAttention, *, feature: str, causal: bool, runs: int = ORDER_RUNS) -> dict:
    """Linear attention computed in both orders on the same φ (at the layer's scale): (φ(Q)φ(K)ᵀ)V
    with the n×n grid, and φ(Q)(φ(K)ᵀV) with the m×d summary, looking back only or both
    ways (``causal``: the reader's choice on step 5). Their largest difference is rounding;
    the sizes show what the second order saves. Each order is timed ``runs`` times, the two
    in turn (a first, cold run is one noisy measurement): the medians."""
    scale = layer.scale
    times_fast, times_slow = [], []
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        fast = linear_kernels.linear_attention(q, k, v, feature=feature, causal=causal, scale=scale)
        t1 = time.perf_counter()
        slow = linear_kernels.linear_attention_quadratic(q, k, v, feature=feature, causal=causal, scale=scale)
        t2 = time.perf_counter()
        times_fast.append(t1 - t0)
        times_slow.append(t2 - t1)
    n, d, dv = q.shape[2], q.shape[-1], v.shape[-1]
    m = feature_size(feature, d)
    diff = (fast - slow).abs()
    return {
        "max_diff": float(diff.max()),
        "rel_diff": float(diff.norm() / slow.norm().clamp_min(1e-30)),
        "n": n, "d": d, "m": m,
        # the grid the first order needs: its causal triangle, or the whole square
        "grid_numbers": n * (n + 1) // 2 if causal else n * n, "summary_numbers": patterns.linear_summary_size(m, dv),
        "seconds_linear": statistics.median(times_fast), "seconds_quadratic": statistics.median(times_slow),
        "runs": len(times_fast),
        # which order ran faster beyond the runs' spread: "summary", "grid" or None (too noisy to tell)
        "faster": {"a": "summary", "b": "grid", None: None}[clearly_faster(times_fast, times_slow)],
    }


# --- output error of each method on the model's own q, k, v --------------------


def relative_error(out: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """‖o − o_exact‖ / ‖o_exact‖ per head: ``(heads,)`` from ``(1, heads, n, d)``."""
    diff = (out.double() - exact.double()).flatten(2).norm(dim=-1)[0]
    return diff / exact.double().flatten(2).norm(dim=-1)[0].clamp_min(1e-30)


def own_params(layer: LayerAttention) -> methods.Params:
    """The layer's own pattern as the registry's parameters."""
    return methods.Params(window=layer.window, scale=layer.scale, causal=layer.causal)


def scored_weights(q, k, allowed: torch.Tensor, layer: LayerAttention, bias=None, dtype=torch.float64):
    """Softmax over ``allowed`` (bool (n, n), or rows of it) of the layer's own scores —
    scaled, soft-capped, biased (LayerAttention.score) — with its learned sink logits, where
    it has them, as a column with no value: ``(b, heads, rows, n)`` in ``dtype``."""
    scores = layer.score(q.to(dtype) @ k.to(dtype).transpose(-1, -2), None if bias is None else bias.to(dtype))
    return masked_softmax(scores, allowed, layer)


def masked_softmax(scores, allowed: torch.Tensor, layer: LayerAttention) -> torch.Tensor:
    """Softmax over ``allowed`` of the layer's scores (already scaled, capped, biased), with
    its sink logits where it has them, in the scores' dtype (:func:`scored_weights`)."""
    dtype = scores.dtype
    scores = scores.masked_fill(~allowed, float("-inf"))
    if layer.sinks is not None:
        sink = torch.tensor(layer.sinks, dtype=dtype, device=scores.device)[None, :, None, None]
        full = torch.cat([scores, sink.expand(*scores.shape[:-1], 1)], dim=-1)
        return torch.softmax(full, dim=-1)[..., :-1]
    return torch.softmax(scores, dim=-1)


def exact_output(q, k, v, layer: LayerAttention, bias=None, dtype=torch.float64, rows: int = 256) -> torch.Tensor:
    """The layer's own attention, written out: softmax over its own pattern of its own
    scores, times v (in ``dtype``): what the model computes, the reference of every error.
    ``rows`` queries at a time, each block on the keys its pattern can reach (looking back:
    none after the block; in a window: none farther than it), never an n×n tensor."""
    n, w = q.shape[2], layer.window
    own = methods.own().mask(n, own_params(layer))
    qd, kd, vd = q.to(dtype), k.to(dtype), v.to(dtype)
    out = torch.empty(*q.shape[:3], v.shape[-1], dtype=dtype, device=q.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        lo = 0 if w is None else max(0, r0 - w + 1)
        hi = r1 if layer.causal else (n if w is None else min(n, r1 + w - 1))
        i, j = torch.arange(r0, r1, device=q.device)[:, None], torch.arange(lo, hi, device=q.device)[None, :]
        allowed = torch.broadcast_to(own(0, 0, i, j), (r1 - r0, hi - lo))
        scores = layer.score(qd[:, :, r0:r1] @ kd[:, :, lo:hi].transpose(-1, -2),
                             None if bias is None else bias[..., r0:r1, lo:hi].to(dtype))
        out[:, :, r0:r1] = masked_softmax(scores, allowed, layer) @ vd[:, :, lo:hi]
    return out


def method_outputs(q, k, v, layer: LayerAttention, *, window: int, hubs=(), features_list=tuple(FEATURE_MAPS),
                   device=None, bias=None) -> dict:
    """Outputs of every method tagged ``errors`` (:mod:`attn.methods`) on one layer's
    q, k, v ``(1, heads, n, d)``, plus the exact output (:func:`exact_output`, float64).
    Every method reads as the layer does (its direction).

    ``own`` is the layer's own attention through the fused kernel, in the device's compute
    dtype (bfloat16 on CUDA) — or, where the layer does more to a score than scale it (a
    soft cap, a bias: ``plain``), the same softmax written out in that dtype, since the
    fused kernel cannot. The softmax shortcuts keep the layer's scores (written out where
    it soft-caps or biases them, and for top-k, whose kernel gathers each query's chosen keys
    and values: on a CPU 8-14x slower than written-out rows at 2,048 tokens); the linear ones
    run in float32."""
    device = torch.device(device) if device is not None else q.device
    dtype = compute_dtype(device)
    n = q.shape[2]
    plain = not layer.plain_scores or bias is not None or layer.sinks is not None
    exact = exact_output(q, k, v, layer, bias)
    outs = {}
    for m in methods.tagged(methods.ERRORS, lambda m: m.family != "linear" or m.feature in features_list):
        params = methods.Params(window=layer.window if m.family == "own" else window, hubs=hubs, scale=layer.scale,
                                causal=layer.causal, span=layer.window)
        if m.fused:
            qd, kd, vd = (t.to(device=device, dtype=dtype) for t in (q, k, v))
            if plain:
                outs[m.name] = exact_output(qd, kd, vd, layer, bias, dtype=dtype)
                continue
            w = params.window
            # the fused kernel itself, with the layer's pattern as its mask
            mask = None if w is None or w >= n else patterns.dense(m.mask(n, params), n, device=device)
            is_causal = layer.causal and mask is None  # a full bidirectional layer: no mask at all
            outs[m.name] = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, is_causal=is_causal,
                                                          scale=layer.scale)
            if dtype != torch.float32:  # the same fused kernel in float32: fusion and precision told apart
                q32, k32, v32 = (t.to(device=device, dtype=torch.float32) for t in (q, k, v))
                outs[methods.in_float32(m.name)] = F.scaled_dot_product_attention(
                    q32, k32, v32, attn_mask=mask, is_causal=is_causal, scale=layer.scale)
        elif m.family != "linear" and (plain or m.data_dependent):  # the layer's own scores over its pairs
            qd, kd, vd = (t.to(device=device) for t in (q, k, v))
            outs[m.name] = written_out(m, qd, kd, vd, params, layer, None if bias is None else bias.to(device))
        else:
            qf, kf, vf = (t.to(device=device, dtype=torch.float32) for t in (q, k, v))
            outs[m.name] = m.run(qf, kf, vf, params)
    return {"exact": exact, "outputs": {k_: o.float().cpu() for k_, o in outs.items()},
            "dtype": str(dtype).replace("torch.", ""), "plain": plain}


def written_out(m: methods.Method, q, k, v, params: methods.Params, layer: LayerAttention, bias=None,
                rows: int = 128) -> torch.Tensor:
    """A softmax method's output written out in float32, ``rows`` queries at a time: softmax
    over the pairs it sees (:func:`chosen_pairs`) of the layer's own scores, times v. Holds
    ``(heads, rows, n)`` weights at most, never an n×n tensor."""
    qf, kf, vf = q.float(), k.float(), v.float()
    n = q.shape[2]
    by = topk.projected(qf, kf, m.indexer_dims) if m.indexer_dims is not None else None  # once, not once a block
    out = torch.empty(*qf.shape[:3], vf.shape[-1], dtype=torch.float32, device=qf.device)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        allowed = chosen_pairs(m, qf, kf, params, layer, bias, (r0, r1), by)
        rows_bias = None if bias is None else bias[..., r0:r1, :].float()
        scores = layer.score(qf[:, :, r0:r1] @ kf.transpose(-1, -2), rows_bias)
        out[:, :, r0:r1] = masked_softmax(scores, allowed, layer) @ vf
    return out


def chosen_pairs(m: methods.Method, q, k, params: methods.Params, layer: LayerAttention, bias=None,
                 rows: tuple[int, int] | None = None, by=None) -> torch.Tensor:
    """The pairs a softmax method sees, for the rows ``rows`` (r0, r1; None: every row). Top-k's
    oracle chooses by the scores the layer itself computes (its bias added, its cap applied);
    the indexer by its projections, as its kernel does (``by``: made once by a caller reading
    block after block); the others by their pattern."""
    r0, r1 = rows or (0, q.shape[2])
    if m.data_dependent and m.indexer_dims is None and not (layer.plain_scores and bias is None):
        qf = q.float()[:, :, r0:r1]
        scores = layer.score(qf @ k.float().transpose(-1, -2), None if bias is None else bias[..., r0:r1, :].float())
        return m.allowed_scored(q, k, params, scores, r0)
    if rows is None:
        return m.allowed(q, k, params)
    return m.allowed_rows(q, k, params, r0, r1, by=by)


def uniform_error(v, exact: torch.Tensor, layer: LayerAttention) -> torch.Tensor:
    """Per head: the error of uniform attention over the layer's own pattern (every
    token it sees weighted equally), the floor a method must beat."""
    n, w = v.shape[2], layer.window
    i = torch.arange(n, device=v.device)
    lo = torch.zeros_like(i) if w is None else (i - w + 1).clamp_min(0)  # a row sees keys lo…hi
    hi = i if layer.causal else (torch.full_like(i, n - 1) if w is None else (i + w - 1).clamp_max(n - 1))
    # the mean of those values, from running sums in float64 (no n×n mask)
    sums = torch.cat([torch.zeros_like(v[:, :, :1], dtype=torch.float64), v.double().cumsum(dim=2)], dim=2)
    mean = (sums[:, :, hi + 1] - sums[:, :, lo]) / (hi - lo + 1).double()[:, None]
    return relative_error(mean, exact)


def output_errors(q, k, v, layer: LayerAttention, *, window: int, hubs=(), features_list=tuple(FEATURE_MAPS),
                  device=None, bias=None) -> dict:
    """Relative error of each method against exact softmax, per head and averaged,
    keyed by method name. Also the error of uniform attention over the layer's own
    pattern (every visible token weighted equally), keyed ``uniform``: the floor a method
    must beat to have learned anything. ``plain``: the layer's ``own`` was written out (a
    soft cap, a bias), not the fused kernel."""
    res = method_outputs(q, k, v, layer, window=window, hubs=hubs, features_list=features_list, device=device,
                         bias=bias)
    exact = res["exact"]
    n = q.shape[2]
    errors = {name: relative_error(o, exact) for name, o in res["outputs"].items()}
    errors["uniform"] = uniform_error(v, exact, layer)
    return {"per_head": {k_: e.tolist() for k_, e in errors.items()},
            "mean": {k_: float(e.mean()) for k_, e in errors.items()},
            "dtype": res["dtype"], "n": n, "plain": res["plain"]}


def pattern_error(q, k, v, layer: LayerAttention, parts: composition.Composition, bias=None,
                  method: methods.Method | None = None, keep: int | None = None) -> dict:
    """Relative error of softmax over a composed pattern (read as the layer reads, with its
    own scores) against the layer's exact output, per head and averaged, beside uniform
    attention's (the floor). ``method``: a top-k method keeping ``keep`` keys a query beside
    the pattern (None: the pattern alone)."""
    exact = exact_output(q, k, v, layer, bias)
    method = method or methods.composed()
    params = methods.Params(parts=parts, scale=layer.scale, causal=layer.causal, k=keep, span=layer.window)
    if layer.plain_scores and bias is None and layer.sinks is None:
        out = method.run(q.float(), k.float(), v.float(), params)
    else:
        allowed = chosen_pairs(method, q, k, params, layer, bias)
        out = scored_weights(q, k, allowed, layer, bias, torch.float32) @ v.float()
    err, floor = relative_error(out.double(), exact), uniform_error(v, exact, layer)
    return {"per_head": err.tolist(), "mean": float(err.mean()), "uniform": float(floor.mean())}


def implied_weights(q, k, layer: LayerAttention, *, method: str, params: methods.Params, bias=None) -> torch.Tensor:
    """The attention map a method of the registry implies on one layer ``(heads, n, n)``,
    rows summing to 1 — for drawing (n small). Softmax methods: softmax over their
    pattern of the layer's own scores; linear methods: φ(q)·φ(k), normalised per row."""
    m = methods.get(method)
    if m.family == "linear":
        return linear_kernels.linear_weights(q.float(), k.float(), feature=m.feature, causal=params.causal,
                                             scale=layer.scale)[0]
    return scored_weights(q, k, chosen_pairs(m, q, k, params, layer, bias), layer, bias)[0].float()


def peak_weights(q, k, layer: LayerAttention, *, window: int, hubs=(), features_list=tuple(FEATURE_MAPS),
                 rows: int = 128, bias=None) -> dict:
    """How sharp each method's weights are on one layer: the largest weight of each
    row, averaged over rows and heads, keyed like :func:`output_errors` (softmax
    methods over their patterns with the layer's own scores, ``own`` being the exact one;
    linear methods' φ(q)·φ(k) normalised; ``uniform`` = 1 / (cells in the row)). Queries go
    ``rows`` at a time, so no n×n tensor is held (``(heads, rows, n)`` at most)."""
    n = q.shape[2]
    causal = layer.causal
    chosen = [m for m in methods.tagged(methods.ERRORS) if m.family != "linear" or m.feature in features_list]
    sums = {m.name: 0.0 for m in chosen}
    qf, kf = q.float(), k.float()
    feats = {m.name: apply_feature_map(m.feature, qf.to(working_dtype(m.feature, qf.dtype)),
                                       kf.to(working_dtype(m.feature, kf.dtype)), scale=layer.scale)
             for m in chosen if m.family == "linear"}
    j = torch.arange(n)
    by = {m.name: topk.projected(qf, kf, m.indexer_dims) for m in chosen if m.indexer_dims is not None}  # once
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        i = torch.arange(r0, r1)
        rows_bias = None if bias is None else bias[..., r0:r1, :].float()
        scores = layer.score(qf[:, :, r0:r1] @ kf.transpose(-1, -2), rows_bias)  # once a block, for every softmax
        for m in chosen:
            if m.family == "linear":
                fq, fk = feats[m.name]
                w = fq[0, :, r0:r1] @ fk[0].transpose(-1, -2)
                if causal:
                    w = w.masked_fill(j[None, None, :] > i[None, :, None], 0)
                w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
            else:
                params = methods.Params(window=layer.window if m.family == "own" else window, hubs=hubs,
                                        causal=causal, span=layer.window)
                allowed = chosen_pairs(m, qf, kf, params, layer, bias, (r0, r1), by.get(m.name))  # these rows only
                w = masked_softmax(scores, allowed, layer)[0]
            sums[m.name] += float(w.amax(dim=-1).sum())
    heads = q.shape[1]
    out = {name: s / (n * heads) for name, s in sums.items()}
    out["uniform"] = float((1.0 / row_cells(n, layer).double()).mean())
    return out


def median_norms(q, k, layer: LayerAttention) -> dict:
    """Median ‖q‖ and ‖k‖ over tokens and heads, raw and in the units a feature map
    sees (×√scale): what FAVOR+'s variance, growing like exp(‖q‖² + ‖k‖²), depends on."""
    qn, kn = q.float().norm(dim=-1).median(), k.float().norm(dim=-1).median()
    root = layer.scale ** 0.5
    return {"q": float(qn), "k": float(kn), "q_scaled": float(qn) * root, "k_scaled": float(kn) * root}
