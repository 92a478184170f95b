"""A long text read whole without its grid: what the analysis holds grows linearly with n,
its rows are recomputed by blocks (attn.rows), and a statistic read on a sample of a long
text's rows lands within the spread it states of the exact value over every row."""

import math
import time

import pytest
import torch

from attn import budgets, hub_stats, loading, stats
from attn.layer import LayerAttention
from attn.rows import RowSample


@pytest.fixture(scope="module")
def tiny():
    return loading.tiny(device="cpu")


def text_of(n: int) -> str:
    """A text of at least n bytes (the tiny model's tokenizer: one token a byte, plus <bos>)."""
    words = "attention reads every earlier token of the text, near ones most; "
    return (words * (n // len(words) + 2))[: n + 16]


def opened_on_3000_tokens(make_app, monkeypatch, step_id: str, lang: str = "en"):
    """A page of the tiny model's app opened on a text of 3,000 tokens (ATLAS_MAX_TOKENS lets
    it read them all): (the app, the text)."""
    from helpers import page_path
    from ui import walk

    monkeypatch.setenv("ATLAS_MAX_TOKENS", "3000")
    text = text_of(3000)
    at = make_app("tiny", lang)
    at.run()
    at.text_area(key="text").input(text).run()
    at.switch_page(page_path(walk.get(step_id))).run()
    assert not at.exception, [e.value for e in at.exception]
    return at, text


def tensors(x) -> list[torch.Tensor]:
    """Every tensor an analysis holds, in its fields, dicts and tuples."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors(v)]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    return []


def test_what_an_analysis_holds_grows_linearly_from_2k_to_8k_tokens_and_nothing_is_n_by_n(tiny):
    held = {}
    for n in (2048, 8192):
        a = tiny.analyze(text_of(n), max_tokens=n)
        assert a.n == n and a.truncated > 0
        held[n] = a.nbytes
        for x in tensors(list(vars(a).values())):
            assert x.numel() <= 64 * n * a.q.shape[-1], x.shape  # q, k, v: layers·heads·n·d at most
            assert not (x.dim() >= 2 and x.shape[-1] == x.shape[-2] == n), x.shape  # no n×n grid
    # linear: 4× the tokens hold 4× the bytes (the token lists' rough 100 bytes a token included)
    assert held[8192] / held[2048] <= 4.0 * 1.01
    assert held[8192] / held[2048] >= 4.0 * 0.99


def test_the_cpu_budget_reads_the_packaged_models_whole_context_and_the_environment_still_overrides(monkeypatch):
    monkeypatch.delenv("ATLAS_MAX_TOKENS", raising=False)
    assert budgets.token_budget("cpu") == 32768  # Gemma 3's positions: past the memory budget, in files
    assert budgets.token_budget("cuda") == 32768
    monkeypatch.setenv("ATLAS_MAX_TOKENS", "300")
    assert budgets.token_budget("cpu") == 300


def test_rows_of_a_spread_sample_are_the_same_rows_as_the_whole_grids(tiny):
    a = tiny.analyze(text_of(3000), max_tokens=3000)
    sample = RowSample.spread(a.n, 1024, 256)
    assert sample.count == 1024 + 256 and float(sample.weights.sum()) == pytest.approx(a.n)
    picked = a.weights().at(sample.positions)
    some = [0, 5, 1023, 1024, 1100, sample.count - 1]
    for layer in range(a.n_layers):
        rows = picked[layer].dense()  # (heads, sampled rows, n)
        for x in some:
            want = a.weights().block(layer, 0, sample.positions[x:x + 1])[0]
            torch.testing.assert_close(rows[0, x], want, atol=1e-6, rtol=0)
    # narrow blocks: only the columns a block can reach, the rest zero
    w = a.weights()[0, 0]
    for _, _, rows, lo in w.blocks(narrow=True):
        assert lo + rows.shape[-1] <= a.n
    dense = a.weights()[0].at(sample.positions).dense().reshape(-1, a.n)  # once, not once a block
    for s, e, rows, lo in a.weights()[0].at(sample.positions).blocks(narrow=True):
        whole = dense[s:e]
        torch.testing.assert_close(whole[:, lo:lo + rows.shape[-1]], rows)
        assert float(whole.sum() - rows.sum()) == pytest.approx(0.0, abs=1e-4)


def brute_k(row: torch.Tensor, p: float) -> int:
    """k(p) of one row, by hand: sorted, summed until a share p."""
    total, target = 0.0, p * float(row.sum()) - 1e-6
    for i, x in enumerate(sorted(row.tolist(), reverse=True)):
        total += x
        if total >= target:
            return i + 1
    return len(row)


def test_a_sampled_statistic_lands_within_its_stated_spread_of_every_rows_value(tiny):
    """k̄, the kept share and the sink on a 3,000-token text: the sample's value, against
    the value over every row computed here row by row; the stated spread is a 95 % bound, so
    allow it twice over for one draw — and it must not be zero."""
    a = tiny.analyze(text_of(3000), max_tokens=3000)
    sample = RowSample.spread(a.n, 1024, 512)
    layer = 3  # the tiny model's full layer
    reads = a.layers[layer]
    every = a.weights()[layer, 0]
    exact_k = stats.k_for_share(every, 0.9).double()
    got = stats.useful_summary(a.weights()[layer, 0].at(sample.positions), 0.9, reads, sample=sample)
    assert got["spread"] > 0
    assert abs(got["k"] - float(exact_k.mean())) <= 2 * got["spread"]
    for x in (0, 700, 2999):  # k itself, against a row sorted by hand
        assert int(exact_k[x]) == brute_k(every.block(layer, 0, torch.tensor([x]))[0], 0.9)
    # a window's kept share: the sampled value and the one over every row
    whole = stats.share_kept_by_pattern(a.weights(), 64, (), a.causal)
    part = stats.share_kept_by_pattern(a.weights().at(sample.positions), 64, (), a.causal, sample=sample)
    assert part["spread"] > 0 and abs(part["mean"] - whole["mean"]) <= 2 * part["spread"]
    sink, spread = stats.sink_rows(a.weights().at(sample.positions), sample)
    assert spread > 0 and abs(sink - stats.sink_share(a.weights())) <= 2 * spread


def test_step_2s_model_wide_k_reads_a_smaller_stated_sample_within_its_spread_of_every_row(tiny):
    """Step 2's k(p) of every head (the model-wide k̄ and the share's trend) reads every row
    where the other statistics do (2,048 tokens); on 3,000 tokens the first 256 rows and 256
    spread over the rest, whose k̄ lands within twice its stated spread of k̄ over every row
    of every head, counted here head by head."""
    from ui import row_reads

    short = tiny.analyze(text_of(2048), max_tokens=2048)
    assert short.n == 2048 and row_reads.model_sample(short).every_row and row_reads.row_sample(short).every_row
    a = tiny.analyze(text_of(3000), max_tokens=3000)
    sample = row_reads.model_sample(a)
    assert (sample.whole, sample.count, sample.n) == (256, 512, 3000)
    assert sample.positions[:256].tolist() == list(range(256)) and sample.positions[256:].min() >= 256
    r = stats.share_trend(a.weights().at(sample.positions), 0.9, 16, a.layers, sample=sample)
    exact = torch.stack([stats.k_for_share(a.weights()[layer, head], 0.9).double()
                         for layer in range(a.n_layers) for head in range(a.n_heads)])
    assert exact.shape == (a.n_layers * a.n_heads, 3000)
    assert r["k_spread"] > 0 and abs(r["k_mean"] - float(exact.mean())) <= 2 * r["k_spread"]


def test_step_2_says_which_rows_its_model_wide_k_and_trend_read_on_a_long_text(make_app, monkeypatch, fresh_caches):
    """On 3,000 tokens, step 2 says under its k̄ over every head, and under the share's trend,
    that they read 512 of the 3,000 rows (the first 256, and 256 spread over the rest)."""
    from ui import i18n

    at, _ = opened_on_3000_tokens(make_app, monkeypatch, "nearly-empty")
    captions = [c.value for c in at.caption]
    note = i18n.translate("en", "common.sampled_cells", rows="512", n="3,000", first="256", spaced="256", spread="§")
    head, tail = note.split("§")
    assert any(c.endswith(tail) and head in c and c.startswith("On your text, over every layer and head")
               for c in captions), captions
    said = i18n.translate("en", "nearly_empty.trend_sampled", rows="512", n="3,000")
    assert any(c.startswith("Across the model on your text") and c.endswith(said) for c in captions), captions


def test_step_2s_coloured_cells_on_a_long_text_are_said_as_an_estimate_whose_stray_holds_the_true_count(
        make_app, monkeypatch, fresh_caches):
    """On 3,000 tokens step 2 reads its rows on a sample (the first 1,024 and 1,024 spread over
    the rest): the count of the cells it colours is said as an estimate from those rows, with
    its stray, and the true count over every row (k(p) of each of the 3,000 rows of the layer
    and head shown, counted here row by row with a sort) lies within that stray."""
    import re

    from ui import analyses, i18n
    from ui.setting_rows import AVERAGE

    at, text = opened_on_3000_tokens(make_app, monkeypatch, "nearly-empty")
    layer, head, p = at.session_state["s2_layer"], at.session_state["s2_head"], at.session_state["s2_p"]
    template = i18n.translate("en", "nearly_empty.grid_caption_sampled", p="§", cells="§", total="§", spread="§",
                              rows="2,048", n="3,000")
    pattern = re.escape(template).replace("§", "([0-9,.%]+)")
    found = [m for c in at.caption if (m := re.fullmatch(pattern, c.value))]
    assert len(found) == 1, [c.value for c in at.caption]
    cells, spread = (int(found[0].group(i).replace(",", "")) for i in (2, 3))
    assert spread > 0

    # the true count: every row of the grid shown, its weights sorted, k(p) = the fewest
    # largest cells whose sum reaches p of the row
    a = analyses.get_analysis(text, "tiny")
    assert a.n == 3000
    heads = range(a.n_heads) if head == AVERAGE else [int(head)]
    true = 0
    for pos in torch.arange(a.n).split(100):
        rows = torch.stack([a.weights().block(layer, h, pos) for h in heads]).double().mean(0)  # (100, n)
        for row in rows:
            running = row.sort(descending=True).values.cumsum(0)
            true += int((running < p * float(row.sum()) - 1e-6).sum()) + 1
    assert abs(true - cells) <= spread, (true, cells, spread)


def test_step_4_finds_a_long_texts_anchors_on_the_model_wide_sample_and_says_so(make_app, monkeypatch,
                                                                                 fresh_caches):
    """On 3,000 tokens the anchors (step 4's list, the hubs' default) read the rows step 2's
    model-wide k̄ reads, the first 256 and 256 spread, and step 4 says so under its list."""
    from ui import analyses, i18n, measures

    at, text = opened_on_3000_tokens(make_app, monkeypatch, "hubs")
    a = analyses.get_analysis(text, "tiny")
    sample = RowSample.spread(3000, 256, 256)
    expect = hub_stats.anchors(a.weights().at(sample.positions), a.causal, top=measures.ANCHORS_READ, sample=sample)
    assert measures.anchors(text, "tiny", 5) == expect[:5]
    said = i18n.translate("en", "hubs.anchors_sampled", rows="512", n="3,000", first="256", spaced="256")
    captions = [c.value for c in at.caption]
    found = [c for c in captions if c.startswith(said)]
    assert found, captions
    listed = captions[captions.index(found[0]) - 1]  # the list it is said of, just above
    assert listed.startswith("Positions your text's far rows") and f"{expect[0][0]} · " in listed, listed


def test_step_4_gives_each_sampled_anchor_its_stray_and_says_which_the_sample_cannot_order(make_app, monkeypatch,
                                                                                          fresh_caches):
    """On 3,000 tokens step 4's anchors are read on 512 rows (the first 256, and 256 spread
    over the rest): each listed anchor is written with its score ± the stray of such samples,
    the listed ones whose ranges overlap are said to be in an order the sample cannot tell,
    and so is a position not listed whose range reaches the fifth's. Worked out here from the
    sampled rows written out whole: a row's far weight on column j (i − j ≥ 8, averaged over
    every layer and head), the score Σ (rows each stands for) · far weight / the far rows of
    j, and its stray 1.96 standard errors of the spread rows' far weights (the finite-population
    correction, scaled as the score is)."""
    from ui import analyses, drawing, i18n

    at, text = opened_on_3000_tokens(make_app, monkeypatch, "hubs")

    a = analyses.get_analysis(text, "tiny")
    n, d, whole = 3000, 8, 256
    sample = RowSample.spread(n, whole, 256)
    pos = sample.positions
    far = torch.zeros(pos.numel(), n, dtype=torch.float64)
    for layer in range(a.n_layers):
        far += a.weights()[layer].at(pos).dense().double().sum(0)  # (rows, n), the heads summed
    far /= a.n_layers * a.n_heads
    far *= (pos[:, None] - torch.arange(n)[None, :]) >= d
    counts = n - torch.arange(n) - d
    score = (sample.weights[:, None] * far).sum(0) / counts.clamp_min(1)
    eligible = [j for j in range(n) if counts[j] >= n // 4]  # a quarter of the text after it
    ranked = sorted(eligible, key=lambda j: -float(score[j]))[:8]
    m, rest = 256, n - whole

    def stray(j):
        se = float(far[whole:, j].std()) / math.sqrt(m) * math.sqrt(1 - m / rest)
        return 1.96 * se * rest / n * n / int(counts[j])

    read = [(j, float(score[j]), stray(j)) for j in ranked]
    assert all(s > 0 for _, _, s in read)
    digits = min(6, max(3, 1 - math.floor(math.log10(min(s for _, _, s in read)))))

    def item(j, sc, sp):
        return f"{j} · {drawing.literal(a.tokens[j])} ({sc:.{digits}f} ± {sp:.{digits}f})"

    def listing(words):  # English lists: "a and b", "a, b, and c"
        return " and ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + ", and " + words[-1]

    captions = [c.value for c in at.caption]
    listed = next(c for c in captions if c.startswith("Positions your text's far rows"))
    assert listed.endswith(": " + listing([item(*x) for x in read[:5]])), listed

    def overlap(x, y):
        return abs(x[1] - y[1]) <= x[2] + y[2]

    runs, run = [], [read[0]]
    for x, y in zip(read[:4], read[1:5]):
        if overlap(x, y):
            run.append(y)
        else:
            runs.append(run)
            run = [y]
    runs.append(run)
    said = [i18n.translate("en", "hubs.anchors_sampled", rows="512", n="3,000", first="256", spaced="256")]
    for r in runs:
        if len(r) > 1:
            names = listing([str(x[0]) for x in r])
            said.append(f"Positions {names} lie within each other's range: this sample cannot tell their order.")
    nearby = [x for x in read[5:] if overlap(read[4], x)]
    if nearby:
        said.append(i18n.translate("en", "hubs.anchors_close_next", names=listing([item(*x) for x in nearby]),
                                   count=len(nearby),
                                   last=read[4][0]))
    assert len(said) > 1  # this text's anchors take nearly equal weight: some order is not told
    assert " ".join(said) in captions, captions


def test_step_6s_indexer_recall_reads_the_first_tokens_its_errors_read(monkeypatch, fresh_caches):
    """On 3,000 tokens, step 6's top-k recall reads the layer's first 2,048 tokens, as the
    errors beside it do (budgets.LAYER_TOKENS): the indexer's chosen keys against the oracle's,
    chosen here row by row with torch.topk on those tokens' scores. (The tiny model's heads
    have 16 dimensions, as many as the indexer keeps, where it would choose as the oracle
    does: here it keeps 4.)"""
    import dataclasses

    from attn import methods, topk
    from ui import analyses, measures, row_reads

    monkeypatch.setenv("ATLAS_MAX_TOKENS", "3000")
    text = text_of(3000)
    a = analyses.get_analysis(text, "tiny")
    m = row_reads.layer_tokens(a)
    assert a.causal and a.n == 3000 and m == budgets.LAYER_TOKENS == 2048
    layer, w = 3, 64
    method = dataclasses.replace(methods.top_k(indexer=True), indexer_dims=4)
    assert a.qkv(layer)[0].shape[-1] == 16
    chosen = methods.top_k
    monkeypatch.setattr(methods, "top_k", lambda indexer=False: method if indexer else chosen())
    keep = method.keep_of(methods.Params(window=w, causal=True))
    q, k, _ = a.qkv(layer)
    q, k = q[:, :, :m].float(), k[:, :, :m].float()
    pq, pk = topk.projected(q, k, method.indexer_dims)  # what the indexer chooses by, on these tokens
    later = torch.ones(m, m, dtype=torch.bool).triu(1)
    hit = total = 0
    for h in range(q.shape[1]):
        exact = (q[0, h] @ k[0, h].T).masked_fill(later, float("-inf"))
        guess = (pq[0, h] @ pk[0, h].T).masked_fill(later, float("-inf"))
        for i in range(m):
            seen = min(keep, i + 1)
            hit += len(set(exact[i].topk(seen).indices.tolist()) & set(guess[i].topk(seen).indices.tolist()))
            total += seen
    assert 0.05 < hit / total < 0.95
    assert measures.topk_recall(text, "tiny", layer, w) == pytest.approx(hit / total, abs=1e-12)


def test_the_sample_mean_weighs_each_spread_row_by_the_rows_it_stands_for():
    sample = RowSample.spread(100, 10, 9)  # 10 rows whole, then 9 standing for 10 each
    assert sample.positions[:10].tolist() == list(range(10))
    assert sample.positions[10:].tolist() == [15, 25, 35, 45, 55, 65, 75, 85, 95]
    values = sample.positions.double()  # the row's own position: the text's mean is 49.5
    assert sample.mean(values) == pytest.approx((sum(range(10)) + 10 * sum(range(15, 96, 10))) / 100)
    assert sample.mean(values, below=10) == pytest.approx(4.5)
    # the spread: 1.96 standard errors of the spaced part's mean, by the finite-population formula
    v = values[10:]
    se = float(v.std()) / math.sqrt(9) * math.sqrt(1 - 9 / 90)
    assert sample.spread_95(values) == pytest.approx(1.96 * se * 90 / 100)
    assert RowSample.all(5).spread_95(torch.ones(5)) == 0.0


def test_a_layer_with_a_window_reads_only_its_band_and_gives_the_same_rows(tiny):
    """A sliding layer's narrow block (its band of columns) and the dense row agree, and the
    band holds all of the row's weight."""
    a = tiny.analyze(text_of(600), max_tokens=600)
    reads: LayerAttention = a.layers[0]
    assert reads.window == 8
    rows, lo = a.weights().narrow_block(0, 1, torch.arange(300, 310))
    assert lo == 300 - 8 + 1 and rows.shape == (10, 310 - lo)
    dense = a.weights().block(0, 1, torch.arange(300, 310))
    torch.testing.assert_close(dense[:, lo:310], rows)
    assert float(dense[:, :lo].abs().sum()) == 0.0 and float(dense[:, 310:].abs().sum()) == 0.0


