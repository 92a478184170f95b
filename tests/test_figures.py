import warnings

import numpy as np
import pytest

from ui import figures


@pytest.mark.parametrize("reduce", ["mean", "max"])
@pytest.mark.parametrize("n", [10, 385, 800, 1024])
def test_downsample_pools_like_nanmean_and_keeps_empty_blocks_empty(n, reduce):
    rng = np.random.default_rng(n)
    grid = rng.random((n, n)).astype(np.float32)
    grid[np.triu_indices(n, 1)] = np.nan  # a causal view: above the diagonal is empty
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pooling must not warn (all-empty blocks)
        pooled, f = figures.downsample(grid, reduce)
    assert pooled.shape[0] <= figures.MAX_SIDE and f == max(1, -(-n // figures.MAX_SIDE))
    m = -(-n // f)
    padded = np.full((m * f, m * f), np.nan, dtype=np.float32)
    padded[:n, :n] = grid
    blocks = padded.reshape(m, f, m, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expect = np.nanmax(blocks, axis=(1, 3)) if reduce == "max" else np.nanmean(blocks, axis=(1, 3))
    if f == 1:
        expect = grid
    np.testing.assert_allclose(pooled, expect, rtol=1e-5, equal_nan=True)
    if f > 1:
        assert np.isnan(pooled[0, -1]) and not np.isnan(pooled[-1, 0])


def test_the_window_band_outline_leaves_every_cell_of_the_window_whole():
    import plotly.graph_objects as go

    n, w = 12, 3
    fig = figures.add_band(go.Figure(), n, w)
    lines = []
    for tr in fig.data:
        (x0, x1), (y0, y1) = tr.x, tr.y
        assert (y1 - y0) == pytest.approx(x1 - x0)  # a diagonal: y = x + c
        lines.append(y0 - x0)
    upper, lower = sorted(lines)
    for i in range(n):
        for j in range(n):
            corners = [(j + dx) - (i + dy) for dx in (-0.5, 0.5) for dy in (-0.5, 0.5)]  # x − y at each corner
            inside = 0 <= i - j < w
            # in the window: whole between the lines; just outside: cut or beyond, never whole inside
            whole = all(upper <= -c <= lower for c in corners)
            assert whole == inside, (i, j)
