from fractions import Fraction

import pytest
import torch

from attn.rows import RowSample
from attn import hub_stats, methods, outputs, stats
from attn.layer import LayerAttention


def L(window=None, causal=True, scale=1.0):  # noqa: N802 — a layer, as the model's are read
    return LayerAttention(causal=causal, window=window, scale=scale)


def test_k_for_share_counts_the_largest_cells_needed():
    w = torch.tensor([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.7, 0.2, 0.1, 0], [0.1, 0.2, 0.3, 0.4]])
    assert stats.k_for_share(w, 0.9).tolist() == [1, 2, 2, 3]
    assert stats.k_for_share(w, 0.5).tolist() == [1, 1, 1, 2]
    assert stats.k_for_share(w, 1.0).tolist() == [1, 2, 3, 4]
    mask = stats.top_share_mask(w, 0.9)
    assert mask.tolist()[3] == [False, True, True, True]
    torch.manual_seed(0)
    rnd = torch.softmax(torch.randn(3, 40, 40) * 3, dim=-1)
    for p in (0.3, 0.9, 1.0):
        assert torch.equal(stats.top_share_mask(rnd, p).sum(dim=-1), stats.k_for_share(rnd, p))
    with pytest.raises(ValueError):
        stats.k_for_share(w, 0)


def cells_to_reach(row: list[Fraction], p: Fraction) -> int:
    """Brute force: the largest cells first, one at a time, until their sum reaches p
    (exact fractions: 0.1 added nine times falls short of 0.9 in floats)."""
    total = Fraction(0)
    for k, x in enumerate(sorted(row, reverse=True), start=1):
        total += x
        if total >= p:
            return k
    return len(row)


def test_useful_summary_and_prefixes_follow_their_formulas():
    n = 64
    w = torch.zeros(n, n)
    w[:, 0] = 0.5  # a sink
    w[torch.arange(n), torch.arange(n)] += 0.5  # and itself
    s = stats.useful_summary(w, 0.9, L())
    assert s["k"] == pytest.approx((1 + 2 * (n - 1)) / n)
    # one denominator: the cells the (causal) layer computes
    assert s["cells"] == n * (n + 1) // 2
    assert s["useful"] == pytest.approx(n * s["k"]) and s["share"] == pytest.approx(n * s["k"] / s["cells"])
    rows = stats.useful_share_by_prefix(w, 0.9, stats.prefix_lengths(n, 8), L())
    assert [r["n"] for r in rows] == [8, 16, 32, 64]
    shares = [r["share"] for r in rows]
    assert shares == sorted(shares, reverse=True)  # k stays ~2 while n grows
    # a row with no preference (i + 1 equal cells): counted cell by cell in exact fractions;
    # by hand at n = 8, ⌈0.9·c⌉ = c for c = 1…8 (36 of 36 cells), at n = 16, 36 + 93 of 136
    assert [r["cells"] for r in rows] == [36, 136, 528, 2080]
    uniform = [sum(cells_to_reach([Fraction(1, i + 1)] * (i + 1), Fraction(9, 10)) for i in range(r["n"]))
               for r in rows]
    assert uniform[:2] == [36, 129]
    for r, kept in zip(rows, uniform):
        assert r["uniform_share"] == pytest.approx(kept / r["cells"])
        assert 0.9 <= r["uniform_share"] < 0.9 + 1.5 / r["n"]  # its share stays near p
    # a sliding layer: the denominator is Σ min(i+1, w)
    slide = stats.useful_summary(w, 0.9, L(8))
    assert slide["cells"] == sum(min(i + 1, 8) for i in range(n))


def test_k_of_several_heads_is_the_mean_of_each_heads_own_k():
    torch.manual_seed(3)
    heads = torch.softmax(torch.randn(4, 30, 30) * 3, dim=-1).tril()
    heads = heads / heads.sum(-1, keepdim=True)
    each = [stats.useful_summary(h, 0.9, L())["k"] for h in heads]
    assert stats.useful_summary(heads, 0.9, L())["k"] == pytest.approx(sum(each) / 4)
    assert stats.useful_summary(heads.mean(0), 0.9, L())["k"] != pytest.approx(sum(each) / 4)


