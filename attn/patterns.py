"""Which (query, key) pairs each attention method computes: the one definition.

A pattern is a *mask_mod* in FlexAttention's signature,
``mask_mod(b, h, q_idx, kv_idx) -> bool``, built from tiny predicates joined with
:func:`or_masks` / :func:`and_masks` (as attention-gym does). The same predicate

* draws small grids (:func:`dense`),
* is the dense reference in the tests,
* builds FlexAttention block masks and the masks of the blocked kernel
  (:mod:`attn.kernels` evaluates it on the candidate cells of each block only),

so there is never a second definition of "which pairs". :func:`cells` counts the
pairs with a closed form, and the tests check it against the predicate.

Rules (i = query position, j = key position):

* causal: ``j <= i``;
* window w: ``|i - j| < w`` (with causal: ``0 <= i - j < w``, the w most recent
  tokens, i itself included);
* hubs: a hub row sees every key, a hub column is seen by every query; causality
  still applies when it is on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

MaskMod = Callable[..., torch.Tensor]


# --- the predicates ---------------------------------------------------------


def causal_mask(b, h, q_idx, kv_idx):
    """A token looks only backwards: ``j <= i``."""
    return q_idx >= kv_idx


def full_mask(b, h, q_idx, kv_idx):
    """Every pair (bidirectional full attention)."""
    return q_idx >= 0  # True, in the broadcast shape FlexAttention expects


def window_mask(window) -> MaskMod:
    """``|i - j| < window``; ``window`` may be an int or a 0-d tensor."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() < window

    return mask_mod


def recent_mask(window) -> MaskMod:
    """``0 <= i - j < window``: the causal window in one predicate (two comparisons; the
    same pairs as ``window_mask & causal_mask``, cheaper in a compiled kernel)."""

    def mask_mod(b, h, q_idx, kv_idx):
        back = q_idx - kv_idx
        return (back >= 0) & (back < window)

    return mask_mod


