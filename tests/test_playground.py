"""The playground's composed patterns: every part and every pair of parts against the
dense reference (kernels, cells, reach and hops), the seeded random blocks, one
compiled kernel for every setting, the presets, and the messages for settings that do
not fit a text."""

import collections
import itertools
import types

import pytest
import torch

from attn import backend, composition, flex, graph, methods, outputs, patterns, sparse_kernels
from attn import model as atlas_model
from attn import loading
from attn import swap as atlas_swap
from attn.composition import Composition, CompositionError, window_and_hubs
from helpers import page_path
from pages import playground as pg

PATTERN = methods.get("pattern")
# one setting of each part, small enough for n = 37 and 130 (neither a multiple of the block)
PART_SETTINGS = {
    "window": {"window": 5},
    "dilated": {"dilated": 3, "stride": 4},
    "hubs": {"hubs": (0, 20)},
    "random": {"random": 2, "random_block": 8, "seed": 3},
    "local": {"local": 16},
}
COMBOS = [(p,) for p in PART_SETTINGS] + list(itertools.combinations(PART_SETTINGS, 2))


def comp(*parts, **extra) -> Composition:
    kw = {}
    for p in parts:
        kw.update(PART_SETTINGS[p])
    kw.update(extra)
    return Composition(**kw)


def dense_of(n: int, c: Composition, causal: bool) -> torch.Tensor:
    return patterns.dense(composition.composed_mask(n, c, causal), n)


def test_every_part_is_one_registry_entry_with_its_own_predicate_and_label():
    assert list(composition.PARTS) == list(PART_SETTINGS)
    for name, part in composition.PARTS.items():
        alone = comp(name)
        assert part.on(alone) and not part.on(Composition(**{**PART_SETTINGS[name], **part.off}))
        # switched off, a part adds nothing to the diagonal
        n = 40
        off = Composition(**{**PART_SETTINGS[name], **part.off})
        assert torch.equal(dense_of(n, off, False), torch.eye(n, dtype=torch.bool)), name
        assert dense_of(n, alone, False).sum() > n, name  # on, it adds cells


def test_each_predicate_means_what_the_page_says():
    n = 30
    g = dense_of(n, comp("dilated"), True)
    assert g[20].nonzero().flatten().tolist() == [12, 16, 20]  # 3 tokens, every 4th, itself first
    g = dense_of(n, Composition(local=8), False)
    assert g[10].nonzero().flatten().tolist() == list(range(8, 16))
    g = dense_of(n, Composition(hubs=(4,)), True)
    assert g[4].nonzero().flatten().tolist() == list(range(5)) and g[:, 4].sum() == n - 4
    g = dense_of(n, Composition(window=3), False)
    assert g[10].nonzero().flatten().tolist() == [8, 9, 10, 11, 12]
    # random blocks: whole blocks of 8 tokens, never the query's own block, seen from each of its rows
    c = Composition(random=1, random_block=8, seed=5)
    g = dense_of(32, c, False) & ~torch.eye(32, dtype=torch.bool)
    for qb in range(4):
        rows = g[qb * 8:(qb + 1) * 8]
        assert torch.equal(rows, rows[:1].expand_as(rows))
        seen = rows[0].reshape(4, 8)
        assert seen.all(dim=1).sum() == 1 and not seen[qb].any() and (seen.any(dim=1) == seen.all(dim=1)).all()


@pytest.mark.parametrize("parts", COMBOS, ids=lambda p: "+".join(p))
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_blocked_kernel_and_cells_match_the_dense_pattern_for_every_part_and_pair(parts, causal):
    for n in (37, 130):
        c = comp(*parts)
        torch.manual_seed(n)
        q, k, v = (torch.randn(2, 3, n, 16) for _ in range(3))
        p = methods.Params(parts=c, causal=causal, scale=0.3)
        want = PATTERN.reference(q, k, v, p)
        torch.testing.assert_close(PATTERN.run(q, k, v, p, backend="blocked"), want, atol=2e-5, rtol=2e-5)
        for block in (16, 32, 64):  # the kernel is right for any block size
            visit = composition.composed_blocks(n, c, causal, block, hub_lines=False)
            got = sparse_kernels.sparse_attention(q, k, v, composition.composed_mask(n, c, causal), visit, c.hubs,
                                                  scale=0.3,
                                           block=block)
            torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
        assert PATTERN.cells(n, p) == int(dense_of(n, c, causal).sum())
        # the block lists hold every cell (what flex and the cell count rely on)
        visit = composition.composed_blocks(n, c, causal, 16).repeat_interleave(16, 0).repeat_interleave(16, 1)[:n, :n]
        assert not (dense_of(n, c, causal) & ~visit).any()