def test_share_kept_by_a_window_is_the_weight_inside_it():
    n = 10
    w = torch.full((n, n), 0.0)
    for i in range(n):
        w[i, : i + 1] = 1.0 / (i + 1)
    res = stats.share_kept_by_pattern(w[None, None], 2, (), True)
    expect = sum(min(i + 1, 2) / (i + 1) for i in range(n)) / n
    assert res["mean"] == pytest.approx(expect, rel=1e-6)
    hub = stats.share_kept_by_pattern(w[None, None], 2, (0,), True)
    expect_h = sum(min(i + 1, 3 if i >= 2 else 2) / (i + 1) for i in range(n)) / n
    assert hub["mean"] == pytest.approx(expect_h, rel=1e-6)


def test_anchors_find_the_column_that_far_rows_look_at():
    n = 40
    w = torch.zeros(n, n)
    for i in range(n):
        w[i, i] = 0.3
        w[i, 0] += 0.5
        w[i, 17 if i > 17 else i] += 0.2
    best = hub_stats.anchors(w, True, top=2)
    assert best[0][0] == 0 and best[1][0] == 17


def test_output_errors_fused_kernel_at_rounding_level_and_full_window_exact():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 70, 32) for _ in range(3))
    mask = torch.ones(70, 70, dtype=torch.bool).tril()
    err = outputs.output_errors(q, k, v, L(scale=0.2), window=4, hubs=(0,))
    assert err["mean"]["own"] <= 1e-5
    assert err["mean"]["window"] > err["mean"]["own"]
    assert len(err["per_head"]["window"]) == 4
    wide = outputs.output_errors(q, k, v, L(scale=0.2), window=70, features_list=())
    assert wide["mean"]["window"] <= 1e-5
    # the uniform floor, by hand: row i averages v over tokens 0…i; exact softmax in
    # float64; the error ‖o − o_exact‖ / ‖o_exact‖ over each head's (n, d) output
    uniform = torch.cumsum(v.double(), dim=2) / torch.arange(1, 71, dtype=torch.float64)[:, None]
    scores = (q.double() @ k.double().transpose(-1, -2) * 0.2).masked_fill(~mask, float("-inf"))
    exact = torch.softmax(scores, dim=-1) @ v.double()
    per_head = [float(torch.linalg.norm(uniform[0, h] - exact[0, h]) / torch.linalg.norm(exact[0, h]))
                for h in range(4)]
    assert err["per_head"]["uniform"] == pytest.approx(per_head, rel=1e-9)
    assert err["mean"]["uniform"] == pytest.approx(sum(per_head) / 4, rel=1e-9)


def test_output_errors_in_a_sliding_layer_compare_within_its_own_window():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 40, 16) for _ in range(3))
    err = outputs.output_errors(q, k, v, L(8, scale=0.25), window=8, hubs=())
    # the window of the layer's own size is the layer's own pattern: exact
    assert err["mean"]["own"] <= 1e-5 and err["mean"]["window"] <= 1e-5


def test_implied_weights_rows_sum_to_one():
    torch.manual_seed(1)
    q, k = torch.randn(1, 2, 30, 8), torch.randn(1, 2, 30, 8)
    for method in methods.tagged(methods.MAPS):
        params = methods.Params(window=3, hubs=(0,))
        w = outputs.implied_weights(q, k, L(scale=0.3), method=method.name, params=params)
        sums = w.sum(-1)
        if method.feature == "relu":  # ReLU can leave a row with no weight at all: then it is all zeros
            sums = torch.where(sums == 0, torch.ones_like(sums), sums)
        torch.testing.assert_close(sums, torch.ones(2, 30), atol=1e-5, rtol=0)
        assert (w.triu(1) == 0).all()


def test_peak_weights_are_each_methods_largest_row_weight_on_average():
    torch.manual_seed(4)
    q, k = torch.randn(1, 2, 50, 8) * 2, torch.randn(1, 2, 50, 8) * 2
    got = outputs.peak_weights(q, k, L(scale=0.35), window=4, hubs=(0,), rows=16)
    for m in methods.tagged(methods.ERRORS):
        params = methods.Params(window=None if m.family == "own" else 4, hubs=(0,))
        w = outputs.implied_weights(q, k, L(scale=0.35), method=m.name, params=params)  # dense, for the test
        assert got[m.name] == pytest.approx(float(w.amax(-1).mean()), rel=1e-4), m.name
    assert got["uniform"] == pytest.approx(sum(1 / (i + 1) for i in range(50)) / 50)
    assert got["own"] > got["uniform"]


