"""Step 7's live benchmark: bounded, with a progress bar, results kept per device
and settings for every reader."""

from __future__ import annotations

import streamlit as st

from attn import bench, methods
from attn.costs import Shape
from attn.device import pick_device

from server.lru import CountLRU

from . import analyses, figures, measures
from .i18n import Translator


def plan_methods() -> list[tuple[str, str]]:
    """(method, backend) of the live run: every method tagged ``bench``, and full
    attention written out (its dense reference) beside the fused kernel."""
    out = []
    for m in methods.tagged(methods.BENCH):
        out.append((m.name, "auto"))
        if m.reference_label_key:
            out.append((m.name, "reference"))
    return out


def method_name(t: Translator, method: str, s: Shape, backend: str = "auto") -> str:
    m = methods.get(method)
    key = m.reference_label_key if backend == "reference" else m.label_key
    return t(key, w=s.window, g=s.hubs)


KERNEL_KEYS = {"sdpa": "sdpa", "flex": "flex", "blocked": "blocked", "chunked scan": "scan", "reference": "reference",
               "gather": "gather"}


def kernel_name(t: Translator, backend: str) -> str:
    """A kernel as the reader's language names it (the registry's kernel names are the
    engine's identifiers)."""
    key = KERNEL_KEYS.get(backend)
    return t(f"kernels.{key}") if key else backend


RUNS = 16  # finished live runs kept per process


def _results() -> CountLRU:
    """Finished live runs, keyed by device and settings, shared by readers."""
    return measures.finished_results("live", RUNS)


def key(device, sizes: list[int], s: Shape | None = None) -> tuple:
    """What a live run's results depend on: the device, the sizes and the shape."""
    s = s or Shape()
    return (str(device), tuple(sizes), s.window, s.hubs, s.d, s.heads)


def results(key) -> list | None:
    return _results().get(key)


def keep(key, rows: list) -> None:
    """A finished live run's rows (``key``: :func:`key`), kept for every reader."""
    _results()[key] = rows


def forget_all() -> None:
    """Every kept live run dropped: step 7's live benchmark is unmeasured again."""
    _results().clear()


def on_this_device() -> tuple[list | None, int]:
    """Step 7's live rows on this process's device (None before anyone ran it) and the
    largest size: what step 7's summary is built from, on its page and in a class's
    summaries built ahead."""
    device = pick_device()
    sizes = bench.live_sizes(device)
    return results(key(device, sizes)), sizes[-1]


def run(t: Translator, key, s: Shape, device, sizes: list[int]) -> list:
    """Measure every method at every size (times first, then memory), showing
    progress; keep the result."""
    bar = st.progress(0.0, text=t("payoff.running"))

    def progress(done, total, method, n):
        bar.progress(done / total, text=t("payoff.running_one", m=method_name(t, method, s), n=t.int(n)))

    plan = [(m, n, b) for n in sizes for m, b in plan_methods()]

    def work():
        done = results(key)  # measured meanwhile by a reader ahead in the line
        if done is not None:
            return done
        # three runs each: a sentence about how a time grows reads their spread (bench.growth)
        rows = bench.run_plan(plan, s, device, repeats=3, max_seconds=2.0, progress=progress)
        keep(key, rows)
        return rows

    try:
        return analyses.in_line("bench", work, same=key)
    finally:
        bar.empty()  # a failed run leaves no bar behind


def topk_parts(rows: list, n2: int) -> dict[str, str | None]:
    """What each top-k method's runs from n2/2 to n2 say of its work's split, beyond their
    spread (bench.growth). A time a·n + b·n² grows (2a·n + 4b·n²)/(a·n + b·n²) times when n
    doubles, between 2 and 4: past 3 exactly when its n² part (scoring every pair to choose
    the keys) is the larger ("square"), below 3 when the part that grows like n (gathering
    each query's k keys) is ("line"); below 2, which neither part can give, fixed costs
    outweigh both ("fixed"); None: the runs overlap, too noisy to tell."""
    out = {}
    for m in (methods.top_k(), methods.top_k(indexer=True)):
        key_ = bench.row_key(m.name, "auto")
        three, two = bench.growth(rows, key_, n2, 3.0), bench.growth(rows, key_, n2, 2.0)
        out[m.name] = "fixed" if two == "under" else "square" if three == "over" else "line" if three == "under" \
            else None
    return out


