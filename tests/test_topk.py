"""Top-k selection against a brute force written apart from the kernel: each row's
scores sorted in plain Python, the k largest kept, softmax in float64."""

import math
import os

import pytest
import torch

from attn import topk
from helpers import ROOT


def brute(q, k, v, keep, causal, scale=None, choose=None, also=None, span=None):
    """Row by row, in Python: sort the visible keys by score (or by ``choose``'s scores),
    keep the first ``keep`` (and the keys ``also(i, j)`` keeps besides), softmax of the
    exact scores over those. ``span``: a sliding layer's window, the keys a row may see at
    most span − 1 away."""
    b, h, n, d = q.shape
    s = d ** -0.5 if scale is None else scale
    out = torch.zeros(b, h, n, v.shape[-1], dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                seen = range(i + 1) if causal else range(n)
                if span is not None:
                    seen = [j for j in seen if abs(i - j) < span]
                exact = {j: float(q[bi, hi, i].double() @ k[bi, hi, j].double()) * s for j in seen}
                rank = exact if choose is None else {j: choose(bi, hi, i, j) for j in seen}
                kept = sorted(seen, key=lambda j: -rank[j])[:keep]
                if also is not None:
                    kept = sorted(set(kept) | {j for j in seen if also(i, j)})
                top = max(exact[j] for j in kept)
                e = {j: math.exp(exact[j] - top) for j in kept}
                total = sum(e.values())
                for j in kept:
                    out[bi, hi, i] += e[j] / total * v[bi, hi, j].double()
    return out


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
@pytest.mark.parametrize("n,keep,rows", [(13, 4, 5), (9, 1, 128), (7, 20, 3), (16, 16, 4)])
def test_the_oracle_is_softmax_over_each_rows_k_highest_scores(causal, n, keep, rows):
    g = torch.Generator().manual_seed(n * 31 + keep)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for _ in range(3))
    got = topk.topk_attention(q, k, v, keep, causal=causal, rows=rows)
    assert torch.allclose(got.double(), brute(q, k, v, keep, causal), atol=1e-5)


def test_a_scale_is_honoured_and_the_dense_selection_counts_each_rows_cells():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 11, 4, generator=g) for _ in range(3))
    got = topk.topk_attention(q, k, v, 3, causal=True, scale=0.7)
    assert torch.allclose(got.double(), brute(q, k, v, 3, True, scale=0.7), atol=1e-5)
    for causal in (True, False):
        grid = topk.selection(q, k, 3, causal=causal, rows=4)
        per_row = grid.sum(-1)[0, 0].tolist()
        assert per_row == [min(3, i + 1) if causal else 3 for i in range(11)]
        assert int(grid[0, 0].sum()) == topk.cells(11, 3, causal)
        if causal:  # nothing after the query
            assert not torch.triu(grid[0, 0], diagonal=1).any()


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
@pytest.mark.parametrize("n,keep,span,rows", [(20, 4, 6, 5), (17, 3, 2, 128), (12, 9, 5, 4), (25, 2, 30, 7)])
def test_in_a_sliding_layer_the_oracle_chooses_only_keys_inside_the_layers_window(causal, n, keep, span, rows):
    g = torch.Generator().manual_seed(n * 7 + span)
    q, k, v = (torch.randn(1, 2, n, 8, generator=g) for _ in range(3))
    got = topk.topk_attention(q, k, v, keep, causal=causal, rows=rows, span=span)
    assert torch.allclose(got.double(), brute(q, k, v, keep, causal, span=span), atol=1e-5)
    grid = topk.selection(q, k, keep, causal=causal, rows=rows, span=span)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    assert not (grid & ((i - j).abs() >= span)).any()  # nothing the layer never reads
    # each row keeps min(k, the keys its window holds), counted by hand
    seen = [len([c for c in (range(r + 1) if causal else range(n)) if abs(r - c) < span]) for r in range(n)]
    assert grid.sum(-1)[0, 0].tolist() == [min(keep, s_) for s_ in seen]
    assert topk.cells(n, keep, causal, span) == sum(min(keep, s_) for s_ in seen)
    with_parts = topk.beside_parts(q, k, v, keep, lambda b, h, i_, j_: i_ == j_, causal=causal, rows=rows, span=span)
    assert torch.allclose(with_parts.double(), brute(q, k, v, keep, causal, span=span, also=lambda a, b: a == b),
                          atol=1e-5)


