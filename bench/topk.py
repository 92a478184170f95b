"""Top-k selection against the window it is compared with, as the text doubles.

    .venv/bin/python -m bench.topk [--sizes 4096,8192,16384,32768]

One causal layer of the benchmark's shape (4 heads of 64), random q, k, v; top-k keeps as
many keys a query as the window of 128 keeps cells a row (k = 128). Each method's median
time (3 calls) and the memory a call adds at its peak (attn.bench.peak_memory), then
each one's ratio to the window's at the same n, and cost(2n)/cost(n) — all in one run,
with the machine's matmul rate beside them. The oracle scores every pair (n²·d) before it
attends to its k keys; the indexer scores every pair too, in 16 directions.
"""

from __future__ import annotations

import argparse

import torch

from attn import bench, methods
from attn.costs import Shape
from attn.device import describe_device

METHODS = (methods.window().name, methods.top_k().name, methods.top_k(indexer=True).name, methods.exact().name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4096,8192,16384,32768")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    s = Shape()  # 4 heads of 64, window 128, causal
    device = torch.device("cpu")
    print(f"top-k against the window, one causal layer of {s.heads} heads of {s.d}, window {s.window} "
          f"(k = {s.window}); {describe_device(device)}; matmul {bench.matmul_gflops(device):.0f} GFLOP/s")
    rows = bench.run_plan([(m, n, "auto") for n in sizes for m in METHODS], s, device, repeats=args.repeats)
    by = {(r.method, r.n): r for r in rows}
    print(f"\n{'method':<14}{'n':>8}{'time (s)':>11}{'× window':>10}{'2n/n':>7}{'peak MB':>10}{'× window':>10}"
          f"{'GFLOP':>9}")
    for m in METHODS:
        for i, n in enumerate(sizes):
            r, w = by[(m, n)], by[(METHODS[0], n)]
            grow = f"{r.seconds / by[(m, sizes[i - 1])].seconds:.2f}" if i else "—"
            mb = "—" if r.peak_bytes is None else f"{r.peak_bytes / 1e6:.1f}"
            mem_ratio = "—" if not (r.peak_bytes and w.peak_bytes) else f"{r.peak_bytes / w.peak_bytes:.1f}"
            print(f"{m:<14}{n:>8}{r.seconds:>11.3f}{r.seconds / w.seconds:>10.1f}{grow:>7}{mb:>10}{mem_ratio:>10}"
                  f"{r.computed_flops / 1e9:>9.1f}")
    print(f"\nmatmul after the run: {bench.matmul_gflops(device):.0f} GFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
