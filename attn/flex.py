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
never scans the n² pairs. Hub keys never enter the block mask: where the compiled
kernel returns its log-sum-exp (CUDA), the window's output and log-sum-exp merge with a
small dense attention over the hub keys (:func:`attn.kernels.add_hub_columns`); torch
2.13's compiled CPU kernel cannot return it, so there window + hubs runs on the blocked
kernel, which can.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import shutil
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import AuxRequest, BlockMask, flex_attention

from . import patterns

# query and key blocks of the block masks. On the CPU 32 × 32 and 64 × 64 tie on the window
# at w = 128 (20.0 against 21.4 ms at 16k in one interleaved run, 21.7 against 21.0 in
# another; 16 × 32, 32 × 64 and 16 × 16 were slower), and 32 computes a fifth fewer cells
# and halves BigBird's compiled time (152 → 80 ms): docs/performance.md. CUDA's tiles want
# larger blocks (not measured here).
FLEX_BLOCK = 32
CUDA_BLOCK = 64


def block_size(device) -> int:
    """The block of this device's block masks."""
    return CUDA_BLOCK if torch.device(device).type == "cuda" else FLEX_BLOCK


def returns_lse(device) -> bool:
    """Whether the compiled kernel can return each row's log-sum-exp on this device
    (torch 2.13: not on the CPU), which the hub merge needs."""
    return torch.device(device).type != "cpu"

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


def _signature(q: torch.Tensor, v: torch.Tensor, causal: bool, hubs: bool, kernel: str = "window") -> tuple:
    """What a compiled kernel is specialised on. Dynamic shapes still specialise
    sizes of 1, so a batch or head count of 1 is part of the signature; with hubs the
    kernel also returns its log-sum-exp for the merge (another compiled graph). The
    playground's compositions (``kernel="pattern"``) are one kernel for every part,
    setting and causality: all of them are tensors its mask closes over."""
    b, h = q.shape[:2]
    if kernel == "pattern":
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


def is_ready(q: torch.Tensor, v: torch.Tensor, causal: bool, hubs: bool = False, kernel: str = "window") -> bool:
    """True when a compiled kernel serves this call without compiling again.
    Texts of one or two blocks stay on the blocked kernel (a single query block is
    a shape the compiler specialises too, and small grids gain nothing)."""
    return q.shape[2] > 2 * block_size(q.device) and _signature(q, v, causal, hubs, kernel) in _ready


