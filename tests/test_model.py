"""The model layer on a tiny random-weight Gemma3 (same classes, byte tokenizer)."""

import threading

import pytest
import torch

from attn import methods, swap, tokens
from attn import model as atlas_model
from attn import loading
from attn.swap import Swap


@pytest.fixture(scope="module")
def tiny():
    return loading.tiny(device="cpu")


TEXT = "Olá! 日本語 and emoji 😀, then more words to pass the window of eight tokens."


# what loading.tiny builds (its arguments): 4 layers of 4 heads of 16, one key/value head, a window of 8
LAYERS, HEADS, HEAD_DIM, WINDOW = 4, 4, 16, 8


def eager_weights(m, ids) -> torch.Tensor:
    """transformers' own eager attention weights of the model on ``ids``: (layers, heads, n, n)."""
    own = m.model.config._attn_implementation
    m.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = m.model.base_model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    finally:
        m.model.set_attn_implementation(own)
    return torch.stack([w[0] for w in out.attentions])


def test_analysis_shapes_one_label_per_token_and_rows_summing_to_one(tiny):
    a = tiny.analyze(TEXT)
    assert a.weights().shape == (LAYERS, HEADS, a.n, a.n)
    dense = a.weights().dense()
    assert dense.dtype == torch.float32
    assert len(a.tokens) == a.n == len(a.ids) == len(a.words)
    sums = dense.sum(dim=-1)
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)
    assert a.layer_types == ["sliding"] * (LAYERS - 1) + ["full"]
    q, k, v = a.qkv(0)
    assert q.shape == k.shape == v.shape == (1, HEADS, a.n, HEAD_DIM)


def test_causal_zeros_above_the_diagonal_and_sliding_layers_zero_beyond_their_window(tiny):
    a = tiny.analyze(TEXT)
    assert a.n > 3 * WINDOW
    i = torch.arange(a.n)[:, None]
    j = torch.arange(a.n)[None, :]
    assert (a.weights().dense()[:, :, j > i] == 0).all()  # nothing after the row's own token
    outside = (j <= i) & (i - j >= WINDOW)  # earlier than the window: by hand, not from the patterns
    for layer, kind in enumerate(a.layer_types):
        outside_weight = a.weights().dense()[layer][:, outside].float().abs().max()
        if kind == "sliding":
            assert outside_weight == 0
        else:
            assert outside_weight > 0  # the full layer does look further back


def test_q_k_v_reproduce_the_models_own_attention_weights(tiny):
    a = tiny.analyze(TEXT)
    for layer in range(a.n_layers):
        q, k, v = a.qkv(layer)
        scores = (q @ k.transpose(-1, -2)) * a.layers[layer].scale
        weights = torch.softmax(scores.masked_fill(~a.model_mask(layer), float("-inf")), dim=-1)[0]
        torch.testing.assert_close(weights, a.weights().dense()[layer], atol=1e-5, rtol=0)