def test_the_blocked_composed_kernel_takes_the_block_that_visits_fewest_cells():
    """backend.sparse_plan: 32-blocks for narrow parts (BigBird's window and random blocks
    of 32 waste most of a 64-block), 64 when a smaller block saves less than a quarter;
    its visited blocks hold every cell of the pattern outside the hub lines."""
    n = 1000
    bigbird = composition.preset("bigbird", (0, 500), 512)
    block, visit = backend.sparse_plan(n, bigbird, True)
    assert block == 32
    wide = Composition(window=300, local=128)
    assert backend.sparse_plan(n, wide, True)[0] == 64
    grid = dense_of(n, bigbird, True)
    grid[:, list(bigbird.hubs)] = False
    grid[list(bigbird.hubs), :] = False
    held = visit.repeat_interleave(block, 0).repeat_interleave(block, 1)[:n, :n]
    assert not (grid & ~held).any()
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 16) for _ in range(3))
    p = methods.Params(parts=bigbird, causal=True)
    torch.testing.assert_close(PATTERN.run(q, k, v, p, backend="blocked"), PATTERN.reference(q, k, v, p),
                               atol=2e-5, rtol=2e-5)


def test_cells_are_exact_at_a_larger_n_and_the_cost_of_a_sparse_mix_grows_linearly():
    c = Composition(window=64, hubs=(0, 700), random=2, random_block=64, seed=1, dilated=8, stride=16)
    n = 1500
    assert composition.composed_cells(n, c, True) == int(dense_of(n, c, True).sum())
    assert composition.composed_cells(n, c, False) == int(dense_of(n, c, False).sum())
    ratio = composition.composed_cells(2 * 8192, c, True) / composition.composed_cells(8192, c, True)
    assert ratio == pytest.approx(2.0, abs=0.05)
    assert composition.composed_cells(64, Composition(window=64), True) == 64 * 65 // 2


def bfs_hops(adj: torch.Tensor) -> torch.Tensor:
    """Plain breadth-first search from every key j along edges j → i (i sees j)."""
    n = adj.shape[0]
    out = torch.full((n, n), -1, dtype=torch.int64)
    for j in range(n):
        out[j, j] = 0
        todo = collections.deque([j])
        while todo:
            cur = todo.popleft()
            for i in adj[:, cur].nonzero().flatten().tolist():
                if out[i, j] < 0:
                    out[i, j] = out[cur, j] + 1
                    todo.append(i)
    return out


@pytest.mark.parametrize("parts", COMBOS, ids=lambda p: "+".join(p))
def test_reach_and_hops_agree_with_a_breadth_first_search(parts):
    n = 40
    c = composition.composition_on_prefix(n, comp(*parts))
    for causal in (True, False):
        adj = dense_of(n, c, causal)
        hops = graph.hops_of(adj)
        assert torch.equal(hops, bfs_hops(adj)), (parts, causal)
        for layers in (1, 2, 3):
            assert torch.equal(graph.reach_of(adj, layers), (hops >= 0) & (hops <= layers))


def test_random_blocks_come_back_from_their_seed_and_change_with_it():
    a = patterns.random_table(500, 16, 3, seed=42)
    assert torch.equal(a, patterns.random_table(500, 16, 3, seed=42))
    assert not torch.equal(a, patterns.random_table(500, 16, 3, seed=43))
    assert (a.sum(dim=1) == 3).all() and not a.diagonal().any()


def test_settings_that_do_not_fit_the_text_name_themselves():
    n = 50
    cases = {"stride": Composition(dilated=2, stride=60),
             "dilated": Composition(dilated=20, stride=3), "hub": Composition(hubs=(50,)),
             "random_block": Composition(random=1, random_block=64), "random": Composition(random=9, random_block=8),
             "seed": Composition(random=1, random_block=8, seed=2**32), "local": Composition(local=51)}
    for code, c in cases.items():
        with pytest.raises(CompositionError) as err:
            composition.check_composition(n, c)
        assert err.value.code == code
    for bad in (Composition(window=-1), Composition(local=2.5), Composition(hubs=(True,))):
        with pytest.raises(ValueError):
            composition.check_composition(n, bad)
    cfg = dict(pg.DEFAULTS, pg_on=["random"], pg_seed="forty-two")
    c, problem = pg.composition(cfg, n, [0])
    assert c is None and problem.code == "seed_text"
    c, problem = pg.composition(dict(pg.DEFAULTS, pg_on=["random"], pg_seed=" 42 ", pg_rblock=16), n, [0])
    assert problem is None and c.seed == 42 and c.random == 2


