"""Step 6's sweep of the whole model (attn.swap.sweep: every swap the page runs) on the
first SWAP_MAX_TOKENS tokens of a long sample, timed with the next-token distributions
compared a chunk of positions at a time: each chunk reads the model's whole output head
(262,144 × 640 weights for Gemma), so the chunk's size sets how often it is read.

    python -m bench.model_sweep                  # chunks of 32 and of 64 positions
    python -m bench.model_sweep --chunks 64

Prints a table; times come with the machine's matmul rate beside them
(attn.bench.matmul_gflops). The numbers measured are the same whatever the chunk (checked).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--lang", default="en", choices=("en", "ja", "pt"))
    args = parser.parse_args()

    from attn import loading, swap
    from attn.bench import matmul_gflops
    from ui.samples import long_text

    model = loading.load(device="cpu")
    text = long_text(args.lang)
    layers = model.arch.layers
    swaps = swap.standard_sweep((0,), min(8, model.n_layers - 1), sliding=any(x.sliding for x in layers),
                                n_layers=model.n_layers,
                                sliding_layers=tuple(i for i, x in enumerate(layers) if x.sliding))
    print(f"matmul {matmul_gflops('cpu'):.0f} GFLOP/s · {len(swaps)} swaps "
          f"on {swap.SWAP_MAX_TOKENS} tokens ({args.lang})")
    print("\n| positions a chunk | the sweep | a swap |\n|---:|---:|---:|")
    kept = swap._LOGIT_CHUNK
    results = []
    for chunk in args.chunks:
        swap._LOGIT_CHUNK = chunk
        t0 = time.perf_counter()
        results.append(swap.sweep(model, text, swaps))
        took = time.perf_counter() - t0
        print(f"| {chunk} | {took:.1f} s | {took / len(swaps):.2f} s |")
    swap._LOGIT_CHUNK = kept
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert abs(a.kl - b.kl) <= 1e-4 * max(1.0, abs(a.kl)) and a.top1_agreement == b.top1_agreement, (a, b)


if __name__ == "__main__":
    main()
