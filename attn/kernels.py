"""Full and window (+ hubs) attention on ``(batch, heads, n, d)`` tensors.

Every fast path has a plain, obviously correct twin here (``*_reference``) that
builds the n×n grid; the tests compare the two. The fast paths never allocate
anything of size n×n:

* :func:`window_attention_blocked` — memory O(n·(w + g)) per head: queries in blocks,
  each block against its ``block + w − 1`` candidate keys (causal), with the pattern
  predicate of :mod:`attn.patterns` deciding which candidates count; on the CPU torch's
  fused attention kernel runs the blocks (strided views, one shared mask), elsewhere
  pure torch does. The window returns its log-sum-exp; the hub columns are a small
  dense attention merged in through it, and the hub rows whole rows. (:mod:`attn.backend`
  runs a compiled FlexAttention kernel for the window instead once it has warmed up;
  this module chooses no backend.)

Softmax over any other pattern (the playground's) is :mod:`attn.sparse_kernels`; linear
attention, :mod:`attn.linear_kernels`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import patterns

BLOCK = 64  # query block of the blocked window kernel (the cost model counts with it)
GROUP_BYTES = {"cpu": 4 * 2**20, "cuda": 256 * 2**20}  # scores of one group of blocks: in cache on CPU


# --- checks -----------------------------------------------------------------


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int]:
    """Validate ``(b, h, n, d)`` shapes; return ``(b, h, n, d)``."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor")
        if t.dim() != 4:
            raise ValueError(f"{name} must be (batch, heads, n, d), got shape {tuple(t.shape)}")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            f"q, k, v must share batch and heads: {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d: {q.shape[-1]} != {k.shape[-1]}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v must have the same length: {k.shape[2]} != {v.shape[2]}")
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"self-attention needs as many queries as keys: {q.shape[2]} != {k.shape[2]}")
    if q.shape[2] == 0:
        raise ValueError("attention needs at least one token")
    if q.dtype != k.dtype or k.dtype != v.dtype:
        raise ValueError(f"q, k, v must share a dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    return tuple(q.shape)  # type: ignore[return-value]


def scale_of(q: torch.Tensor, scale: float | None) -> float:
    """The factor q·kᵀ is multiplied by: ``scale``, or 1/√d for None."""
    return q.shape[-1] ** -0.5 if scale is None else float(scale)


_scale = scale_of


# --- full attention ---------------------------------------------------------


def full_attention(q, k, v, *, causal: bool = True, scale: float | None = None) -> torch.Tensor:
    """softmax(s·QKᵀ + causal mask)·V through torch's fused SDPA (flash / memory-efficient
    kernels where the device has them). ``scale=None`` means 1/√d."""
    check_qkv(q, k, v)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=_scale(q, scale))


