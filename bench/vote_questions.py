"""What a teacher's click on «Ask the matched question» or «Ask for an estimate» costs.

    .venv/bin/python -m bench.vote_questions [--lang en] [--model gemma]

On a sample text and the served model, with every page's settings at first: for each step's
matched question and estimate, the seconds to build it in the three languages as the vote's
copy does (ui.summaries.asked, after the step's own question was built once, as the page
has), and its measured answer — with the machine's matmul rate beside the times.
"""

from __future__ import annotations

import argparse
import time

import pages  # noqa: F401 (importing it fills the walk: ui.walk)
from attn.bench import matmul_gflops
from ui import analyses, measures, setting_table, walk, summaries
from ui.i18n import LANGS, Translator
from ui.samples import sample_text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lang", default="en")
    ap.add_argument("--model", default="gemma")
    args = ap.parse_args()
    print(f"this machine: one 2,048² float32 matmul at {matmul_gflops('cpu'):.0f} GFLOP/s")
    text = sample_text(args.lang)
    a = analyses.get_analysis(text, args.model)
    cfg = setting_table.settings_for(a, measures.setting_context(text, args.model), {})
    print(f"{args.model}, the {args.lang} sample: {a.n} tokens\n")
    print("| question | of | page's own (s) | three languages (s) | answer |\n|---|---|---|---|---|")
    for step in walk.steps():
        given = (a, text, args.model, cfg) if step.needs_text else (None, "", args.model, {})
        for asked in (*step.matched, *step.estimates):
            started = time.perf_counter()
            summaries.asked(step, asked.of, Translator(args.lang), *given)
            own = time.perf_counter() - started
            started = time.perf_counter()
            for lang in LANGS:
                q = summaries.asked(step, asked.id, Translator(lang), *given)
            took = time.perf_counter() - started
            answer = f"{q.answer:.4g}" if isinstance(q.answer, float) else q.answer
            print(f"| {asked.id} | {asked.of} | {own:.2f} | {took:.2f} | {answer} |")


if __name__ == "__main__":
    main()
