"""How each attention method's time and memory grow as n doubles.

    .venv/bin/python -m bench.scaling            # CPU: n = 512 … 16,384, then 65,536 for memory
    .venv/bin/python -m bench.scaling --quick    # a short run (n up to 4,096)

Prints one table: median time and peak memory per method (and per preset of the
pattern playground, through the composed-pattern kernels) and n, the ratio
cost(2n)/cost(n), the machine's matrix-multiply throughput, and for each
efficient method its computed and useful GFLOP/s as shares of that figure.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from attn import backend as kernel_choice
from attn import bench, composition, flex, methods
from attn.costs import Shape
from attn.device import compute_dtype, describe_device, pick_device

WRITTEN_OUT_MAX = {"cpu": 8192, "cuda": 32768}  # full attention written out: n² floats, twice


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n up to 4,096, fewer repeats")
    ap.add_argument("--max-n", type=int, default=None)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--no-flex", action="store_true", help="skip the compiled FlexAttention path")
    args = ap.parse_args(argv)

    device = pick_device()
    s = Shape(window=args.window)
    top = args.max_n or (4096 if args.quick else (16384 if device.type == "cpu" else 131072))
    ns = []
    n = 512
    while n <= top:
        ns.append(n)
        n *= 2
    repeats = 2 if args.quick else args.repeats
    print(f"device: {describe_device(device)}   torch {torch.__version__}")
    print(f"heads={s.heads} d={s.d} window={s.window} hubs={s.hubs} feature={s.feature}; median of {repeats}")

    peak = bench.matmul_gflops(device)
    print(f"matmul throughput ({compute_dtype(device)}, 2048²): {peak:.1f} GFLOP/s\n")

    backends = ["blocked"]
    if not args.no_flex:
        t0 = time.perf_counter()
        # with hubs the compiled kernel must return its log-sum-exp: not on the CPU, where
        # window + hubs runs on the blocked kernel
        hub_kinds = [h for h in (False, True) if kernel_choice.compiled_serves(device, h)]
        ok = all([kernel_choice.warm((1, s.heads, 1024, s.d), dtype=compute_dtype(device), device=device, hubs=h)
                  for h in hub_kinds]
                 + [kernel_choice.warm((1, s.heads, 1024, s.d), dtype=torch.float32, device=device, kernel="pattern")])
        print(f"FlexAttention compile: {'ready' if ok else 'unavailable'} in {time.perf_counter() - t0:.1f} s"
              + ("" if ok else f" ({flex.status()['failed']})"))
        if ok:
            backends.insert(0, "flex")

    plan = []  # every method the registry tags for the benchmark; window kernels on each backend
    for m in methods.tagged(methods.BENCH):
        if m.family == "window":
            plan += [(m.name, b, None) for b in backends
                     if b != "flex" or kernel_choice.compiled_serves(device, m.with_hubs)]
        else:
            plan.append((m.name, "auto", None))
        if m.reference_label_key:
            plan.append((m.name, "reference", None))
    # the playground's presets, through the composed-pattern kernels (a window with hubs is
    # run by the window kernels: not compiled where the compiled kernel has no log-sum-exp)
    def compiled_serves(preset):
        parts = bench.preset_params(1024, s, preset).parts
        return kernel_choice.compiled_serves(device, composition.window_and_hubs(parts) and bool(parts.hubs))

    plan += [("pattern", b, p) for p in composition.PRESETS for b in backends if b != "flex" or compiled_serves(p)]
    steps = [(method, n, backend, preset) for n in ns for method, backend, preset in plan
             if not (backend == "reference" and n > WRITTEN_OUT_MAX[device.type])]

    def progress(done, total, method, n):
        print(f"  [{done + 1}/{total}] {'time' if done < total // 2 else 'memory'} {method} n={n}", file=sys.stderr)

    measured = bench.run_plan(steps, s, device, repeats=repeats, max_seconds=6.0, progress=progress)
    rows: dict[tuple, list[bench.Row]] = {p: [] for p in plan}
    for (method, _, backend, preset), r in zip(steps, measured):
        rows[(method, backend, preset)].append(r)

    def label(method, backend, preset):
        name = f"{method}:{preset}" if preset else method
        if backend in ("flex", "blocked"):  # the kernel asked for (a short text may run as SDPA)
            return f"{name} [{backend}]"
        return f"{name} [{rows[(method, backend, preset)][0].backend}]" if rows[(method, backend, preset)] else name

    print(f"{'method':<30}{'n':>8}{'time ms':>11}{'t(2n)/t(n)':>12}{'peak MiB':>10}"
          f"{'m(2n)/m(n)':>12}{'×SDPA':>8}{'computed':>10}{'useful':>8}")
    sdpa = {r.n: r.seconds for r in rows[("full", "auto", None)]}
    for key, rs in rows.items():
        tr = bench.ratios(rs)
        mr = bench.ratios(rs, key=lambda r: r.peak_bytes or 0)
        for r in rs:
            ratio = tr.get((r.key, r.n))
            mratio = mr.get((r.key, r.n))
            speed = sdpa.get(r.n, float("nan")) / r.seconds
            comp = r.computed_flops / r.seconds / 1e9 / peak
            use = r.useful_flops / r.seconds / 1e9 / peak
            mib = (r.peak_bytes or 0) / 2**20
            print(f"{label(*key):<30}{r.n:>8}{r.seconds * 1e3:>11.2f}"
                  f"{'' if ratio is None else f'{ratio:.2f}':>12}{mib:>10.1f}"
                  f"{'' if mratio is None else f'{mratio:.2f}':>12}{speed:>8.1f}"
                  f"{comp:>10.0%}{use:>8.0%}")
        print()

    if not args.quick:
        big = 65536
        print(f"peak memory at n = {big:,} (a dense n×n float32 grid per head would be "
              f"{big * big * 4 * s.heads / 2**30:.0f} GiB):")
        big_plan = [("window", big, b) for b in backends] + [("window_hubs", big, "auto")]
        big_plan += [(m.name, big) for m in methods.tagged(methods.BENCH) if m.family == "linear"]
        for r in bench.run_plan(big_plan, s, device, repeats=1):
            print(f"  {r.method} [{r.backend}]: {(r.peak_bytes or 0) / 2**20:.0f} MiB, {r.seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