def test_cells_by_hand():
    assert topk.cells(10, 4, causal=False) == 40
    assert topk.cells(10, 4, causal=True) == 1 + 2 + 3 + 4 * 7
    assert topk.cells(3, 8, causal=True) == 6
    assert topk.for_window(5, True) == 5 and topk.for_window(5, False) == 9


def test_the_oracle_keeps_at_least_the_weight_a_window_of_the_same_cells_keeps():
    g = torch.Generator().manual_seed(7)
    q, k = torch.randn(1, 2, 40, 16, generator=g) * 2, torch.randn(1, 2, 40, 16, generator=g)
    w = 6
    scores = (q @ k.transpose(-1, -2)) / 4
    i, j = torch.arange(40)[:, None], torch.arange(40)[None, :]
    causal = j <= i
    weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)
    window = causal & (i - j < w)
    chosen = topk.selection(q, k, topk.for_window(w, True), causal=True)
    kept_top = (weights * chosen).sum(-1)
    kept_window = (weights * window).sum(-1)
    assert (kept_top >= kept_window - 1e-6).all()
    assert (kept_top > kept_window + 1e-3).any()  # on random scores the window is not the best choice


def test_an_indexer_with_every_direction_chooses_as_the_oracle_and_fewer_directions_recall_less():
    g = torch.Generator().manual_seed(11)
    n, d = 48, 16
    q, k, v = (torch.randn(1, 2, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    assert topk.recall(q, k, 8, d, causal=True, rows=7) == pytest.approx(1.0)
    full = topk.topk_attention(q, k, v, 8, causal=False, indexer_dims=d)
    assert torch.allclose(full, topk.topk_attention(q, k, v, 8, causal=False), atol=1e-10)
    few = topk.recall(q, k, 8, 2, causal=False)
    assert 0 < few < 1


def test_the_indexers_choice_against_a_brute_force_with_its_projection():
    g = torch.Generator().manual_seed(5)
    n, d, dims = 12, 6, 2
    q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    # the projection by hand: the top right singular vectors of the key matrix = the top
    # eigenvectors of kᵀk
    vals, vecs = torch.linalg.eigh(k[0, 0].T @ k[0, 0])
    p = vecs[:, vals.argsort(descending=True)[:dims]]
    qp, kp = q[0, 0] @ p, k[0, 0] @ p
    got = topk.topk_attention(q, k, v, 3, causal=True, indexer_dims=dims)
    want = brute(q, k, v, 3, True, choose=lambda b, h, i, j: float(qp[i] @ kp[j]))
    assert torch.allclose(got, want, atol=1e-10)
    found = topk.selection(q, k, 3, causal=True, indexer_dims=dims)
    oracle = topk.selection(q, k, 3, causal=True)
    assert topk.recall(q, k, 3, dims, causal=True) == pytest.approx(float((found & oracle).sum() / oracle.sum()))


@pytest.mark.parametrize("n, d, dims", [(40, 12, 4), (5, 12, 8)], ids=["more keys than dims", "fewer keys"])
def test_the_indexers_directions_span_the_keys_top_singular_vectors(n, d, dims):
    # the reference: numpy's SVD of each head's keys (the projector P Pᵀ, which no sign or
    # order of the directions changes); heads 0 and 2 share their keys, as grouped-query heads do
    import numpy as np

    g = torch.Generator().manual_seed(3)
    own = torch.randn(1, 2, n, d, generator=g)
    k = own[:, [0, 1, 0]]
    p = topk.principal_directions(k, dims)
    kept = min(dims, n)
    assert p.shape == (1, 3, d, kept)
    for h in range(3):
        _, _, vh = np.linalg.svd(k[0, h].double().numpy(), full_matrices=False)
        want = vh[:kept].T @ vh[:kept]
        got = (p[0, h].double() @ p[0, h].double().T).numpy()
        assert np.allclose(got, want, atol=1e-5)
    repeated = k[:, [0, 0, 0]]  # every head the same keys: computed once, the same directions
    assert torch.equal(topk.principal_directions(repeated, dims)[0, 2], p[0, 0])


@pytest.mark.parametrize("bad", [0, -1, 2.5, "x", None, True])
def test_a_bad_k_says_so(bad):
    with pytest.raises(ValueError, match="k must be"):
        topk.check_keep(bad)


def _error(out, exact):
    return float((out.double() - exact.double()).norm() / exact.double().norm())


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
def test_step_sixs_errors_measure_top_k_at_the_windows_cells_against_a_brute_force(causal):
    from attn import outputs
    from attn.layer import LayerAttention

    g = torch.Generator().manual_seed(21)
    n, d, w = 30, 8, 4
    q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))
    layer = LayerAttention(causal=causal, window=None, scale=0.5)
    res = outputs.output_errors(q, k, v, layer, window=w)
    exact = brute(q, k, v, n, causal, scale=0.5)  # every key kept: the exact layer
    keep = w if causal else 2 * w - 1  # the window's cells a row
    assert res["mean"]["topk"] == pytest.approx(_error(brute(q, k, v, keep, causal, scale=0.5), exact), rel=1e-4)
    p = topk.principal_directions(k, 16)  # d = 8 < 16 directions: the indexer sees every one, as the oracle
    assert p.shape[-1] == d
    assert res["mean"]["topk_indexer"] == pytest.approx(res["mean"]["topk"], rel=1e-4)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