def hub_mask(is_hub: torch.Tensor) -> MaskMod:
    """A hub row sees every key; a hub column is seen by every query.

    ``is_hub`` is a bool tensor of length n (see :func:`hub_flags`)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return is_hub[q_idx] | is_hub[kv_idx]

    return mask_mod


def or_masks(*mods: MaskMod) -> MaskMod:
    def mask_mod(b, h, q_idx, kv_idx):
        out = mods[0](b, h, q_idx, kv_idx)
        for m in mods[1:]:
            out = out | m(b, h, q_idx, kv_idx)
        return out

    return mask_mod


def and_masks(*mods: MaskMod) -> MaskMod:
    def mask_mod(b, h, q_idx, kv_idx):
        out = mods[0](b, h, q_idx, kv_idx)
        for m in mods[1:]:
            out = out & m(b, h, q_idx, kv_idx)
        return out

    return mask_mod


# --- arguments --------------------------------------------------------------


def whole_number(value, name: str, why: str) -> int:
    """``value`` as a whole number ≥ 1 (an int, or what equals one: 4.0), else ``ValueError``
    naming it, with ``why`` it cannot be less than 1; a bool is no number here."""
    bad = f"{name} must be a whole number >= 1, got {value!r}"
    if isinstance(value, bool):
        raise ValueError(bad)
    if not isinstance(value, int):
        try:
            as_int = int(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(bad) from None
        if as_int != value:
            raise ValueError(bad)
        value = as_int
    if value < 1:
        raise ValueError(f"{name} must be >= 1 ({why}), got {value}")
    return value


def check_window(window) -> int:
    return whole_number(window, "window", "a token always sees itself")


def check_hubs(n: int, hubs: Iterable[int] | None) -> tuple[int, ...]:
    """Sorted, de-duplicated hub positions; ``ValueError`` when one is outside 0..n-1."""
    if hubs is None:
        return ()
    out = set()
    for h in hubs:
        if isinstance(h, bool) or int(h) != h:
            raise ValueError(f"hub positions must be whole numbers, got {h!r}")
        h = int(h)
        if not 0 <= h < n:
            raise ValueError(f"hub position {h} is outside the text (0..{n - 1})")
        out.add(h)
    return tuple(sorted(out))


def hub_flags(n: int, hubs: Sequence[int], device=None) -> torch.Tensor:
    """Bool tensor of length n, True at each hub position."""
    flags = torch.zeros(n, dtype=torch.bool, device=device)
    if hubs:
        flags[torch.as_tensor(list(hubs), dtype=torch.long, device=device)] = True
    return flags


# --- patterns ---------------------------------------------------------------


def pattern(
    n: int,
    window: int | None = None,
    hubs: Iterable[int] = (),
    causal: bool = True,
    *,
    device=None,
    window_tensor: bool = False,
) -> MaskMod:
    """The mask_mod of full (``window=None``), window, or window + hubs attention.

    ``window_tensor=True`` captures the window as a 0-d tensor (so a compiled
    FlexAttention does not recompile for each window)."""
    parts = []
    if window is not None:
        window = check_window(window)
        w = torch.tensor(window, device=device) if window_tensor else window
        hubs = check_hubs(n, hubs)
        if causal and not hubs:
            return recent_mask(w)
        visible = window_mask(w)
        if hubs:
            visible = or_masks(visible, hub_mask(hub_flags(n, hubs, device=device)))
        parts.append(visible)
    elif hubs:
        check_hubs(n, hubs)  # validated, but full attention already sees everything
    if causal:
        parts.append(causal_mask)
    if not parts:
        return full_mask
    return parts[0] if len(parts) == 1 else and_masks(*parts)


def dense(mask_mod: MaskMod, n_q: int, n_kv: int | None = None, device=None) -> torch.Tensor:
    """Evaluate a pattern on every cell: bool ``(n_q, n_kv)``. For drawing small grids
    and for reference tests only; the kernels never call this."""
    n_kv = n_q if n_kv is None else n_kv
    q_idx = torch.arange(n_q, device=device)[:, None]
    kv_idx = torch.arange(n_kv, device=device)[None, :]
    return torch.broadcast_to(mask_mod(0, 0, q_idx, kv_idx), (n_q, n_kv))


def rows_of(mask_mod: MaskMod, n_kv: int):
    """A pattern read a block of rows at a time: a function of row positions (int64
    ``(r,)``), and optionally a band of columns [lo, hi), giving their bool rows
    ``(r, hi − lo)`` — never the whole grid."""
    def rows(positions: torch.Tensor, lo: int = 0, hi: int | None = None) -> torch.Tensor:
        """The rows at ``positions``, on the columns [lo, hi) (default: every column)."""
        hi = n_kv if hi is None else hi
        kv_idx = torch.arange(lo, hi)[None, :]
        return torch.broadcast_to(mask_mod(0, 0, positions[:, None], kv_idx), (positions.numel(), hi - lo))

    return rows


def pattern_grid(n: int, window=None, hubs=(), causal=True) -> torch.Tensor:
    """Shortcut: the dense bool grid of a pattern (small n only)."""
    return dense(pattern(n, window, hubs, causal), n)


def cells(n: int, window: int | None = None, hubs: Iterable[int] = (), causal: bool = True) -> int:
    """Exact number of (query, key) pairs the pattern computes, in O(n log g) time.

    full: n² (bidirectional) or n(n+1)/2 (causal). Window + hubs: per non-hub row
    the band ``min(i+1, w)`` (causal) plus the hubs outside it; per hub row the
    whole (causal) row. Equals ``pattern_grid(...).sum()``, which the tests check."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n == 0:
        return 0
    if window is None or window >= n:
        check_hubs(n, hubs)
        return n * (n + 1) // 2 if causal else n * n
    w = check_window(window)
    hubs_t = torch.tensor(check_hubs(n, hubs), dtype=torch.long)
    i = torch.arange(n, dtype=torch.long)
    if causal:
        lo = (i - w + 1).clamp_min(0)
        band = i - lo + 1
        # hubs j <= i - w (strictly before the band; later hubs are in the future)
        outside = torch.searchsorted(hubs_t, lo, right=False)
        hub_row = i + 1
    else:
        lo = (i - w + 1).clamp_min(0)
        hi = (i + w - 1).clamp_max(n - 1)
        band = hi - lo + 1
        before = torch.searchsorted(hubs_t, lo, right=False)
        after = len(hubs_t) - torch.searchsorted(hubs_t, hi, right=True)
        outside = before + after
        hub_row = torch.full_like(i, n)
    per_row = band + outside
    if len(hubs_t):
        is_hub = hub_flags(n, hubs_t.tolist())
        per_row = torch.where(is_hub, hub_row, per_row)
    return int(per_row.sum())


def linear_summary_size(m: int, d_v: int) -> int:
    """Numbers held by linear attention's running summary: the m×d_v matrix Σφ(k)vᵀ
    plus the m-vector Σφ(k)."""
    return m * d_v + m


# --- the playground's parts ------------------------------------------------------
#
# Each part of a composed pattern is one predicate here and one entry of
# ``attn.composition.PARTS``. Every setting is a 0-d tensor (or a tensor of flags) that
# has a neutral value switching the part off (a window of 0, one random block of 0…),
# so a compiled FlexAttention kernel serves every composition without recompiling.


def diagonal_mask(b, h, q_idx, kv_idx):
    """A token sees itself: the composition always has it, so no row is empty."""
    return q_idx == kv_idx


def dilated_mask(count, stride) -> MaskMod:
    """Every ``stride``-th token, ``count`` of them on each side (itself the first):
    ``|i − j| = m·stride`` with ``0 ≤ m < count``. ``count=0``: no pair."""

    def mask_mod(b, h, q_idx, kv_idx):
        d = (q_idx - kv_idx).abs()
        return (d % stride == 0) & (d < count * stride)

    return mask_mod


