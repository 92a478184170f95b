"""Time and peak memory of each attention method on the active device.

Used by ``bench/scaling.py`` (the printed table) and by step 7 of the app (a
short live run). Times are medians of several runs after a warm-up call.

Peak memory: on CUDA, the allocator's peak; on CPU, the rise of the process's
resident high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs``)
over its resident size before the call, with glibc's mmap threshold held low
during the probe so that large tensors are really returned to the system when
freed. That counts every page the call touched, the kernels' own workspaces
included. (Resetting VmHWM affects the whole process: a monitor reading the peak
of an app that ran the live benchmark sees the peak since then.)
"""

from __future__ import annotations

import ctypes
import gc
import math
import statistics
import time
from dataclasses import dataclass, field

import torch

from . import flex, kernels, patterns
from .device import compute_dtype, synchronize
from .features import feature_size

METHODS = ("sdpa", "naive", "window", "window_hubs", "linear")

_libc = None
_M_MMAP_THRESHOLD = -3


def _malloc_setup() -> None:
    global _libc
    if _libc is not None:
        return
    try:
        _libc = ctypes.CDLL("libc.so.6")
    except OSError:
        _libc = False


def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def peak_memory(fn, device: torch.device) -> int | None:
    """Bytes a call adds at its peak (None where the platform cannot say)."""
    device = torch.device(device)
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    _malloc_setup()
    gc.collect()
    if _libc:
        _libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)  # big blocks go back to the system on free
        _libc.malloc_trim(0)
    try:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            return None
        before = _proc_status("VmRSS:")
        fn()
        after = _proc_status("VmHWM:")
    finally:
        if _libc:  # back to glibc's largest automatic threshold, so later work allocates as fast as before
            _libc.mallopt(_M_MMAP_THRESHOLD, 32 * 2**20)
    if before is None or after is None:
        return None
    return max(0, after - before)


def median_time(fn, device, repeats: int = 3, max_seconds: float | None = None) -> float:
    """Median wall time of ``fn`` after one warm-up call (stops early past max_seconds)."""
    fn()
    synchronize(device)
    times = []
    start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            break
    return statistics.median(times)


@dataclass
class Setting:
    heads: int = 4
    d: int = 64
    window: int = 128
    hubs: int = 4  # hubs spread evenly, the first token among them
    feature: str = "elu"
    batch: int = 1

    def hub_positions(self, n: int) -> tuple[int, ...]:
        if self.hubs <= 0:
            return ()
        return tuple(sorted({int(round(i * (n - 1) / max(1, self.hubs))) for i in range(self.hubs)}))


@dataclass
class Row:
    method: str
    n: int
    seconds: float
    peak_bytes: int | None
    useful_flops: float
    computed_flops: float
    backend: str
    extra: dict = field(default_factory=dict)


def _inputs(n: int, s: Setting, device, dtype):
    g = torch.Generator(device="cpu").manual_seed(n)
    shape = (s.batch, s.heads, n, s.d)
    return [torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(3)]


