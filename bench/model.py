"""Load, analysis and swap timings of the real model on this machine.

    .venv/bin/python -m bench.model              # conversion (in a fresh cache), load, forward, swap
    .venv/bin/python -m bench.model --no-convert # skip the first-conversion measurement

Each measurement that needs a cold process runs in a subprocess, so that its
peak resident memory (ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    t0 = time.perf_counter()
    from attn import convert, model, swap
    what = {what!r}
    out = {{}}
    if what == "convert":
        t = time.perf_counter(); convert.convert(); out["convert_s"] = time.perf_counter() - t
    t = time.perf_counter(); m = model.load(); out["load_s"] = time.perf_counter() - t
    if what == "serve":
        from ui.samples import sample_text
        text = " ".join(sample_text(l) for l in ("en", "pt", "ja")) * 2
        for n in (128, 512, 1024):
            m.analyze(text, max_tokens=n)  # warm
            t = time.perf_counter(); a = m.analyze(text, max_tokens=n)
            out[f"forward_{{n}}_s"] = time.perf_counter() - t
            out[f"analysis_{{n}}_MB"] = a.nbytes / 2**20
        for n in (256, 512):
            swap.measure(m, text, swap.Swap("window", window=4), max_tokens=n)
            t = time.perf_counter()
            swap.measure(m, text, swap.Swap("window_hubs", window=16, hubs=(0,)), max_tokens=n)
            out[f"swap_{{n}}_s"] = time.perf_counter() - t
        swaps = swap.standard_sweep((0,), 8)
        t = time.perf_counter(); swap.sweep(m, sample_text("en"), swaps, max_tokens=256)
        out["sweep_s"] = time.perf_counter() - t
        out["sweep_runs"] = len(swaps)
    out["peak_rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out))
""")


def child(what: str, env: dict) -> dict:
    script = CHILD.format(what=what)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-convert", action="store_true")
    args = ap.parse_args(argv)
    env = {**os.environ}
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if not args.no_convert:
        with tempfile.TemporaryDirectory() as tmp:
            r = child("convert", {**env, "ATLAS_CACHE_DIR": tmp})
        print(f"first conversion (GGUF → float32 safetensors): {r['convert_s']:.1f} s, "
              f"peak resident memory {r['peak_rss_MB']:.0f} MB")
    r = child("load", env)
    print(f"cached load: {r['load_s']:.1f} s, peak resident memory {r['peak_rss_MB']:.0f} MB")
    r = child("serve", env)
    print(f"cached load (serving process): {r['load_s']:.1f} s")
    for n in (128, 512, 1024):
        print(f"forward with attentions, {n:>5} tokens: {r[f'forward_{n}_s']:.2f} s "
              f"(analysis kept: {r[f'analysis_{n}_MB']:.0f} MB)")
    for n in (256, 512):
        print(f"swap and measure (window 16 + first token, all layers), {n} tokens: {r[f'swap_{n}_s']:.2f} s")
    print(f"step 6 sweep ({r['sweep_runs']} runs, 256 tokens): {r['sweep_s']:.1f} s")
    print(f"peak resident memory of that serving process: {r['peak_rss_MB']:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