def test_the_rows_recomputed_by_blocks_equal_the_models_own_eager_weights(tiny):
    """Nothing n×n is kept: every block of rows, recomputed from q and k by the layer's own
    rule, equals transformers' eager attention weights, in any block size and any rows."""
    a = tiny.analyze(TEXT)
    want = eager_weights(tiny, a.ids)
    torch.testing.assert_close(a.weights().dense(), want, atol=1e-5, rtol=0)
    w = a.weights()
    some = torch.tensor([0, 3, 17, a.n - 1])
    for layer in range(a.n_layers):
        for head in range(a.n_heads):
            torch.testing.assert_close(w.block(layer, head, some), want[layer, head, some], atol=1e-5, rtol=0)
    small = torch.empty(want.numel() // a.n, a.n)
    for s_, e, rows in w.blocks(cells=5 * a.n):  # five rows at a time
        assert e - s_ <= 5
        small[s_:e] = rows
    torch.testing.assert_close(small.reshape(want.shape), want, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.rows(2, None, [5, 9]), want[2, :, [5, 9]].mean(dim=0), atol=1e-5, rtol=0)
    assert not any(x.dim() == 4 and x.shape[-1] == x.shape[-2] == a.n for x in vars(a).values()
                   if isinstance(x, torch.Tensor))  # no n×n tensor held


def test_truncation_keeps_the_budget_and_says_how_much_was_dropped(tiny):
    a = tiny.analyze(TEXT, max_tokens=10)
    full = tiny.analyze(TEXT)
    assert a.n == 10 and a.truncated == full.n - 10 and a.total_tokens == full.n
    # a causal model: the first rows are the same with or without the rest of the text
    torch.testing.assert_close(a.weights().dense(), full.weights().dense()[:, :, :10, :10], atol=1e-5, rtol=0)
    torch.testing.assert_close(full.prefix(10).dense(), a.weights().dense(), atol=1e-5, rtol=0)


def test_multibyte_characters_show_on_their_first_piece_and_never_as_bytes(tiny):
    a = tiny.analyze("日😀a")
    assert a.tokens == ["<bos>", "日", "…", "…", "😀", "…", "…", "…", "a"]
    assert a.words == [-1, 0, 0, 0, 1, 1, 1, 1, 2]  # 日, then 😀 (a symbol: a word of its own), then a


@pytest.mark.parametrize("text,expect", [
    ("", ["<bos>"]), ("   ", ["<bos>", "␣", "␣", "␣"]), ("a\nb", ["<bos>", "a", "↵", "b"]),
    ("\u202e", ["<bos>", "U+202E", "…", "…"]), ("\x07", ["<bos>", "U+0007"]),
])
def test_odd_text_gets_readable_labels(tiny, text, expect):
    a = tiny.analyze(text)
    assert a.tokens == expect
    assert not any("\ufffd" in t for t in a.tokens)


def test_readable_labels_make_whitespace_and_control_characters_visible():
    assert tokens.readable(" coração") == "coração"
    assert tokens.readable("\n\n") == "↵↵"
    assert tokens.readable("a\u200db") == "aU+200Db"
    assert tokens.readable("x" * 40).endswith("…")
    offsets = [(0, 0), (0, 1), (0, 1), (1, 3)]
    assert tokens.labels_from_offsets("𠮷ab", offsets, ["<bos>", None, None, None]) == ["<bos>", "𠮷", "…", "ab"]


def test_bad_analysis_arguments_raise_value_error(tiny):
    with pytest.raises(ValueError):
        tiny.analyze(TEXT, max_tokens=0)
    with pytest.raises(ValueError):
        tiny.analyze(None)
    with pytest.raises(ValueError):
        tiny.analyze(TEXT).qkv(99)


# --- swapping the attention (issue: the model itself feels the catch) --------------


def own_logits(m, text, max_tokens=256):
    ids = m.encode(text)[0][:max_tokens]
    with torch.no_grad():
        return m.model(input_ids=torch.tensor([ids])).logits[0]


def swapped_logits(m, text, method, layers="all", **params):
    """The model's logits with the attention of ``layers`` computed by ``method``."""
    x = torch.tensor([m.encode(text)[0]])
    plan = atlas_model.Replace(method, frozenset(m.resolve_layers(layers)), methods.Params(**params))
    with torch.no_grad():
        hidden = m.run_plan(plan, lambda: m.hidden(x))
        return m.logits(hidden)[0]


def test_exact_control_reproduces_the_unmodified_model_beyond_its_own_window(tiny):
    text = TEXT * 2
    assert len(tiny.encode(text)[0]) > 5 * tiny.sliding_window
    torch.testing.assert_close(swapped_logits(tiny, text, "own"), own_logits(tiny, text),
                               atol=1e-4, rtol=1e-4)
    r = swap.measure(tiny, text, Swap("own"))
    assert r.kl < 1e-6 and r.top1_agreement == 1.0
    assert r.perplexity == pytest.approx(r.base_perplexity, rel=1e-5)


def test_a_swapped_window_as_long_as_a_short_text_reproduces_the_model():
    m = loading.tiny(device="cpu", sliding_window=64)
    text = "short text, under the window"
    n = len(m.encode(text)[0])
    assert n < m.sliding_window
    torch.testing.assert_close(swapped_logits(m, text, "window", window=n), own_logits(m, text),
                               atol=1e-4, rtol=1e-4)
    r = swap.measure(m, text, Swap("window", window=n))
    assert r.kl < 1e-6 and r.top1_agreement == 1.0


@pytest.mark.parametrize("method", ["topk", "topk_indexer"])
def test_top_k_keeping_every_key_reproduces_the_model_and_fewer_keys_do_not(method):
    m = loading.tiny(device="cpu", sliding_window=64)
    text = "a short text to choose keys in"
    n = len(m.encode(text)[0])
    assert 8 < n < m.sliding_window
    torch.testing.assert_close(swapped_logits(m, text, method, k=n), own_logits(m, text), atol=1e-4, rtol=1e-4)
    few = swapped_logits(m, text, method, k=2)
    assert (few - own_logits(m, text)).abs().max() > 1e-3
    r = swap.measure(m, text, Swap(method, window=n))  # k from the window: n cells a row, every key
    assert r.kl < 1e-6 and r.top1_agreement == 1.0
    with pytest.raises(ValueError, match="k or a window"):
        swap.measure(m, text, Swap(method))


def test_the_sweep_runs_top_k_at_each_windows_cells_in_every_layer():
    got = [s for s in swap.standard_sweep((0,), 1) if methods.get(s.method).data_dependent]
    assert sorted((s.method, s.window, s.layers) for s in got) == sorted(
        (name, w, "all") for name in ("topk", "topk_indexer") for w in swap.WINDOWS)


def test_hybrid_stacks_keep_every_fourth_or_sixth_layer_exact():
    assert swap.stack_layers(8, 4) == (0, 1, 2, 4, 5, 6) and swap.kept_exact(8, 4) == (3, 7)
    assert swap.kept_exact(18, 6) == (5, 11, 17) and len(swap.stack_layers(18, 6)) == 15
    gemma_sliding = swap.stack_layers(18, 6)  # Gemma 3: five sliding layers, then a full one
    plain = swap.standard_sweep((0,), 1, n_layers=18, sliding_layers=gemma_sliding)
    other = swap.standard_sweep((0,), 1, n_layers=18)
    stacks = [s for s in other if s.series.endswith("/stack")]
    assert sorted({s.series for s in stacks}) == ["linear/stack", "topk/stack", "window/stack"]
    assert all(s.layers == swap.stack_layers(18, 6 if s.series == "window/stack" else 4) for s in stacks)
    assert len(other) - len(plain) == len(swap.WINDOWS)  # where the model's own layout is 5 in 6, no copy of it
    assert not [s for s in swap.standard_sweep((0,), 1, n_layers=3) if s.series.endswith("/stack")]


def test_a_stack_leaves_its_exact_layers_as_the_model_has_them():
    m = loading.tiny(device="cpu", layers=4)
    text = TEXT
    stack = swap.stack_layers(4, 4)  # 0, 1, 2 replaced; 3 kept
    got = swapped_logits(m, text, "linear_elu", layers=stack)
    # the tiny model slides in layers 0–2 and is full in 3: its own sliding layers are that stack
    torch.testing.assert_close(got, swapped_logits(m, text, "linear_elu", layers="sliding"))
    assert (got - swapped_logits(m, text, "linear_elu")).abs().max() > 1e-4  # layer 3 exact changes the output


def test_a_swapped_window_replaces_the_layers_own_pattern(tiny):
    # a window wider than the model's own 8 in its sliding layers changes the output:
    # the engine's pattern replaces the layer's, not min(w, 8)
    text = TEXT
    wide = swapped_logits(tiny, text, "window", layers="sliding", window=40)
    own = own_logits(tiny, text)
    assert (wide - own).abs().max() > 1e-3
    # and a window equal to its own reproduces it
    same = swapped_logits(tiny, text, "window", layers="sliding", window=tiny.sliding_window)
    torch.testing.assert_close(same, own, atol=1e-4, rtol=1e-4)


def test_a_sweep_gives_the_same_numbers_as_single_runs(tiny):
    text = TEXT * 2  # more than one chunk of predicted positions
    swaps = [Swap("own"), Swap("window_hubs", window=3, hubs=(0,)), Swap("linear_favor", (2,)),
             Swap("window", window=0)]
    got = swap.sweep(tiny, text, swaps, max_tokens=100)
    assert isinstance(got[-1], ValueError)
    for s, r in zip(swaps[:3], got[:3]):
        one = swap.measure(tiny, text, s, max_tokens=100)
        assert r.perplexity == pytest.approx(one.perplexity, rel=1e-6)
        assert r.kl == pytest.approx(one.kl, rel=1e-5, abs=1e-9)
        assert r.top1_agreement == one.top1_agreement and r.n == 100


def test_swapping_one_layer_leaves_the_others_as_they_were(tiny):
    one = swap.measure(tiny, TEXT, Swap("linear_elu", (1,)))
    assert one.layers == (1,) and one.kl > 0
    assert tiny.resolve_layers("sliding") == [0, 1, 2]


def test_the_shared_model_is_restored_after_a_swap_even_when_it_fails(tiny, monkeypatch):
    before = tiny.model.config._attn_implementation
    swap.measure(tiny, TEXT, Swap("window", window=2))
    assert tiny.model.config._attn_implementation == before and tiny.plan is None
    import attn.backend as B
    monkeypatch.setattr(B, "window_attention", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError):
        swap.measure(tiny, TEXT, Swap("window", window=2))
    assert tiny.model.config._attn_implementation == before and tiny.plan is None
    free = []  # another thread can take the lock: it was released
    t = threading.Thread(target=lambda: free.append(tiny.lock.acquire(timeout=5) and tiny.lock.release() is None))
    t.start()
    t.join()
    assert free == [True]


@pytest.mark.parametrize("bad", [
    Swap("window", window=0), Swap("window"), Swap("window", (), window=2), Swap("window", (99,), window=2),
    Swap("window", "some", window=2), Swap("linear_softmax"), Swap("magic"), Swap("full"),
    Swap("window_hubs", window=2, hubs=(500,)), {"method": "window", "window": 2},
])
def test_bad_swap_settings_raise_value_error(tiny, bad):
    with pytest.raises(ValueError):
        swap.measure(tiny, TEXT, bad)


def test_a_text_with_nothing_to_predict_is_refused(tiny):
    with pytest.raises(ValueError, match="too short"):
        swap.measure(tiny, "", Swap("own"))


def test_readers_in_parallel_see_an_unmodified_model(tiny):
    expected = tiny.analyze(TEXT).weights().dense()
    results, errors = [], []

    def reader():
        try:
            results.append(tiny.analyze(TEXT).weights().dense())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def swapper():
        try:
            for _ in range(3):
                swap.measure(tiny, TEXT, Swap("window", window=2))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=swapper)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert torch.equal(r, expected)


