"""The real packaged model (Gemma-3-270m), converted once into the cache folder.
Marked ``real``: it runs in CI (the first conversion takes about a minute)."""

import dataclasses
import math
import subprocess
import sys
import textwrap

import pytest
import torch

from attn import converted, hub_stats, methods, patterns, stats, swap, tokens
from attn import model as atlas_model
from attn import loading
from attn.swap import Swap
from ui.samples import sample_text

pytestmark = pytest.mark.real

SHORT = {
    "en": "The keeper counted the stairs, and the cat waited at step forty.",
    "pt": "A bibliotecária guardou o papelzinho na lata de biscoitos, atrás do balcão.",
    "ja": "駅長の森さんは、列車が来るたびに帽子をかぶり直しました。😀",
}


@pytest.fixture(scope="module")
def real():
    return loading.load()


def test_the_model_is_the_one_the_app_names(real):
    assert real.n_layers == 18 and real.n_heads == 4 and real.head_dim == 256
    assert real.layer_types.count("sliding") == 15 and real.layer_types.count("full") == 3
    assert real.sliding_window == 512
    assert converted.is_converted()


def test_the_tokenizer_as_loaded_reads_every_sample_as_gemmas_own_class_does(real):
    """attn.loading reads tokenizer.json with tokenizers' own class (faster): the ids,
    offsets and special tokens are those of transformers' Gemma tokenizer."""
    from transformers import AutoTokenizer

    from attn.converted import converted_dir
    from ui.samples import sample_text

    gemma = AutoTokenizer.from_pretrained(str(converted_dir()))
    assert type(gemma).__name__ != type(real.tokenizer.tok).__name__
    for text in [*(sample_text(lang) for lang in ("en", "pt", "ja")), "<bos> a\n\tb  東京、 ok?!", ""]:
        ours = real.tokenizer.tok(text, return_offsets_mapping=True, add_special_tokens=True)
        theirs = gemma(text, return_offsets_mapping=True, add_special_tokens=True)
        assert ours["input_ids"] == theirs["input_ids"] and ours["offset_mapping"] == theirs["offset_mapping"]
    assert real.tokenizer.tok.all_special_ids == gemma.all_special_ids
    assert (real.tokenizer.bos_token_id, real.tokenizer.unk_token_id) == (gemma.bos_token_id, gemma.unk_token_id)


@pytest.mark.parametrize("lang", ["en", "pt", "ja"])
def test_each_language_has_no_unknown_tokens_and_readable_labels(real, lang):
    a = real.analyze(SHORT[lang])
    assert a.unknown == 0
    assert a.tokens[0] == "<bos>" and len(a.tokens) == a.n
    for label in a.tokens:
        assert "\ufffd" not in label and "<0x" not in label and label
    q, k, v = a.qkv(5)
    for layer in (0, 5):
        q, k, v = a.qkv(layer)
        scores = (q @ k.transpose(-1, -2)) * a.layers[layer].scale
        w = torch.softmax(scores.masked_fill(~a.model_mask(layer), float("-inf")), -1)
        torch.testing.assert_close(w[0], a.weights().dense()[layer].float(), atol=1e-3, rtol=0)


def test_japanese_characters_split_into_bytes_show_once(real):
    a = real.analyze("𠮷野家")  # 𠮷 has no piece of its own: four byte pieces
    assert a.tokens[1] == "𠮷" and a.tokens[2:5] == [tokens.CONTINUATION] * 3


def float32_bound(a, weights: torch.Tensor, hidden: int) -> torch.Tensor:
    """How far two float32 runs of the same model may put one attention weight apart, cell
    by cell ``(layers, heads, n, n)``: both take their sums in different orders (the app's
    block-by-block kernels against transformers' eager path, on any processor). Through the
    layers before it, each of L + 1 residual steps over h numbers perturbs q·k by about
    √h·ε relative (ε: float32's unit round-off), so a score s moves by |s|·(L + 1)·√h·ε; a
    softmax weight w moves by at most w·2·max|Δs| over its row (its log moves by Δs_i less
    the row's weighted mean). A floor of 2e-5 covers the weights' own rounding."""
    eps = torch.finfo(torch.float32).eps / 2
    bounds = []
    for layer in range(a.n_layers):
        q, k, _ = a.qkv(layer)
        s = (q.double() @ k.double().transpose(-1, -2))[0] * a.layers[layer].scale  # (heads, n, n)
        most = s.abs().amax(-1, keepdim=True)  # each row's largest score
        bounds.append(2e-5 + 2 * weights[layer].double() * most * (layer + 1) * math.sqrt(hidden) * eps)
    return torch.stack(bounds).to(weights.dtype)