def test_presets_longformer_and_bigbird_join_every_pair_within_two_hops_bidirectional():
    a = types.SimpleNamespace(sliding_window=512, n=200)
    for name in ("longformer", "bigbird"):
        cfg = dict(pg.DEFAULTS, **pg.preset(name, a.sliding_window))
        c, problem = pg.composition(cfg, a.n, [0, 57, 120])
        assert problem is None and c.hubs and c.window == pg.PRESET_WINDOW
        assert (name == "bigbird") == (c.random > 0)
        hops = graph.hops_of(dense_of(a.n, c, False))
        assert int(hops.max()) <= 2 and int(hops.min()) >= 0
    for name in pg.PRESETS:  # the page's presets are the registry's
        c = pg.composition(dict(pg.DEFAULTS, **pg.preset(name, a.sliding_window)), a.n, [0, 57, 120])[0]
        assert c == composition.preset(name, (0, 57, 120), a.sliding_window), name
        assert len(set(pg.preset(name, a.sliding_window)["pg_on"])) == len(pg.preset(name, a.sliding_window)["pg_on"])
    sink = pg.composition(dict(pg.DEFAULTS, **pg.preset("sink", a.sliding_window)), a.n, [57])[0]
    assert sink.hubs == (0,)
    own = pg.composition(dict(pg.DEFAULTS, **pg.preset("model", a.sliding_window)), a.n, [57])[0]
    assert own == Composition(window=512)  # on a text of 200 tokens: every earlier token, as the model does
    assert composition.composed_cells(200, own, True) == 200 * 201 // 2


@pytest.fixture(scope="module")
def tiny():
    return loading.tiny(device="cpu", sliding_window=8)


TEXT = "The model's own pattern, swapped in, must give the model back to the last digit. " * 3


def test_the_models_own_preset_reproduces_the_model_exactly(tiny):
    """Window = the model's sliding window in its sliding layers: the model itself, through
    the block-sparse kernel (the text is longer than the window)."""
    ids, _ = tiny.encode(TEXT)
    assert len(ids) > 3 * tiny.sliding_window
    x = torch.tensor([ids])
    base = torch.log_softmax(tiny.logits(tiny.base_hidden(ids)[0]), dim=-1)
    c = Composition(window=tiny.sliding_window)
    plan = atlas_model.Replace("pattern", frozenset(tiny.resolve_layers("sliding")), methods.Params(parts=c))
    swapped = torch.log_softmax(tiny.logits(tiny.run_plan(plan, lambda: tiny.hidden(x))[0]), dim=-1)
    assert (swapped - base).abs().max() < 1e-4
    res = atlas_swap.measure(tiny, TEXT, atlas_swap.Swap("pattern", "sliding", parts=c))
    assert abs(res.kl) < 1e-6 and res.top1_agreement == 1.0
    # the same window in every layer (its full layers too) does change the model
    other = atlas_swap.measure(tiny, TEXT, atlas_swap.Swap("pattern", "all", parts=c))
    assert other.kl > 1e-4


def test_the_swap_is_always_causal(tiny, monkeypatch):
    seen = []
    real = methods.Method.run

    def spy(self, q, k, v, params=methods.Params(), backend="auto"):
        if self.name == "pattern":
            seen.append(params.causal)
        return real(self, q, k, v, params, backend)

    monkeypatch.setattr(methods.Method, "run", spy)
    atlas_swap.measure(tiny, TEXT, atlas_swap.Swap("pattern", "all", parts=Composition(window=4, local=8)))
    assert seen and all(seen)