def test_step_sixs_top_k_on_a_sliding_layer_keeps_to_the_layers_window(causal):
    """A layer that slides a window of 6 gives no weight farther back: top-k there chooses
    its k keys inside that window, and so keeps at least what the w nearest keep."""
    from attn import outputs
    from attn.layer import LayerAttention

    g = torch.Generator().manual_seed(5)
    n, d, w, span = 40, 8, 3, 6
    q, k, v = (torch.randn(1, 1, n, d, generator=g) * 2 for _ in range(3))
    k[..., 0, :] *= 6  # a far key that scores high for many rows: outside most rows' window
    layer = LayerAttention(causal=causal, window=span, scale=0.5)
    res = outputs.output_errors(q, k, v, layer, window=w)
    exact = brute(q, k, v, n, causal, scale=0.5, span=span)  # every key of the window: the layer itself
    keep = w if causal else 2 * w - 1
    assert res["mean"]["topk"] == pytest.approx(_error(brute(q, k, v, keep, causal, scale=0.5, span=span), exact),
                                                rel=1e-4)
    assert res["mean"]["topk"] <= res["mean"]["window"] + 1e-9


def test_with_a_bias_the_oracle_chooses_by_the_scores_the_layer_computes():
    from attn import outputs
    from attn.layer import LayerAttention

    g = torch.Generator().manual_seed(8)
    n, d = 12, 4
    q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    bias = (-3.0 * (i - j).abs()).float()[None, None]  # an ALiBi-like bias: near keys win
    layer = LayerAttention(causal=True, window=None, scale=1.0)
    res = outputs.output_errors(q, k, v, layer, window=3, bias=bias)

    def choose(b, h, i_, j_):
        return float(q[b, h, i_] @ k[b, h, j_]) + float(bias[0, 0, i_, j_])

    # softmax over the chosen cells of the biased scores, by hand
    out = torch.zeros(1, 1, n, d, dtype=torch.float64)
    for r in range(n):
        seen = sorted(range(r + 1), key=lambda c: -choose(0, 0, r, c))[:3]
        s = torch.tensor([choose(0, 0, r, c) for c in seen], dtype=torch.float64)
        out[0, 0, r] = torch.softmax(s, 0) @ v[0, 0, seen].double()
    full = torch.zeros(1, 1, n, d, dtype=torch.float64)
    for r in range(n):
        s = torch.tensor([choose(0, 0, r, c) for c in range(r + 1)], dtype=torch.float64)
        full[0, 0, r] = torch.softmax(s, 0) @ v[0, 0, : r + 1].double()
    assert res["mean"]["topk"] == pytest.approx(_error(out, full), rel=1e-4)


NO_GRID = """
import sys, torch
from attn import bench, patterns, topk
dims = None if sys.argv[1] == "none" else int(sys.argv[1])
n = 16384
g = torch.Generator().manual_seed(1)
q, k, v = (torch.randn(1, 1, n, 16, generator=g) for _ in range(3))
fixed = patterns.window_mask(64)
calls = [lambda: topk.topk_attention(q, k, v, 32, causal=True, indexer_dims=dims),
         lambda: topk.beside_parts(q, k, v, 32, fixed, causal=True, indexer_dims=dims)]
for call in calls:
    call()  # once first: what a library sets up on its first use in a process is not the call's own
    print(bench.peak_memory(call, "cpu"))
"""


