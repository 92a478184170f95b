"""Compiled FlexAttention: it compiles and it calls, and keeps what is compiled.

The first compile of ``torch.compile(flex_attention, dynamic=True)`` takes 10–20 s
(it needs a C++ compiler on CPU). A request never waits for it: :func:`is_ready`
is False until a warm-up for that kind of call (device, dtype, head sizes, causal)
has finished, and :mod:`attn.backend` (which chooses the kernel, and supplies the
self-check each warm-up runs against the blocked kernel) uses the blocked kernel
meanwhile. The app starts :func:`attn.backend.start_warmup` once the server is idle.

The block mask is built from kv-block lists (``BlockMask.from_kv_blocks``) — the
band of blocks around the diagonal, split into partial blocks (the pattern predicate
of :mod:`attn.patterns` decides inside) and full ones (no predicate) — so building it
never scans the n² pairs. With hubs, the hub keys are gathered into their own key
block before the text's: each hub costs one column of cells, not a column of blocks.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from . import patterns

FLEX_BLOCK = 64  # 64 beat 128 and 32 on useful GFLOP/s here (less of each block wasted on the band's edges)
# key blocks of the hub kernel: the hub keys take the first (up to 32 hubs), so a block of
# 32 wastes less on padding than one of 64, and costs the band nothing measurable
HUB_KV_BLOCK = 32
HUB_CHUNK = 4096  # queries per call of the hub kernel: its copy of the keys and values it reaches stays small

_lock = threading.Lock()
# One compiled-flex call or compile at a time: dynamo is not thread-safe, and a call
# that arrives while another thread compiles can fall back to the unfused flex
# attention, which builds the n×n scores. Requests never wait on it (try_window_attention).
_busy = threading.Lock()
_compiled = None
_ready: set[tuple] = set()  # signatures whose compile has finished
_failed: dict[tuple, str] = {}
_warming: set[tuple] = set()
_log: list[str] = []
_threads: list[threading.Thread] = []
_warned = False  # the first failure is logged as a warning; every later one goes to _log only

logger = logging.getLogger(__name__)


def _signature(q: torch.Tensor, v: torch.Tensor, causal: bool, hubs: bool, kind: str = "window") -> tuple:
    """What a compiled kernel is specialised on. Dynamic shapes still specialise
    sizes of 1, so a batch or head count of 1 is part of the signature; with and
    without hubs are two kernels (the hub test costs a quarter of the speed). The
    playground's compositions (``kind="pattern"``) are one kernel for every part,
    setting and causality: all of them are tensors its mask closes over."""
    b, h = q.shape[:2]
    if kind == "pattern":
        return (q.device.type, q.dtype, q.shape[-1], v.shape[-1], "pattern", b == 1, h == 1)
    return (q.device.type, q.dtype, q.shape[-1], v.shape[-1], bool(causal), bool(hubs), b == 1, h == 1)


def available() -> bool:
    """Can FlexAttention compile here? (CPU needs a C++ compiler.)"""
    if torch.cuda.is_available():
        return True
    return shutil.which("g++") is not None or shutil.which("c++") is not None


def _get_compiled():
    global _compiled
    with _lock:
        if _compiled is None:
            # Past the recompile limit dynamo would silently run the unfused flex
            # attention, which builds the n×n scores: fail instead, and the caller
            # falls back to the blocked kernel.
            torch._dynamo.config.fail_on_recompile_limit_hit = True
            # Each signature (head size, dtype, hubs or not, batch/heads of 1…) is one
            # more compiled entry of the same function, and dynamo guards on the mask's
            # closures: room for the few the app and the benchmark warm, and the tests'.
            _compiled = torch.compile(flex_attention, dynamic=True, recompile_limit=64)
        return _compiled


def is_ready(q: torch.Tensor, v: torch.Tensor, causal: bool, hubs: bool = False, kind: str = "window") -> bool:
    """True when a compiled kernel serves this call without compiling again.
    Texts of one or two blocks stay on the blocked kernel (a single query block is
    a shape the compiler specialises too, and small grids gain nothing)."""
    return q.shape[2] > 2 * FLEX_BLOCK and _signature(q, v, causal, hubs, kind) in _ready


def has_ready(device_type: str, kind: str = "window") -> bool:
    """Whether some compiled kernel of this kind (window or pattern) is warm on this kind
    of device."""
    return any(sig[0] == device_type and (sig[4] == "pattern") == (kind == "pattern") for sig in _ready)


def status() -> dict:
    """For the app and the benchmark: what is compiled, warming or failed."""
    return {
        "available": available(),
        "ready": sorted(str(s) for s in _ready),
        "warming": sorted(str(s) for s in _warming),
        "failed": {str(k): v for k, v in _failed.items()},
        "log": list(_log),
    }


def band_lists(n: int, window: int, causal: bool, q_block: int = FLEX_BLOCK, kv_block: int = FLEX_BLOCK,
               first: int = 0, keys: tuple[int, int] | None = None, device=None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The window's block pairs as two bool (query blocks × key blocks) grids: the
    partial ones (the predicate decides inside) and the full ones (every pair allowed:
    the compiled kernel skips the predicate there). ``n`` queries at positions 0 … n−1;
    the key sequence holds ``first`` other keys (the hub keys' blocks), then the text's
    keys at positions ``keys = (start, end)`` (default: the same n positions). Built from
    block ranges, in O((n/block)²) small integers, never from the n² cells."""
    k_start, k_end = keys if keys is not None else (0, n)
    q_lo, q_hi = patterns.block_bounds(n, q_block, device)
    index = torch.arange(0, first + k_end - k_start, kv_block, device=device)  # each key block's first index
    k_lo = index - first + k_start
    k_hi = torch.clamp(k_lo + kv_block - 1, max=k_end - 1)
    q_lo, q_hi, k_lo, k_hi, index = q_lo[:, None], q_hi[:, None], k_lo[None, :], k_hi[None, :], index[None, :]
    real = index >= first  # the hub keys' blocks are not the band's
    band = patterns.band_blocks(q_lo, q_hi, k_lo, k_hi, window) & real
    # whole blocks only: the last block of the queries or of the keys may be short
    whole = (q_lo + q_block - 1 < n) & (k_lo + kv_block - 1 < k_end) & real
    if causal:
        band = band & (k_lo <= q_hi)
        full = whole & (q_lo >= k_hi) & (q_hi - k_lo < window)
    else:
        full = whole & (torch.maximum(q_hi - k_lo, k_hi - q_lo) < window)
    return band & ~full, full


