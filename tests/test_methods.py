"""The method registry, walked: every method's fast kernel equals its dense
reference, its cost model is sound, its pattern is the one of attn/patterns, and
its label exists in every language. A new method added to the registry is tested
here without a line of its own."""

import pytest
import torch

from attn import costs, methods, patterns
from attn.costs import Shape
from helpers import LANGS
from ui import i18n

ALL = list(methods.METHODS.values())
SHAPES = [(1, 1, 1, 8), (1, 2, 37, 16), (2, 3, 130, 8)]  # n = 1, n not a multiple of the block, batch > 1


def params_for(n: int, causal: bool) -> methods.Params:
    return methods.Params(window=min(5, n), hubs=tuple(h for h in (0, n // 2) if h < n), causal=causal, scale=0.3)


@pytest.mark.parametrize("method", ALL, ids=lambda m: m.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("causal", [True, False])
def test_every_method_matches_its_dense_reference(method, shape, causal):
    torch.manual_seed(sum(shape))
    q, k, v = (torch.randn(shape) for _ in range(3))
    p = params_for(shape[2], causal)
    torch.testing.assert_close(method.run(q, k, v, p), method.reference(q, k, v, p), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("method", ALL, ids=lambda m: m.name)
def test_every_method_counts_the_cells_of_its_own_pattern(method):
    for n in (1, 9, 70):
        for causal in (True, False):
            p = params_for(n, causal)
            q, k = torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8)
            seen = method.allowed(q, k, p)
            for grid in seen.reshape(-1, n, n):  # every head of a data-dependent pattern alike
                assert method.cells(n, p) == int(grid.sum())
            if not method.data_dependent:
                assert torch.equal(seen, patterns.dense(method.mask(n, p), n))
            else:
                with pytest.raises(ValueError, match="q and k"):
                    method.mask(n, p)
            rows = torch.cat([method.allowed_rows(q, k, p, r0, min(n, r0 + 4)) for r0 in range(0, n, 4)], dim=-2)
            assert torch.equal(rows.expand_as(seen) if seen.dim() == 4 else rows, seen)


@pytest.mark.parametrize("method", ALL, ids=lambda m: m.name)
def test_every_cost_model_is_positive_and_never_computes_less_than_it_uses(method):
    s = Shape()
    for n in (64, 1000, 4096):
        for backend in ("model", "blocked", "flex", "sdpa", "reference"):
            useful, computed = method.flops(n, s, backend)
            assert 0 < useful <= computed
        assert method.memory(n, s) > 0


@pytest.mark.parametrize("method", [m for m in ALL if m.family != "linear"], ids=lambda m: m.name)
def test_useful_operations_of_softmax_methods_are_their_cells_times_a_hand_count(method):
    s = Shape()
    # by hand, for the default shape (batch 1, 4 heads of size 64): one cell is 64
    # multiply-adds for q·k and 64 for p·v, 256 operations per head, 1,024 over the heads
    assert (s.batch, s.heads, s.d) == (1, 4, 64)
    n = 300
    window = None if method.family == "full" else s.window  # the shape's window (own: a sliding layer's)
    hubs = s.hub_positions(n) if method.name in ("window_hubs", "pattern") else ()
    assert s.hub_positions(n) == (0, 75, 150, 224)  # 299·i/4 rounded, i = 0…3
    p = methods.Params(window=window, hubs=hubs, causal=True)
    if method.data_dependent:  # top-k at the window's cells a row: each row min(i + 1, 128) keys
        cells = sum(min(i + 1, s.window) for i in range(n))
    else:
        cells = int(patterns.dense(method.mask(n, p), n).sum())
    assert method.flops(n, s)[0] == cells * 1024


def test_top_k_counts_its_choosing_apart_from_its_attention():
    s = Shape()  # 4 heads of 64, causal, window 128
    n = 300
    pairs = n * (n + 1) // 2  # every visible pair is scored
    oracle, indexer = methods.top_k(), methods.top_k(indexer=True)
    assert oracle.scoring_flops(n, s) == pairs * 2 * 64 * 4
    dims = methods.INDEXER_DIMS
    assert indexer.scoring_flops(n, s) == (pairs * 2 * dims + 4 * n * 64 * dims) * 4
    useful, computed = oracle.flops(n, s)
    assert computed == useful + oracle.scoring_flops(n, s)
    assert methods.get("window").scoring_flops(n, s) == 0
    for m in (300, 2**16):  # step 7 says the oracle's choosing alone is half of full attention at every length
        assert oracle.scoring_flops(m, s) == pytest.approx(0.5 * methods.exact().flops(m, s)[0])
    assert str(dims) in i18n.translate("en", indexer.label_key, w=4)


def test_efficient_methods_grow_linearly_and_full_attention_quadratically():
    ops = methods.operations([2**16, 2**17], Shape())
    for name, (a, b) in ops.items():
        assert b / a == pytest.approx(4.0 if name == "full" else 2.0, rel=0.01), name
    s = Shape()
    assert methods.get("full").memory(2**16, s) == 17_179_869_184  # 1 batch × 4 heads × 65,536² scores
    assert methods.get("window").memory(2**17, s) / methods.get("window").memory(2**16, s) == pytest.approx(2, rel=0.01)


@pytest.mark.parametrize("lang", LANGS)
def test_every_method_has_a_label_in_every_language(lang):
    table = i18n.strings(lang)
    for m in ALL:
        for key in filter(None, (m.label_key, m.reference_label_key)):
            assert key in table, f"{m.name}: no {key!r} in {lang}"
            assert i18n.translate(lang, key, w=4, g=2, dtype="float32").strip()


def test_every_tag_names_a_place_and_selects_in_registry_order():
    names = list(methods.METHODS)
    for tag in (methods.ERRORS, methods.BENCH, methods.COST_MODEL, methods.SWAP, methods.MAPS):
        chosen = [m.name for m in methods.tagged(tag)]
        assert chosen and chosen == sorted(chosen, key=names.index)
    assert [m.name for m in methods.tagged(methods.BENCH)] == ["full", "window", "window_hubs", "topk", "topk_indexer",
                                                                "linear_elu"]
    with pytest.raises(ValueError):
        methods.get("sdpa")  # one name per method: full attention is "full"


def test_the_models_own_pattern_is_causal_plus_the_layers_window():
    own = methods.get("own")
    assert own.cells(20, methods.Params(window=None)) == 20 * 21 // 2
    assert own.cells(20, methods.Params(window=4)) == patterns.cells(20, 4, (), True)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("m,d", [(256, 256), (273, 256), (16, 16), (1, 1)])
def test_linear_break_even_is_where_the_summary_order_first_gets_cheaper(m, d, causal):
    b = costs.linear_break_even(m, d, causal)
    summary = m * d + m

    def grid(n):
        return n * (n + 1) // 2 if causal else n * n

    assert grid(b.memory) > summary >= grid(b.memory - 1)
    ops = b.operations  # the grid order: m + d per cell (score φ(q)·φ(k), then the values); the summary: 2md a token
    assert grid(ops) * (m + d) > ops * 2 * m * d and grid(ops - 1) * (m + d) <= (ops - 1) * 2 * m * d
    if (m, d) == (256, 256):  # the model's head size with elu+1, ReLU or FAVOR+
        assert (b.memory, b.operations) == ((363, 512) if causal else (257, 257))
    if (m, d) == (273, 256):  # Taylor's m on the model's head size: counted by hand, 279,552 / 529 and 139,776 / 529
        assert b.operations == (528 if causal else 265)


def test_the_key_value_cache_by_hand_for_gemma_3s_shape():
    from types import SimpleNamespace

    from pages import payoff

    # Gemma-3-270m: 18 layers, five sliding (window 512) then one full, one key/value head of 256
    windows = ((512,) * 5 + (None,)) * 3
    n = 2 ** 17
    per_token = 2 * 1 * 256  # a key and a value of one head
    assert costs.kv_cache(n, windows, 1, 256) == per_token * (3 * n + 15 * 512) == 205_258_752
    assert costs.kv_cache(100, windows, 1, 256) == per_token * 18 * 100  # a short text: every layer keeps it all
    assert costs.linear_state(18, 1, 256) == 18 * (256 * 256 + 256)  # elu + 1: m = d
    arch = SimpleNamespace(windows=windows, kv_heads=1, head_dim=256, n_layers=18, max_positions=32_768)
    c = payoff.cache(arch, 128, 4)  # float32, as the app runs the model
    assert c.ns[-1] == payoff.cache_at(arch) == 32_768  # the chart stops at the model's own context
    at, n = c.ns.index(32_768), 32_768
    assert c.model[at] == pytest.approx(per_token * (3 * n + 15 * 512) * 4 / 1e6)  # 217.1 MB in float32
    assert c.full[at] == pytest.approx(per_token * 18 * n * 4 / 1e6)  # 1,208.0 MB
    assert c.window[at] == pytest.approx(per_token * 18 * 128 * 4 / 1e6)
    assert c.linear[at] == pytest.approx(18 * 65_792 * 4 / 1e6) and len(set(c.linear)) == 1
    assert (c.full_layers, c.sliding_layers) == (3, 15)
    from ui.i18n import Translator

    t = Translator("en")
    rows = payoff.cache_rows(t, arch, Shape(window=128, hubs=4), (4096,), 4)
    col = t("payoff.cache_col_n", n=t.int(4096))
    got = {r[t("payoff.cache_col_way")]: r[col] for r in rows}

    def mb(numbers):
        return t.float(numbers * 4 / 1e6, 1)

    assert got[t("payoff.cache_full")] == got[t("payoff.cache_topk")] == mb(per_token * 18 * 4096)
    assert got[t("payoff.cache_model_short")] == mb(per_token * (3 * 4096 + 15 * 512))
    assert got[t("payoff.cache_window_hubs", w=t.int(128), g=4)] == mb(per_token * 18 * 132)  # 128 + 4 tokens kept
    # the 3-in-4 hybrid: layers 3, 7, 11 and 15 full, the other 14 a linear summary each
    assert got[t("payoff.cache_hybrid", exact=4, layers=18)] == mb(per_token * 4 * 4096 + 14 * 65_792)


def test_the_cache_is_said_within_the_models_positions_and_lengths_past_them_stand_apart():
    """Gemma-3-270m reads 32,768 positions: the cache's metric is said at 32,768 (not
    131,072), its table runs 4,096 and 32,768, and 131,072 and 1,048,576 stand apart (another
    model's table); a model that reads further is said at 131,072, every length its own."""
    from types import SimpleNamespace

    from pages import payoff
    from ui.i18n import Translator

    t = Translator("en")
    windows = ((512,) * 5 + (None,)) * 3
    gemma = SimpleNamespace(windows=windows, kv_heads=1, head_dim=256, n_layers=18, max_positions=32_768)
    assert payoff.cache_at(gemma) == 32_768
    own, beyond = payoff.cache_lengths(gemma)
    assert (own, beyond) == ((4096, 32_768), (131_072, 1_048_576))
    columns = list(payoff.cache_rows(t, gemma, Shape(window=128, hubs=4), own, 4)[0])[1:]
    assert columns == [t("payoff.cache_col_n", n="4,096"), t("payoff.cache_col_n", n="32,768")]
    longer = SimpleNamespace(**{**vars(gemma), "max_positions": 2 ** 21})
    assert payoff.cache_at(longer) == payoff.CACHE_AT == 131_072
    assert payoff.cache_lengths(longer) == ((4096, 131_072, 1_048_576), ())