def test_sliding_layers_put_no_weight_beyond_their_window(real):
    small = 16
    sliding = [i for i, t in enumerate(real.layer_types) if t == "sliding"]
    with real.lock:  # a smaller window, on this model only for the length of the test
        old, old_arch, own = real.config.sliding_window, real.arch, real.model.config._attn_implementation
        try:
            real.config.sliding_window = small
            for i in sliding:
                real.model.model.layers[i].self_attn.sliding_window = small
            real.sliding_window = small
            # as a model of that window reads it (attn.arch reads the windows once, on loading)
            real.arch = dataclasses.replace(old_arch, windows=tuple(small if w else None for w in old_arch.windows))
            a = real.analyze(sample_text("en"), max_tokens=120)
            real.model.set_attn_implementation("eager")  # the model's own weights, as transformers computes them
            with torch.no_grad():
                out = real.model.model(input_ids=torch.tensor([a.ids]), output_attentions=True, use_cache=False)
        finally:
            real.model.set_attn_implementation(own)
            real.config.sliding_window = old
            for i in sliding:
                real.model.model.layers[i].self_attn.sliding_window = old
            real.sliding_window, real.arch = old, old_arch
    eager = torch.stack([w[0] for w in out.attentions])
    mine = a.weights().dense()
    assert (mine - eager).abs().le(float32_bound(a, mine, real.config.hidden_size)).all()
    outside = ~patterns.pattern_grid(a.n, small, (), True) & patterns.pattern_grid(a.n, None, (), True)
    for i, kind in enumerate(a.layer_types):
        beyond = a.weights().dense()[i][:, outside].float()
        if kind == "sliding":
            assert beyond.abs().max() == 0
        else:
            assert beyond.sum() > 1.0  # the full layers do look further back


@pytest.mark.parametrize("lang", ["en", "pt", "ja"])
def test_the_first_token_is_found_as_the_sink(real, lang):
    a = real.analyze(sample_text(lang))
    found = hub_stats.anchors(a.weights().dense(), a.causal, top=3)
    assert found[0][0] == 0
    assert stats.sink_share(a.weights().dense()) > 0.2


def test_loading_and_running_work_with_the_network_blocked():
    script = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network blocked by the test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from attn import loading
        m = loading.load()
        a = m.analyze("offline, and still working")
        print("tokens", a.n)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "tokens" in res.stdout


# --- swapping the attention of the real model -----------------------------------------


def test_exact_control_reproduces_the_model_beyond_its_own_512_window(real):
    text = " ".join(sample_text(lang) for lang in ("en", "pt", "ja"))
    ids = real.encode(text)[0][:700]
    assert len(ids) == 700 > real.sliding_window
    x = torch.tensor([ids])
    with torch.no_grad():
        own = real.model.model(input_ids=x).last_hidden_state  # its own eager attention
    plan = atlas_model.Replace("own", frozenset(range(real.n_layers)), methods.Params())
    with torch.no_grad():
        swapped = real.run_plan(plan, lambda: real.hidden(x))
    torch.testing.assert_close(swapped, own, atol=2e-3, rtol=2e-3)
    r = swap.measure(real, text, Swap("own"), max_tokens=700)
    assert r.n == 700 and r.kl < 1e-4 and r.top1_agreement > 0.995
    assert r.perplexity == pytest.approx(r.base_perplexity, rel=1e-3)


def test_a_window_as_long_as_a_short_text_reproduces_the_model(real):
    text = SHORT["en"]
    n = len(real.encode(text)[0])
    r = swap.measure(real, text, Swap("window", window=n))
    assert r.kl < 1e-6 and r.top1_agreement == 1.0