def computed_cells(n: int, window: int, hubs: tuple[int, ...] = (), causal: bool = True) -> int:
    """Cells the compiled window (+ hubs) kernel computes for one head: every cell of the
    blocks it visits (64 × 64; with hubs 64 × 32 over all its chunks of queries, the
    hub keys' blocks among them). For the cost model."""
    if not hubs:
        partial, full = band_lists(n, window, causal)
        return int((partial | full).sum()) * FLEX_BLOCK * FLEX_BLOCK
    total = 0
    for a, e, k0, k1 in hub_chunks(n, window, causal):
        partial, full = _hub_lists(e - a, window, len(hubs), causal, (k0 - a, k1 - a))
        total += int((partial | full).sum()) * FLEX_BLOCK * HUB_KV_BLOCK
    return total


def kv_lists(visit: torch.Tensor):
    """bool (blocks × blocks) → ``(kv_num_blocks, kv_indices)`` as ``BlockMask.from_kv_blocks``
    takes them: per query block, its visited key blocks first, in increasing order."""
    counts = visit.sum(dim=-1).to(torch.int32)
    order = torch.argsort((~visit).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts[None, None], order[None, None]


def hub_prefix(g: int) -> int:
    """Key positions the hub keys take before the text's in the hub kernel: g, rounded up
    to whole blocks of HUB_KV_BLOCK (padding never seen)."""
    return HUB_KV_BLOCK * -(-g // HUB_KV_BLOCK)


def hub_chunks(n: int, window: int, causal: bool) -> list[tuple[int, int, int, int]]:
    """The hub kernel's calls: queries [a, e) in chunks of about HUB_CHUNK (whole blocks,
    as even as can be), each with the text keys [k0, k1) its window can reach (its own
    copy of them follows the hub keys)."""
    calls = max(1, round(n / HUB_CHUNK))  # chunks of HUB_CHUNK / 2 or more: never a one-block chunk
    bounds = [0] + [FLEX_BLOCK * round(i * n / calls / FLEX_BLOCK) for i in range(1, calls)] + [n]
    return [(a, e, max(0, a - (window - 1)), e if causal else min(n, e + window - 1))
            for a, e in zip(bounds, bounds[1:])]


def _hub_lists(n_q: int, window: int, g: int, causal: bool, keys: tuple[int, int], device=None):
    """One hub-kernel call's block pairs: the band over its text keys (positions relative
    to its first query), and every query block visiting the hub keys' blocks."""
    P = hub_prefix(g)
    partial, full = band_lists(n_q, window, causal, FLEX_BLOCK, HUB_KV_BLOCK, first=P, keys=keys, device=device)
    partial[:, : P // HUB_KV_BLOCK] = True
    return partial, full


def block_mask(n: int, window: int, causal: bool, device, block: int = FLEX_BLOCK) -> BlockMask:
    """The window kernel's block mask. The window is a tensor, so one compiled kernel
    serves every window."""
    partial, full = band_lists(n, window, causal, block, block, device=device)
    mask_mod = patterns.pattern(n, window, (), causal, device=device, window_tensor=True)
    return _from_lists(partial, full, mask_mod, (block, block), (n, n))


def hub_block_mask(n: int, window: int, hubs: tuple[int, ...], causal: bool, chunk: tuple[int, int, int, int],
                   device) -> BlockMask:
    """The block mask of one hub-kernel call (``chunk``: queries [a, e), text keys
    [k0, k1)). Its keys are the g hub keys (padded to whole blocks), then the text keys
    k0 … k1−1: the hub columns cost one small block per query block, not a column of
    blocks each. A hub key counts for query i when i may see it (causal) and it lies
    outside i's window (inside, the window counts it: once). The window, the hub
    positions and their number, and the chunk's place are tensors: one compiled kernel
    serves every setting and every chunk."""
    a, e, k0, k1 = chunk
    g, P = len(hubs), hub_prefix(len(hubs))
    partial, full = _hub_lists(e - a, window, g, causal, (k0 - a, k1 - a), device)
    inner = patterns.pattern(n, window, (), causal, device=device, window_tensor=True)
    count, first = (torch.tensor(x, device=device) for x in (g, P))
    q_at, k_at = torch.tensor(a, device=device), torch.tensor(k0 - P, device=device)  # positions in the text
    where = torch.zeros(P, dtype=torch.long, device=device)
    where[:g] = torch.tensor(hubs, dtype=torch.long, device=device)

    def mask_mod(b, h, q_idx, kv_idx):
        i = q_idx + q_at
        in_window = (kv_idx >= first) & inner(b, h, i, kv_idx + k_at)
        hub = where[torch.clamp(kv_idx, max=first - 1)]
        seen = ~inner(b, h, i, hub)  # outside i's window: inside, the window counts it
        if causal:
            seen = seen & patterns.causal_mask(b, h, i, hub)
        return in_window | ((kv_idx < count) & seen)

    return _from_lists(partial, full, mask_mod, (FLEX_BLOCK, HUB_KV_BLOCK), (e - a, P + k1 - k0))


def _from_lists(partial, full, mask_mod, sizes, lengths):
    counts, order = kv_lists(partial)
    full_counts, full_order = kv_lists(full)
    return BlockMask.from_kv_blocks(counts, order, full_counts, full_order, BLOCK_SIZE=sizes, mask_mod=mask_mod,
                                    seq_lengths=lengths)


def window_attention(q, k, v, *, window: int, hubs=(), causal=True, scale=None):
    """Window (+ hubs) attention through compiled FlexAttention (compiles on first use;
    waits for any compile in progress)."""
    with _busy:
        return call_window(q, k, v, window, hubs, causal, scale)


def try_window_attention(q, k, v, *, window: int, hubs=(), causal=True, scale=None):
    """The same, or None at once when a compile (a warm-up) is in progress."""
    if not _busy.acquire(blocking=False):
        return None
    try:
        return call_window(q, k, v, window, hubs, causal, scale)
    finally:
        _busy.release()


def sparse_attention(q, k, v, mask_mod, visit: torch.Tensor, *, scale=None):
    """Any pattern (the playground's compositions) through compiled FlexAttention: the
    block mask from the visited block pairs ``visit`` (bool blocks × blocks of
    :data:`FLEX_BLOCK`, from the parts' own block rules: no n² scan), ``mask_mod``
    inside. Compiles on first use; waits for any compile in progress."""
    with _busy:
        return call_sparse(q, k, v, mask_mod, visit, scale)


def try_sparse_attention(q, k, v, mask_mod, visit: torch.Tensor, *, scale=None):
    """The same, or None at once when a compile (a warm-up) is in progress."""
    if not _busy.acquire(blocking=False):
        return None
    try:
        return call_sparse(q, k, v, mask_mod, visit, scale)
    finally:
        _busy.release()


def visit_block_mask(n: int, visit: torch.Tensor, mask_mod, block: int = FLEX_BLOCK):
    counts, order = kv_lists(visit)
    return BlockMask.from_kv_blocks(counts, order, BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(n, n))


def call_sparse(q, k, v, mask_mod, visit, scale):
    """One compiled call over visited block pairs (the caller holds the compile lock)."""
    bm = visit_block_mask(q.shape[2], visit.to(q.device), mask_mod)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    return _get_compiled()(q, k, v, block_mask=bm, scale=scale)


MASKS_KEPT = 16  # block masks kept (building one for 16k tokens takes 3–5 ms, a fifth of the call)
_masks: OrderedDict = OrderedDict()


def _kept_masks(n: int, window: int, hubs: tuple[int, ...], causal: bool, device):
    """The window kernel's block mask, or the hub kernel's chunks and their masks, built
    once per (n, window, hubs, causal, device) among the last MASKS_KEPT (callers hold
    the compile lock; the lock here keeps the table whole)."""
    key = (n, int(window), hubs, bool(causal), str(device))
    with _lock:
        found = _masks.get(key)
        if found is not None:
            _masks.move_to_end(key)
            return found
    if hubs:
        made = [(c, hub_block_mask(n, window, hubs, causal, c, device)) for c in hub_chunks(n, window, causal)]
    else:
        made = block_mask(n, window, causal, device)
    with _lock:
        _masks[key] = made
        while len(_masks) > MASKS_KEPT:
            _masks.popitem(last=False)
    return made


def call_window(q, k, v, window, hubs, causal, scale):
    """One compiled window (+ hubs) call (the caller holds the compile lock). With hubs,
    the hub rows of the output are not the pattern's yet: the caller writes them (whole
    rows, see attn.kernels.with_hub_rows)."""
    n = q.shape[2]
    hubs = tuple(hubs)
    masks = _kept_masks(n, window, hubs, causal, q.device)
    # contiguous inputs: strides are part of what a compiled kernel is specialised on
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    compiled = _get_compiled()
    if not hubs:
        return compiled(q, k, v, block_mask=masks, scale=scale)
    # per chunk of queries: the hub keys first, padded to whole blocks, then a copy of the
    # text keys the chunk's window reaches (so the copy costs a chunk's worth of memory)
    b, h = q.shape[:2]
    idx = torch.tensor(hubs, dtype=torch.long, device=q.device)
    pad = hub_prefix(len(hubs)) - len(hubs)
    out = q.new_empty(b, h, n, v.shape[-1])
    for (a, e, k0, k1), bm in masks:
        kk, vv = (torch.cat([t[:, :, idx], t.new_zeros(b, h, pad, t.shape[-1]), t[:, :, k0:k1]], dim=2)
                  for t in (k, v))
        out[:, :, a:e] = compiled(q[:, :, a:e].contiguous(), kk, vv, block_mask=bm, scale=scale)
    return out


def _warn_once(message: str) -> None:
    """One warning per process: a compiler that fails once (none installed, an
    unsupported shape) fails for every signature and every warm-up, and a warning per
    call would bury the server's log. :func:`status` keeps every failure."""
    global _warned
    with _lock:
        first, _warned = not _warned, True
    if first:
        logger.warning("%s (later FlexAttention failures are not logged again: see attn.flex.status())", message)


def mark_failed(q, v, causal, hubs: bool, exc: Exception, kind: str = "window") -> None:
    sig = _signature(q, v, causal, hubs, kind)
    _ready.discard(sig)
    _failed[sig] = f"{type(exc).__name__}: {str(exc)[:300]}"
    _log.append(f"flex call failed for {sig}; the blocked kernel takes over: {_failed[sig]}")
    _warn_once(_log[-1])


def warm(q_shape=(1, 4, 1024, 64), dtype=torch.float32, device="cpu", causal=True, dv=None, hubs=False,
         kind: str = "window", *, check: Callable) -> bool:
    """Compile for one kind of call (window with or without hubs, or ``kind="pattern"``,
    the playground's compositions), synchronously, by running ``check(q, v, n, causal,
    hubs, dtype)`` — compiled calls compared with the blocked kernel, which raises when
    they disagree — under the compile lock; returns True when it is ready."""
    device = torch.device(device)
    b, h, n, d = q_shape
    dv = dv or d
    q = torch.randn(b, h, n, d, dtype=dtype, device=device)
    v = torch.randn(b, h, n, dv, dtype=dtype, device=device)
    sig = _signature(q, v, causal, hubs, kind)
    if sig in _ready:
        return True
    if not available():
        _failed[sig] = "no C++ compiler or FlexAttention in this torch"
        return False
    t0 = time.perf_counter()
    try:
        with _busy:
            check(q, v, n, causal, hubs, dtype)
    except Exception as exc:  # compile errors surface here; the blocked kernel stays in use
        _failed[sig] = f"{type(exc).__name__}: {str(exc)[:300]}"
        _log.append(f"flex warm-up failed for {sig}: {_failed[sig]}\n{traceback.format_exc()[-2000:]}")
        _warn_once(f"flex warm-up failed for {sig}; the blocked kernel stays in use: {_failed[sig]}")
        return False
    _ready.add(sig)
    _log.append(f"flex ready for {sig} after {time.perf_counter() - t0:.1f} s")
    return True


def start_warmup(signatures: list[dict], warm_one: Callable[..., bool]) -> threading.Thread | None:
    """Warm several kinds of call in one background thread (daemon), each by
    ``warm_one(**signature)``; returns it."""
    todo = []
    for kw in signatures:
        key = repr(sorted(kw.items()))
        if key not in _warming:
            _warming.add(key)
            todo.append(kw)
    if not todo or not available():
        return None

    def run():
        for kw in todo:
            warm_one(**kw)

    t = threading.Thread(target=run, name="flex-warmup", daemon=True)
    t.start()
    _threads.append(t)
    return t


def _finish_warmups(timeout: float = 180.0) -> None:
    """At exit, let a compile in progress end: a daemon thread killed inside the C++
    compiler aborts the whole process ("terminate called without an active exception")."""
    for t in _threads:
        t.join(timeout)


atexit.register(_finish_warmups)