def test_median_norms_in_the_units_a_feature_map_sees():
    q = torch.full((1, 1, 5, 4), 3.0)  # ‖q‖ = 6
    k = torch.full((1, 1, 5, 4), 1.0)  # ‖k‖ = 2
    r = outputs.median_norms(q, k, L(scale=0.25))
    assert (r["q"], r["k"], r["q_scaled"], r["k_scaled"]) == pytest.approx((6, 2, 3, 1))


# --- an encoder: every row reads both ways -------------------------------------------


def test_row_cells_both_ways_count_each_rows_band_by_loops():
    for n, window in ((1, None), (7, None), (7, 1), (7, 3), (12, 5), (5, 9)):
        want = [sum(1 for j in range(n) if window is None or abs(i - j) < window) for i in range(n)]
        assert stats.row_cells(n, L(window, causal=False)).tolist() == want, (n, window)
        causal = [sum(1 for j in range(i + 1) if window is None or i - j < window) for i in range(n)]
        assert stats.row_cells(n, L(window)).tolist() == causal, (n, window)


def test_useful_summary_both_ways_divides_by_the_whole_square():
    n = 32
    w = torch.zeros(n, n)
    w[:, 0] = 0.5  # [CLS]
    w[:, n - 1] += 0.25  # [SEP]
    w[torch.arange(n), torch.arange(n)] += 0.25
    s = stats.useful_summary(w, 0.9, L(causal=False))
    # rows 0 and n − 1: two cells (0.75 + 0.25); the others three
    k = (2 * 2 + 3 * (n - 2)) / n
    assert s["k"] == pytest.approx(k) and s["cells"] == n * n
    assert s["share"] == pytest.approx(n * k / (n * n))
    with pytest.raises(ValueError):  # an encoder's prefixes cannot be read off the whole run
        stats.useful_share_by_prefix(w, 0.9, [8, n], L(causal=False))


def test_an_encoders_prefixes_are_counted_on_their_own_runs():
    """Each prefix's k is counted on the weights given for that prefix (a run of its
    own), never on the whole run's top-left block."""
    n = 32
    whole = torch.full((n, n), 1.0 / n)  # no preference on the whole text
    own = {8: torch.eye(8), 16: torch.eye(16)}  # each prefix's own run: one cell a row
    rows = stats.useful_share_by_prefix(whole, 0.9, [8, 16, n], L(causal=False), prefix=lambda m: own[m])
    assert [(r["n"], r["k"], r["cells"]) for r in rows[:2]] == [(8, 1.0, 64), (16, 1.0, 256)]
    assert rows[2]["k"] == pytest.approx(29.0)  # ⌈0.9·32⌉ cells of 1/32 each
    assert rows[0]["share"] == pytest.approx(8 / 64)
    assert rows[0]["uniform_k"] == pytest.approx(8.0)  # ⌈0.9·8⌉ of a row of 8 equal cells
    trend = stats.share_trend(whole[None, None], 0.9, 8, [L(causal=False)], first_attentions=own[8][None, None])
    assert trend["head_first"][0][0] == pytest.approx(8 / 64)
    assert trend["head_all"][0][0] == pytest.approx(29 * n / (n * n))
    assert trend["heads_fell"] == 0  # the share rose: 12.5 % → 90.6 %


