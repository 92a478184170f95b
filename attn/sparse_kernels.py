"""Softmax attention over any pattern (the playground's compositions) in pure torch, block
by block: never an n×n tensor. Its dense twin is :func:`attn.kernels.masked_softmax_reference`
over the pattern's own predicate."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .kernels import BLOCK, GROUP_BYTES, _scale, check_qkv


def sparse_attention(q, k, v, mask_mod, visit: torch.Tensor, hubs=(), *, scale: float | None = None,
                     block: int = BLOCK) -> torch.Tensor:
    """Softmax attention over any pattern (the playground's compositions), in pure torch:
    each block of ``block`` queries against the key blocks ``visit`` marks for it (bool
    blocks × blocks, hub rows and columns left out) and the hub columns, the predicate
    ``mask_mod`` deciding inside; the hub rows are whole rows, O(g·n). Never n×n:
    memory O(n · (blocks visited per query block · block + g)). Every row must hold its
    diagonal cell, and ``visit`` every cell of the pattern outside the hub lines."""
    b, h, n, d = check_qkv(q, k, v)
    s = _scale(q, scale)
    dv = v.shape[-1]
    dev = q.device
    B = block
    nb = math.ceil(n / B)
    if tuple(visit.shape) != (nb, nb):
        raise ValueError(f"visit must be ({nb}, {nb}) blocks, got {tuple(visit.shape)}")
    pad = nb * B - n
    qp = F.pad(q, (0, 0, 0, pad)).reshape(b, h, nb, B, d)
    kp = F.pad(k, (0, 0, 0, pad)).reshape(b, h, nb, B, d)
    vp = F.pad(v, (0, 0, 0, pad)).reshape(b, h, nb, B, dv)
    visit = visit.to(dev)
    counts = visit.sum(dim=-1)
    order = torch.argsort((~visit).to(torch.int8), dim=-1, stable=True)  # visited blocks first
    hubs = tuple(hubs)
    g = len(hubs)
    hub_idx = torch.tensor(hubs, dtype=torch.long, device=dev)
    k_hub, v_hub = k[:, :, hub_idx][:, :, None], v[:, :, hub_idx][:, :, None]  # (b, h, 1, g, ·)
    pos = torch.arange(B, device=dev)
    out = torch.empty(b, h, n, dv, dtype=q.dtype, device=dev)
    per_block = b * h * B * (int(counts.max()) * B + g) * max(q.element_size(), 4) * 3
    group = max(1, GROUP_BYTES.get(dev.type, GROUP_BYTES["cpu"]) // max(per_block, 1))
    for g0 in range(0, nb, group):
        g1 = min(nb, g0 + group)
        G = g1 - g0
        C = int(counts[g0:g1].max())
        idx = order[g0:g1, :C]  # (G, C) key blocks of each query block, padded with unvisited ones
        valid = torch.arange(C, device=dev)[None, :] < counts[g0:g1, None]
        kg = kp[:, :, idx].reshape(b, h, G, C * B, d)
        vg = vp[:, :, idx].reshape(b, h, G, C * B, dv)
        qs = qp[:, :, g0:g1]  # (b, h, G, B, d)
        scores = qs @ kg.transpose(-1, -2)  # (b, h, G, B, C·B)
        qi = (torch.arange(g0, g1, device=dev) * B)[:, None] + pos[None, :]  # (G, B)
        kj = ((idx * B)[:, :, None] + pos[None, None, :]).reshape(G, C * B)
        inside = valid.repeat_interleave(B, dim=1) & (kj < n)
        qc, kc = qi.clamp(max=n - 1), kj.clamp(max=n - 1)
        allowed = mask_mod(0, 0, qc[:, :, None], kc[:, None, :]) & inside[:, None, :]
        if g:  # hub columns whose block this query block does not visit (those it does are counted above)
            seen = visit[g0:g1][:, hub_idx // B]  # (G, g)
            allowed_h = mask_mod(0, 0, qc[:, :, None], hub_idx[None, None, :]) & ~seen[:, None, :]
            scores = torch.cat([scores, qs @ k_hub.transpose(-1, -2)], dim=-1)
            allowed = torch.cat([allowed, allowed_h], dim=-1)
        p = torch.softmax((scores * s).masked_fill_(~allowed, float("-inf")), dim=-1)
        o = p[..., :C * B] @ vg
        if g:
            o = o + p[..., C * B:] @ v_hub
        q1 = min(n, g1 * B)
        out[:, :, g0 * B:q1] = o.reshape(b, h, G * B, dv)[:, :, :q1 - g0 * B]
    if g:  # hub rows: whole rows
        rows = q[:, :, hub_idx] @ k.transpose(-1, -2) * s
        allowed = mask_mod(0, 0, hub_idx[:, None], torch.arange(n, device=dev)[None, :])
        out[:, :, hub_idx] = torch.softmax(rows.masked_fill(~allowed, float("-inf")), dim=-1) @ v
    return out
