"""The playground's top-k part on the model's own attention: what it keeps and what it costs.

    .venv/bin/python -m bench.playground_topk [--lang en] [--k 32] [--window 32] [--layer 8]

On a sample text and the packaged model: for the oracle and the 16-direction indexer, each
query's k chosen keys beside a window and the first token as hub (the playground's parts),
the share of the model's weight kept over every layer (and the seconds that takes), the output
error on one layer against the exact output beside equal weights', and the cells computed
there against every pair — with the machine's matmul rate beside the times.
"""

from __future__ import annotations

import argparse
import time

import torch

from attn import bench, loading, methods, outputs, stats
from attn.composition import Composition
from ui import samples


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", default="en")
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--layer", type=int, default=8)
    args = ap.parse_args(argv)
    model = loading.load(device="cpu")
    a = model.analyze(samples.sample_text(args.lang))
    parts = Composition(window=args.window, hubs=(0,))
    every = a.n * (a.n + 1) // 2 if a.causal else a.n * a.n
    print(f"{model.name}, the {args.lang} sample ({a.n} tokens), k = {args.k} beside window {args.window} + "
          f"hub 0; matmul {bench.matmul_gflops('cpu'):.0f} GFLOP/s")
    print(f"\n{'chosen by':<10}{'kept, all layers':>18}{'seconds':>9}{'error, layer ' + str(args.layer):>17}"
          f"{'equal weights':>15}{'cells/head':>12}{'of every pair':>15}")
    for indexer in (False, True):
        m = methods.top_k(indexer)
        params = methods.Params(parts=parts, k=args.k, causal=a.causal)
        t0 = time.perf_counter()
        kept = []
        for i in range(a.n_layers):
            q, k, _ = a.qkv(i)
            cells = outputs.chosen_pairs(m, q, k, params, a.layers[i], a.bias(i))
            kept.append(float(stats.share_kept(a.weights()[i], cells[0]).mean()))
        seconds = time.perf_counter() - t0
        q, k, v = a.qkv(args.layer)
        err = outputs.pattern_error(q, k, v, a.layers[args.layer], parts, bias=a.bias(args.layer), method=m,
                                    keep=args.k)
        per_head = float(outputs.chosen_pairs(m, q, k, params, a.layers[args.layer], a.bias(args.layer)).sum()
                         / a.n_heads)
        print(f"{'indexer' if indexer else 'oracle':<10}{sum(kept) / len(kept):>18.4f}{seconds:>9.2f}"
              f"{err['mean']:>17.4f}{err['uniform']:>15.4f}{per_head:>12.1f}{per_head / every:>15.1%}")
    return 0


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    raise SystemExit(main())