@pytest.mark.parametrize("lang", ["en", "pt", "ja"])
def test_damage_grows_as_the_window_shrinks_and_the_first_token_as_hub_repairs_it(real, lang):
    text = sample_text(lang)
    swaps = [Swap("window", window=w) for w in (4, 16, 64)]
    swaps += [Swap("window_hubs", window=4, hubs=(0,)), Swap("window_hubs", window=16, hubs=(0,))]
    w4, w16, w64, h4, h16 = swap.sweep(real, text, swaps, max_tokens=192)
    # a window as long as the text is the model itself (KL 0, its own perplexity: the
    # test above shows it), so the unmodified model ends both rows
    kls = [w4.kl, w16.kl, w64.kl, 0.0]
    ppls = [w4.perplexity, w16.perplexity, w64.perplexity, w4.base_perplexity]
    assert kls == sorted(kls, reverse=True)
    assert ppls[0] > ppls[1] > ppls[3] and ppls[2] >= ppls[3] * 0.98  # within noise at w = 64
    assert h4.kl < w4.kl / 2 and h4.perplexity < w4.perplexity / 10
    assert h16.kl < w16.kl
    assert w4.perplexity / w4.base_perplexity > 50  # "hundreds" on the samples; at least 50


def test_a_chapters_pooled_grid_shows_the_band_and_the_sink_and_leaves_blank_what_a_layer_never_computes(real):
    """2,000 tokens of the long sample, pooled 6×6 to a square (figures.pool_factor), as
    steps 1 and 3 draw it (measures.grid: each block's largest weight). In a sliding layer,
    every square wholly beyond the window is blank (never computed, not a weight of 0) and the
    squares on the diagonal stand far above the rest of what is computed; in a full layer, the
    first token's column does, the sink (the colour scale's top stops: at least 0.3; pooled
    by the mean, as before, 0.07 here, and the never-computed squares drawn as weights of 0)."""
    import numpy as np

    from ui import figures, row_reads
    from ui.samples import long_text

    a = real.analyze(long_text("en"), max_tokens=2000)
    f = figures.pool_factor(a.n)
    assert a.n == 2000 and f == 6
    sliding = next(i for i, x in enumerate(a.layers) if x.sliding)
    full = next(i for i, x in enumerate(a.layers) if not x.sliding)
    for layer in (sliding, full):
        w = a.layers[layer].window
        g = row_reads.pooled_grid(a, layer, None, reduce="max", window=w)
        rows, cols = np.indices(g.shape)
        diagonal, first = rows == cols, (cols == 0) & (rows > 2)
        if w is not None:  # a square whose nearest cell is w or more tokens back: never computed
            beyond = (rows - cols - 1) * f + 1 >= w
            assert np.isnan(g[beyond]).all() and beyond.sum() > 0
            assert not np.isnan(g[diagonal]).any()
        rest = ~np.isnan(g) & ~diagonal & ~first & (rows > cols + 1)
        if w is not None:  # the band this layer computes
            assert np.median(g[diagonal]) > 10 * np.percentile(g[rest], 90)
        else:  # the sink's column
            assert np.median(g[first]) >= 0.3 and np.median(g[first]) > 10 * np.percentile(g[rest], 90)


def test_gemma_read_in_chunks_records_what_its_whole_run_does(real, monkeypatch):
    """1,300 tokens of the three samples: read 512 at a time (the app's chunked run; its
    sliding layers keep their window of 512 in the cache) or whole, every layer's q, k
    and v agree to float32's rounding, and so do the weights of a full and a sliding layer
    past the window."""
    text = " ".join(sample_text(lang) for lang in ("en", "pt", "ja")) * 2
    monkeypatch.setattr(atlas_model, "CHUNK", 10**9)
    whole = real.analyze(text, max_tokens=1300)
    monkeypatch.setattr(atlas_model, "CHUNK", 512)
    told = []
    parts = real.analyze(text, max_tokens=1300, between=lambda left, n: told.append(left))
    assert whole.n == parts.n == 1300 and told == [1300, 788, 276]
    for name in ("q", "k", "v"):
        a, b = getattr(whole, name), getattr(parts, name)
        scale = a.abs().amax()
        assert (a - b).abs().max() <= 1e-4 * scale, (name, (a - b).abs().max(), scale)
    rows = list(range(1100, 1300, 7))
    for layer in (0, next(i for i, t in enumerate(real.layer_types) if t == "full")):
        torch.testing.assert_close(parts.rows(layer, None, rows), whole.rows(layer, None, rows), atol=1e-4, rtol=1e-3)