def has_ready(device_type: str, kernel: str = "window") -> bool:
    """Whether some compiled kernel of this kind (window or pattern) is warm on this kind
    of device."""
    return any(sig[0] == device_type and (sig[4] == "pattern") == (kernel == "pattern") for sig in _ready)


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
               device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The window's block pairs as two bool (query blocks × key blocks) grids: the
    partial ones (the predicate decides inside) and the full ones (every pair allowed:
    the compiled kernel skips the predicate there). Built from block ranges, in
    O((n/block)²) small integers, never from the n² cells."""
    q_lo, q_hi = patterns.block_bounds(n, q_block, device)
    k_lo, k_hi = patterns.block_bounds(n, kv_block, device)
    q_lo, q_hi, k_lo, k_hi = q_lo[:, None], q_hi[:, None], k_lo[None, :], k_hi[None, :]
    band = patterns.band_blocks(q_lo, q_hi, k_lo, k_hi, window)
    # whole blocks only: the last block of the queries or of the keys may be short
    whole = (q_lo + q_block - 1 < n) & (k_lo + kv_block - 1 < n)
    if causal:
        band = band & (k_lo <= q_hi)
        full = whole & (q_lo >= k_hi) & (q_hi - k_lo < window)
    else:
        full = whole & (torch.maximum(q_hi - k_lo, k_hi - q_lo) < window)
    return band & ~full, full


def computed_cells(n: int, window: int, causal: bool = True, device="cpu") -> int:
    """Cells the compiled window kernel computes for one head: every cell of the blocks
    it visits. For the cost model."""
    block = block_size(device)
    partial, full = band_lists(n, window, causal, block, block)
    return int((partial | full).sum()) * block * block


def kv_lists(visit: torch.Tensor):
    """bool (blocks × blocks) → ``(kv_num_blocks, kv_indices)`` as ``BlockMask.from_kv_blocks``
    takes them: per query block, its visited key blocks first, in increasing order."""
    counts = visit.sum(dim=-1).to(torch.int32)
    order = torch.argsort((~visit).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts[None, None], order[None, None]


def block_mask(n: int, window: int, causal: bool, device) -> BlockMask:
    """The window kernel's block mask. The window is a tensor, so one compiled kernel
    serves every window."""
    block = block_size(device)
    partial, full = band_lists(n, window, causal, block, block, device=device)
    mask_mod = patterns.pattern(n, window, (), causal, device=device, window_tensor=True)
    return _from_lists(partial, full, mask_mod, (block, block), (n, n))


def _from_lists(partial, full, mask_mod, sizes, lengths):
    counts, order = kv_lists(partial)
    full_counts, full_order = kv_lists(full)
    return BlockMask.from_kv_blocks(counts, order, full_counts, full_order, BLOCK_SIZE=sizes, mask_mod=mask_mod,
                                    seq_lengths=lengths)


def window_attention(q, k, v, *, window: int, causal=True, scale=None, with_lse: bool = False):
    """Window attention through compiled FlexAttention (compiles on first use; waits
    for any compile in progress); with ``with_lse``, ``(out, lse)``."""
    with _busy:
        return call_window(q, k, v, window, causal, scale, with_lse)


def _unless_compiling(call, *args):
    """``call(*args)`` under the compile lock, or None at once when a compile (a warm-up)
    holds it: a request never waits for a compile it did not ask for."""
    if not _busy.acquire(blocking=False):
        return None
    try:
        return call(*args)
    finally:
        _busy.release()


def try_window_attention(q, k, v, *, window: int, causal=True, scale=None, with_lse: bool = False):
    """The same, or None at once when a compile (a warm-up) is in progress."""
    return _unless_compiling(call_window, q, k, v, window, causal, scale, with_lse)


def sparse_attention(q, k, v, mask_mod, visit: torch.Tensor, *, scale=None, with_lse: bool = False):
    """Any pattern (the playground's compositions) through compiled FlexAttention: the
    block mask from the visited block pairs ``visit`` (bool blocks × blocks of
    :func:`block_size`, from the parts' own block rules: no n² scan), ``mask_mod``
    inside; with ``with_lse``, ``(out, lse)``. Compiles on first use; waits for any
    compile in progress."""
    with _busy:
        return call_sparse(q, k, v, mask_mod, visit, scale, with_lse)


def try_sparse_attention(q, k, v, mask_mod, visit: torch.Tensor, *, scale=None, with_lse: bool = False):
    """The same, or None at once when a compile (a warm-up) is in progress."""
    return _unless_compiling(call_sparse, q, k, v, mask_mod, visit, scale, with_lse)


def visit_block_mask(n: int, visit: torch.Tensor, mask_mod, block: int):
    counts, order = kv_lists(visit)
    return BlockMask.from_kv_blocks(counts, order, BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(n, n))


def call_sparse(q, k, v, mask_mod, visit, scale, with_lse: bool = False):
    """One compiled call over visited block pairs (the caller holds the compile lock);
    with ``with_lse`` also each row's log-sum-exp, where :func:`returns_lse`."""
    bm = visit_block_mask(q.shape[2], visit.to(q.device), mask_mod, block_size(q.device))
    return _compiled_call(q, k, v, bm, scale, with_lse)


def _compiled_call(q, k, v, bm, scale, with_lse: bool):
    # contiguous inputs: strides are part of what a compiled kernel is specialised on
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if not with_lse:
        return _get_compiled()(q, k, v, block_mask=bm, scale=scale)
    out, aux = _get_compiled()(q, k, v, block_mask=bm, scale=scale, return_aux=AuxRequest(lse=True))
    return out, aux.lse


MASKS_KEPT = 16  # block masks kept (building one for 16k tokens takes 3–5 ms, a fifth of the call)
_masks: OrderedDict = OrderedDict()


def _kept_mask(n: int, window: int, causal: bool, device) -> BlockMask:
    """The window kernel's block mask, built once per (n, window, causal, device) among
    the last MASKS_KEPT (callers hold the compile lock; the lock here keeps the table whole)."""
    key = (n, int(window), bool(causal), str(device))
    with _lock:
        found = _masks.get(key)
        if found is not None:
            _masks.move_to_end(key)
            return found
    made = block_mask(n, window, causal, device)
    with _lock:
        _masks[key] = made
        while len(_masks) > MASKS_KEPT:
            _masks.popitem(last=False)
    return made


def call_window(q, k, v, window, causal, scale, with_lse: bool = False):
    """One compiled window call (the caller holds the compile lock); with ``with_lse``
    also each row's log-sum-exp, ``(out, lse)``, where :func:`returns_lse`."""
    return _compiled_call(q, k, v, _kept_mask(q.shape[2], window, causal, q.device), scale, with_lse)


def _warn_once(message: str) -> None:
    """One warning per process: a compiler that fails once (none installed, an
    unsupported shape) fails for every signature and every warm-up, and a warning per
    call would bury the server's log. :func:`status` keeps every failure."""
    global _warned
    with _lock:
        first, _warned = not _warned, True
    if first:
        logger.warning("%s (later FlexAttention failures are not logged again: see attn.flex.status())", message)


@contextlib.contextmanager
def compiling():
    """The compile lock held, as a warm-up holds it while it compiles: meanwhile a request
    takes the blocked kernel rather than wait (``try_…``), and a call that must compile waits."""
    with _busy:
        yield


def mark_ready(q, v, causal, hubs: bool = False, kernel: str = "window") -> None:
    """Count this kind of call as compiled, as a finished warm-up does (a process whose
    compiler ran elsewhere; a test that checks what follows a warm-up)."""
    _ready.add(_signature(q, v, causal, hubs, kernel))


def has_failed(q, v, causal, hubs: bool = False, kernel: str = "window") -> bool:
    """Whether this kind of call failed (its warm-up or a call), so the blocked kernel serves it."""
    return _signature(q, v, causal, hubs, kernel) in _failed


def mark_failed(q, v, causal, hubs: bool, exc: Exception, kernel: str = "window") -> None:
    sig = _signature(q, v, causal, hubs, kernel)
    _ready.discard(sig)
    _failed[sig] = f"{type(exc).__name__}: {str(exc)[:300]}"
    _log.append(f"flex call failed for {sig}; the blocked kernel takes over: {_failed[sig]}")
    _warn_once(_log[-1])


def warm(q_shape=(1, 4, 1024, 64), dtype=torch.float32, device="cpu", causal=True, dv=None, hubs=False,
         kernel: str = "window", *, check: Callable) -> bool:
    """Compile for one kind of call (window with or without hubs, or ``kernel="pattern"``,
    the playground's compositions), synchronously, by running ``check(q, v, n, causal,
    hubs, dtype)`` — compiled calls compared with the blocked kernel, which raises when
    they disagree — under the compile lock; returns True when it is ready."""
    device = torch.device(device)
    b, h, n, d = q_shape
    dv = dv or d
    q = torch.randn(b, h, n, d, dtype=dtype, device=device)
    v = torch.randn(b, h, n, dv, dtype=dtype, device=device)
    sig = _signature(q, v, causal, hubs, kernel)
    if sig in _ready:
        return True
    if hubs and kernel == "window" and not returns_lse(device):  # nothing to compile: the blocked kernel merges
        return False
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