@pytest.mark.parametrize("dims", [None, 4], ids=["oracle", "indexer"])
def test_top_k_never_holds_an_n_by_n_grid(dims):
    """Queries go in blocks: at 16,384 tokens an n×n float32 grid alone is 1 GiB; a call
    adds a small fraction of it at its peak (the process's high-water mark, as the
    benchmark reads it) — alone and beside fixed parts (the playground's top-k part). In a
    process of its own, one torch thread: a test process's high-water mark moves with
    whatever else its threads hold (130 MB once, 33 MB alone)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", NO_GRID, "none" if dims is None else str(dims)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    peaks = run.stdout.split()
    if "None" in peaks:
        pytest.skip("this platform cannot say a call's peak memory")
    n = 16384
    assert len(peaks) == 2 and all(int(p) < 0.1 * n * n * 4 for p in peaks), peaks


def _window_and_hub(w, hub):
    """A window of w (|i − j| < w) and one hub's row and column, with the diagonal: by hand."""
    return lambda i, j: abs(i - j) < w or i == hub or j == hub or i == j


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
@pytest.mark.parametrize("dims", [None, 2], ids=["oracle", "indexer"])
@pytest.mark.parametrize("n,keep,w,hub,rows", [(13, 2, 3, 5, 4), (9, 4, 1, 0, 128), (6, 9, 2, 5, 2)])
def test_top_k_beside_fixed_parts_is_softmax_over_the_chosen_keys_and_the_parts(causal, dims, n, keep, w, hub, rows):
    """The playground's top-k part: each query's k chosen keys and the fixed pattern's
    cells, against a brute force (the parts written by hand, the indexer's projection by
    an eigen-decomposition)."""
    from attn import methods
    from attn.composition import Composition

    g = torch.Generator().manual_seed(n * 7 + keep)
    q, k, v = (torch.randn(1, 2, n, 6, generator=g, dtype=torch.float64) for _ in range(3))
    choose = None
    if dims is not None:
        ps = []
        for hi in range(2):
            vals, vecs = torch.linalg.eigh(k[0, hi].T @ k[0, hi])
            ps.append(vecs[:, vals.argsort(descending=True)[:dims]])
        qp = [q[0, hi] @ ps[hi] for hi in range(2)]
        kp = [k[0, hi] @ ps[hi] for hi in range(2)]
        choose = lambda b, h, i, j: float(qp[h][i] @ kp[h][j])  # noqa: E731
    also = _window_and_hub(w, hub)
    want = brute(q, k, v, keep, causal, choose=choose, also=also)
    m = methods.top_k(indexer=dims is not None)
    if dims is not None:
        m = methods.Method(m.name, m.family, m.label_key, m.tags, indexer_dims=dims)
    params = methods.Params(parts=Composition(window=w, hubs=(hub,)), k=keep, causal=causal)
    got = topk.beside_parts(q, k, v, keep, methods.composed().mask(n, params), causal=causal, indexer_dims=dims,
                            rows=rows)
    assert torch.allclose(got, want, atol=1e-10)
    assert torch.allclose(m.run(q, k, v, params), want, atol=1e-10)
    assert torch.allclose(m.reference(q, k, v, params), want, atol=1e-10)
    assert m.backend(q, v, params) == "blocked"
    # the cells, counted by hand: the union of the chosen keys and the parts, per head
    grid = m.allowed(q, k, params)
    for hi in range(2):
        for i in range(n):
            seen = range(i + 1) if causal else range(n)
            rank = ({j: float(q[0, hi, i] @ k[0, hi, j]) for j in seen} if choose is None
                    else {j: choose(0, hi, i, j) for j in seen})
            kept = set(sorted(seen, key=lambda j: -rank[j])[:keep]) | {j for j in seen if also(i, j)}
            assert set(torch.nonzero(grid[0, hi, i]).flatten().tolist()) == kept
    rows_grid = torch.cat([m.allowed_rows(q, k, params, r0, min(n, r0 + rows)) for r0 in range(0, n, rows)], dim=2)
    assert torch.equal(rows_grid, grid)
    with pytest.raises(ValueError, match="depend on the text"):
        m.cells(n, params)


def test_beside_parts_the_oracle_chooses_by_the_scores_the_layer_computes():
    """With a soft cap (the layer's own scores at hand) the oracle's choice beside parts is
    the same cells as from q and k: the cap keeps each row's order."""
    from attn import methods
    from attn.composition import Composition

    g = torch.Generator().manual_seed(2)
    q, k = (torch.randn(1, 2, 10, 4, generator=g, dtype=torch.float64) for _ in range(2))
    params = methods.Params(parts=Composition(window=2), k=3, causal=True)
    scores = 5 * torch.tanh((q @ k.transpose(-1, -2)) / 5)
    got = methods.top_k().allowed_scored(q, k, params, scores[:, :, 4:], r0=4)
    assert torch.equal(got, methods.top_k().allowed(q, k, params)[:, :, 4:])