@pytest.mark.skipif(not flex.available(), reason="FlexAttention cannot compile here (no C++ compiler)")
@pytest.mark.filterwarnings("error:flex_attention called without torch.compile")  # the n×n unfused path
def test_one_compiled_kernel_serves_every_part_and_setting_without_recompiling():
    assert backend.warm((1, 4, 1024, 32), kernel="pattern"), "\n".join(flex.status()["log"])
    compiled_before = torch._dynamo.utils.counters["frames"]["ok"]
    cases = [(700, comp("window", "random", random_block=32), True), (333, comp("dilated", "local"), False)]
    cases += [(300 + 7 * i, comp(*parts, random_block=32) if "random" in parts else comp(*parts), i % 2 == 0)
              for i, parts in enumerate(COMBOS)]
    for n, c, causal in cases:
        torch.manual_seed(n)
        q, k, v = (torch.randn(1, 4, n, 32) for _ in range(3))
        p = methods.Params(parts=c, causal=causal)
        if window_and_hubs(c):  # the window kernels run it (tested with them), not the composed kernel
            assert PATTERN.backend(q, v, p) == backend.window_backend(q, v, causal, c.window, c.hubs)
            torch.testing.assert_close(PATTERN.run(q, k, v, p), PATTERN.reference(q, k, v, p), atol=1e-4, rtol=1e-4)
            continue
        # on the CPU, auto runs the blocked kernel (measured as fast); flex is asked for here
        assert PATTERN.backend(q, v, p) == ("flex" if q.device.type == "cuda" else "blocked")
        torch.testing.assert_close(PATTERN.run(q, k, v, p, backend="flex"), PATTERN.reference(q, k, v, p),
                                   atol=1e-4, rtol=1e-4)
    assert torch._dynamo.utils.counters["frames"]["ok"] == compiled_before  # no compile for any of them


# --- the page, through AppTest ---------------------------------------------------------------

PLAY = page_path(pg.STEP)


def open_playground(make_app, lang="en", text=None):
    at = make_app("tiny", lang)
    at.run()
    if text is not None:
        at.text_area(key="text").input(text).run()
    at.switch_page(PLAY).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_composition(at, a) -> Composition:
    cfg = {k: at.session_state[k] for k in pg.KEYS}
    from ui import measures

    anchors = [p for p, _ in measures.anchors(at.session_state["text"], "tiny", 5)[:pg.ANCHOR_HUBS]]
    c, problem = pg.composition(cfg, a.n, anchors)
    assert problem is None
    return c


@pytest.mark.apptest
@pytest.mark.parametrize("lang", ["en", "ja", "pt"])
def test_every_preset_draws_its_numbers_and_each_equals_its_formula(make_app, tiny, lang):
    from test_app import metric, parse
    from ui import i18n, samples

    at = open_playground(make_app, lang)
    a = tiny.analyze(samples.sample_text(lang))
    d, h = a.q.shape[-1], a.n_heads
    seen_scopes = set()
    for name in pg.PRESETS:
        at.button(key=f"pg_preset_{name}").click().run()
        assert not at.exception and not at.error, (name, [e.value for e in at.exception])
        # the model's own window applies to its sliding layers only; every other preset to all
        assert at.session_state["pg_scope"] == ("sliding" if name == "model" else "all"), name
        c = shown_composition(at, a)
        causal = at.session_state["pg_causal"]
        assert at.info[0].value == i18n.translate(lang, "playground.composed", parts=pg.parts_label(
            __import__("ui.i18n", fromlist=["Translator"]).Translator(lang), c),
            direction=i18n.translate(lang, "playground.causal_word" if causal else "playground.bidirectional_word"))
        cells = int(dense_of(a.n, c, causal).sum())  # the predicate on every pair
        assert parse(metric(at, "playground.metric_cells", lang), lang) == cells
        flops = parse(metric(at, "playground.metric_flops", lang), lang)
        # by hand, for the tiny model's 4 heads of size 16: one cell is 16 multiply-adds
        # for q·k and 16 for p·v, 64 operations per head, 256 over the heads
        assert (d, h) == (16, 4)
        assert flops == pytest.approx(256 * cells, rel=0.05)  # shown with two significant digits
        assert parse(metric(at, "playground.metric_numbers", lang), lang) == cells * h
        cells = composition.composed_cells
        ratio = cells(2 * pg.LARGE_N, c, causal) / cells(pg.LARGE_N, c, causal)
        assert parse(metric(at, "playground.metric_ratio", lang, n=f"{pg.LARGE_N:,}".replace(",", i18n._SEPARATORS[
            lang][1])), lang) == pytest.approx(ratio, abs=0.005)
        # the weight kept: the model's attention inside the pattern (made causal), layers in scope
        allowed = dense_of(a.n, c, True)
        scoped = [i for i in range(a.n_layers) if at.session_state["pg_scope"] == "all"
                  or a.layer_types[i] == "sliding"]
        per_layer = [float((a.weights().dense()[i].float() * allowed).sum(-1).mean()) if i in scoped else 1.0
                     for i in range(a.n_layers)]
        kept = parse(metric(at, "playground.metric_kept_all", lang), lang)
        assert kept == pytest.approx(sum(per_layer) / len(per_layer), abs=0.0015)
        # the output error of the chosen layer against exact softmax, or "—" outside the scope
        layer = at.session_state["pg_layer"]
        shown = metric(at, "playground.metric_error", lang, layer=layer)
        if layer in scoped:
            q, k, v = a.qkv(layer)
            want = outputs.pattern_error(q, k, v, a.layers[layer], c)["mean"]
            assert parse(shown, lang) == pytest.approx(want, abs=0.0015)
        else:
            assert shown == "—"
        seen_scopes.add(layer in scoped)
    # the tiny model has a full layer, the one shown: out of scope under the model's own
    # preset only, so the test saw both cases
    assert "full" in a.layer_types
    assert seen_scopes == {True, False}