def test_the_exact_share_chart_puts_each_swap_at_the_share_of_layers_it_left_alone():
    from types import SimpleNamespace

    from ui import model_swaps
    from ui.i18n import Translator

    def result(method, layers, series, kl, window=None):
        return SimpleNamespace(swap=Swap(method, layers, window=window, series=series), layers=tuple(layers), kl=kl)

    res = [result("own", range(8), "control", 0.0),
           result("linear_elu", range(8), "linear/all", 3.0), result("linear_elu", (2,), "linear/one", 0.5),
           result("linear_elu", swap.stack_layers(8, 4), "linear/stack", 1.5),
           result("topk", range(8), "topk/all", 0.4, window=16), result("topk", range(8), "topk/all", 0.1, window=64),
           result("topk", swap.stack_layers(8, 4), "topk/stack", 0.2, window=16)]
    fig = model_swaps.exact_share_figure(Translator("en"), res, "kl", 8)
    lines = {tr["name"]: (list(tr["x"]), list(tr["y"])) for tr in fig.to_dict()["data"]}
    linear = next(v for k, v in lines.items() if "elu" in k)
    top = next(v for k, v in lines.items() if "top-k" in k)
    # by hand: every layer swapped = 0 exact; 3 of 4 in 8 layers = 2 of 8 exact; one layer = 7 of 8; the control
    assert linear == ([0.0, 0.25, 0.875, 1.0], [3.0, 1.5, 0.5, 0.0])
    assert top == ([0.0, 0.25, 1.0], [0.4, 0.2, 0.0])  # at window 16's cells only
    assert model_swaps.exact_share_figure(Translator("en"), res[:3], "kl", 8) is None  # no stack, no chart


def test_a_character_counts_as_changed_only_when_the_model_reads_another_not_when_spaced():
    """BERT's normaliser (uncased, accents stripped, Chinese characters spaced): 港, 町 and 朝
    come back as themselves between spaces — unchanged; で and が lose their voicing mark
    (read as て and か), É and A are lowercased. Each expected reading written by hand."""
    from types import SimpleNamespace

    from tokenizers.normalizers import BertNormalizer

    normaliser = BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    tok = SimpleNamespace(backend_tokenizer=SimpleNamespace(normalizer=normaliser), bos_token_id=None,
                          unk_token_id=0, all_special_tokens=[], all_special_ids=[])
    changed = tokens.HFTokenizer(tok).changed_characters("港町の朝で、Éが A")
    assert changed == {"で": "て", "が": "か", "É": "e", "A": "a"}