def naive_attention(q, k, v, causal: bool = True, scale=None):
    """Full attention written out: the n×n score grid, masked, softmax, times V."""
    s = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * s  # (b, h, n, n)
    if causal:
        n = q.shape[2]
        scores = scores.masked_fill(~patterns.dense(patterns.causal_mask, n, device=q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def flops(method: str, n: int, s: Setting, backend: str) -> tuple[float, float]:
    """(useful, computed) floating-point operations: 2d for q·k plus 2d for p·v per
    computed cell; linear attention 4·m·d per token (summary update and read) plus
    its chunks' own causal triangles."""
    per_cell = 4 * s.d * s.batch * s.heads
    if method in ("sdpa", "naive"):
        useful = patterns.cells(n, None, (), True) * per_cell
        computed = useful if method == "sdpa" else n * n * per_cell
        return useful, computed
    if method in ("window", "window_hubs"):
        hubs = s.hub_positions(n) if method == "window_hubs" else ()
        w = min(s.window, n)
        useful = patterns.cells(n, w, hubs, True) * per_cell
        if backend == "flex":
            counts, _ = flex.block_lists(n, w, hubs, True)
            computed = int(counts.sum()) * flex.FLEX_BLOCK**2 * per_cell
        elif backend == "sdpa":
            computed = useful
        else:
            B = min(kernels.BLOCK, n)
            nb = math.ceil(n / B)
            computed = (nb * B * (B + w - 1 + len(hubs)) + len(hubs) * n) * per_cell
        return useful, computed
    m = feature_size(s.feature, s.d)
    C = min(kernels.CHUNK, n)
    per_token = 4 * m * s.d * s.batch * s.heads
    useful = n * per_token
    computed = useful + n * C * 2 * (m + s.d) * s.batch * s.heads
    return useful, computed


def run_method(method: str, q, k, v, s: Setting, backend: str = "auto"):
    n = q.shape[2]
    if method == "sdpa":
        return lambda: kernels.full_attention(q, k, v, causal=True)
    if method == "naive":
        return lambda: naive_attention(q, k, v, causal=True)
    if method == "window":
        return lambda: kernels.window_attention(
            q, k, v, window=min(s.window, n), causal=True, backend=backend)
    if method == "window_hubs":
        hubs = s.hub_positions(n)
        return lambda: kernels.window_attention(
            q, k, v, window=min(s.window, n), hubs=hubs, causal=True, backend=backend)
    if method == "linear":
        return lambda: kernels.linear_attention(q, k, v, feature=s.feature, causal=True)
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


def backend_of(method: str, q, v, s: Setting, backend: str = "auto") -> str:
    if method in ("window", "window_hubs"):
        if backend != "auto" and s.window < q.shape[2]:
            return backend
        hubs = s.hub_positions(q.shape[2]) if method == "window_hubs" else ()
        return kernels.window_backend(q, v, True, min(s.window, q.shape[2]), hubs)
    return {"sdpa": "sdpa", "naive": "torch", "linear": "chunked scan"}[method]


def measure(method: str, n: int, s: Setting, device, dtype=None, repeats: int = 3,
            memory: bool = True, max_seconds: float | None = None, backend: str = "auto") -> Row:
    """Time (and, with ``memory``, peak memory) of one method at one length.

    The memory probe changes how glibc hands out large blocks (a fixed mmap
    threshold from then on), which changes allocation-heavy kernels' times: time
    every method before probing memory (:func:`run_plan` does)."""
    device = torch.device(device)
    dtype = dtype or compute_dtype(device)
    if method == "linear":
        dtype = torch.float32  # the scan's running sums stay in float32
    q, k, v = _inputs(n, s, device, dtype)
    fn = run_method(method, q, k, v, s, backend)
    backend = backend_of(method, q, v, s, backend)
    seconds = median_time(fn, device, repeats, max_seconds)
    peak = peak_memory(fn, device) if memory else None
    useful, computed = flops(method, n, s, backend)
    return Row(method, n, seconds, peak, useful, computed, backend, {"dtype": str(dtype).replace("torch.", "")})


def measure_memory(row: Row, s: Setting, device, backend: str = "auto") -> Row:
    """Fill in a timed row's peak memory."""
    dtype = torch.float32 if row.method == "linear" else compute_dtype(torch.device(device))
    q, k, v = _inputs(row.n, s, device, dtype)
    row.peak_bytes = peak_memory(run_method(row.method, q, k, v, s, backend), device)
    return row


def run_plan(plan: list[tuple], s: Setting, device, repeats: int = 3, max_seconds: float | None = None,
             progress=None) -> list[Row]:
    """Every (method, n[, backend]) of ``plan``: all timings first, then all memory
    probes. ``progress(done, total, method, n)`` is called before each step."""
    plan = [(p[0], p[1], p[2] if len(p) > 2 else "auto") for p in plan]
    total = 2 * len(plan)
    rows = []
    for i, (method, n, backend) in enumerate(plan):
        if progress:
            progress(i, total, method, n)
        rows.append(measure(method, n, s, device, repeats=repeats, memory=False, max_seconds=max_seconds,
                            backend=backend))
    for i, (row, (method, n, backend)) in enumerate(zip(rows, plan)):
        if progress:
            progress(len(plan) + i, total, method, n)
        measure_memory(row, s, device, backend)
    return rows


def matmul_gflops(device, n: int = 2048, repeats: int = 5) -> float:
    """fp32 (CPU) / bf16 (CUDA) square matrix-multiply throughput, GFLOP/s."""
    device = torch.device(device)
    dtype = compute_dtype(device)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    t = median_time(lambda: a @ b, device, repeats)
    return 2 * n**3 / t / 1e9


def ratios(rows: list[Row], key=lambda r: r.seconds) -> dict[tuple[str, int], float]:
    """cost(2n)/cost(n) per method, keyed by (method, 2n)."""
    by = {(r.method, r.n): r for r in rows}
    out = {}
    for (method, n), r in by.items():
        prev = by.get((method, n // 2))
        if prev is not None and n % 2 == 0 and key(prev):
            out[(method, n)] = key(r) / key(prev)
    return out


def live_sizes(device) -> list[int]:
    """The lengths the app's live benchmark runs: short enough to end in ~20 s on a
    2-core CPU; longer on CUDA."""
    return [512, 1024, 2048, 4096] if torch.device(device).type == "cpu" else [1024, 2048, 4096, 8192, 16384]


def cost_model(ns: list[int], s: Setting) -> dict[str, list[float]]:
    """Useful floating-point operations of each method at each n (no timing)."""
    out = {}
    for method in ("sdpa", "window", "window_hubs", "linear"):
        out[method] = [flops(method, n, s, "model")[0] for n in ns]
    return out
