"""A sentence about which of two timed things runs faster reads repeated runs and their
spread, never one timing: attn.bench.clearly_faster, and the words step 5 draws from it."""

import pytest

from attn import bench
from pages import linear


def test_clean_repeats_name_the_faster_and_overlapping_ones_name_none():
    fast, slow = [1.0, 1.1, 1.05, 0.98, 1.02], [2.0, 2.1, 1.9, 2.2, 2.05]
    assert bench.clearly_faster(fast, slow) == "a"
    assert bench.clearly_faster(slow, fast) == "b"
    # the medians differ (1.1 against 1.3) but the middle halves of the runs overlap: too noisy
    noisy_a, noisy_b = [0.7, 1.1, 1.6, 0.9, 1.4], [1.0, 1.3, 1.8, 0.8, 1.5]
    assert bench.clearly_faster(noisy_a, noisy_b) is None
    # one run each, however far apart, tells nothing
    assert bench.clearly_faster([1.0], [9.0]) is None
    assert bench.clearly_faster([1.0, 1.0], [9.0, 9.0]) is None


def test_the_quartiles_are_the_runs_own_by_hand():
    # five runs: the inclusive quartiles are the 2nd and 4th smallest; [1, 2] and [3, 4] apart
    assert bench.clearly_faster([0, 1, 1.5, 2, 10], [0.5, 3, 3.5, 4, 9]) == "a"
    # the same runs with b's second smallest at 1.9: the middles [1, 2] and [1.9, 4] overlap
    assert bench.clearly_faster([0, 1, 1.5, 2, 10], [0.5, 1.9, 3.5, 4, 9]) is None


@pytest.mark.parametrize("side,faster,causal,key", [
    ("long", "summary", True, None),  # the clock agrees with the count: nothing to add
    ("long", "grid", True, "linear.clock_against_causal"),
    ("long", "grid", False, "linear.clock_against"),
    ("short", "grid", True, None),
    ("short", "summary", True, "linear.clock_against_short"),
    ("between", "grid", True, None),
    ("between", "summary", False, None),
    ("long", None, True, "linear.clock_noisy"),
    ("short", None, False, "linear.clock_noisy"),
])
def test_step_5_speaks_of_the_clock_only_when_it_is_clear_or_against_the_count(side, faster, causal, key):
    assert linear.clock_sentence(side, faster, causal) == key


def test_the_orders_timing_verdict_reads_the_runs_it_timed(monkeypatch):
    """linear_orders' ``faster`` comes from its own runs: with the grid order made slow on
    purpose, every run says so and the summary is faster beyond the spread."""
    import time

    import torch

    from attn import linear_kernels, outputs
    from attn.layer import LayerAttention

    slow_grid = linear_kernels.linear_attention_quadratic

    def slower(*args, **kwargs):
        time.sleep(0.02)
        return slow_grid(*args, **kwargs)

    monkeypatch.setattr(linear_kernels, "linear_attention_quadratic", slower)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 16, 4, generator=g) for _ in range(3))
    r = outputs.linear_orders(q, k, v, LayerAttention(causal=True, window=None, scale=0.5), feature="elu",
                              causal=True)
    assert r["runs"] == outputs.ORDER_RUNS and r["faster"] == "summary"



