"""Time and peak memory of each attention method of the registry
(:mod:`attn.methods`) on the active device; the operations each run did come from
the registry's cost model (:mod:`attn.costs`).

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
import statistics
import time
from dataclasses import dataclass, field

import torch

from . import composition, costs, methods, settings
from .costs import Shape
from .device import compute_dtype, synchronize

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
    return statistics.median(wall_times(fn, device, repeats, max_seconds))


def wall_times(fn, device, repeats: int = 3, max_seconds: float | None = None) -> list[float]:
    """Wall times of ``fn``, each run on its own, after one warm-up call (stops early past
    max_seconds, after one run at least)."""
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
    return times


@dataclass
class Row:
    method: str  # a name of the registry (attn.methods)
    n: int
    seconds: float
    peak_bytes: int | None
    useful_flops: float
    computed_flops: float
    backend: str  # the kernel that ran; "reference" for the method's dense twin, written out
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return row_key(self.method, self.backend, self.extra.get("preset"))


def growth(rows: list[Row], key: str, n2: int, factor: float) -> str | None:
    """Whether the time of row ``key`` grew more or less than ``factor``× from n2/2 to n2,
    beyond the spread of its repeated runs (:func:`clearly_faster` of factor·t(n) against
    t(2n)): ``"over"``, ``"under"``, or None (too noisy to tell, or not measured)."""
    by = {(r.key, r.n): r for r in rows}
    small, large = by.get((key, n2 // 2)), by.get((key, n2))
    if small is None or large is None:
        return None
    times = [r.extra.get("times") or [r.seconds] for r in (small, large)]
    said = clearly_faster([factor * x for x in times[0]], times[1])
    return {"a": "over", "b": "under", None: None}[said]


def clearly_faster(a: list[float], b: list[float]) -> str | None:
    """Which of two sets of repeated timings is faster beyond the spread of both: ``"a"`` or
    ``"b"`` when the middle halves of their runs (lower to upper quartile) do not overlap,
    None when they do, or when either has fewer than 3 runs: the machine was too noisy (or
    the runs too few) to tell. A sentence about which order or method runs faster reads this,
    never one timing."""
    if min(len(a), len(b)) < 3:
        return None
    qa, qb = statistics.quantiles(a, n=4, method="inclusive"), statistics.quantiles(b, n=4, method="inclusive")
    if qa[2] < qb[0]:
        return "a"
    if qb[2] < qa[0]:
        return "b"
    return None


def row_key(method: str, backend: str, preset: str | None = None) -> str:
    """A timed row's name: the method, or the method written out (its dense
    reference, ``backend="reference"``, timed beside it), or a playground preset of
    the ``pattern`` method."""
    if preset:
        return f"{method}:{preset}"
    return f"{method}:reference" if backend == "reference" else method


MODEL_WINDOW = 512  # the model's own sliding window: the "model" preset's window


def preset_params(n: int, s: Shape, preset: str) -> methods.Params:
    """A playground preset at the benchmark's shape: its global tokens are the shape's hubs."""
    return methods.Params(parts=composition.preset(preset, s.hub_positions(n), MODEL_WINDOW))


def _inputs(n: int, s: Shape, device, dtype):
    g = torch.Generator(device="cpu").manual_seed(n)
    shape = (s.batch, s.heads, n, s.d)
    return [torch.randn(shape, generator=g).to(device=device, dtype=dtype) for _ in range(3)]


def _params(method: methods.Method, n: int, s: Shape, preset: str | None = None) -> methods.Params:
    if preset:
        return preset_params(n, s, preset)
    return methods.Params(window=min(s.window, n), hubs=s.hub_positions(n) if method.with_hubs else ())


def dtype_of(method: methods.Method, device) -> torch.dtype:
    """Fused softmax kernels run in the device's compute dtype (bfloat16 on CUDA); the
    window and linear kernels here keep float32 running sums everywhere."""
    return compute_dtype(torch.device(device)) if method.fused or method.family == "window" else torch.float32


def run_method(method: str, q, k, v, s: Shape, backend: str = "auto", preset: str | None = None):
    """A call of one method (``backend="reference"``: its dense twin) on q, k, v."""
    m = methods.get(method)
    params = _params(m, q.shape[2], s, preset)
    if backend == "reference":
        return lambda: m.reference(q, k, v, params)
    return lambda: m.run(q, k, v, params, backend=backend)


def backend_of(method: str, q, v, s: Shape, backend: str = "auto", preset: str | None = None) -> str:
    if backend == "reference":
        return "reference"
    m = methods.get(method)
    return m.backend(q, v, _params(m, q.shape[2], s, preset), backend)


def measure(method: str, n: int, s: Shape, device, dtype=None, repeats: int = 3,
            memory: bool = True, max_seconds: float | None = None, backend: str = "auto",
            preset: str | None = None) -> Row:
    """Time (and, with ``memory``, peak memory) of one method at one length.

    The memory probe changes how glibc hands out large blocks (a fixed mmap
    threshold from then on), which changes allocation-heavy kernels' times: time
    every method before probing memory (:func:`run_plan` does)."""
    device = torch.device(device)
    m = methods.get(method)
    dtype = dtype or dtype_of(m, device)
    q, k, v = _inputs(n, s, device, dtype)
    fn = run_method(method, q, k, v, s, backend, preset)
    ran = backend_of(method, q, v, s, backend, preset)
    times = wall_times(fn, device, repeats, max_seconds)
    peak = peak_memory(fn, device) if memory else None
    if preset:
        useful, computed = costs.composed_flops(n, s, preset_params(n, s, preset).parts, ran, device=device.type)
    else:
        useful, computed = m.flops(n, s, ran, device.type)
    extra = {"dtype": str(dtype).replace("torch.", ""), "times": times, **({"preset": preset} if preset else {})}
    return Row(method, n, statistics.median(times), peak, useful, computed, ran, extra)


def measure_memory(row: Row, s: Shape, device, backend: str = "auto") -> Row:
    """Fill in a timed row's peak memory."""
    q, k, v = _inputs(row.n, s, device, dtype_of(methods.get(row.method), device))
    row.peak_bytes = peak_memory(run_method(row.method, q, k, v, s, backend, row.extra.get("preset")), device)
    return row