def topk_split(t: Translator, parts: dict[str, str | None]) -> str:
    """The sentence for :func:`topk_parts`: both methods alike, or each named with its part;
    said as too noisy to tell where the runs do not allow it."""
    names = {methods.top_k().name: t("methods.topk"), methods.top_k(indexer=True).name: t("methods.topk_indexer")}
    kinds = set(parts.values())
    if kinds == {"square"}:
        return t("payoff.live_topk_square")
    if kinds == {"line"}:
        return t("payoff.live_topk_line")
    if kinds == {"fixed"}:
        return t("payoff.live_topk_fixed")
    if None in kinds:
        return t("payoff.live_topk_noisy")
    said = {kind: t.list(names[m] for m, k in parts.items() if k == kind) for kind in kinds}
    return t.sentences([t(f"payoff.live_topk_part_{kind}", who=who) for kind, who in said.items()])


def walls_shown(rows: list, n2: int) -> tuple[str, dict]:
    """Whether this run shows the two walls on full attention's fused kernel from n2/2 to
    n2: its peak memory grew at most like n (at most 2.5×) while its time grew past 3×
    beyond its runs' spread. The locale key of what is said, and its numbers."""
    key_ = bench.row_key(methods.exact().name, "auto")
    by = {(r.key, r.n): r for r in rows}
    small, large = by.get((key_, n2 // 2)), by.get((key_, n2))
    if small is None or large is None or not small.peak_bytes or large.peak_bytes is None:
        return "payoff.walls_note_unmeasured", {}
    memory, seconds = large.peak_bytes / small.peak_bytes, large.seconds / small.seconds
    shown = memory <= 2.5 and bench.growth(rows, key_, n2, 3.0) == "over"
    return ("payoff.walls_note" if shown else "payoff.walls_note_unclear"), {"mem": memory, "time": seconds}


def table(t: Translator, rows: list, s: Shape) -> dict:
    """The measured rows as columns of text, numbers in the reader's language."""
    ratios = bench.ratios(rows)
    cols = {t("payoff.col_method"): [], t("common.n_axis"): [], t("payoff.ms_axis"): [], t("payoff.col_ratio"): [],
            t("payoff.mib_axis"): [], t("payoff.col_backend"): []}
    for r in rows:
        ratio = ratios.get((r.key, r.n))
        cols[t("payoff.col_method")].append(method_name(t, r.method, s, r.backend))
        cols[t("common.n_axis")].append(t.int(r.n))
        cols[t("payoff.ms_axis")].append(t.float(r.seconds * 1e3, 2))
        cols[t("payoff.col_ratio")].append("" if ratio is None else t.float(ratio, 2))
        cols[t("payoff.mib_axis")].append("—" if r.peak_bytes is None else t.float(r.peak_bytes / 2**20, 1))
        cols[t("payoff.col_backend")].append(kernel_name(t, r.backend))
    return cols


def figures_of(t: Translator, rows: list, sizes: list[int], s: Shape):
    """The live run's two charts: time and peak memory against n, per method and backend."""
    ticks = (sizes, [t.int(n) for n in sizes])
    time_series, mem_series = [], []
    for m, backend in plan_methods():
        rs = [r for r in rows if r.key == bench.row_key(m, backend)]
        label, kernel = method_name(t, m, s, backend), kernel_name(t, rs[-1].backend)
        ran = rs[-1].extra["dtype"] if kernel in label else f"{kernel} · {rs[-1].extra['dtype']}"  # once: full (SDPA)
        name = f"{label} [{ran}]"
        time_series.append({"name": name, "x": [r.n for r in rs], "y": [r.seconds * 1e3 for r in rs],
                            "hover": t("payoff.hover_ms")})
        mem_series.append({"name": name, "x": [r.n for r in rs], "y": [(r.peak_bytes or 0) / 2**20 for r in rs],
                           "hover": t("payoff.hover_mib")})
    common = dict(x_title=t("common.n_axis"), separators=t.separators, log_x=True, log_y=True, x_ticks=ticks)
    return (figures.lines(time_series, title=t("payoff.time_title"), y_title=t("payoff.ms_axis"), **common),
            figures.lines(mem_series, title=t("payoff.mem_title"), y_title=t("payoff.mib_axis"), **common))