def test_share_to_sums_the_special_columns_of_every_row():
    torch.manual_seed(3)
    w = torch.softmax(torch.randn(2, 3, 10, 10), dim=-1)
    got = hub_stats.share_to(w, (0, 9), False)
    by_loops = sum(float(w[l_, h, i, 0] + w[l_, h, i, 9]) for l_ in range(2) for h in range(3) for i in range(10))
    assert got["mean"] == pytest.approx(by_loops / 60, rel=1e-6)
    assert got["per_layer"][1] == pytest.approx(float((w[1, :, :, 0] + w[1, :, :, 9]).mean()), rel=1e-6)
    assert got["even"] == pytest.approx(2 / 10)
    # causal: column 9 is seen by row 9 only; column 0 by every row i (1 / (i + 1) each)
    even = sum((1 / (i + 1)) + (1 / 10 if i == 9 else 0) for i in range(10)) / 10
    assert hub_stats.share_to(w, (0, 9), True)["even"] == pytest.approx(even)
    assert hub_stats.share_to(w, (), True)["mean"] == 0.0


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
def test_anchors_score_each_column_as_a_plain_loop_over_its_far_rows(causal, monkeypatch):
    """Every column's score, the mean weight over layers, heads and far rows (|i − j| ≥ 8;
    a causal model's after it), by a loop over the cells: the five best, in order."""
    g = torch.Generator().manual_seed(5)
    n, d = 48, hub_stats.ANCHOR_DISTANCE
    scores = torch.randn(2, 3, n, n, generator=g) * 2
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(scores, dim=-1)
    flat = w.double().reshape(-1, n, n).tolist()
    want = {}
    for j in range(n):
        far = [i for i in range(n) if (i - j if causal else abs(i - j)) >= d]
        if len(far) >= max(d, n // 4):
            want[j] = sum(g_[i][j] for g_ in flat for i in far) / len(flat) / len(far)
    best = sorted(want, key=want.get, reverse=True)[:5]
    got = hub_stats.anchors(w, causal, top=5)
    assert [p for p, _ in got] == best
    assert [x for _, x in got] == pytest.approx([want[p] for p in best], rel=1e-5)
    # on a sample of the rows (the first 10, then 12 spread over the rest, each standing for its
    # stretch), read in blocks of a few rows: each far row weighs the rows it stands for
    sample = RowSample.spread(n, 10, 12)
    pos, weight = sample.positions.tolist(), sample.weights.tolist()
    want = {}
    for j in range(n):
        far = [(r, x) for r, x in zip(pos, weight) if (r - j if causal else abs(r - j)) >= d]
        rows_far = max(0, n - j - d) + (0 if causal else max(0, j - d + 1))  # the text's far rows of column j
        if rows_far >= max(d, n // 4):
            want[j] = sum(g_[r][j] * x for g_ in flat for r, x in far) / len(flat) / rows_far
    best = sorted(want, key=want.get, reverse=True)[:5]
    monkeypatch.setattr(stats, "_CHUNK", 7 * n)  # 7 rows a chunk: rows of a sample split across chunks
    got = hub_stats.anchors(w[..., sample.positions, :], causal, top=5, sample=sample)
    assert [p for p, _ in got] == best
    assert [x for _, x in got] == pytest.approx([want[p] for p in best], rel=1e-5)


def test_anchors_both_ways_count_the_rows_on_either_side():
    n = 40
    w = torch.zeros(n, n)
    for i in range(n):
        w[i, i] = 0.4
        w[i, n - 1] += 0.4  # a [SEP] at the end: causally only its own row sees it
        w[i, 20] += 0.2
    assert hub_stats.anchors(w, False, top=1)[0] == (n - 1, pytest.approx(0.4))
    causal = w.tril()  # the same rows read causally (a causal grid holds nothing after its row)
    causal = causal / causal.sum(dim=-1, keepdim=True)
    assert all(p != n - 1 for p, _ in hub_stats.anchors(causal, True, top=3))  # causal: no row lies 8 after it


def test_output_errors_both_ways_against_a_hand_made_bidirectional_softmax():
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 2, 30, 16) for _ in range(3))
    err = outputs.output_errors(q, k, v, L(causal=False, scale=0.25), window=30, hubs=(), features_list=())
    assert err["mean"]["own"] <= 1e-5 and err["mean"]["window"] <= 1e-5  # w = n both ways: every pair
    narrow = outputs.output_errors(q, k, v, L(causal=False, scale=0.25), window=4, hubs=(0,), features_list=())
    # the window with hubs by hand: |i − j| < 4, row 0 and column 0 whole, softmax in float64
    keep = torch.tensor([[abs(i - j) < 4 or i == 0 or j == 0 for j in range(30)] for i in range(30)])
    scores = q.double() @ k.double().transpose(-1, -2) * 0.25
    exact = torch.softmax(scores, dim=-1) @ v.double()
    hubbed = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v.double()
    want = [float(torch.linalg.norm(hubbed[0, h] - exact[0, h]) / torch.linalg.norm(exact[0, h])) for h in range(2)]
    assert narrow["per_head"]["window_hubs"] == pytest.approx(want, rel=1e-4)
    uniform = v.double().mean(dim=2, keepdim=True).expand_as(exact)  # every row: the mean of all 30 values
    floor = [float(torch.linalg.norm(uniform[0, h] - exact[0, h]) / torch.linalg.norm(exact[0, h])) for h in range(2)]
    assert narrow["per_head"]["uniform"] == pytest.approx(floor, rel=1e-9)
    peak = outputs.peak_weights(q, k, L(causal=False, scale=0.25), window=4, hubs=(0,), features_list=())
    assert peak["own"] == pytest.approx(float(torch.softmax(scores, dim=-1).amax(-1).mean()), rel=1e-5)
    assert peak["uniform"] == pytest.approx(1 / 30)