@pytest.mark.apptest
def test_settings_that_do_not_fit_give_a_message_in_the_readers_language(make_app):
    from ui import i18n

    at = open_playground(make_app, "pt")
    at.button(key="pg_preset_bigbird").click().run()
    at.text_input(key="pg_seed").input("quarenta e dois").run()
    assert not at.exception
    assert [e.value for e in at.error] == [i18n.translate("pt", "playground.err_seed_text", value="quarenta e dois")]
    at.text_input(key="pg_seed").input("42").run()
    at.number_input(key="pg_w").set_value(5000).run()  # wider than the text: allowed, and said
    assert not at.exception and not at.error
    assert at.warning[0].value.startswith(i18n.translate("pt", "playground.window_covers", w="§", n="1").split("§")[0])
    at.selectbox(key="pg_rblock").set_value(128).run()
    at.text_area(key="text").input("Um texto curto demais para blocos de cento e vinte e oito tokens.").run()
    assert not at.exception
    assert at.error[0].value.startswith(i18n.translate("pt", "playground.err_random_block", value="§", n="1")
                                        .split("§")[0])


@pytest.mark.apptest
@pytest.mark.parametrize("text", ["a", "😀👨‍👩‍👧🇯🇵 🦜 " * 20, "<script>alert(1)</script> **x** $y$", "word " * 2000])
def test_odd_texts_give_a_result_or_a_message_on_every_preset(make_app, text):
    at = open_playground(make_app, "ja", text=text)
    for name in pg.PRESETS:
        if not at.button:
            break
        buttons = [b for b in at.button if b.key == f"pg_preset_{name}"]
        if not buttons:  # too short a text: the page said so and stopped
            assert at.info
            break
        buttons[0].click().run()
        assert not at.exception, (name, [e.value for e in at.exception])
        for el in list(at.markdown) + list(at.caption) + list(at.info):
            assert "<script" not in el.value


@pytest.mark.apptest
def test_a_share_link_carries_the_composed_pattern(make_app):
    at = open_playground(make_app, "en")
    at.button(key="pg_preset_bigbird").click().run()
    at.text_input(key="pg_seed").input("7").run()
    at.pills(key="pg_on").set_value(["window", "hubs", "random", "local"]).run()
    want = {k: at.session_state[k] for k in pg.KEYS}
    at.sidebar.button(key="share").click().run()
    url = at.code[0].value
    assert url.split("?s=")[0].endswith("/playground")
    fresh = make_app("tiny", None)
    fresh.query_params["s"] = url.split("?s=")[1]
    fresh.run()
    assert not fresh.exception and not fresh.toast
    assert {k: fresh.session_state[k] for k in pg.KEYS} == want
    assert fresh.info[0].value == at.info[0].value  # the same pattern, said the same way


