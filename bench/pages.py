"""Each step's page on a reader's long sample, in one process (Streamlit's AppTest, the
packaged model): step 1 from the paste to the page's end, then each other step opened
once (``switch_page``) and again (its caches warm). With ``--ahead`` the background
build of the other pages (ui.prebuild, as a reader's page starts it) is waited for first,
and its time printed.

    python -m bench.pages --tokens 1024             # cut at 1,024 tokens (ATLAS_MAX_TOKENS)
    python -m bench.pages --tokens 1024 --ahead
    python -m bench.pages --lang pt                 # the whole sample (8,121 tokens on a CPU)
    python -m bench.pages --tokens 1024 --steps hubs  # step 4 opened straight after step 1
    python -m bench.pages --copies 4                # the sample four times: 32,768 tokens, the whole context

Prints a table, the process's peak memory and the machine's matmul rate beside the
times (attn.bench.matmul_gflops): compare runs of one machine, in one sitting.
"""

from __future__ import annotations

import argparse
import os
import resource
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", default="en", choices=("en", "ja", "pt"))
    ap.add_argument("--tokens", type=int, default=None, help="ATLAS_MAX_TOKENS (default: the device's budget)")
    ap.add_argument("--ahead", action="store_true", help="wait for the background build before the other pages")
    ap.add_argument("--steps", nargs="*", default=None, help="the steps opened after step 1, by id (default: all)")
    ap.add_argument("--copies", type=int, default=1, help="the long sample this many times over, as one text")
    args = ap.parse_args()
    os.environ.update({"ATLAS_MODEL": "gemma", "ATLAS_FLEX_WARMUP": "0", "ATLAS_ROOM_WORKER": "0",
                       "ATLAS_BUILD_AHEAD": "1" if args.ahead else "0"})
    if args.tokens:
        os.environ["ATLAS_MAX_TOKENS"] = str(args.tokens)

    import pages  # noqa: F401 (fills the walk)
    from attn.bench import matmul_gflops
    from harness.in_process import app, page_of
    from ui import walk

    text = "\n\n".join([(ROOT / "assets" / f"long_{args.lang}.txt").read_text(encoding="utf-8").strip()] * args.copies)
    at = app(args.lang)
    at.run()
    t = time.perf_counter()
    at.text_area(key="text").input(text).run()
    rows = [("step 1, paste to the page's end", time.perf_counter() - t, None)]
    if args.ahead:
        t = time.perf_counter()
        for th in threading.enumerate():
            if th.name == "atlas-class-summaries":
                th.join()
        print(f"background build: {time.perf_counter() - t:.1f} s after step 1")
    for step in [walk.get(x) for x in args.steps] if args.steps else walk.steps()[1:]:
        t = time.perf_counter()
        at.switch_page(page_of(step.page)).run()
        first = time.perf_counter() - t
        t = time.perf_counter()
        at.run()
        rows.append((step.id, first, time.perf_counter() - t))
        if at.exception:
            raise SystemExit(f"{step.id}: {at.exception[0].value}")
    print(f"| page ({args.lang} × {args.copies}, {args.tokens or 'budget'} tokens) | opened | again |\n|---|---:|---:|")
    for name, first, again in rows:
        print(f"| {name} | {first:.1f} s | {'' if again is None else f'{again:.1f} s'} |")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; "
          f"matmul {matmul_gflops('cpu'):.0f} GFLOP/s")


if __name__ == "__main__":
    main()
