"""How a row's attention weight is spread, and what each shortcut costs.

Weights are ``(..., n, n)`` with rows summing to 1 (float16 is fine: the sums
here run in float32).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from . import composition, kernels, methods, patterns
from .device import compute_dtype
from .features import FEATURE_MAPS, apply_feature_map, feature_size


_CHUNK = 1 << 22  # weights handled at once (in float32: 16 MB), so all layers of a long text fit


def _rows(weights: torch.Tensor):
    """The grid's rows in chunks: yields (start, stop, float32 rows ``(r, n)``)."""
    n = weights.shape[-1]
    flat = weights.reshape(-1, n)
    step = max(1, _CHUNK // max(n, 1))
    for s in range(0, flat.shape[0], step):
        yield s, min(flat.shape[0], s + step), flat[s:s + step].float()


def k_for_share(weights: torch.Tensor, p: float) -> torch.Tensor:
    """k(p) per row: the fewest cells whose weights add up to at least a share p of
    the row (largest first). int64 ``(..., n)``."""
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    n = weights.shape[-1]
    out = torch.empty(weights.shape[:-1], dtype=torch.int64).reshape(-1)
    for s, e, w in _rows(weights):
        total = w.sum(dim=-1, keepdim=True)
        top = torch.sort(w, dim=-1, descending=True).values.cumsum(dim=-1)
        # cells strictly below the target, plus the one that reaches it (float slack 1e-6)
        out[s:e] = ((top < p * total - 1e-6).sum(dim=-1) + 1).clamp_max(n)
    return out.reshape(weights.shape[:-1])


def top_share_mask(weights: torch.Tensor, p: float) -> torch.Tensor:
    """bool, same shape: the cells that make up share p of each row (largest first)."""
    w = weights.float()
    k = k_for_share(w, p)
    order = torch.argsort(w, dim=-1, descending=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(w.shape[-1]).expand_as(order).contiguous())
    return ranks < k[..., None]


def row_cells(n: int, window: int | None = None, causal: bool = True) -> torch.Tensor:
    """int64 ``(n,)``: the cells row i computes — in a causal layer min(i + 1, window);
    in a bidirectional one (an encoder) n, or with a window the band |i − j| < window:
    min(i, window − 1) + min(n − 1 − i, window − 1) + 1."""
    i = torch.arange(n, dtype=torch.int64)
    if causal:
        return (i + 1) if window is None else (i + 1).clamp_max(window)
    if window is None:
        return torch.full((n,), n, dtype=torch.int64)
    return i.clamp_max(window - 1) + (n - 1 - i).clamp_max(window - 1) + 1


def uniform_k(n: int, p: float, window: int | None = None, causal: bool = True) -> torch.Tensor:
    """k(p) of a row with no preference (equal weight on each of its c cells): ⌈p·c⌉
    per row ``(n,)``. Its share of the computed cells stays ≈ p whatever n: the
    reference that shows the fall of the real k/n is no artefact of counting."""
    c = row_cells(n, window, causal).double()
    return torch.ceil(p * c - 1e-9).clamp_min(1).to(torch.int64)


def useful_summary(weights: torch.Tensor, p: float, window: int | None = None, causal: bool = True) -> dict:
    """For one head ``(n, n)`` or the heads of one layer ``(H, n, n)`` of a layer with
    its own ``window`` (None: a full layer), causal or both ways (``causal``):

    k̄ = k(p) averaged over the rows of every head given (for several heads, the mean
    of each head's own k̄ — never k of their averaged grid, which matches no head);
    useful ≈ n·k̄; cells = the cells the layer computes (``row_cells`` summed: Σ min(i+1,
    window) in a causal layer, n² in a full bidirectional one);
    share = useful / cells: the one denominator of step 2."""
    n = weights.shape[-1]
    k = k_for_share(weights, p).float()
    mean_k = float(k.mean())
    cells = int(row_cells(n, window, causal).sum())
    return {"n": n, "k": mean_k, "useful": n * mean_k, "cells": cells, "share": n * mean_k / cells,
            "k_rows": k}


def useful_share_by_prefix(weights: torch.Tensor, p: float, lengths: list[int], window: int | None = None,
                           causal: bool = True, prefix=None) -> list:
    """k̄, useful share and the no-preference reference on growing prefixes of the text.
    In a causal model the attention of a prefix is the top-left block of the whole
    text's grid (no row sees later tokens), so each prefix is read off the one run — and
    a row's k(p) is the same in every prefix that holds it (its weights past the diagonal
    are zero), so k is counted once, on the whole grid, and averaged over each prefix's
    rows (as ``useful_summary`` averages: each head's own k̄, then their mean).

    In an encoder (``causal`` False) every row sees the tokens after it, so a prefix's
    attention is its own run: ``prefix(m)`` gives the weights ``(..., m, m)`` of the
    model run on the first m tokens (Analysis.prefix), and each prefix's k is counted on
    those."""
    if not causal and prefix is None:
        raise ValueError("an encoder's prefixes are runs of their own: give prefix(m)")
    n = weights.shape[-1]
    k_rows = k_for_share(weights, p).double() if causal else None  # (..., n): one sort of every row
    out = []
    for m in lengths:
        if 1 <= m <= n:
            if causal:
                k = float(k_rows[..., :m].mean())
            else:  # the whole text is the run given; a shorter prefix, its own run
                k = float(k_for_share(weights if m == n else prefix(m), p).double().mean())
            cells = int(row_cells(m, window, causal).sum())
            u = uniform_k(m, p, window, causal).double()
            out.append({"n": m, "k": k, "share": m * k / cells, "cells": cells,
                        "uniform_k": float(u.mean()), "uniform_share": float(u.sum()) / cells})
    return out


def share_trend(attentions: torch.Tensor, p: float, first: int, windows: list, causal: bool = True,
                first_attentions: torch.Tensor | None = None) -> dict:
    """Whether the useful share (step 2's k̄·n / cells) falls from the first ``first``
    tokens to the whole text, for every layer (its heads' k̄ averaged, as
    ``useful_summary`` does) and for every head of every layer. ``attentions``:
    ``(L, H, n, n)``; ``windows[l]``: layer l's own window (None: full). Returns the
    counts that fell, the totals, each layer's and head's two shares, and k̄ over every
    row of every head (``k_mean``). In an encoder the first tokens' attention is a run
    of its own (``first_attentions``, ``(L, H, first, first)``: Analysis.prefix)."""
    n_layers, n_heads, n, _ = attentions.shape
    if not causal and first_attentions is None:
        raise ValueError("an encoder's first tokens are a run of their own: give first_attentions")
    k_all = k_for_share(attentions, p).double()  # (L, H, n)
    head = attentions[..., :first, :first] if causal else first_attentions
    k_first = k_for_share(head, p).double()  # (L, H, first)
    share_first = torch.empty(n_layers, n_heads, dtype=torch.float64)
    share_all = torch.empty_like(share_first)
    for layer, window in enumerate(windows):
        share_first[layer] = k_first[layer].sum(-1) / row_cells(first, window, causal).sum()
        share_all[layer] = k_all[layer].sum(-1) / row_cells(n, window, causal).sum()
    layer_first, layer_all = share_first.mean(-1), share_all.mean(-1)
    return {"first": first, "n": n, "layers": n_layers, "heads": n_layers * n_heads, "k_mean": float(k_all.mean()),
            "layers_fell": int((layer_all < layer_first).sum()), "heads_fell": int((share_all < share_first).sum()),
            "layer_first": layer_first.tolist(), "layer_all": layer_all.tolist(),
            "head_first": share_first.tolist(), "head_all": share_all.tolist()}


def prefix_lengths(n: int, start: int = 16) -> list[int]:
    """Doubling lengths up to n (n itself last)."""
    out, m = [], start
    while m < n:
        out.append(m)
        m *= 2
    if n >= 1:
        out.append(n)
    return out


def share_kept(weights: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Share of each row's weight on the allowed cells, averaged over rows:
    ``(...)`` from weights ``(..., n, n)`` and a bool pattern ``(n, n)``."""
    n = weights.shape[-1]
    kept = torch.empty(weights.shape[:-1]).reshape(-1)
    allowed_rows = allowed.reshape(-1, n)
    for s, e, w in _rows(weights):
        rows = torch.arange(s, e) % allowed_rows.shape[0]  # which row of the pattern each is
        kept[s:e] = (w * allowed_rows[rows]).sum(dim=-1)
    return kept.reshape(weights.shape[:-1]).mean(dim=-1)


def share_kept_by_pattern(weights: torch.Tensor, window: int, hubs=(), causal: bool = True) -> dict:
    """Per layer and head (``(L, H)``), per layer and overall, for weights ``(L, H, n, n)``."""
    n = weights.shape[-1]
    allowed = patterns.pattern_grid(n, window, patterns.check_hubs(n, hubs), causal)
    per = share_kept(weights, allowed)
    return {"per_head": per, "per_layer": per.mean(dim=-1), "mean": float(per.mean())}


ANCHOR_DISTANCE = 8  # an anchor is scored by the rows at least this far after it


def anchors(weights: torch.Tensor, top: int = 5, min_distance: int = ANCHOR_DISTANCE,
            causal: bool = True) -> list[tuple[int, float]]:
    """Positions that receive the most weight from far away: for column j, the mean
    weight it gets from rows i ≥ j + min_distance (averaged over layers and heads
    when given ``(L, H, n, n)``), for columns with at least a quarter of the text
    after them. In an encoder (``causal`` False) rows on both sides count:
    |i − j| ≥ min_distance. Candidates for hubs: the <bos> sink, an encoder's [CLS]
    and [SEP], separators, punctuation.
    Returns [(position, mean far weight)], best first."""
    n = weights.shape[-1]
    grids = weights.reshape(-1, n, n)
    w = torch.zeros(n, n)
    for g in grids:  # the mean over layers and heads, one grid at a time
        w += g.float()
    w /= max(1, grids.shape[0])
    if n <= min_distance:
        return [(0, float(w[:, 0].mean()))] if n else []
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    far = ((i - j) if causal else (i - j).abs()) >= min_distance
    counts = far.sum(dim=0)
    score = (w * far).sum(dim=0) / counts.clamp_min(1)
    # a mean over a handful of rows is noise: a column needs a quarter of the text after it
    eligible = counts >= max(1, min(n - min_distance, max(min_distance, n // 4)))
    score = torch.where(eligible, score, torch.full_like(score, -1.0))
    best = torch.argsort(score, descending=True)[: min(top, int(eligible.sum()))]
    return [(int(b), float(score[b])) for b in best]


def sink_share(weights: torch.Tensor) -> float:
    """Mean weight that each row after the first puts on the first token, over all
    layers and heads of ``(L, H, n, n)``: how much the sink soaks up."""
    if weights.shape[-1] < 2:
        return 0.0
    return float(weights[..., 1:, 0].float().mean())


def share_to(weights: torch.Tensor, columns, causal: bool = True) -> dict:
    """The share of each row's weight that lands on ``columns`` (positions), for weights
    ``(L, H, n, n)``: averaged over every row, head and layer (``mean``), per layer
    (``per_layer``), and what rows spreading their weight evenly over the cells they see
    would give those columns (``even``: in an encoder each row sees all n, so g / n)."""
    n = weights.shape[-1]
    cols = sorted({int(c) for c in columns if 0 <= int(c) < n})
    if not cols or n == 0:
        return {"mean": 0.0, "per_layer": [0.0] * weights.shape[0], "even": 0.0, "columns": cols}
    got = weights[..., cols].float().sum(dim=-1)  # (L, H, n): each row's weight on those columns
    i = torch.arange(n)
    seen = row_cells(n, None, causal).double()  # cells each row sees in a full layer
    per_row = ((torch.tensor(cols)[None, :] <= i[:, None]) if causal else torch.ones(n, len(cols), dtype=torch.bool))
    even = float((per_row.sum(dim=-1).double() / seen).mean())
    return {"mean": float(got.mean()), "per_layer": got.mean(dim=(1, 2)).tolist(), "even": even, "columns": cols}


ORDER_RUNS = 5  # each order is timed this many times, in turn; the median is shown


def linear_orders(q, k, v, *, scale: float, feature: str, causal: bool, runs: int = ORDER_RUNS) -> dict:
    """Linear attention computed in both orders on the same φ: (φ(Q)φ(K)ᵀ)V with the
    n×n grid, and φ(Q)(φ(K)ᵀV) with the m×d summary. Their largest difference is
    rounding; the sizes show what the second order saves. Each order is timed ``runs``
    times, the two in turn (a first, cold run is one noisy measurement): the medians."""
    times_fast, times_slow = [], []
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        fast = kernels.linear_attention(q, k, v, feature=feature, causal=causal, scale=scale)
        t1 = time.perf_counter()
        slow = kernels.linear_attention_quadratic(q, k, v, feature=feature, causal=causal, scale=scale)
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
    }


# --- output error of each method on the model's own q, k, v --------------------


def relative_error(out: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """‖o − o_exact‖ / ‖o_exact‖ per head: ``(heads,)`` from ``(1, heads, n, d)``."""
    diff = (out.double() - exact.double()).flatten(2).norm(dim=-1)[0]
    return diff / exact.double().flatten(2).norm(dim=-1)[0].clamp_min(1e-30)


def method_outputs(q, k, v, *, scale: float, own_window: int | None, window: int, hubs=(),
                   features_list=tuple(FEATURE_MAPS), device=None, causal: bool = True) -> dict:
    """Outputs of every method tagged ``errors`` (:mod:`attn.methods`) on one layer's
    q, k, v ``(1, heads, n, d)``, plus the exact softmax output over the layer's own
    pattern (causal, or both ways in an encoder; ``own_window`` in a sliding layer) in
    float64. Every method reads as the model does (``causal``).

    ``own`` is the layer's own pattern through the fused kernel, in the device's
    compute dtype (bfloat16 on CUDA); the shortcuts run in float32."""
    device = torch.device(device) if device is not None else q.device
    dtype = compute_dtype(device)
    n = q.shape[2]
    own = methods.own()
    exact = own.reference(q.double(), k.double(), v.double(),
                          methods.Params(window=own_window, scale=scale, causal=causal))
    outs = {}
    for m in methods.tagged(methods.ERRORS, lambda m: m.family != "linear" or m.feature in features_list):
        params = methods.Params(window=own_window if m.family == "own" else window, hubs=hubs, scale=scale,
                                causal=causal)
        if m.fused:
            qd, kd, vd = (t.to(device=device, dtype=dtype) for t in (q, k, v))
            w = params.window
            # the fused kernel itself, with the layer's pattern as its mask
            mask = None if w is None or w >= n else patterns.dense(m.mask(n, params), n, device=device)
            is_causal = causal and mask is None  # a full bidirectional layer: no mask at all
            outs[m.name] = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, is_causal=is_causal,
                                                          scale=scale)
            if dtype != torch.float32:  # the same fused kernel in float32: fusion and precision told apart
                q32, k32, v32 = (t.to(device=device, dtype=torch.float32) for t in (q, k, v))
                outs[methods.in_float32(m.name)] = F.scaled_dot_product_attention(
                    q32, k32, v32, attn_mask=mask, is_causal=is_causal, scale=scale)
        else:
            qf, kf, vf = (t.to(device=device, dtype=torch.float32) for t in (q, k, v))
            outs[m.name] = m.run(qf, kf, vf, params)
    return {"exact": exact, "outputs": {k_: o.float().cpu() for k_, o in outs.items()},
            "dtype": str(dtype).replace("torch.", "")}


def uniform_error(v, exact: torch.Tensor, own_window: int | None, causal: bool = True) -> torch.Tensor:
    """Per head: the error of uniform attention over the layer's own pattern (every
    token it sees weighted equally), the floor a method must beat."""
    n = v.shape[2]
    own_mask = patterns.dense(methods.own().mask(n, methods.Params(window=own_window, causal=causal)), n).double()
    return relative_error((own_mask / own_mask.sum(dim=-1, keepdim=True)) @ v.double(), exact)


def output_errors(q, k, v, *, scale: float, own_window: int | None, window: int, hubs=(),
                  features_list=tuple(FEATURE_MAPS), device=None, causal: bool = True) -> dict:
    """Relative error of each method against exact softmax, per head and averaged,
    keyed by method name. Also the error of uniform attention over the layer's own
    pattern (every visible earlier token weighted equally), keyed ``uniform``: the
    floor a method must beat to have learned anything."""
    res = method_outputs(q, k, v, scale=scale, own_window=own_window, window=window, hubs=hubs,
                         features_list=features_list, device=device, causal=causal)
    exact = res["exact"]
    n = q.shape[2]
    errors = {name: relative_error(o, exact) for name, o in res["outputs"].items()}
    errors["uniform"] = uniform_error(v, exact, own_window, causal)
    return {"per_head": {k_: e.tolist() for k_, e in errors.items()},
            "mean": {k_: float(e.mean()) for k_, e in errors.items()},
            "dtype": res["dtype"], "n": n}


def pattern_error(q, k, v, *, scale: float, own_window: int | None, parts: composition.Composition,
                  causal: bool = True) -> dict:
    """Relative error of softmax over a composed pattern (read as the model reads:
    causal, or both ways in an encoder) against exact softmax over the layer's own
    pattern, per head and averaged, beside uniform attention's (the floor)."""
    exact = methods.own().reference(q.double(), k.double(), v.double(),
                                    methods.Params(window=own_window, scale=scale, causal=causal))
    out = methods.composed().run(q.float(), k.float(), v.float(),
                                 methods.Params(parts=parts, scale=scale, causal=causal))
    err, floor = relative_error(out.double(), exact), uniform_error(v, exact, own_window, causal)
    return {"per_head": err.tolist(), "mean": float(err.mean()), "uniform": float(floor.mean())}


def implied_weights(q, k, *, scale: float, method: str, params: methods.Params) -> torch.Tensor:
    """The attention map a method of the registry implies on one layer ``(heads, n, n)``,
    rows summing to 1 — for drawing (n small). Softmax methods: softmax over their
    pattern; linear methods: φ(q)·φ(k), normalised per row."""
    m = methods.get(method)
    n = q.shape[2]
    if m.family == "linear":
        return kernels.linear_weights(q.float(), k.float(), feature=m.feature, causal=params.causal,
                                      scale=scale)[0]
    allowed = patterns.dense(m.mask(n, params), n)
    scores = (q.double() @ k.double().transpose(-1, -2)) * scale
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)[0].float()