def test_the_benchmark_times_each_preset_with_its_exact_cost():
    from attn import bench
    from attn.costs import Shape

    s = Shape()
    plan = [("pattern", n, "blocked", p) for p in composition.PRESETS for n in (256, 640)]
    rows = bench.run_plan(plan, s, "cpu", repeats=1)
    assert [r.key for r in rows] == [f"pattern:{p}" for p in composition.PRESETS for _ in (256, 640)]
    # by hand, for the default shape (batch 1, 4 heads of size 64): one cell is 64
    # multiply-adds for q·k and 64 for p·v, 256 operations per head, 1,024 over the heads
    assert (s.batch, s.heads, s.d) == (1, 4, 64)
    for r in rows:
        c = bench.preset_params(r.n, s, r.extra["preset"]).parts
        assert r.useful_flops == int(dense_of(r.n, c, True).sum()) * 1024
        assert r.computed_flops >= r.useful_flops
        assert r.seconds > 0
        assert r.peak_bytes is None or r.peak_bytes > 0  # None where the platform cannot say
    assert ("pattern:bigbird", 640) not in bench.ratios(rows)  # 256 → 640 is not a doubling


@pytest.mark.apptest
def test_a_window_wider_than_the_layers_own_says_where_its_error_comes_from(make_app, tiny):
    """On a sliding layer (the tiny model's window is 8), a pattern window of 20 keeps
    every weight the layer computes yet errs: the page says it reads where the layer
    never looks; at a window of 8 it does not say so."""
    from ui import i18n

    at = open_playground(make_app)
    at.selectbox(key="pg_layer").set_value(0).run()
    assert tiny.layer_types[0] == "sliding" and tiny.sliding_window == 8
    at.number_input(key="pg_w").set_value(20).run()
    assert not at.exception, [e.value for e in at.exception]
    said = i18n.translate("en", "playground.wider_than_layer", w="20", own="8", layer=0)
    assert said in [c.value for c in at.caption]
    at.number_input(key="pg_w").set_value(8).run()
    assert said.split("20")[0] not in " ".join(c.value for c in at.caption)


# --- the top-k part and a hybrid stack ---------------------------------------------------------


def test_top_k_beside_parts_with_every_key_is_the_model_and_a_stack_keeps_every_kth_layer(tiny):
    """k as long as the text keeps every key: top-k beside any parts is the model itself in
    the layers it replaces (a check the fixed parts cannot fool); with a small k the
    stack's layers change the model and the kept ones are the model's own."""
    ids, _ = tiny.encode(TEXT)
    n = len(ids)
    every = 2
    stack = atlas_swap.stack_layers(tiny.arch.n_layers, every)
    assert stack == tuple(i for i in range(tiny.arch.n_layers) if i % 2 == 0)
    for indexer in (False, True):
        name = methods.top_k(indexer).name
        # every key: the model back in its full layers (they see every earlier token; a
        # sliding layer sees a window, which top-k beside parts does not keep)
        full_layers = tuple(i for i in range(tiny.arch.n_layers) if tiny.arch.layers[i].window is None)
        assert full_layers
        same = atlas_swap.measure(tiny, TEXT, atlas_swap.Swap(name, full_layers, parts=Composition(window=2), k=n))
        assert abs(same.kl) < 1e-6 and same.top1_agreement == 1.0
        small = atlas_swap.measure(tiny, TEXT, atlas_swap.Swap(name, stack, parts=Composition(window=2), k=2))
        assert small.layers == stack and small.kl > 1e-4


def _hand_cells(q, k, keep, w, causal, span=None):
    """Per head, in Python: each row's top ``keep`` keys by q·k among those it sees (inside
    the layer's own window ``span`` where it slides one), and the window |i − j| < w (the
    diagonal inside it)."""
    h, n = q.shape[1], q.shape[2]
    total = 0
    for hi in range(h):
        s = (q[0, hi].double() @ k[0, hi].double().T).tolist()
        for i in range(n):
            seen = list(range(i + 1)) if causal else list(range(n))
            within = [j for j in seen if span is None or abs(i - j) < span]
            top = set(sorted(within, key=lambda j: -s[i][j])[:keep])
            total += len(top | {j for j in seen if abs(i - j) < w})
    return total