def _k_by_hand(row: list[float], p: float) -> tuple[int, bool]:
    """k(p) by a plain loop in float64: the largest cells taken one by one until their sum
    reaches p; and whether a running sum came within float32's rounding of the target
    (there float32 sums may land on either side: one cell more or less is no error)."""
    total, taken, close = sum(row), 0.0, False
    for count, x in enumerate(sorted(row, reverse=True), start=1):
        taken += x
        close = close or abs(taken - p * total) < 1e-5
        if taken >= p * total - 1e-6:
            return count, close
    return len(row), close


def _agrees(got: list[int], rows: list[list[float]], p: float) -> bool:
    for k, row in zip(got, rows):
        want, close = _k_by_hand(row, p)
        if k != want and not (close and abs(k - want) == 1):
            return False
    return True


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 200])
def test_k_for_share_matches_a_plain_loop_on_rows_short_and_long_flat_and_peaked(n):
    g = torch.Generator().manual_seed(n)
    rows = [torch.softmax(torch.randn(n, generator=g) * scale, dim=0) for scale in (0.1, 1.0, 4.0, 12.0)]
    rows.append(torch.full((n,), 1.0 / n))  # every cell tied
    causal = torch.softmax(torch.randn(n, n, generator=g) * 3, dim=-1).tril()  # zeros past the diagonal
    w = torch.cat([torch.stack(rows), causal / causal.sum(-1, keepdim=True)])
    for p in (0.5, 0.9, 0.99, 1.0):
        assert _agrees(stats.k_for_share(w, p).tolist(), w.tolist(), p), p
    # float16 weights (as the analyses keep them) count as their float32 values
    assert _agrees(stats.k_for_share(w.half(), 0.9).tolist(), w.half().float().tolist(), 0.9)


def test_k_for_share_is_the_whole_rows_sort_when_most_rows_need_more_than_the_first_cells():
    """Rows past the first cells (flat rows of 300) and rows within them, mixed in one
    chunk: the same counts as sorting every row whole (the rule before the shortcut)."""
    g = torch.Generator().manual_seed(7)
    w = torch.softmax(torch.randn(64, 300, generator=g) * torch.linspace(0.05, 8, 64)[:, None], dim=-1)
    for p in (0.5, 0.9):
        top = torch.sort(w, dim=-1, descending=True).values.cumsum(dim=-1)
        whole = ((top < p * w.sum(-1, keepdim=True) - 1e-6).sum(-1) + 1).clamp_max(300)
        got = stats.k_for_share(w, p)
        assert (got > 32).any() and (got <= 32).any()
        assert torch.equal(got, whole)


def _every_look_rows() -> torch.Tensor:
    """Rows of 3,000 cells whose k(0.9) falls within the first 32 cells, within 128, within
    512, within 2,048 and past them (a whole row's sort)."""
    g = torch.Generator().manual_seed(11)
    return torch.softmax(torch.randn(100, 3000, generator=g) * torch.linspace(0.01, 10, 100)[:, None], dim=-1)


def test_k_for_share_reaches_every_look_and_counts_as_a_plain_loop():
    """Rows whose k(0.9) is reached at each of k(p)'s looks, in one chunk, and at p = 0.5:
    each the count of a plain loop over the row sorted by hand."""
    w = _every_look_rows()
    for p in (0.9, 0.5):
        got = stats.k_for_share(w, p)
        if p == 0.9:
            bounds = (0, 32, 128, 512, 2048, 3000)
            assert all(((got > lo) & (got <= hi)).any() for lo, hi in zip(bounds, bounds[1:])), got
        assert _agrees(got.tolist(), w.tolist(), p), p


