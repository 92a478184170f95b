"""Linear attention on ``(batch, heads, n, d)`` tensors: φ(q)ᵀ(Σ φ(k) vᵀ) / φ(q)ᵀ(Σ φ(k)) in
the O(n·m·d) order — causal through a chunked scan (chunks of ``CHUNK``), memory
O(n·m + m·d), never an n×n tensor — beside its twins that build the grid: the quadratic
order (the same numbers, the other grouping) and the plain reference."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import patterns
from .features import apply_feature_map, feature_functions, working_dtype
from .kernels import check_qkv

CHUNK = 32  # chunk of the causal linear-attention scan (32 and 64 tied within noise at 16k; 32 computes less)
GROUP = 16  # chunks whose features are made at once (16 beat 8 and 32: the group's working set stays in cache)

# denominator guard: max(φ(q)·Σφ(k), ε), for rows where both parts are 0 (ReLU features can
# make them so). ε is the working dtype's smallest normal number: any larger guard leaves rows
# whose denominator is small but real unnormalised (FAVOR+'s shifted exponentials reach 1e-20
# on long texts: a third of the rows of a 679-token text were, with ε = 1e-12; in float64,
# which FAVOR+ is computed in, far smaller)
LINEAR_EPS = torch.finfo(torch.float32).tiny


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).tiny if dtype.is_floating_point else LINEAR_EPS


def _working(feature: str, *xs):
    """The tensors in the dtype the feature map is computed in (attn.features.working_dtype)."""
    wd = working_dtype(feature, xs[0].dtype)
    return tuple(x if x.dtype == wd else x.to(wd) for x in xs)


def linear_attention(
    q, k, v, *, feature: str = "elu", causal: bool = True, feature_dim: int | None = None,
    seed: int = 0, scale: float | None = None, chunk: int = CHUNK,
) -> torch.Tensor:
    """φ(q)ᵀ(Σ_j φ(k_j) v_jᵀ) / max(φ(q)ᵀ Σ_j φ(k_j), ε), in the O(n·m·d) order.

    The sums run over j ≤ i when ``causal``: a chunked scan carries the m×d summary
    from chunk to chunk and handles each chunk's own causal triangle (chunk×chunk)
    directly. φ is applied to q·√s and k·√s (see :mod:`attn.features`)."""
    check_qkv(q, k, v)
    out_dtype = v.dtype
    q, k, v = _working(feature, q, k, v)
    phi_q, phi_k = feature_functions(feature, q, k, scale=scale, feature_dim=feature_dim, seed=seed)
    if not causal:
        fq, fk = phi_q(q), phi_k(k)  # (b, h, n, m)
        summary = fk.transpose(-1, -2) @ v  # (b, h, m, dv): Σ φ(k) vᵀ
        norm = fk.sum(dim=-2)  # (b, h, m): Σ φ(k)
        num = fq @ summary  # (b, h, n, dv)
        den = (fq @ norm[..., None]).clamp_min(_eps(v.dtype))  # (b, h, n, 1)
        return (num / den).to(out_dtype)
    return _causal_linear_scan(q, k, v, phi_q, phi_k, chunk).to(out_dtype)


def _causal_linear_scan(q, k, v, phi_q, phi_k, chunk: int, group: int = GROUP) -> torch.Tensor:
    """Tokens in groups of ``group`` chunks of C: φ applied to the group only (the
    working set stays in cache), each chunk's own causal triangle directly (C×C), the
    earlier chunks through the running m×(d+1) summary (Σφ(k)vᵀ beside Σφ(k): a
    column of ones appended to v gives numerator and denominator in one product, and
    the triangle's product and the summary's accumulate into it: one batched
    multiply-add)."""
    b, h, n, _ = q.shape
    dv = v.shape[-1]
    C = max(1, min(chunk, n))
    out = torch.empty(b, h, n, dv, dtype=v.dtype, device=v.device)
    state = None  # (b, h, m, dv+1): summary of every earlier group
    span = C * group
    for t0 in range(0, n, span):
        t1 = min(n, t0 + span)
        G = math.ceil((t1 - t0) / C)
        pad = G * C - (t1 - t0)
        fq, fk = phi_q(q[:, :, t0:t1]), phi_k(k[:, :, t0:t1])  # (b, h, r, m)
        m = fq.shape[-1]
        va = v.new_empty(b, h, G * C, dv + 1)  # v and a column of ones; padding rows zero
        va[:, :, : t1 - t0, :dv] = v[:, :, t0:t1]
        va[..., dv] = 1.0
        if pad:
            fq, fk = F.pad(fq, (0, 0, 0, pad)), F.pad(fk, (0, 0, 0, pad))
            va[:, :, t1 - t0:] = 0.0
        q_ = fq.reshape(b * h * G, C, m)
        k_ = fk.reshape(b * h * G, C, m)
        v_ = va.view(b * h * G, C, dv + 1)
        inner = torch.bmm(q_, k_.transpose(1, 2)).tril_()  # each chunk's own causal triangle
        kv = torch.bmm(k_.transpose(1, 2), v_).view(b, h, G, m, dv + 1)  # each chunk's own summary
        running = kv.cumsum(dim=2)
        before = torch.empty_like(kv)  # every earlier chunk's: the running sum, shifted by one
        before[:, :, 0] = 0.0 if state is None else state
        before[:, :, 1:] = running[:, :, :-1]
        if state is not None:
            before[:, :, 1:] += state[:, :, None]
        num = torch.baddbmm(torch.bmm(inner, v_), q_, before.view(b * h * G, m, dv + 1))
        num = num.view(b, h, G * C, dv + 1)[:, :, : t1 - t0]
        torch.div(num[..., :dv], num[..., dv:].clamp_min(_eps(v.dtype)), out=out[:, :, t0:t1])
        last = running[:, :, -1]
        state = last if state is None else state + last
    return out


def linear_attention_quadratic(
    q, k, v, *, feature: str = "elu", causal: bool = True, feature_dim: int | None = None,
    seed: int = 0, scale: float | None = None,
) -> torch.Tensor:
    """The same φ in the other order: build the n×n grid A = φ(Q)φ(K)ᵀ (lower
    triangle when causal), then (A·V) / (A·1). Step 5 shows it beside the linear order."""
    n = check_qkv(q, k, v)[2]
    out_dtype = v.dtype
    q, k, v = _working(feature, q, k, v)
    fq, fk = apply_feature_map(feature, q, k, scale=scale, feature_dim=feature_dim, seed=seed)
    grid = fq @ fk.transpose(-1, -2)  # (b, h, n, n)
    if causal:
        grid = grid.masked_fill(~patterns.dense(patterns.causal_mask, n, device=q.device), 0.0)
    return ((grid @ v) / grid.sum(dim=-1, keepdim=True).clamp_min(_eps(v.dtype))).to(out_dtype)


def linear_attention_reference(q, k, v, **kwargs) -> torch.Tensor:
    """float64 version of :func:`linear_attention_quadratic`, for the tests."""
    out = linear_attention_quadratic(q.double(), k.double(), v.double(), **kwargs)
    return out.to(q.dtype)


def linear_weights(q, k, *, feature="elu", causal=True, feature_dim=None, seed=0, scale=None):
    """The attention map a linear method implies, rows normalised: (b, h, n, n).
    For drawing small grids only."""
    n = q.shape[2]
    out_dtype = q.dtype
    q, k = _working(feature, q, k)
    fq, fk = apply_feature_map(feature, q, k, scale=scale, feature_dim=feature_dim, seed=seed)
    grid = fq @ fk.transpose(-1, -2)
    if causal:
        grid = grid.masked_fill(~patterns.dense(patterns.causal_mask, n, device=q.device), 0.0)
    return (grid / grid.sum(dim=-1, keepdim=True).clamp_min(_eps(grid.dtype))).to(out_dtype)