def block_local_mask(size) -> MaskMod:
    """Within fixed blocks of ``size`` tokens: ``i // size == j // size``. ``size=1``
    is the diagonal alone (the part switched off)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return q_idx // size == kv_idx // size

    return mask_mod


def random_block_mask(table: torch.Tensor, size) -> MaskMod:
    """BigBird's random blocks: query block ``i // size`` sees key block ``j // size``
    where ``table`` (bool, blocks × blocks) says so (see :func:`random_table`)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return table[q_idx // size, kv_idx // size]

    return mask_mod


def causal_switch(causal: torch.Tensor) -> MaskMod:
    """``j <= i`` when the 0-d bool tensor ``causal`` is True, every pair otherwise."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) | ~causal

    return mask_mod


def random_table(n: int, size: int, count: int, seed: int, device=None) -> torch.Tensor:
    """bool ``(u, u)`` with u = ⌈n / size⌉ (at least 2): for each query block, ``count``
    other key blocks drawn without replacement, from a CPU generator seeded with
    ``seed`` (the same seed gives the same blocks on any machine). The draw does not
    depend on causality: a causal pattern keeps the drawn blocks that lie behind."""
    u = max(2, -(-n // max(1, size)))
    table = torch.zeros(u, u, dtype=torch.bool)
    count = min(int(count), u - 1)
    if count > 0:
        g = torch.Generator().manual_seed(int(seed))
        keys = torch.rand(u, u, generator=g)
        keys.fill_diagonal_(2.0)  # never its own block (the local parts cover that)
        table.scatter_(1, keys.topk(count, dim=1, largest=False).indices, True)
    return table.to(device)


def block_bounds(n: int, block: int, device=None):
    """First and last position of each block of ``block`` tokens."""
    starts = torch.arange(0, n, block, device=device)
    return starts, torch.clamp(starts + block - 1, max=n - 1)


def band_blocks(q_lo, q_hi, k_lo, k_hi, window: int) -> torch.Tensor:
    """Block pairs holding some ``|i − j| < window`` (None for window 0)."""
    return (k_lo <= q_hi + (window - 1)) & (k_hi >= q_lo - (window - 1))


def dilated_blocks(q_lo, q_hi, k_lo, k_hi, count: int, stride: int) -> torch.Tensor:
    """Block pairs holding some ``i − j = m·stride`` with ``|m| < count`` (exact)."""
    reach = (count - 1) * stride
    lo = torch.clamp(q_lo - k_hi, min=-reach)
    hi = torch.clamp(q_hi - k_lo, max=reach)
    first = -torch.div(-lo, stride, rounding_mode="floor") * stride  # the first multiple of stride ≥ lo
    return first <= hi


def local_blocks(q_lo, q_hi, k_lo, k_hi, size: int) -> torch.Tensor:
    """Block pairs where a query's local block of ``size`` tokens meets the key block."""
    lo = torch.div(q_lo, size, rounding_mode="floor") * size
    hi = torch.div(q_hi, size, rounding_mode="floor") * size + size - 1
    return (k_lo <= hi) & (k_hi >= lo)


def random_blocks(table: torch.Tensor, size: int, n: int, block: int) -> torch.Tensor:
    """Block pairs (of ``block`` tokens) meeting a random (query unit, key unit) pair of
    ``table`` (units of ``size`` tokens)."""
    nb = -(-n // block)
    visit = torch.zeros(nb, nb, dtype=torch.bool, device=table.device)
    uq, uk = table.nonzero(as_tuple=True)
    keep = (uq * size < n) & (uk * size < n)
    uq, uk = uq[keep], uk[keep]
    span = -(-size // block) + 1  # blocks one unit can touch
    first_q, last_q = (uq * size) // block, (torch.clamp((uq + 1) * size, max=n) - 1) // block
    first_k, last_k = (uk * size) // block, (torch.clamp((uk + 1) * size, max=n) - 1) // block
    for a in range(span):
        for c in range(span):
            qb, kb = first_q + a, first_k + c
            ok = (qb <= last_q) & (kb <= last_k)
            visit[qb[ok], kb[ok]] = True
    return visit


def count_cells(n: int, mask_mod: MaskMod, visit: torch.Tensor, block: int, pairs_at_once: int = 256) -> int:
    """Exact count of the pattern's cells: the predicate evaluated on every cell of the
    visited block pairs (``visit``, bool blocks × blocks, must hold every cell of the
    pattern). O(visited blocks · block²), never n² for a sparse pattern."""
    qb, kb = visit.nonzero(as_tuple=True)
    r = torch.arange(block, device=visit.device)
    total = 0
    for s in range(0, len(qb), pairs_at_once):
        qi = (qb[s:s + pairs_at_once] * block)[:, None, None] + r[None, :, None]  # (P, B, 1)
        kj = (kb[s:s + pairs_at_once] * block)[:, None, None] + r[None, None, :]  # (P, 1, B)
        inside = (qi < n) & (kj < n)
        total += int((mask_mod(0, 0, qi.clamp(max=n - 1), kj.clamp(max=n - 1)) & inside).sum())
    return total