def peak_weights(q, k, *, scale: float, own_window: int | None, window: int, hubs=(),
                 features_list=tuple(FEATURE_MAPS), rows: int = 128, causal: bool = True) -> dict:
    """How sharp each method's weights are on one layer: the largest weight of each
    row, averaged over rows and heads, keyed like :func:`output_errors` (softmax
    methods over their patterns, ``own`` being the exact one; linear methods' φ(q)·φ(k)
    normalised; ``uniform`` = 1 / (cells in the row)). Queries go ``rows`` at a time,
    so no n×n tensor is held (``(heads, rows, n)`` at most)."""
    n = q.shape[2]
    chosen = [m for m in methods.tagged(methods.ERRORS) if m.family != "linear" or m.feature in features_list]
    sums = {m.name: 0.0 for m in chosen}
    qf, kf = q.float(), k.float()
    feats = {m.name: apply_feature_map(m.feature, qf, kf, scale=scale) for m in chosen if m.family == "linear"}
    j = torch.arange(n)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        i = torch.arange(r0, r1)
        scores = (qf[0, :, r0:r1] @ kf[0].transpose(-1, -2)) * scale  # (heads, r, n)
        for m in chosen:
            if m.family == "linear":
                fq, fk = feats[m.name]
                w = fq[0, :, r0:r1] @ fk[0].transpose(-1, -2)
                if causal:
                    w = w.masked_fill(j[None, None, :] > i[None, :, None], 0)
                w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
            else:
                params = methods.Params(window=own_window if m.family == "own" else window, hubs=hubs, causal=causal)
                allowed = m.mask(n, params)(0, 0, i[:, None], j[None, :])  # (r, n): the predicate, these rows only
                w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            sums[m.name] += float(w.amax(dim=-1).sum())
    heads = q.shape[1]
    out = {name: s / (n * heads) for name, s in sums.items()}
    out["uniform"] = float((1.0 / row_cells(n, own_window, causal).double()).mean())
    return out


def median_norms(q, k, scale: float) -> dict:
    """Median ‖q‖ and ‖k‖ over tokens and heads, raw and in the units a feature map
    sees (×√scale): what FAVOR+'s variance, growing like exp(‖q‖² + ‖k‖²), depends on."""
    qn, kn = q.float().norm(dim=-1).median(), k.float().norm(dim=-1).median()
    root = scale ** 0.5
    return {"q": float(qn), "k": float(kn), "q_scaled": float(qn) * root, "k_scaled": float(kn) * root}