def masked_softmax_reference(q, k, v, allowed: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Plain dense softmax over the allowed cells of an n×n grid (float64 inside)."""
    s = _scale(q, scale)
    scores = (q.double() @ k.double().transpose(-1, -2)) * s  # (b, h, n, n)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.double()).to(q.dtype)


def full_attention_reference(q, k, v, *, causal: bool = True, scale: float | None = None):
    n = check_qkv(q, k, v)[2]
    allowed = patterns.dense(patterns.pattern(n, None, (), causal), n, device=q.device)
    return masked_softmax_reference(q, k, v, allowed, scale)


# --- window (+ hubs) attention ----------------------------------------------


def window_attention_blocked(
    q, k, v, *, window: int, hubs=(), causal: bool = True, scale: float | None = None,
    block: int | None = None,
) -> torch.Tensor:
    """The blocked window (+ hubs) kernel (see the module docstring): the window alone
    with its log-sum-exp, then the hubs merged in (:func:`merge_hubs`)."""
    n = check_qkv(q, k, v)[2]
    w = patterns.check_window(window)
    hubs = patterns.check_hubs(n, hubs)
    s = _scale(q, scale)
    if not hubs:
        return window_blocked_lse(q, k, v, window=w, causal=causal, scale=s, block=block, with_lse=False)[0]
    out, lse = window_blocked_lse(q, k, v, window=w, causal=causal, scale=s, block=block)
    return merge_hubs(q, k, v, out, lse, window=w, hubs=hubs, causal=causal, scale=s)


# torch's fused CPU attention kernel (what SDPA runs on the CPU), which also returns each
# row's log-sum-exp; None where this torch lacks it (the pure-torch blocks serve then)
_FUSED_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
# queries per block of the fused kernel: at 16k, 18–22 ran fastest at w = 128 (18.8 ms; 16: 21.1,
# 32: 21.8) and 20 at w = 512 (58.6 ms; 16: 64.6, 64: 62.8)
FUSED_BLOCK = 20
# rows per call of the fused kernel: each call's output is small, and copied while in cache
# (one call for the whole text made the allocator's page faults swing a 16k call by ±20 %)
FUSED_ROWS = 4096


def window_blocked_lse(q, k, v, *, window: int, causal: bool = True, scale: float, block: int | None = None,
                       with_lse: bool = True, fused: bool | None = None):
    """Softmax attention over the window alone, and each row's log-sum-exp of its
    scaled scores (float32, ``(b, h, n)``; None unless ``with_lse``): what a merge with
    other keys needs. On the CPU (``fused`` None or True) torch's fused attention kernel
    runs over the blocks (:func:`_window_fused_lse`; it needs values as wide as the
    keys); elsewhere, or with ``fused=False``, the blocks are pure torch
    (:func:`_window_torch_lse`)."""
    if fused is None:
        fused = q.device.type == "cpu" and _FUSED_CPU is not None and v.shape[-1] == q.shape[-1]
    if fused:
        out, lse = _window_fused_lse(q, k, v, window=window, causal=causal, scale=scale, block=block or FUSED_BLOCK)
        return out, (lse if with_lse else None)
    return _window_torch_lse(q, k, v, window=window, causal=causal, scale=scale, block=block or BLOCK,
                             with_lse=with_lse)


def blocked_cells(n: int, window: int, causal: bool = True, device="cpu") -> int:
    """Cells the blocked window kernel computes for one head on this kind of device (its
    window part; the hub merge adds n·g and the hub rows g·n): each block of queries
    against all its candidate keys, and the edges' calls. For the cost model."""
    left, right = window - 1, (0 if causal else window - 1)
    if torch.device(device).type != "cpu" or _FUSED_CPU is None:
        B = max(1, min(BLOCK, n))
        return math.ceil(n / B) * B * (B + left + right)
    first, nb, edges = _fused_plan(n, window, causal, FUSED_BLOCK)
    return nb * FUSED_BLOCK * (FUSED_BLOCK + left + right) + sum((e - a) * (k1 - k0) for a, e, k0, k1 in edges)


def _fused_plan(n: int, window: int, causal: bool, block: int):
    """The fused kernel's calls: from row ``first`` (the first whose candidate keys all
    lie in the text), ``nb`` whole blocks of ``block`` rows; and the edges, rows [a, e)
    against keys [k0, k1) each, the first w − 1 rows and a ragged end."""
    left, right = window - 1, (0 if causal else window - 1)
    first = min(left, n)
    nb = max(0, (n - right - first) // block)
    edges = [(a, e, max(0, a - left), min(n, e + right)) for a, e in ((0, first), (first + nb * block, n)) if e > a]
    return first, nb, edges


def _band_mask(rows: int, keys: int, first_row: int, first_key: int, window: int, causal: bool, dtype, device):
    """The window's additive mask (0 where the pattern allows, −∞ elsewhere) for queries
    first_row … and keys first_key …: from the pattern predicate, on rows × keys cells."""
    i = torch.arange(first_row, first_row + rows, device=device)[:, None]
    j = torch.arange(first_key, first_key + keys, device=device)[None, :]
    allowed = patterns.pattern(max(first_row + rows, first_key + keys), window, (), causal, device=device)(0, 0, i, j)
    return torch.zeros(rows, keys, dtype=dtype, device=device).masked_fill_(~allowed, float("-inf"))


def _window_fused_lse(q, k, v, *, window: int, causal: bool, scale: float, block: int):
    """The window through torch's fused CPU attention kernel, blocks of ``block``
    queries each against its block + w − 1 candidate keys (+ w − 1 more when not
    causal). The blocks are strided views of q, k and v (consecutive blocks' keys
    overlap in memory: nothing is copied), and since the band looks the same from every
    block, one small block × keys mask serves them all. The rows whose candidates would
    run past the text (the first w − 1, and a ragged end) are two more calls with their
    own masks. Memory: the output and one call's (about FUSED_ROWS rows)."""
    b, h, n, d = q.shape
    dv = v.shape[-1]
    bh = b * h
    left, right = window - 1, (0 if causal else window - 1)
    B, L = block, block + left + right  # a block's rows and its candidate keys
    qf, kf, vf = (t.contiguous().reshape(bh, n, t.shape[-1]) for t in (q, k, v))
    out = torch.empty(b, h, n, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(b, h, n, dtype=torch.float32, device=q.device)
    flat, flat_lse = out.view(bh, n, dv), lse.view(bh, n)
    first, nb, edges = _fused_plan(n, window, causal, B)
    mask = _band_mask(B, L, left, 0, window, causal, q.dtype, q.device) if nb else None  # rows at left, keys at 0
    per_call = max(1, FUSED_ROWS // B)  # blocks per call: its output stays small, and in cache for the copy

    def blocks(t, count, rows, at):  # count blocks of rows, consecutive ones B rows apart, from row at
        c = t.shape[-1]
        return t.as_strided((bh, count, rows, c), (n * c, B * c, c, 1), t.storage_offset() + at * c)

    for j0 in range(0, nb, per_call):
        j1 = min(nb, j0 + per_call)
        r0 = first + j0 * B  # the call's first row; its keys start left before it
        o, l_ = _FUSED_CPU(blocks(qf, j1 - j0, B, r0), blocks(kf, j1 - j0, L, r0 - left),
                           blocks(vf, j1 - j0, L, r0 - left), 0.0, False, attn_mask=mask, scale=scale)
        r1 = r0 + (j1 - j0) * B
        flat[:, r0:r1] = o.view(bh, -1, dv)
        flat_lse[:, r0:r1].view(bh, j1 - j0, B).copy_(l_)  # the kernel's log-sum-exps are laid out block-minor
    for a, e, k0, k1 in edges:  # each with its own keys and mask
        mask = _band_mask(e - a, k1 - k0, a, k0, window, causal, q.dtype, q.device)
        o, l_ = _FUSED_CPU(qf[None, :, a:e], kf[None, :, k0:k1], vf[None, :, k0:k1], 0.0, False,
                           attn_mask=mask, scale=scale)
        flat[:, a:e], flat_lse[:, a:e] = o[0], l_[0]
    return out, lse


def _window_torch_lse(q, k, v, *, window: int, causal: bool, scale: float, block: int, with_lse: bool):
    """The window in pure torch: query blocks against their candidate keys, a group of
    blocks at a time (its scores stay in cache), the pattern predicate deciding inside."""
    b, h, n, d = q.shape
    w = window
    dv = v.shape[-1]
    B = max(1, min(block, n))
    nb = math.ceil(n / B)  # query blocks
    left = w - 1
    right = 0 if causal else w - 1
    L = B + left + right  # candidate keys of one query block
    dev = q.device
    mask_mod = patterns.pattern(n, w, (), causal, device=dev)
    out = torch.empty(b, h, n, dv, dtype=q.dtype, device=dev)
    lse = torch.empty(b, h, n, dtype=torch.float32, device=dev) if with_lse else None
    per_block = b * h * B * L * max(q.element_size(), 4) * 3
    group = max(1, GROUP_BYTES.get(q.device.type, GROUP_BYTES["cpu"]) // max(per_block, 1))
    for g0 in range(0, nb, group):
        g1 = min(nb, g0 + group)
        G, q0, q1 = g1 - g0, g0 * B, min(n, g1 * B)
        # this group's queries and candidate keys only, padded where they run past the
        # text (nothing of size n is copied): keys [q0 − left, g1·B + right)
        k0, k1 = q0 - left, g1 * B + right
        lo, hi = max(0, k0), min(n, k1)
        kg = F.pad(k[:, :, lo:hi], (0, 0, lo - k0, k1 - hi))  # (b, h, G·B + left + right, d)
        vg = F.pad(v[:, :, lo:hi], (0, 0, lo - k0, k1 - hi))
        qs = F.pad(q[:, :, q0:q1], (0, 0, 0, G * B - (q1 - q0))).reshape(b, h, G, B, d)  # (b, h, G, B, d)
        starts = torch.arange(g0, g1, device=dev) * B  # (G,)
        qi = starts[:, None] + torch.arange(B, device=dev)[None, :]  # (G, B) absolute query positions
        kj = starts[:, None] - left + torch.arange(L, device=dev)[None, :]  # (G, L) absolute key positions
        scores = qs @ kg.unfold(2, L, B)  # (b, h, G, B, L)
        inside = (kj >= 0) & (kj < n)  # padding keys are never visible
        # the predicate sees clamped positions; padded cells are dropped by `inside`
        # and padded query rows are cut off below
        qc, kc = qi.clamp(max=n - 1), kj.clamp(0, n - 1)
        allowed = mask_mod(0, 0, qc[:, :, None], kc[:, None, :]) & inside[:, None, :]
        scores = scores.mul_(scale).masked_fill_(~allowed, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        o = p @ vg.unfold(2, L, B).transpose(-1, -2)  # (b, h, G, B, dv)
        out[:, :, q0:q1] = o.reshape(b, h, G * B, dv)[:, :, : q1 - q0]
        if lse is not None:  # the largest weight is e^0 / Σ: log Σ e^s = max s − log(max p), max p ≥ 1/L
            top = scores.amax(dim=-1).float() - p.amax(dim=-1).float().log()
            lse[:, :, q0:q1] = top.reshape(b, h, G * B)[:, :, : q1 - q0]
    return out, lse


MERGE_SCORES = 2**20  # hub scores held at a time by the merge (rows × hubs × heads): 4 MiB


def add_hub_columns(q, k, v, out, lse, *, window: int | None = None, hubs, causal: bool, scale: float,
                    inside=None) -> torch.Tensor:
    """Merge the hub columns into softmax attention over the window: ``out`` and ``lse``
    are the window's output and log-sum-exp; the g hub keys are one small dense
    attention (n × g), each hub counted for query i when i may see it and it lies
    outside i's window (inside, the window counted it: once). ``inside``, a mask_mod,
    stands for the window when the rest is another pattern (a composition's parts
    without its hubs). The two parts merge exactly through their log-sum-exps, as
    FlashAttention merges blocks. O(n·g), in chunks of rows that hold MERGE_SCORES
    scores, in place (float32 inside); returns ``out`` (a contiguous copy if it was not)."""
    if not hubs:
        return out
    b, h, n, d = q.shape
    dv = v.shape[-1]
    bh = b * h
    out = out.contiguous()
    idx = torch.tensor(hubs, dtype=torch.long, device=q.device)
    k_hub = k[:, :, idx].reshape(bh, len(hubs), d).transpose(1, 2)  # (bh, d, g)
    v_hub = v[:, :, idx].reshape(bh, len(hubs), dv).float()  # (bh, g, dv)
    i = torch.arange(n, device=q.device)[:, None]
    inside = inside or patterns.pattern(n, window, (), causal, device=q.device)
    seen = ~inside(0, 0, i, idx[None, :])  # outside the window: inside, it counted the hub
    if causal:
        seen &= patterns.causal_mask(0, 0, i, idx[None, :])
    bias = torch.zeros(seen.shape, dtype=q.dtype, device=q.device).masked_fill_(~seen, float("-inf"))  # (n, g)
    flat, qf, part_all = out.view(bh, n, dv), q.reshape(bh, n, d), lse.reshape(bh, n)
    step = max(1, MERGE_SCORES // (bh * len(hubs)))
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        s = torch.baddbmm(bias[r0:r1], qf[:, r0:r1], k_hub, alpha=scale).float()  # (bh, r, g), unseen at −∞
        part = part_all[:, r0:r1]
        top = torch.maximum(part, s.amax(dim=-1))  # (bh, r): the largest of the row's log-weights
        from_window = torch.exp(part - top)
        from_hubs = torch.exp(s.sub_(top[..., None]))
        total = from_hubs.sum(dim=-1).add_(from_window)
        m = flat[:, r0:r1] if out.dtype == torch.float32 else flat[:, r0:r1].float()
        m.mul_(from_window.div_(total)[..., None])
        m.baddbmm_(from_hubs.div_(total[..., None]), v_hub)
        if m.data_ptr() != flat[:, r0:r1].data_ptr():
            flat[:, r0:r1] = m.to(out.dtype)
    return out


def merge_hubs(q, k, v, out, lse, *, hubs, causal: bool, scale: float, window: int | None = None,
               inside=None) -> torch.Tensor:
    """Window (or other parts) + hubs from the rest's output and log-sum-exp: the hub
    columns merged in (:func:`add_hub_columns`), then the hub rows written whole
    (:func:`with_hub_rows`). Every kernel that runs hubs ends here."""
    out = add_hub_columns(q, k, v, out, lse, window=window, hubs=hubs, causal=causal, scale=scale, inside=inside)
    return with_hub_rows(out, q, k, v, hubs, causal=causal, scale=scale)


HUB_ROW_CALLS = 32  # hub rows computed one call each (0.6 ms for 4 hubs at 16k, against 1.4 in one masked call)


def with_hub_rows(out, q, k, v, hubs, *, causal: bool, scale: float) -> torch.Tensor:
    """``out`` with its hub rows written whole: each hub sees every (earlier) key, as
    full attention does (O(g·n), through SDPA: causal, up to HUB_ROW_CALLS hubs, one call
    per hub over the keys up to it, which reads half the keys on average and needs no
    mask); the window kernels compute the window and the hub columns only."""
    if not hubs:
        return out
    n = q.shape[2]
    if causal and len(hubs) <= HUB_ROW_CALLS:  # each hub sees the keys up to itself: one call each, no mask
        for i in hubs:
            out[:, :, i] = F.scaled_dot_product_attention(q[:, :, i:i + 1], k[:, :, :i + 1], v[:, :, :i + 1],
                                                          scale=scale)[:, :, 0].to(out.dtype)
        return out
    idx = torch.tensor(hubs, dtype=torch.long, device=q.device)
    seen = patterns.pattern(n, None, (), causal, device=q.device)(0, 0, idx[:, None], torch.arange(n, device=q.device))
    rows = F.scaled_dot_product_attention(q[:, :, idx], k, v, attn_mask=torch.broadcast_to(seen, (len(hubs), n)),
                                          scale=scale)
    out[:, :, idx] = rows.to(out.dtype)
    return out


def window_attention_reference(q, k, v, *, window: int, hubs=(), causal: bool = True, scale=None):
    n = check_qkv(q, k, v)[2]
    allowed = patterns.dense(patterns.pattern(n, window, hubs, causal), n, device=q.device)
    return masked_softmax_reference(q, k, v, allowed, scale)
