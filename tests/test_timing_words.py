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