def _rows(method: str, small: list[float], large: list[float], n2: int = 2048, mem=(1.0, 2.0)) -> list:
    """Two timed rows of one method at n2/2 and n2, with their runs."""
    import statistics

    return [bench.Row(method, n, statistics.median(ts), int(m * 2**20), 0.0, 0.0, "auto", {"times": ts})
            for n, ts, m in ((n2 // 2, small, mem[0]), (n2, large, mem[1]))]


def test_a_growth_is_said_only_beyond_the_spread_of_the_runs():
    # 3 runs at n of about 1 s: ×3 is about 3 s; at 2n clearly 4 s, clearly 2.5 s, or 2.9–3.1 s
    small = [0.98, 1.0, 1.02]
    assert bench.growth(_rows("full", small, [3.9, 4.0, 4.1]), "full", 2048, 3.0) == "over"
    assert bench.growth(_rows("full", small, [2.4, 2.5, 2.6]), "full", 2048, 3.0) == "under"
    assert bench.growth(_rows("full", small, [2.9, 3.0, 3.1]), "full", 2048, 3.0) is None
    assert bench.growth(_rows("full", small, [4.0]), "full", 2048, 3.0) is None  # one run: too few
    assert bench.growth(_rows("full", small, [4.0, 4.0, 4.0]), "window", 2048, 3.0) is None  # not measured


def test_step_7s_sentences_read_the_runs_they_are_about():
    from attn import methods
    from ui import live_bench
    from ui.i18n import Translator

    t = Translator("en")
    oracle, indexer = methods.top_k().name, methods.top_k(indexer=True).name
    small = [0.98, 1.0, 1.02]
    clean = _rows(oracle, small, [3.9, 4.0, 4.1]) + _rows(indexer, small, [2.4, 2.5, 2.6])
    parts = live_bench.topk_parts(clean, 2048)
    assert parts == {oracle: "square", indexer: "line"}
    said = live_bench.topk_split(t, parts)
    assert t("payoff.live_topk_part_square", who=t("methods.topk")) in said
    assert t("payoff.live_topk_part_line", who=t("methods.topk_indexer")) in said
    # ratios of 1.59× and 1.32× (below 2, which neither part can give): fixed costs, never a split
    low = _rows(oracle, small, [1.55, 1.59, 1.62]) + _rows(indexer, small, [1.3, 1.32, 1.35])
    assert live_bench.topk_split(t, live_bench.topk_parts(low, 2048)) == t("payoff.live_topk_fixed")
    noisy = _rows(oracle, [0.5, 1.0, 1.5], [1.5, 3.0, 4.5]) + _rows(indexer, small, [2.4, 2.5, 2.6])
    assert live_bench.topk_split(t, live_bench.topk_parts(noisy, 2048)) == t("payoff.live_topk_noisy")
    # the two walls: memory ×2, time clearly past ×3 — shown; memory that fell, or a time ratio of 1.8 — not
    full = methods.exact().name
    assert live_bench.walls_shown(_rows(full, small, [3.9, 4.0, 4.1]), 2048)[0] == "payoff.walls_note"
    key, numbers = live_bench.walls_shown(_rows(full, small, [1.7, 1.8, 1.9], mem=(3.2, 1.2)), 2048)
    assert key == "payoff.walls_note_unclear"
    assert abs(numbers["mem"] - 1.2 / 3.2) < 1e-6 and abs(numbers["time"] - 1.8) < 1e-9
    assert live_bench.walls_shown(_rows(full, small, [3.9, 4.0, 4.1], mem=(2.0, 8.0)), 2048)[0] == \
        "payoff.walls_note_unclear"  # memory ×4: it did not grow like n
    assert live_bench.walls_shown([], 2048)[0] == "payoff.walls_note_unmeasured"


def test_step_7_closes_on_the_payoff_only_where_its_run_shows_it():
    from types import SimpleNamespace

    from ui import model_runs

    def run(full, own):
        return SimpleNamespace(ratio=lambda way, *_: {"full": full, "own": own}.get(way))

    assert model_runs.payoff_shown(run(3.1, 2.2))
    assert not model_runs.payoff_shown(run(2.02, 2.52))  # the layout grew faster than full attention
    assert not model_runs.payoff_shown(run(None, 2.0))


def test_step_7_says_when_the_window_holds_the_whole_text(make_app):
    """The tiny model slides a window of 8: a text of 8 tokens (7 bytes and <bos>) is read by
    «its own layout» and «window + hubs» exactly as full attention reads it, and step 7 says so."""
    from helpers import page_path
    from ui import i18n, walk

    at = make_app("tiny", "en")
    at.run()
    at.sidebar.text_area(key="text").input("abcdefg").run()
    at.switch_page(page_path(walk.get("payoff"))).run()
    assert not at.exception, [e.value for e in at.exception]
    said = i18n.translate("en", "payoff.model_window_covers", n="8", w="8",
                          own=i18n.translate("en", "payoff.way_own"), hubs=i18n.translate("en", "payoff.way_hubs"))
    assert said in [c.value for c in at.caption]
    at.sidebar.text_area(key="text").input("abcdefgh").run()  # 9 tokens: the window drops one
    assert not [c.value for c in at.caption if "holds the whole text" in c.value]
