"""Step 7's run of the model itself, four ways at n/4, n/2 and n (attn.model_run.four_ways),
on a long sample, on this machine: each run's time, the whole run's time, and the pass
that gives the model's own output, its layers' own attention read a block of rows at a
time (attn.model.OWN_ROWS) beside the whole grid scored at once (the way before), timed
in the same process.

    python -m bench.model_run                    # the Portuguese long sample, whole
    python -m bench.model_run --lang en --tokens 4096

Prints a table; times come with the machine's matmul rate beside them
(attn.bench.matmul_gflops).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", default="pt", choices=("en", "ja", "pt"))
    parser.add_argument("--tokens", type=int, default=None, help="the text's first tokens (default: all of it)")
    args = parser.parse_args()

    import torch

    from attn import loading, methods, model, model_run
    from attn.bench import matmul_gflops
    from attn.model import Replace
    from ui.samples import long_text

    lm = loading.load(device="cpu")
    ids = lm.encode(long_text(args.lang))[0][: args.tokens or None]
    n = len(ids)
    print(f"matmul {matmul_gflops('cpu'):.0f} GFLOP/s · {n:,} tokens ({args.lang}) · CPU")

    own = Replace(methods.own().name, frozenset(range(lm.n_layers)), methods.Params(causal=True))
    x = torch.tensor([ids])
    rows = model.OWN_ROWS
    times = {}
    for label, block in (("whole grid at once", 10**9), (f"{rows:,} rows at a time", rows)):
        model.OWN_ROWS = block
        t0 = time.perf_counter()
        lm.run_plan(own, lambda: lm.hidden(x))
        times[label] = time.perf_counter() - t0
    model.OWN_ROWS = rows
    print("\nthe model's own output (every layer its own pattern, the fused kernel):")
    for label, s in times.items():
        print(f"  {label:<24} {s:7.1f} s")
    before, after = times.values()
    print(f"  ratio {before / after:.2f}×")

    said = []
    last = [time.perf_counter()]

    def progress(done, total, way, m):
        now = time.perf_counter()
        if said:
            said[-1] = (*said[-1], now - last[0])
        said.append((way, m))
        last[0] = now

    t0 = time.perf_counter()
    res = model_run.four_ways(lm, ids, hubs=(0,), progress=progress)
    whole = time.perf_counter() - t0
    said[-1] = (*said[-1], time.perf_counter() - last[0])
    print("\n| run | n | its step (forward, peak, loss) |\n|---|---:|---:|")
    for way, m, s in said:
        print(f"| {way} | {m:,} | {s:.1f} s |")
    print(f"\nthe whole four-way run: {whole:.0f} s")
    for way in model_run.WAYS:
        r = res.ratio(way)
        print(f"  {way:<7} time(n)/time(n/2) = {r:.2f}" if r else f"  {way}: no ratio")


if __name__ == "__main__":
    main()
