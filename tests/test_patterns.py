import itertools

import pytest
import torch

from attn import patterns


@pytest.mark.parametrize("causal", [True, False])
def test_cells_equals_the_count_of_true_cells_of_the_dense_pattern(causal):
    for n, w in itertools.product([1, 2, 5, 17, 64, 65], [1, 2, 3, 16, 64, 100]):
        for hubs in [(), (0,), (n - 1,), (n // 2, 0, n // 2), tuple(range(0, n, 7))]:
            grid = patterns.pattern_grid(n, w, patterns.check_hubs(n, hubs), causal)
            assert patterns.cells(n, w, hubs, causal) == int(grid.sum()), (n, w, hubs, causal)


def test_full_attention_cells_are_n_squared_or_the_causal_triangle():
    # by hand: n² pairs, and the triangle 1 + 2 + … + n = n(n+1)/2 of pairs j <= i
    for n, square, triangle in [(1, 1, 1), (2, 4, 3), (10, 100, 55), (1000, 1_000_000, 500_500)]:
        assert patterns.cells(n, None, (), False) == square
        assert patterns.cells(n, None, (), True) == triangle
    # and by brute force, pair by pair, on small n (the grid too)
    for n in [1, 2, 10, 33]:
        pairs = [(i, j) for i in range(n) for j in range(n)]
        assert patterns.cells(n, None, (), False) == len(pairs)
        assert patterns.cells(n, None, (), True) == sum(1 for i, j in pairs if j <= i)
        assert int(patterns.pattern_grid(n, None, (), True).sum()) == sum(1 for i, j in pairs if j <= i)


def test_causal_window_row_is_the_w_most_recent_tokens_including_itself():
    grid = patterns.pattern_grid(10, 3, (), True)
    assert grid[5].nonzero().flatten().tolist() == [3, 4, 5]
    assert grid[0].nonzero().flatten().tolist() == [0]
    bi = patterns.pattern_grid(10, 3, (), False)
    assert bi[5].nonzero().flatten().tolist() == [3, 4, 5, 6, 7]


def test_hub_row_sees_all_earlier_keys_and_hub_column_is_seen_by_later_queries():
    grid = patterns.pattern_grid(12, 2, (6,), True)
    assert grid[6].nonzero().flatten().tolist() == list(range(7))  # hub row, causal
    assert grid[:, 6].nonzero().flatten().tolist() == list(range(6, 12))  # hub column
    bi = patterns.pattern_grid(12, 2, (6,), False)
    assert bool(bi[6].all()) and bool(bi[:, 6].all())


def test_window_of_n_or_more_is_full_attention():
    for n in [1, 7, 30]:
        assert torch.equal(patterns.pattern_grid(n, n, (), True), patterns.pattern_grid(n, None, (), True))
        assert patterns.cells(n, n + 5, (), False) == n * n


@pytest.mark.parametrize("bad", [0, -3, 2.5, "4", None, True, float("inf")])
def test_bad_window_raises_value_error(bad):
    with pytest.raises(ValueError, match="window"):
        patterns.check_window(bad)


def test_hub_out_of_range_raises_value_error():
    with pytest.raises(ValueError, match="outside"):
        patterns.check_hubs(10, (10,))
    with pytest.raises(ValueError, match="outside"):
        patterns.cells(10, 3, (-1,))


def test_cells_grow_linearly_for_window_and_quadratically_for_full():
    w = 64
    for n in [1024, 4096]:
        assert patterns.cells(2 * n, w) / patterns.cells(n, w) == pytest.approx(2, rel=0.05)
        assert patterns.cells(2 * n) / patterns.cells(n) == pytest.approx(4, rel=0.01)
