"""A long text through the analysis, by length: what the analysis holds, the process's
peak memory, the analysis' time beside a bare forward pass of the model over the same
tokens (transformers' own SDPA path, no grad), and the statistics the pages read, on the
row sample a long text is read on (ui.row_reads.row_sample: exact up to 1,024 rows).

    python -m bench.long_text                       # 1,024 · 2,048 · 4,096 · 8,192 tokens
    python -m bench.long_text --lengths 1024 8192

Each length runs in a process of its own (a peak is a process's own). The text is the
three samples in turn, repeated to length. Prints a table; times come with the
machine's matmul rate beside them (attn.bench.matmul_gflops).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(n: int) -> dict:
    """One length, in this process: the numbers of a row of the table."""
    import torch

    from attn import hub_stats, loading, stats
    from attn.rows import RowSample
    from ui.samples import sample_text

    model = loading.load(device="cpu")
    loaded = peak_mb()
    text = "\n".join(sample_text(lang) for lang in ("en", "pt", "ja")) + "\n"
    text = text * (4 * n // len(text) + 8)  # more tokens than n, whatever the tokenizer
    t = time.perf_counter()
    a = model.analyze(text, max_tokens=n)
    analysis_s = time.perf_counter() - t
    after_analysis = peak_mb()
    sample = RowSample.spread(a.n, 1024, 1024)
    w = a.weights() if sample.every_row else a.weights().at(sample.positions)
    timings = {}
    for name, fn in (("k(p), every layer", lambda: stats.k_for_share(w, 0.9)),
                     ("kept by a window", lambda: stats.share_kept_by_pattern(w, 64, (), a.causal, sample=sample)),
                     ("anchors", lambda: hub_stats.anchors(w, a.causal, sample=sample)),
                     ("the sink", lambda: stats.sink_rows(w, sample))):
        t = time.perf_counter()
        fn()
        timings[name] = time.perf_counter() - t
    read_peak = peak_mb()  # the analysis and its statistics: before the bare run, whose peak is its own
    ids = torch.tensor([a.ids])
    own = model.model.config._attn_implementation
    model.model.set_attn_implementation("sdpa")
    try:
        t = time.perf_counter()
        with torch.no_grad():
            model.model.base_model(input_ids=ids, use_cache=False)
        bare_s = time.perf_counter() - t
    finally:
        model.model.set_attn_implementation(own)
    return {"n": a.n, "held_mb": a.nbytes / 2**20, "loaded_mb": loaded, "peak_mb": max(after_analysis, read_peak),
            "bare_peak_mb": peak_mb(),
            "analysis_s": analysis_s, "bare_s": bare_s, "rows": sample.count, "stats": timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one length, printed as JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    from attn import bench

    print(f"Gemma-3-270m on the CPU · matmul {bench.matmul_gflops('cpu'):.0f} GFLOP/s")
    rows = []
    for n in args.lengths:
        out = subprocess.run([sys.executable, "-m", "bench.long_text", "--one", str(n)], capture_output=True,
                             text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    names = list(rows[0]["stats"])
    print(f"\n{'tokens':>7} {'held MB':>8} {'peak RSS MB':>12} {'model MB':>9} {'analysis s':>11} {'bare s':>7} "
          f"{'ratio':>6} {'bare peak':>10} {'rows read':>10} " + " ".join(f"{x:>18}" for x in names))
    for r in rows:
        print(f"{r['n']:>7,} {r['held_mb']:>8.0f} {r['peak_mb']:>12.0f} {r['loaded_mb']:>9.0f} "
              f"{r['analysis_s']:>11.1f} {r['bare_s']:>7.1f} {r['analysis_s'] / r['bare_s']:>6.2f} "
              f"{r['bare_peak_mb']:>10.0f} {r['rows']:>10,} "
              + " ".join(f"{r['stats'][x]:>17.2f}s" for x in names))
    first, last = rows[0], rows[-1]
    if len(rows) > 1:
        print(f"\nheld {last['n']:,} / {first['n']:,} tokens: {last['held_mb'] / first['held_mb']:.2f}× "
              f"(linear: {last['n'] / first['n']:.2f}×)")


if __name__ == "__main__":
    main()
