"""What one room text costs, by part (attn/room_numbers.text_numbers), on this machine:

    .venv/bin/python -m bench.room_text [--model gemma] [--runs 5]

The model's run (with its attention and q, k, v recorded), then each of the room's
numbers: step 2's useful share by prefix (every layer), the share kept by each window
and by each row's top cells at the window's count,
the hubs, the sink, step 6's output errors. Medians of ``--runs`` texts (the bench's
own texts of ≈ 300 tokens, three languages in turn), with the matmul rate beside them."""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import torch

from attn import outputs, room_numbers, stats, topk
from attn.bench import matmul_gflops
from bench.classroom import own_text


def parts_of(a, times: dict) -> None:
    """text_numbers' work, part by part, each timed into ``times``."""
    def timed(name, fn):
        t = time.perf_counter()
        out = fn()
        times[name].append(time.perf_counter() - t)
        return out

    n, layers = a.n, a.n_layers
    prefixes = stats.prefix_lengths(n)
    keeps = [topk.for_window(w, a.causal) for w in room_numbers.ROOM_WINDOWS]
    weights = timed("the weights' view (recomputed by blocks on each read)", a.weights)
    found = timed("k(p) and each row's top cells at each window's", lambda: [
        stats.k_and_top(weights[layer], room_numbers.ROOM_P, keeps) for layer in range(layers)])
    timed("useful share by prefix, every layer", lambda: [
        stats.useful_share_by_prefix(weights[layer], room_numbers.ROOM_P, prefixes, a.layers[layer],
                                     prefix=lambda m, layer=layer: a.prefix(m)[layer], k_rows=found[layer][0])
        for layer in range(layers)])
    timed("share kept by each window", lambda: [
        stats.share_kept_by_pattern(weights, w, (), a.causal) for w in room_numbers.ROOM_WINDOWS])
    hubs = timed("the hubs", lambda: room_numbers.hubs_of(a, weights))
    timed("window with and without hubs", lambda: [
        stats.share_kept_by_pattern(weights, room_numbers.HUB_WINDOW, h, a.causal) for h in ((), hubs)])
    timed("the sink", lambda: stats.sink_share(weights))
    layer = min(room_numbers.ERROR_LAYER, layers - 1)

    def errors():
        q, k, v = a.qkv(layer)
        return outputs.output_errors(q, k, v, a.layers[layer], window=room_numbers.ERROR_WINDOW, hubs=hubs,
                                     bias=a.bias(layer))
    timed("output errors (one layer)", errors)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gemma")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from ui import served_model

    model = served_model.get_model(args.model)
    print(f"one room text by part ({args.model}; matmul {matmul_gflops('cpu'):.0f} GFLOP/s; torch threads "
          f"{torch.get_num_threads()})")
    times: dict[str, list[float]] = defaultdict(list)
    for i in range(args.runs + 1):
        text = own_text(i)[:1400]
        t = time.perf_counter()
        a = model.analyze(text, max_tokens=room_numbers.ROOM_TOKENS)
        forward = time.perf_counter() - t
        t = time.perf_counter()
        room_numbers.text_numbers(a)
        whole = time.perf_counter() - t
        if i == 0:
            continue  # a warm-up text: first calls pay one-off costs
        times["the model's run (analyze)"].append(forward)
        times["text_numbers, whole"].append(whole)
        parts_of(a, times)
        times["tokens"].append(a.n)
    print(f"  tokens per text: {statistics.median(times.pop('tokens')):.0f}")
    for name, ts in times.items():
        print(f"  {name:<48}{statistics.median(ts) * 1000:>9.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