def run_plan(plan: list[tuple], s: Shape, device, repeats: int = 3, max_seconds: float | None = None,
             progress=None) -> list[Row]:
    """Every (method, n[, backend[, preset]]) of ``plan``: all timings first, then all
    memory probes. ``progress(done, total, method, n)`` is called before each step."""
    plan = [(p[0], p[1], p[2] if len(p) > 2 else "auto", p[3] if len(p) > 3 else None) for p in plan]
    total = 2 * len(plan)
    rows = []
    for i, (method, n, backend, preset) in enumerate(plan):
        if progress:
            progress(i, total, method, n)
        rows.append(measure(method, n, s, device, repeats=repeats, memory=False, max_seconds=max_seconds,
                            backend=backend, preset=preset))
    for i, (row, (method, n, backend, _)) in enumerate(zip(rows, plan)):
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
    """cost(2n)/cost(n) per method (``Row.key``), keyed by (key, 2n)."""
    by = {(r.key, r.n): r for r in rows}
    out = {}
    for (method, n), r in by.items():
        prev = by.get((method, n // 2))
        if prev is not None and n % 2 == 0 and key(prev):
            out[(method, n)] = key(r) / key(prev)
    return out


def live_sizes(device) -> list[int]:
    """The lengths the app's live benchmark runs, each double the one before: up to
    4,096 on the CPU, 16,384 on CUDA, or ``ATLAS_LIVE_MAX_N``."""
    cpu = torch.device(device).type == "cpu"
    top = settings.read().live_max_n or (4096 if cpu else 16384)
    return [top >> i for i in reversed(range(4 if cpu else 5))]
