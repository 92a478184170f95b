"""Step 7's live benchmark: bounded, with a progress bar, results kept per device
and settings for every reader."""

from __future__ import annotations

import streamlit as st

from attn import bench

from .i18n import Translator

METHODS = {"sdpa": "step7.m_full", "naive": "step7.m_naive", "window": "step7.m_window",
           "window_hubs": "step7.m_window_hubs", "linear": "step7.m_linear"}


def method_name(t: Translator, method: str, s: bench.Setting) -> str:
    return t(METHODS[method], w=s.window, g=s.hubs)


@st.cache_resource(show_spinner=False)
def _results() -> dict:
    """Finished live runs, keyed by device and settings, shared by readers."""
    return {}


def results(key) -> list | None:
    return _results().get(key)


def run(t: Translator, key, s: bench.Setting, device, sizes: list[int]) -> list:
    """Measure every method at every size (times first, then memory), showing
    progress; keep the result."""
    bar = st.progress(0.0, text=t("step7.running"))

    def progress(done, total, method, n):
        bar.progress(done / total, text=t("step7.running_one", m=method_name(t, method, s), n=t.int(n)))

    rows = bench.run_plan([(m, n) for n in sizes for m in METHODS], s, device, repeats=2, max_seconds=2.0,
                          progress=progress)
    bar.empty()
    _results()[key] = rows
    return rows


def table(t: Translator, rows: list, s: bench.Setting) -> dict:
    """The measured rows as columns of text, numbers in the reader's language."""
    ratios = bench.ratios(rows)
    cols = {t("step7.col_method"): [], t("common.n_axis"): [], t("step7.ms_axis"): [], t("step7.col_ratio"): [],
            t("step7.mib_axis"): [], t("step7.col_backend"): []}
    for r in rows:
        ratio = ratios.get((r.method, r.n))
        cols[t("step7.col_method")].append(method_name(t, r.method, s))
        cols[t("common.n_axis")].append(t.int(r.n))
        cols[t("step7.ms_axis")].append(t.float(r.seconds * 1e3, 2))
        cols[t("step7.col_ratio")].append("" if ratio is None else t.float(ratio, 2))
        cols[t("step7.mib_axis")].append("—" if r.peak_bytes is None else t.float(r.peak_bytes / 2**20, 1))
        cols[t("step7.col_backend")].append(r.backend)
    return cols
