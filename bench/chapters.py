"""A class of chapters on one server (a benchmark, not a test): N readers paste a long
text each at the same moment, and a few seconds later one more reader sends five
sentences; does one reader's chapter cost that reader, or the class?

    .venv/bin/python -m bench.chapters [--readers 3] [--after 5] [--model gemma]

Starts the app as scripts/run.sh does (launch.py, the sample pages built from the start)
and waits until it is ready. Readers speak Streamlit's websocket protocol
(harness/readers.py). First each text alone, one after another (each signed so that no
analysis is found kept): its step 1's time. Then the class: the N long texts at once, and
the short one ``--after`` seconds later (signed afresh). Prints each time, the short
text's wait ÷ its time alone (goal ≤ 2× plus one chunk), the last long text's time ÷ the
sum of the long texts' times alone (goal ≤ 1.25), and the server's peak resident memory
(polled from outside: goal ≤ 3.5 GB for three, 4 GB for six), with the matmul rate.
The long texts are the app's own long samples (assets/long_*.txt), cut at the CPU's budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from pathlib import Path

from attn.bench import matmul_gflops
from attn.budgets import MAX_TOKENS
from attn.model import CHUNK
from bench.classroom import MemoryPoll
from harness.readers import Reader
from harness.serve import SERVER_PIDS, app_server, ready_after, rss_mb
from ui.i18n import translate

ROOT = Path(__file__).resolve().parent.parent
SHORT = ("Attention compares every word with every other word. A window keeps only the nearby ones. "
         "A hub is a token that many rows read. Linear attention keeps a running sum instead. "
         "Each shortcut has a cost that step 6 measures.")
LANGS = ("en", "pt", "ja")


def chapter(i: int, sign: str) -> tuple[str, str]:
    lang = LANGS[i % 3]
    return lang, f"({sign} {i}) " + (ROOT / "assets" / f"long_{lang}.txt").read_text(encoding="utf-8")


def chapter_tokens() -> int:
    """The fewest tokens of the three chapters (the packaged model's tokenizer, read alone)."""
    from transformers import PreTrainedTokenizerFast

    from attn import convert

    tok = PreTrainedTokenizerFast.from_pretrained(str(convert.convert()))
    return min(len(tok(chapter(i, "")[1])["input_ids"]) for i in range(3))


async def step_one(url: str, lang: str, text: str, delay: float = 0.0) -> float:
    """Seconds from this reader's paste to its step 1 drawn (the reader on the page first)."""
    return (await read_one(url, lang, text, delay)).seconds


async def read_one(url: str, lang: str, text: str, delay: float = 0.0):
    """This reader's paste and its step 1 drawn (the reader on the page first): the run, its
    notices with the moments they came (harness.readers.Run), and ``.lang``."""
    await asyncio.sleep(delay)
    r = Reader(url, lang)
    await r.connect()
    try:
        await r.run("")
        run = await r.run("", text=text, timeout=3600)
        if not run.finished or run.exceptions:
            raise RuntimeError(run.exceptions or "not finished")
        run.lang = lang
        return run
    finally:
        await r.close()


def told(lang: str, notice: str) -> float | None:
    """The seconds a queue's notice told (queue.waiting or queue.paused, in the reader's
    language), or None (another notice: the memory's names no time)."""
    for key in ("queue.waiting", "queue.paused"):
        said = re.escape(translate(lang, key, ahead="§A§", seconds="§S§", done="§D§", tokens="§T§"))
        number = r"[\d.,\s]+"
        pattern = said.replace("§A§", number).replace("§D§", number).replace("§T§", number)
        found = re.fullmatch(pattern.replace("§S§", f"({number})"), notice)
        if found:
            return float(re.sub(r"\D", "", found.group(1)))
    return None


def first_wait(run, ran_alone: float, chunk: float) -> tuple[float, float] | None:
    """What the first notice with a time told, and the wait that came: until the reader's
    text was read — a chapter's progress bar, less one chunk (it comes after the first); a
    short text's end, less its time alone — or, sooner, until a notice that the memory is
    full (the queue's turn came; the wait for memory is another, told without a time).
    None when no notice told a time."""
    notices = list(zip(run.alerts, run.alert_times))
    for i, (notice, at) in enumerate(notices):
        seconds = told(run.lang, notice)
        if seconds is not None:
            began = run.progress_at - chunk if run.progress_at is not None else run.ended_at - ran_alone
            memory = next((t for n, t in notices[i + 1:] if n == translate(run.lang, "queue.memory")), began)
            return seconds, max(0.0, min(began, memory) - at)
    return None


async def scenario(url: str, n: int, after: float, mem: MemoryPoll) -> dict:
    pid = SERVER_PIDS[url]
    print(f"  the server ready: {rss_mb(pid):,.0f} MB resident", flush=True)
    alone = []
    for i in range(n):
        lang, text = chapter(i, "alone")
        alone.append(await step_one(url, lang, text))
        print(f"  chapter {i} ({lang}) alone: {alone[-1]:.1f} s", flush=True)
    short_alone = await step_one(url, "en", "(alone) " + SHORT)
    print(f"  five sentences alone: {short_alone:.1f} s", flush=True)
    print(f"  after the texts alone: {rss_mb(pid):,.0f} MB resident (peak {mem.peak:,.0f} MB)", flush=True)
    mem.reset()  # the class's own peak from here
    jobs = [read_one(url, *chapter(i, "class")) for i in range(n)]
    jobs.append(read_one(url, "en", "(class) " + SHORT, delay=after))
    runs = await asyncio.gather(*jobs)
    tokens = min(MAX_TOKENS["cpu"], chapter_tokens())
    chunk = min(alone) / max(1, round(tokens / CHUNK))
    waits = [first_wait(r, a, chunk) for r, a in zip(runs, [*alone, short_alone])]
    return {"tokens": tokens, "alone": alone, "short_alone": short_alone,
            "together": [r.seconds for r in runs[:-1]], "short": runs[-1].seconds, "waits": waits}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readers", type=int, default=3)
    ap.add_argument("--after", type=float, default=5.0)
    ap.add_argument("--model", default="gemma")
    args = ap.parse_args()
    print(f"chapters: {args.readers} long texts and five sentences {args.after:g} s later, model {args.model}; "
          f"chunk {CHUNK} tokens; this machine's matmul {matmul_gflops('cpu'):.0f} GFLOP/s", flush=True)
    t0 = time.perf_counter()
    with app_server(args.model, timeout=900, warm=True) as url:
        print(f"the app ready {ready_after(url, t0):.1f} s after the start", flush=True)
        with MemoryPoll([SERVER_PIDS[url]]) as mem:
            res = asyncio.run(scenario(url, args.readers, args.after, mem))
    alone_sum = sum(res["alone"])
    print(f"\n{'':<26}{'alone':>9}{'in the class':>14}")
    for i, (a, b) in enumerate(zip(res["alone"], res["together"])):
        print(f"  chapter {i} ({LANGS[i % 3]}){'':<11}{a:8.1f} s{b:12.1f} s")
    print(f"  five sentences{'':<10}{res['short_alone']:8.1f} s{res['short']:12.1f} s")
    # one chunk's time: a chapter's time alone over its chunks
    chunk = min(res["alone"]) / max(1, round(res["tokens"] / CHUNK))
    print(f"\nthe short text: {res['short']:.1f} s = {res['short'] / res['short_alone']:.1f}× its time alone; "
          f"goal ≤ 2× plus one chunk ({chunk:.1f} s): {2 * res['short_alone'] + chunk:.1f} s")
    print(f"the last chapter: {max(res['together']) / alone_sum:.2f}× the sum of the chapters alone "
          f"({alone_sum:.0f} s; goal ≤ 1.25)")
    print("\nthe first wait each reader was told, and the wait that came (goal: within half of it, or of the "
          "second a notice says at least)")
    for i, w in enumerate(res["waits"]):
        name = f"chapter {i} ({LANGS[i % 3]})" if i < len(res["waits"]) - 1 else "five sentences"
        if w is None:
            print(f"  {name:<24} told no time (read at once, or waiting for memory)")
        else:
            print(f"  {name:<24} told {w[0]:5.0f} s, waited {w[1]:6.1f} s: "
                  f"{'within' if abs(w[0] - w[1]) <= max(w[1] / 2, 1.0) else 'NOT within'}")
    goal = 3500 if args.readers <= 3 else 4000
    print(f"the server's peak resident memory in the class: {mem.peak:,.0f} MB (goal ≤ {goal} MB)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    sys.exit(main())