def test_step_4s_shares_and_sink_read_in_one_pass_equal_each_cell_counted_by_hand(tiny):
    """Step 4's three windows (no hub, the reader's hubs, the first token) and the sink, read
    in one pass over the analysis' rows, against the dense grid summed cell by cell: a cell
    (i, j) is kept when j ≤ i and (i − j < w, or j is a hub, or i is one: a hub reads every
    earlier token); the sink is each row's weight on token 0, over the rows after it."""
    a = tiny.analyze(text_of(300), max_tokens=300)
    dense = a.weights().dense().double()  # (L, H, n, n)
    n, w = dense.shape[-1], 5
    sets = ((), (3, 40), (0,))
    got, (sink, spread) = stats.shares_kept_and_sink(a.weights(), w, sets, a.causal)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    for hubs, r in zip(sets, got):
        h = torch.tensor(hubs, dtype=torch.long)
        keep = (j <= i) & ((i - j < w) | torch.isin(j, h) | torch.isin(i, h))
        expect = (dense * keep).sum(-1).mean(-1)  # (L, H)
        torch.testing.assert_close(r["per_head"].double(), expect, rtol=1e-5, atol=1e-6)
        assert r["mean"] == pytest.approx(float(expect.mean()), rel=1e-5)
    assert sink == pytest.approx(float(dense[..., 1:, 0].mean()), rel=1e-5) and spread == 0.0