@pytest.mark.apptest
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_top_k_part_and_a_stack_show_numbers_counted_by_hand(make_app, tiny, lang):
    from test_app import metric, parse
    from ui import i18n, samples

    at = open_playground(make_app, lang)
    a = tiny.analyze(samples.sample_text(lang))
    at.pills(key="pg_on").set_value(["window", "topk"]).run()
    at.number_input(key="pg_w").set_value(3).run()
    at.number_input(key="pg_k").set_value(4).run()
    at.radio(key="pg_scope").set_value("stack").run()
    at.number_input(key="pg_every").set_value(2).run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    layer, causal = at.session_state["pg_layer"], at.session_state["pg_causal"]
    q, k, v = a.qkv(layer)
    h, d, n = a.n_heads, q.shape[-1], a.n
    cells = _hand_cells(q, k, 4, 3, causal, a.layers[layer].window)
    shown = metric(at, "playground.metric_cells_topk", lang, layer=layer)
    assert parse(shown, lang) == pytest.approx(cells / h, abs=0.005)
    # operations: 4d per cell over the heads, and the oracle's choosing: 2d per visible pair and head
    pairs = n * (n + 1) // 2 if causal else n * n
    assert parse(metric(at, "playground.metric_flops", lang), lang) == pytest.approx(
        4 * d * cells + 2 * d * h * pairs, rel=0.05)
    # the stack: every second layer kept exact, said on the page and measured so
    exact = [i for i in range(a.n_layers) if (i + 1) % 2 == 0]
    tr = i18n.Translator(lang)
    assert any(c.value == i18n.translate(lang, "playground.stack_kept", every=2,
                                         layers=tr.list(str(i) for i in exact)) for c in at.caption)
    weights = []
    for i in range(a.n_layers):
        if i in exact:
            weights.append(1.0)
            continue
        qi, ki, _ = a.qkv(i)
        s = (qi[0].double() @ ki[0].double().transpose(-1, -2)).tolist()  # Python lists: the loop reads them fast
        w_ = a.weights().dense()[i].double().tolist()
        kept_rows = []
        for hi in range(h):
            for r in range(n):
                seen = list(range(r + 1)) if a.causal else list(range(n))
                span = a.layers[i].window  # top-k chooses inside the layer's own window
                within = [j for j in seen if span is None or abs(r - j) < span]
                top = set(sorted(within, key=lambda j: -s[hi][r][j])[:4]) | {j for j in seen if abs(r - j) < 3}
                kept_rows.append(sum(w_[hi][r][j] for j in top))
        weights.append(sum(kept_rows) / len(kept_rows))
    assert parse(metric(at, "playground.metric_kept_all", lang), lang) == pytest.approx(
        sum(weights) / len(weights), abs=0.0015)
    # the indexer: the same page, the choosing at 16 numbers a pair instead of d
    at.radio(key="pg_chooser").set_value("indexer").run()
    assert not at.exception and not at.error
    dims = min(methods.INDEXER_DIMS, d)
    flops = parse(metric(at, "playground.metric_flops", lang), lang)
    shown = parse(metric(at, "playground.metric_cells_topk", lang, layer=layer), lang)
    assert flops == pytest.approx(4 * d * shown * h + (2 * dims * pairs + 4 * n * d * dims) * h, rel=0.05)


def test_the_swap_caption_says_the_whole_text_when_it_is_shorter_than_the_budget(make_app):
    """A text of 121 tokens (the tiny model reads bytes, after its <bos>) against a budget of
    256: the caption names the whole text and its 121 tokens, never "the first 256"."""
    from helpers import page_path
    from ui import i18n, walk

    at = make_app("tiny", "en")
    at.run()
    at.sidebar.text_area(key="text").input("a" * 120).run()
    at.switch_page(page_path(walk.get("playground"))).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    first = i18n.translate("en", "playground.swap_caption", n="§", scope="§").split("§")[0]
    whole = i18n.translate("en", "playground.swap_caption_all", n="121", scope="§").split("§")[0]
    assert [c for c in captions if c.startswith(whole)] and not [c for c in captions if c.startswith(first)]


@pytest.mark.apptest
def test_a_window_covering_the_text_read_both_ways_says_every_token_not_every_earlier_one(make_app):
    from ui import i18n

    text = "A short text, read whole by the tiny model."
    at = open_playground(make_app, "en", text=text)
    at.number_input(key="pg_w").set_value(5000).run()
    n = len(text.encode("utf-8")) + 1  # the tiny model reads bytes, after its <bos>
    causal = i18n.translate("en", "playground.window_covers", w="5,000", n=i18n.fmt_int(n, "en"))
    assert [w.value for w in at.warning][:1] == [causal]
    at.toggle(key="pg_causal").set_value(False).run()
    both = i18n.translate("en", "playground.window_covers_both", w="5,000", n=i18n.fmt_int(n, "en"))
    assert [w.value for w in at.warning][:1] == [both] and "every token, before and after" in both
