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