def test_top_share_mask_holds_k_cells_none_smaller_than_a_cell_left_out_and_the_first_of_equal_ones(monkeypatch):
    """At every look: the mask's cells number k(p), and none of them weighs less than a
    cell left out (checked row by row, by hand). Equal weights: the first columns."""
    w = _every_look_rows()
    mask = stats.top_share_mask(w, 0.9)
    k = stats.k_for_share(w, 0.9)
    assert torch.equal(mask.sum(dim=-1), k)
    for row, m in zip(w.tolist(), mask.tolist()):
        kept = [x for x, inside in zip(row, m) if inside]
        left = [x for x, inside in zip(row, m) if not inside]
        assert not left or min(kept) >= max(left)
    monkeypatch.setattr(stats, "_CHUNK", 7 * 3000)  # 7 rows a chunk: a look's rows split across chunks
    k, kth = stats.k_and_kth(w, 0.9)
    assert [x for x in kth.tolist()] == [sorted(row, reverse=True)[c - 1] for row, c in zip(w.tolist(), k.tolist())]
    assert torch.equal(stats.top_share_mask(w, 0.9), mask)
    ties = torch.tensor([[0.3, 0.3, 0.3, 0.1], [0.1, 0.3, 0.3, 0.3], [0.25, 0.25, 0.25, 0.25]])
    assert stats.top_share_mask(ties, 0.5).tolist() == [[True, True, False, False], [False, True, True, False],
                                                        [True, True, False, False]]


@pytest.mark.parametrize("n", [3, 40, 300])
def test_k_and_top_gives_k_and_each_keeps_largest_cells_as_rows_sorted_by_hand(n):
    # keeps within the first sorted cells, past them, and past the row (a row of fewer cells keeps them all)
    g = torch.Generator().manual_seed(n)
    w = torch.softmax(torch.randn(2, 3, n, n, generator=g) * torch.linspace(0.1, 9, n)[:, None], dim=-1).half()
    keeps = (4, 16, 64, 127, 256, 511)
    k, tops = stats.k_and_top(w, 0.9, keeps)
    assert torch.equal(k, stats.k_for_share(w, 0.9))
    rows = w.float().reshape(-1, n).tolist()
    assert _agrees(k.reshape(-1).tolist(), rows, 0.9)
    for keep in keeps:
        want = torch.tensor([sum(sorted(row, reverse=True)[:keep]) for row in rows])
        assert torch.allclose(tops[keep].reshape(-1), want, atol=1e-5), keep


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
@pytest.mark.parametrize("window", [None, 1, 4, 50])
def test_the_uniform_floor_is_each_rows_mean_over_the_keys_its_pattern_sees(causal, window):
    """uniform_error's floor, from running sums, against each row's mean of its visible
    values by hand (|i - j| < w, and j <= i looking back)."""
    g = torch.Generator().manual_seed(5)
    n = 23
    v = torch.randn(1, 2, n, 3, generator=g)
    exact = torch.randn(1, 2, n, 3, generator=g).double()
    by_hand = torch.zeros(1, 2, n, 3, dtype=torch.float64)
    for i in range(n):
        seen = [j for j in range(n) if (window is None or abs(i - j) < window) and (not causal or j <= i)]
        by_hand[0, :, i] = v[0, :, seen].double().mean(dim=1)
    want = ((by_hand - exact).norm(dim=(-1, -2)) / exact.norm(dim=(-1, -2)))[0]
    got = outputs.uniform_error(v, exact, L(window, causal=causal, scale=1.0))
    assert got.tolist() == pytest.approx(want.tolist(), rel=1e-12)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "both ways"])
@pytest.mark.parametrize("window", [None, 1, 5, 300])
def test_the_exact_output_block_by_block_equals_the_whole_grid_written_out(causal, window):
    """exact_output reads blocks of rows on the keys each can reach; the whole pattern's
    grid (patterns.dense) softmaxed at once gives the same, with a soft cap, a bias and
    sink logits."""
    g = torch.Generator().manual_seed(11)
    n = 600  # more than two blocks of rows, and a window that crosses them
    q, k, v = (torch.randn(1, 2, n, 8, generator=g) for _ in range(3))
    bias = torch.randn(1, 2, n, n, generator=g)
    layer = LayerAttention(causal=causal, window=window, scale=0.3, softcap=5.0, sinks=(0.5, -1.0))
    grid = outputs.patterns.dense(methods.own().mask(n, outputs.own_params(layer)), n)
    whole = outputs.scored_weights(q, k, grid, layer, bias, torch.float64) @ v.double()
    torch.testing.assert_close(outputs.exact_output(q, k, v, layer, bias), whole, rtol=0, atol=1e-13)