def kept_by_hand(dense: torch.Tensor, w: int, hubs, causal: bool) -> torch.Tensor:
    """Each row's kept weight ``(L, H, n)``, summed cell by cell over the dense grid: (i, j) is
    kept when it is read (j ≤ i in a causal model) and i − j < w (|i − j| < w both ways), or j
    is a hub, or i is one."""
    n = dense.shape[-1]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    h = torch.tensor(hubs, dtype=torch.long)
    near = (i - j < w) & (j <= i) if causal else (i - j).abs() < w
    keep = near | torch.isin(j, h) | torch.isin(i, h)
    return (dense * (keep & (j <= i) if causal else keep)).sum(-1)


@pytest.mark.parametrize("family", ["tiny", "bert", "gemma2", "mistral"])
def test_once_a_pass_kept_each_rows_normaliser_step_4_reads_only_the_windows_and_hubs_cells(family, tiny, tmp_path):
    """After one pass over the rows (which keeps each row's log-sum-exp: attn.rows.RowNorms),
    step 4's kept shares and the sink are read from the window's cells and the hub columns
    alone (Weights.kept_near), and equal the dense grid summed cell by cell: a causal model
    with sliding layers (the tiny one, window 8), an encoder (both ways), a soft cap, grouped
    key heads. Before the pass, nothing is known and the pass is made."""
    if family == "tiny":
        m, text = tiny, text_of(300)
    else:
        from attn import folders
        from harness import model_folders as mf

        m, text = folders.load_folder(mf.build(family, tmp_path / family), device="cpu"), text_of(100)
    a = m.analyze(text, max_tokens=120)
    n, w, sets = a.n, 5, ((), (3, 40), (0,))
    fresh = a.weights()
    assert fresh.kept_near(w, sets, a.causal) is None  # no row made yet: its normaliser unknown
    dense = fresh.dense().double()  # a pass over every row: their normalisers kept
    assert bool(a.norms.known.all())
    near, first = a.weights().kept_near(w, sets, a.causal)
    for hubs, got in zip(sets, near):
        torch.testing.assert_close(got.double(), kept_by_hand(dense, w, hubs, a.causal), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(first.double(), dense[..., 0], rtol=1e-5, atol=1e-6)
    got, (sink, _) = stats.shares_kept_and_sink(a.weights(), w, sets, a.causal)
    assert got[1]["mean"] == pytest.approx(float(kept_by_hand(dense, w, sets[1], a.causal).mean()), rel=1e-5)
    assert sink == pytest.approx(float(dense[..., 1:, 0].mean()), rel=1e-5)
    assert n > 40


def test_on_a_row_sample_the_normalisers_read_give_the_passs_own_shares(tiny):
    """On a long text's row sample, a pass keeps the sampled rows' normalisers; the shares read
    from them then equal the pass's own (the same rows, each standing for its stretch); a layer
    with learned sinks or a bias, or a window wider than NEAR_WIDTH, is left to the pass."""
    from attn import rows

    a = tiny.analyze(text_of(3000), max_tokens=3000)
    sample = RowSample.spread(a.n, 1024, 1024)
    view = a.weights().at(sample.positions)
    sets = ((), (0, 7, 2500), (0,))
    assert view.kept_near(16, sets, True) is None
    by_pass, by_pass_sink = stats.shares_kept_and_sink(view, 16, sets, True, sample=sample)  # the pass: norms kept
    near = a.weights().at(sample.positions).kept_near(16, sets, True)
    assert near is not None
    got, got_sink = stats.shares_kept_and_sink(a.weights().at(sample.positions), 16, sets, True, sample=sample)
    for x, y in zip(got, by_pass):
        torch.testing.assert_close(x["per_head"], y["per_head"], rtol=1e-5, atol=1e-6)
        assert x["spread"] == pytest.approx(y["spread"], rel=1e-4) and x["spread"] > 0
    assert got_sink == pytest.approx(by_pass_sink, rel=1e-5)
    assert a.weights().kept_near(rows.NEAR_WIDTH + 1, sets, True) is None
    assert a.weights().kept_near(16, sets, True) is None  # the rows outside the sample: never made


# --- step 7 on the model itself ----------------------------------------------------------


def test_the_four_way_run_reproduces_the_model_with_its_own_layout_and_counts_its_operations(tiny):
    """On the tiny model (window 8 in layers 0–2, layer 3 full): its own layout through the
    window kernel is the model (KL 0), full attention in every layer is not; the cost
    model's operations are the cells counted by hand plus the weights' 2 a token."""
    from attn import model_run

    ids = tiny.encode(text_of(200))[0][:200]
    res = model_run.four_ways(tiny, ids, hubs=(0, 5))
    assert res.lengths == (50, 100, 200) and res.layers == (0, 1, 2) and res.window == 8 and res.own_sliding
    assert [(r.way, r.n) for r in res.runs] == [(w, m) for m in (50, 100, 200) for w in model_run.WAYS]
    for r in res.runs:
        assert r.seconds > 0 and r.positions == min(r.n - 1, model_run.KL_POSITIONS)
        if r.way == "own":
            assert abs(r.kl) < 1e-6 and r.perplexity == pytest.approx(r.base_perplexity, rel=1e-5)
        if r.way in ("full", "linear") and r.n > 8:
            assert r.kl > 1e-4  # a layout the model was not made with changes what it predicts
    weights = tiny.arch.parameters - tiny.model.get_input_embeddings().weight.numel()
    per_cell = 4 * 16 * 4  # 4·d·heads
    for r in res.of("full"):
        assert r.operations == pytest.approx(4 * r.n * (r.n + 1) // 2 * per_cell + 2 * weights * r.n)
    for r in res.of("own"):
        band = sum(min(i + 1, 8) for i in range(r.n))
        assert r.operations == pytest.approx((3 * band + r.n * (r.n + 1) // 2) * per_cell + 2 * weights * r.n)
    assert res.ratio("full", lambda r: r.operations) == pytest.approx(
        res.of("full")[2].operations / res.of("full")[1].operations)


def test_the_forecast_of_the_four_way_run_weighs_each_run_in_the_order_it_runs(tiny):
    """attn.model_run.run_units lists one share for each run four_ways makes, in its order:
    the model's own output at n first (the tiny model has its head), then each length's four
    ways — each for the m tokens its progress names; the forecast is the pace times their
    sum, worked out here by hand for 200 tokens."""
    from attn import model_run

    ids = tiny.encode(text_of(200))[0][:200]
    calls = []
    model_run.four_ways(tiny, ids, hubs=(0,), progress=lambda done, total, way, n: calls.append((done, total, way, n)))
    units = model_run.run_units(200)
    assert [c[0] for c in calls] == list(range(len(units))) and {c[1] for c in calls} == {len(units)}
    share = [model_run.RUN_LINEAR * n + model_run.RUN_SQUARE * n * n for _, _, _, n in calls]
    compared = [0] + [min(n - 1, model_run.KL_POSITIONS) for _, _, _, n in calls[1:]]  # the base run is not
    assert units == pytest.approx([s + model_run.RUN_COMPARED * c for s, c in zip(share, compared)])
    by_hand = (model_run.RUN_LINEAR * (200 + 4 * (50 + 100 + 200))
               + model_run.RUN_SQUARE * (200**2 + 4 * (50**2 + 100**2 + 200**2))
               + model_run.RUN_COMPARED * 4 * (49 + 99 + 199))
    assert model_run.forecast(0.002, 200) == pytest.approx(0.002 * by_hand)
    assert model_run.run_units(200, compared=False) == pytest.approx(share[1:])


def test_step_7_reads_the_models_pace_from_the_fastest_analysis_of_the_process(monkeypatch):
    """A text read while other work ran beside it (10 s for 2,000 tokens) is forecast at the
    pace another analysis of the process ran at (1 s for 1,000 tokens), brought to its length
    by hand: 1/1000/(1 + 1000/20000) a token on a few tokens, × (1 + 2000/20000) at 2,000; a
    text read faster than that keeps its own pace; another model's analyses are not read."""
    from types import SimpleNamespace

    from ui import analyses

    monkeypatch.setattr(analyses, "_PACES", {})
    quiet, busy = SimpleNamespace(n=1000, seconds=1.0), SimpleNamespace(n=2000, seconds=10.0)
    assert analyses.pace(busy, "gemma") == pytest.approx(10.0 / 2000)  # nothing else known yet
    analyses._record_pace(quiet, "gemma")
    assert analyses.pace(busy, "gemma") == pytest.approx(1 / 1000 / 1.05 * 1.1)
    assert analyses.pace(SimpleNamespace(n=2000, seconds=1.0), "gemma") == pytest.approx(1.0 / 2000)
    assert analyses.pace(busy, "other") == pytest.approx(10.0 / 2000)


def test_an_analysis_counts_the_models_own_seconds_not_the_waits_between_its_chunks(tiny, monkeypatch):
    """A long text read in chunks (attn.model.CHUNK, here 64) with the queue's turn taking
    0.2 s between each: Analysis.seconds leaves those waits out (step 7's forecast reads the
    model's pace from it)."""
    from attn import model

    monkeypatch.setattr(model, "CHUNK", 64)
    text = text_of(400)
    waits = []

    def between(left, tokens):
        if left < tokens:  # between two chunks (the first call comes before any)
            time.sleep(0.2)
            waits.append(0.2)

    t0 = time.perf_counter()
    a = tiny.analyze(text, between=between)
    whole = time.perf_counter() - t0
    assert len(waits) >= 5 and a.seconds <= whole - sum(waits) + 0.05


def test_the_models_own_attention_read_a_block_of_rows_at_a_time_is_the_models_own_output(tiny):
    """On a long text the layer's own attention scores a block of rows at a time with the
    keys those rows see (attn.model.OWN_ROWS): its hidden states equal transformers' own
    eager attention on the whole grid (no plan), in the sliding layers (window 8) and the
    full one; the last block a partial one."""
    from attn import methods, model
    from attn.model import Replace

    n = 2 * model.OWN_ROWS + 300
    ids = tiny.encode(text_of(n))[0][:n]
    own = Replace(methods.own().name, frozenset(range(tiny.n_layers)), methods.Params(causal=True))
    x = torch.tensor([ids])
    got = tiny.run_plan(own, lambda: tiny.hidden(x))
    want = tiny.base_hidden(ids)  # transformers' eager attention: every pair scored, the mask applied
    assert got.shape == want.shape == (1, n, tiny.model.config.hidden_size)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)


def test_a_mask_that_reads_outside_the_band_runs_the_layers_own_attention_on_the_whole_grid(tiny, monkeypatch):
    """Where the model's mask lets a block's rows see keys the band leaves out (here: a
    window read as 4 while the mask keeps the model's 8), the band is not used: the output is
    still transformers' own."""
    import dataclasses

    from attn import methods, model
    from attn.model import Replace

    narrow = tuple(4 if w else w for w in tiny.arch.windows)
    monkeypatch.setattr(tiny, "arch", dataclasses.replace(tiny.arch, windows=narrow))
    n = model.OWN_ROWS + 200
    ids = tiny.encode(text_of(n))[0][:n]
    own = Replace(methods.own().name, frozenset(range(tiny.n_layers)), methods.Params(causal=True))
    got = tiny.run_plan(own, lambda: tiny.hidden(torch.tensor([ids])))
    torch.testing.assert_close(got, tiny.base_hidden(ids), atol=2e-5, rtol=2e-5)


def test_the_four_way_run_compares_positions_spread_over_the_whole_text():
    from attn import model_run

    assert model_run.spread_positions(10).tolist() == list(range(9))
    p = model_run.spread_positions(8192)
    assert p.numel() == model_run.KL_POSITIONS and int(p[0]) == 0 and int(p[-1]) == 8190
    assert model_run.lengths_of(8192) == (2048, 4096, 8192)


# --- the pages -------------------------------------------------------------------------------


@pytest.mark.parametrize("n, built", [(400, False), (700, True)])
def test_a_readers_text_over_512_tokens_has_its_other_pages_built_in_the_background(make_app, monkeypatch, n, built):
    """Step 1 of a text over AHEAD_TOKENS starts the background build of the other pages, in
    the reader's language, waiting while pages run; a shorter text's pages are quick: none."""
    from ui import prebuild, step_page

    assert step_page.AHEAD_TOKENS == 512
    monkeypatch.setenv("ATLAS_BUILD_AHEAD", "1")
    asked = []
    monkeypatch.setattr(prebuild, "prebuild", lambda view, langs, quiet: asked.append((view["text"], langs, quiet)))
    at = make_app("tiny", "pt")
    at.run()  # (the sample, 1,024 tokens here, is built ahead too)
    asked.clear()
    text = text_of(n)[:n - 1]  # n − 1 bytes, and <bos>: n tokens
    at.sidebar.text_area(key="text").input(text).run()
    assert not at.exception
    assert (asked[-1:] == [(text, ("pt",), True)]) is built and (not asked) is not built



def test_a_text_file_uploaded_becomes_the_text_and_another_encoding_is_refused_in_words(make_app):
    from ui import i18n, keys

    at = make_app("tiny", "pt")
    at.run()
    words = "Um texto só meu, lido de um arquivo: ação, coração, pão. " * 40
    at.sidebar.file_uploader(key="text_file").set_value(("meu.txt", ("\ufeff" + words).encode("utf-8"),
                                                         "text/plain")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[keys.TEXT] == words  # the byte-order mark dropped, the rest as written
    said = [x.value for x in at.toast]
    assert i18n.translate("pt", "sidebar.upload_read", name="meu.txt", n=i18n.fmt_int(len(words), "pt")) in said
    latin1 = "Coração em Latin-1".encode("latin-1")
    at.sidebar.file_uploader(key="text_file").set_value(("velho.txt", latin1, "text/plain")).run()
    assert at.session_state[keys.TEXT] == words  # kept: the other file was not read
    assert i18n.translate("pt", "sidebar.upload_not_utf8", name="velho.txt") in [x.value for x in at.toast]


def test_the_long_sample_is_read_whole_in_every_language(monkeypatch):
    """Each language's long sample, written for the app: over 8,000 tokens of the packaged
    model's tokenizer and within the CPU's budget (read whole, nothing cut)."""
    from pathlib import Path

    from tokenizers import Tokenizer

    from attn import settings
    from ui.samples import long_text

    monkeypatch.delenv("ATLAS_MAX_TOKENS", raising=False)
    found = Path(settings.read().cache_dir) / "gemma-3-270m-q4_k_m" / "tokenizer.json"
    if not found.exists():
        pytest.skip("the packaged model is not converted here (its tokenizer comes with it)")
    tok = Tokenizer.from_file(str(found))
    for lang in ("en", "pt", "ja"):
        n = len(tok.encode(long_text(lang)).ids) + 1  # and the start token
        assert 8000 <= n <= budgets.token_budget("cpu"), (lang, n)


def test_step7_runs_the_model_four_ways_on_the_readers_text_and_says_each_number(make_app, monkeypatch):
    from helpers import page_path
    from ui import i18n, walk

    at = make_app("tiny", "en")
    at.run()
    at.text_area(key="text").input(text_of(300)).run()
    at.switch_page(page_path(walk.get("payoff"))).run()
    assert not at.exception, [e.value for e in at.exception]
    before, after = i18n.translate("en", "payoff.model_forecast", s="§").split("§")
    assert [c for c in at.caption if before in c.value and after in c.value]  # how long, before it starts
    at.button(key="s7_model_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [m.label for m in at.metric]
    n = len(at.session_state["text"]) + 1  # one token a byte, and <bos>
    for way in ("full", "own", "hubs", "linear"):
        name = i18n.translate("en", f"payoff.way_{way}")
        label = i18n.translate("en", "payoff.metric_way_ratio", way=name, n=i18n.fmt_int(n // 2, "en"),
                               n2=i18n.fmt_int(n, "en"))
        assert label in labels, labels
    table = at.dataframe[-1].value
    assert len(table) == 12  # four ways at three lengths
    own = table[table.iloc[:, 0] == i18n.translate("en", "payoff.way_own")]
    assert set(own.iloc[:, 4]) == {"0.0000"}  # the model's own layout is the model


def test_a_followed_token_opens_a_band_of_rows_at_full_resolution_when_the_grid_is_pooled(make_app):
    """Step 1 on 1,024 tokens (the grid pooled 3×3): the followed token's band — its row and
    8 on each side, on the 128 keys that end with the band's last row — is drawn one cell a
    pair, each cell the layer's heads' mean weight as the dense grid holds it; a text short
    enough to be drawn whole has no band."""
    import base64
    import json

    import numpy as np

    from ui import analyses, figures
    from ui.i18n import translate

    at = make_app("tiny", "en")
    at.run()
    at.selectbox(key="s1_token").set_value(500).run()
    assert not at.exception
    text = at.session_state["text"]
    a = analyses.get_analysis(text, "tiny")
    assert a.n == 1024 and figures.pool_factor(a.n) == 3
    layer = at.selectbox(key="s1_layer").value
    title = translate("en", "every_pair.band_title", a="492", b="508", i="500")
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    spec = next(x for x in specs if title in json.dumps(x["layout"].get("title"), ensure_ascii=False))
    trace = spec["data"][0]
    rows, keys = list(range(492, 509)), list(range(509 - 128, 509))

    def numbers(x):  # a typed array (base64, with its dtype and shape) or a list, as Plotly sends them
        if isinstance(x, dict):
            return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
        return np.asarray(x).reshape(-1)

    assert numbers(trace["y"]).tolist() == rows and numbers(trace["x"]).tolist() == keys
    dense = a.weights().dense()[layer].mean(0)  # the layer's heads averaged: the page's default
    z = numbers(trace["z"]).reshape(len(rows), len(keys))
    expect = dense[492:509, 381:509].numpy()
    assert abs(z - expect).max() < 1e-4
    assert translate("en", "every_pair.band_caption", f="3", c="381", d="508") in [c.value for c in at.caption]
    at.sidebar.text_area(key="text").input("A short text, drawn whole.").run()
    assert not [c for c in at.get("plotly_chart") if "around token" in json.dumps(json.loads(c.proto.spec)["layout"])]


def test_a_classs_prebuild_builds_every_page_of_a_long_text(monkeypatch, fresh_caches):
    """A class on a long text (3,000 tokens of the tiny model: its statistics read on a
    sample): the class's background build (ui.prebuild, as a class's start, its teacher's
    changes and its students' joins call it) builds every step's page of the class's
    language, and nothing failed."""
    from ui import analyses, prebuild, row_reads, summaries, walk

    monkeypatch.setenv("ATLAS_MAX_TOKENS", "3000")
    text = text_of(3000)
    failed, built = sum(prebuild.PREBUILD_FAILED.values()), dict(summaries.BUILT)
    thread = prebuild.prebuild({"text": text, "settings": {}, "model": "tiny"}, langs=("en",))
    thread.join(timeout=600)
    assert not thread.is_alive() and sum(prebuild.PREBUILD_FAILED.values()) == failed
    assert all(summaries.BUILT[s.id] - built.get(s.id, 0) == 1 for s in walk.steps())  # each step, once
    a = analyses.get_analysis(text, "tiny")
    assert a.n == 3000 and not row_reads.row_sample(a).every_row


def test_a_readers_long_text_built_ahead_never_holds_its_analysis_while_it_waits(monkeypatch, fresh_caches):
    """A reader's long text, its other pages built ahead (ui.prebuild, quiet): each step in
    each language, every one built; at every wait for the readers' pages the thread holds
    no reference to the analysis (the memory budget does not count it: held while waiting,
    it would be memory nobody counts, kept past the cache's drop)."""
    import sys
    import weakref

    from ui import analyses, page_run, prebuild, summaries, walk

    text = text_of(400)
    ref = weakref.ref(analyses.get_analysis(text, "tiny"))
    holding = []

    def wait(limit):
        mine, f, held = ref(), sys._getframe(1), False
        while f is not None:
            held = held or any(v is mine for v in f.f_locals.values())
            f = f.f_back
        del mine, f
        holding.append(held)
        return 0.0

    monkeypatch.setattr(page_run, "wait_quiet", wait)
    built = dict(summaries.BUILT)
    prebuild._build_quietly(text, "tiny", {}, ("en", "pt"))
    assert all(summaries.BUILT[s.id] - built.get(s.id, 0) == 2 for s in walk.steps())  # each step, both languages
    pieces = sum(2 + (s.ahead is not None and s.needs_text) for s in walk.steps())  # its languages, its measures
    assert len(holding) == pieces and not any(holding)


def test_step_5_says_how_long_the_text_is_and_how_much_of_it_its_measure_reads(make_app, monkeypatch, fresh_caches):
    """On 3,000 tokens step 5's orders read the first 2,048 (budgets.LAYER_TOKENS): its words
    on the break-even say both numbers, and never call 2,048 the text's length."""
    from attn import costs
    from ui import i18n

    at, _ = opened_on_3000_tokens(make_app, monkeypatch, "linear")
    d = 16  # the tiny model's head size; elu + 1: m = d
    even = costs.linear_break_even(d, d, True)
    said = i18n.translate("en", "linear.break_long_part", n="2,048", total="3,000", nm=even.memory,
                          no=even.operations)
    shown = [m.value for m in at.markdown]
    assert said in shown, shown
    assert not [m for m in shown if "Your text has 2,048" in m]


def test_a_file_that_is_no_utf8_text_is_refused_and_one_just_under_the_bound_is_read(make_app):
    """UTF-16 saved without its byte-order mark decodes as UTF-8 with a NUL between the
    letters, and a file of NULs is no text: both refused in words, the text kept. A file of
    2,097,052 bytes, under the 2 MB (2 × 1024² bytes) the help promises, is read (cut to the
    text area, and said); one byte over 2 MB is refused in words."""
    from ui import i18n, keys, session

    at = make_app("tiny", "en")
    at.run()
    before = at.session_state[keys.TEXT]
    for name, data in (("utf16.txt", "Plain words in UTF-16.".encode("utf-16-le")),
                       ("nul.txt", b"\x00" * 64)):
        at.sidebar.file_uploader(key="text_file").set_value((name, data, "text/plain")).run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state[keys.TEXT] == before
        assert i18n.translate("en", "sidebar.upload_not_utf8", name=name) in [x.value for x in at.toast]
    assert session.UPLOAD_BYTES == 2 * 1024 * 1024
    near = (b"words and more words. " * 100_000)[:2_097_052]
    at.sidebar.file_uploader(key="text_file").set_value(("near.txt", near, "text/plain")).run()
    assert at.session_state[keys.TEXT] == near[:session.MAX_CHARS].decode()
    over = b"a" * (2 * 1024 * 1024 + 1)
    at.sidebar.file_uploader(key="text_file").set_value(("over.txt", over, "text/plain")).run()
    assert at.session_state[keys.TEXT] == near[:session.MAX_CHARS].decode()
    assert i18n.translate("en", "sidebar.upload_too_big", name="over.txt", mb=2) in [x.value for x in at.toast]


def test_step_6_names_the_hubs_its_errors_measured_when_some_lie_past_the_tokens_read(make_app, monkeypatch,
                                                                                     fresh_caches):
    """On 3,000 tokens step 6's errors read the first 2,048: with hubs 0, 2,500 and 2,900 asked
    for, window + hubs is measured with hub 0 alone, and every label of it on the page (the
    bar, the metric, the vote's options and revealed answer) says so, with the hubs left out
    named; its error equals window 16 + the first token's, computed here in float64 on those
    2,048 tokens of the full layer 3 (a cell (i, j) read when j ≤ i and i − j < 16, or j = 0)."""
    import json

    from helpers import page_path, revealed
    from ui import analyses, i18n, walk

    monkeypatch.setenv("ATLAS_MAX_TOKENS", "3000")
    text = text_of(3000)
    at = make_app("tiny", "en")
    at.run()
    at.text_area(key="text").input(text).run()
    at.switch_page(page_path(walk.get("honest-catch"))).run()
    at.selectbox(key="s6_layer").set_value(3).run()
    at.multiselect(key="s6_hubs").set_value([0, 2500, 2900]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["s6_w"] == 16
    name = "window 16 + hub 0 only"
    assert not [m for m in at.metric if "3 hubs" in m.label]
    shown = next(m for m in at.metric if m.label == f"{name}: error")
    said = ("Hubs 2500 and 2900 lie beyond the first 2,048 tokens these errors are measured on, so window + hubs "
            "is measured with hub 0 alone.")
    assert said in [c.value for c in at.caption], [c.value for c in at.caption]
    assert i18n.translate("en", "honest_catch.name_window_hubs_some", w=16, g=1, hubs="0") == name
    specs = [json.dumps(json.loads(c.proto.spec)["data"], ensure_ascii=False) for c in at.get("plotly_chart")]
    assert any(name in s for s in specs) and not any("+ 3 hubs" in s for s in specs)
    options = [o for r in at.radio for o in r.options]
    assert name in options and not [o for o in options if "3 hubs" in o], options

    # by hand: the layer's q, k, v on the first 2,048 tokens, softmax in float64, head by head
    a = analyses.get_analysis(text, "tiny")
    m, scale = 2048, a.layers[3].scale
    assert a.n == 3000 and a.layers[3].window is None
    q, k, v = (x[0, :, :m].double() for x in a.qkv(3))
    i, j = torch.arange(m)[:, None], torch.arange(m)[None, :]
    seen = j <= i
    kept = seen & ((i - j < 16) | (j == 0))
    errs = []
    for h in range(q.shape[0]):
        s = q[h] @ k[h].T * scale
        exact = torch.softmax(s.masked_fill(~seen, float("-inf")), -1) @ v[h]
        got = torch.softmax(s.masked_fill(~kept, float("-inf")), -1) @ v[h]
        errs.append(float((got - exact).norm() / exact.norm()))
    assert shown.value == i18n.fmt_pct(sum(errs) / len(errs), "en")
    answer = revealed(at)
    page = " ".join(x.value for x in at.markdown)
    assert said in page and "3 hubs" not in page
    assert "hub" not in answer or answer.startswith(name), answer


def test_the_closing_pages_numbers_read_on_a_sample_say_so_with_each_ones_stray(make_app, monkeypatch, fresh_caches):
    """On 3,000 tokens the closing page's first token's share, its 16 nearest tokens' and the
    two together are read on 2,048 rows (the first 1,024, and 1,024 spread over the rest): the
    page says so under them, with each one's stray. Worked out here from those rows written
    out whole, each row's kept weight averaged over every layer and head: the shares are the
    rows' weighted means (the sink's over the rows after the first), the strays 1.96 standard
    errors of the spread rows' values with the finite-population correction."""
    from ui import analyses, i18n

    at, text = opened_on_3000_tokens(make_app, monkeypatch, "closing")

    a = analyses.get_analysis(text, "tiny")
    n, whole, m = 3000, 1024, 1024
    sample = RowSample.spread(n, whole, m)
    pos = sample.positions
    i, j = pos[:, None], torch.arange(n)[None, :]
    near_cells = (j <= i) & (i - j < 16)
    both_cells = near_cells | ((j == 0) & (j <= i))
    near = torch.zeros(pos.numel(), dtype=torch.float64)
    both, first = torch.zeros_like(near), torch.zeros_like(near)
    for layer in range(a.n_layers):
        rows = a.weights()[layer].at(pos).dense().double()  # (heads, rows, n)
        near += (rows * near_cells).sum(-1).sum(0)
        both += (rows * both_cells).sum(-1).sum(0)
        first += rows[..., 0].sum(0)
    grids = a.n_layers * a.n_heads
    near, both, first = near / grids, both / grids, first / grids
    wt = sample.weights
    rest = n - whole

    def stray(values, rows_after):  # 95 % of the spread rows' mean, scaled to the rows it stands for
        se = float(values[whole:].std()) / math.sqrt(m) * math.sqrt(1 - m / rest)
        return 1.96 * se * rest / rows_after

    got = {"near": (float((wt * near).sum() / n), stray(near, n)),
           "both": (float((wt * both).sum() / n), stray(both, n)),
           "sink": (float((wt[1:] * first[1:]).sum() / (n - 1)), stray(first, n - 1))}  # rows after the first
    lead = i18n.translate("en", "closing.lead_numbers", n="3,000", w=16,
                          **{k: i18n.fmt_pct(v, "en") for k, (v, _) in got.items()})
    assert lead in [x.value for x in at.markdown]
    note = ("These three numbers are read on 2,048 of the text's 3,000 rows: all of its first 1,024 rows, and 1,024 "
            "more spread evenly over the rest. 95% of such samples land within ±{sink} percentage points of the "
            "first token's share, ±{near} of the neighbours' and ±{both} of the two together, each around its "
            "figure above.")
    smallest = min(100 * s for _, s in got.values())
    assert smallest > 0
    digits = min(4, max(2, -math.floor(math.log10(smallest))))  # never ±0.00: as many as its first digit needs
    note = note.format(**{k: f"{100 * s:.{digits}f}" for k, (_, s) in got.items()})
    assert note in [c.value for c in at.caption], [c.value for c in at.caption]


def test_the_playground_names_the_hubs_its_swap_and_its_error_leave_out_past_their_first_tokens(
        make_app, monkeypatch, fresh_caches):
    """On 3,000 tokens with hubs 0, 1000 and 2500 chosen, the swap runs the model on the first
    256 tokens and the output error reads the first 2,048: each says which of the hubs lie
    past its tokens (1000 and 2500; 2500), never only «your pattern»."""
    from attn import swap
    from helpers import page_path
    from ui import i18n, walk

    monkeypatch.setenv("ATLAS_MAX_TOKENS", "3000")
    at = make_app("tiny", "en")
    at.run()
    at.text_area(key="text").input(text_of(3000)).run()
    at.switch_page(page_path(walk.get("playground"))).run()
    at.radio(key="pg_hub_mode").set_value("chosen").run()
    at.multiselect(key="pg_hubs").set_value([0, 1000, 2500]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert swap.SWAP_MAX_TOKENS == 256 and "hubs" in at.session_state["pg_on"]
    captions = [c.value for c in at.caption]
    runs = i18n.translate("en", "playground.swap_caption", n="256", scope=i18n.translate("en", "playground.scope_all"))
    left = "Hubs 1000 and 2500 lie beyond the first 256 tokens, so the pattern measured on them leaves them out."
    assert f"{runs} {left}" in captions, captions
    first = i18n.translate("en", "playground.error_first", m="2,048", n="3,000")
    assert f"{first} Hub 2500 lies beyond the first 2,048 tokens, so the pattern measured on them leaves it out." \
        in captions, captions
