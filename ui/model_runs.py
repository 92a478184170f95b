"""Step 7's run of the model itself on the reader's text (attn.model_run: n/4, n/2 and n,
four ways): through the process's queue, with a progress bar that says the time left,
stopped by the reader's Stop button (its rerun ends the run at its next step); results
kept per model, text and length for every reader."""

from __future__ import annotations

import time

import streamlit as st

from attn import model_run

from . import analyses, measures, served_model
from .i18n import Translator

RUNS = 8  # finished runs kept per process


def _results():
    return measures.finished_results("model_runs", RUNS)


def key(model_id: str, text: str, n: int) -> tuple:
    return (model_id, text, n)


def result(key) -> model_run.FourWays | None:
    return _results().get(key)


def run(t: Translator, key, ids: list[int], hubs: tuple[int, ...], seconds_a_token: float) -> model_run.FourWays:
    """The four ways on ``ids``, showing each run and the time left: before the first run
    ends, the forecast from the model's own pace on the text (``seconds_a_token``: its
    analysis' seconds over its tokens; attn.model_run.forecast); then the pace of the runs so
    far, each weighed by its share of the work (attn.model_run.run_units). Kept for every
    reader."""
    model = served_model.get_model(key[0])
    units = model_run.run_units(len(ids), model_run.measured(model))
    bar = st.progress(0.0, text=t("payoff.model_running_first"))
    started = time.monotonic()  # again when the first run starts: the wait in line is not the run's
    sliding = any(x.sliding for x in model.arch.layers)

    def progress(done: int, total: int, way: str, n: int) -> None:
        nonlocal started
        if not done:
            started = time.monotonic()
        spent = time.monotonic() - started
        name = t("payoff.way_window") if way == "own" and not sliding else t(f"payoff.way_{way}")  # as the table says
        said = t("payoff.model_running", way=name, n=t.int(n), done=done, total=total)
        ran, left = sum(units[:done]), sum(units[done:])
        pace = spent / ran if done else seconds_a_token
        said = t.sentences([said, t("payoff.model_left", s=t.int(max(1, round(pace * left))))])
        bar.progress(ran / (ran + left), text=said)

    def work():
        done = result(key)
        if done is not None:
            return done
        out = model_run.four_ways(served_model.get_model(key[0]), ids, hubs, progress=progress)
        _results()[key] = out
        return out

    try:
        return analyses.in_line("model_run", work, same=key, weight=sum(units))
    finally:
        bar.empty()


def way_name(t: Translator, res: model_run.FourWays, way: str) -> str:
    """A way as the page names it: "its own layout" only where the layers replaced are the
    model's own sliding ones (a model with none gets a window in every layer but its last)."""
    return t("payoff.way_window") if way == "own" and not res.own_sliding else t(f"payoff.way_{way}")


def table(t: Translator, res: model_run.FourWays) -> dict:
    """Every (way, length) as columns of text, numbers in the reader's language."""
    cols = {t("payoff.col_way"): [], t("common.n_axis"): [], t("payoff.col_seconds"): [],
            t("payoff.col_attention_mib"): [], t("payoff.col_kl"): [], t("payoff.col_ppl"): []}
    for r in res.runs:
        cols[t("payoff.col_way")].append(way_name(t, res, r.way))
        cols[t("common.n_axis")].append(t.int(r.n))
        cols[t("payoff.col_seconds")].append(t.float(r.seconds, 2))
        cols[t("payoff.col_attention_mib")].append("—" if r.peak_bytes is None else t.float(r.peak_bytes / 2**20, 1))
        cols[t("payoff.col_kl")].append("—" if r.kl is None else t.float(max(0.0, r.kl), 4))
        cols[t("payoff.col_ppl")].append("—" if r.perplexity is None else
                                         f"{t.float(r.perplexity, 1)} ({t.float(r.base_perplexity, 1)})")
    return cols


SLOWER = 1.25  # a measured ratio this much above the cost model's is said plainly


def slower_than_counted(res: model_run.FourWays) -> list[tuple[str, float, float]]:
    """The ways whose time grew from n/2 to n by more than SLOWER × the cost model's
    operations did: (way, measured, counted)."""
    out = []
    for way in model_run.WAYS:
        measured, counted = res.ratio(way), res.ratio(way, lambda r: r.operations)
        if measured is not None and counted is not None and measured > SLOWER * counted:
            out.append((way, measured, counted))
    return out


def payoff_shown(res: model_run.FourWays) -> bool:
    """Whether this run shows the payoff the step closes on: from n/2 to n, the model's own
    layout (or its window) grew less than full attention did."""
    full, own = res.ratio("full"), res.ratio("own")
    return full is not None and own is not None and own < full
