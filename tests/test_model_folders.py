"""Any local model folder (attn.folders, attn.arch): tiny random-weight folders of each
family, built here from configs (harness.model_folders), loaded as ATLAS_MODEL would.

The references are independent of the code under test: the structure from each
family's config by the rules its modeling file follows (written out per family below),
the weights recomputed from the captured q and k with a mask built by two loops, and
the whole model's output against transformers' own eager attention."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attn import budgets, folders, methods, model, swap
from harness import model_folders as mf

TEXT = "Uma janela guarda as palavras vizinhas. 窓は近くの語を残します。 A window keeps the nearby words."

# what each family's config says, worked out by hand from harness.model_folders' configs
# (3 layers, 4 query heads of size 32, WINDOW = 6)
W = mf.WINDOW
EXPECTED = {
    "llama": dict(kv=2, causal=True, windows=(None, None, None)),
    "qwen2": dict(kv=2, causal=True, windows=(None, W, W)),  # max_window_layers = 1: layers 1, 2 slide
    "qwen3": dict(kv=2, causal=True, windows=(None, None, W)),  # max_window_layers = 2
    "mistral": dict(kv=2, causal=True, windows=(W, W, W)),  # sliding_window on every layer
    "gemma2": dict(kv=1, causal=True, windows=(W, None, W)),  # sliding, full, sliding, …
    "gemma3_text": dict(kv=1, causal=True, windows=(W, W, None)),  # the layer_types given
    "phi3": dict(kv=2, causal=True, windows=(W, W, W)),
    "gpt2": dict(kv=4, causal=True, windows=(None, None, None)),
    "bert": dict(kv=4, causal=False, windows=(None, None, None)),
    "roberta": dict(kv=4, causal=False, windows=(None, None, None)),
    "xlm-roberta": dict(kv=4, causal=False, windows=(None, None, None)),
    "distilbert": dict(kv=4, causal=False, windows=(None, None, None)),
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = folders.load_folder(mf.build(family, root / family), device="cpu")
        return cache[family]

    return get


def hand_mask(n: int, causal: bool, window) -> torch.Tensor:
    keep = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(n):
            seen = j <= i if causal else True
            if window is not None:
                seen = seen and abs(i - j) < window
            keep[i, j] = seen
    return keep


def test_every_family_is_listed_with_its_expected_structure():
    assert set(EXPECTED) == set(mf.FAMILIES)


@pytest.mark.parametrize("family", mf.FAMILIES)
def test_the_structure_is_read_from_the_model(loaded, family):
    m = loaded(family)
    want = EXPECTED[family]
    a = m.arch
    assert (a.n_layers, a.n_heads, a.kv_heads, a.head_dim) == (3, 4, want["kv"], 32)
    assert a.causal is want["causal"] and m.causal is want["causal"]
    assert a.windows == want["windows"]
    if family == "gpt2":  # scale_attn_by_inverse_layer_idx: 1/√d divided by the layer's number
        assert a.scales == pytest.approx(tuple(32 ** -0.5 / (layer + 1) for layer in range(3)))
    elif family.startswith("gemma"):  # query_pre_attn_scalar = 32
        assert a.scales == pytest.approx((32 ** -0.5,) * 3)
    else:
        assert a.scales == pytest.approx((32 ** -0.5,) * 3)
    assert a.softcaps == ((mf.SOFTCAP,) * 3 if family == "gemma2" else (None,) * 3)
    # positions, as each family's embeddings number them: RoBERTa's from its padding index + 1
    # (pad 0 here: 130 − 1; the real roberta-base: 514 − 2 = 512), BERT's 130, the others 128
    assert a.max_positions == {"roberta": 129, "xlm-roberta": 129, "bert": 130}.get(family, 128)
    assert m.max_tokens <= a.max_positions
    assert a.parameters == sum(p.numel() for p in m.model.parameters())


@pytest.mark.parametrize("family", mf.FAMILIES)
def test_captured_weights_are_the_softmax_of_the_captured_queries_and_keys(loaded, family):
    m = loaded(family)
    an = m.analyze(TEXT)
    n = an.n
    assert n > 2 * W  # long enough for the windows to matter
    for layer in range(an.n_layers):
        q, k, _ = an.qkv(layer)  # keys repeated to the query heads
        scores = (q[0] @ k[0].transpose(-1, -2)) * m.arch.scales[layer]
        cap = m.arch.softcaps[layer]
        if cap is not None:
            scores = torch.tanh(scores / cap) * cap
        keep = hand_mask(n, EXPECTED[family]["causal"], EXPECTED[family]["windows"][layer])
        want = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
        got = an.weights().dense()[layer].float()
        assert torch.allclose(got, want, atol=2e-3), (family, layer, (got - want).abs().max())
        assert torch.equal(an.model_mask(layer), keep)
        assert torch.all(got[:, ~keep] == 0)
        assert torch.allclose(got.sum(-1), torch.ones(an.n_heads, n), atol=3e-3)
    # and the family's own eager attention (transformers' output_attentions) gives the same rows
    own = m.model.config._attn_implementation
    m.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = m.model.base_model(input_ids=torch.tensor([an.ids]), output_attentions=True)
    finally:
        m.model.set_attn_implementation(own)
    eager = torch.stack([w[0] for w in out.attentions])
    assert torch.allclose(an.weights().dense(), eager, atol=2e-5), (family, (an.weights().dense() - eager).abs().max())


@pytest.mark.parametrize("family", mf.ENCODERS)
def test_an_encoders_prefixes_are_its_own_runs_on_those_tokens(loaded, family):
    """An encoder's tokens look ahead, so the weights on a beginning of the text are a run
    of their own: the first m − 1 tokens and the closing [SEP] / </s>, as transformers'
    own eager attention gives them (output_attentions) — not the whole run's corner."""
    m = loaded(family)
    an = m.analyze(TEXT * 2)
    ids = an.ids
    assert m.tokenizer.special_label(ids[-1]) is not None  # the text ends on its closing token
    lengths = [16, 32, 64]
    assert sorted(an.prefix_qk) == [x for x in lengths if x < an.n]
    for length in sorted(an.prefix_qk):
        head = torch.tensor([ids[:length - 1] + ids[-1:]])
        with torch.no_grad():
            out = m.model.base_model(input_ids=head, output_attentions=True)
        want = torch.stack([w[0] for w in out.attentions])  # (layers, heads, m, m)
        got = an.prefix(length).dense()
        assert got.shape == want.shape
        assert torch.allclose(got, want, atol=2e-5), (family, length, (got - want).abs().max())
        corner = an.weights().dense()[..., :length, :length].float()
        corner = corner / corner.sum(-1, keepdim=True)
        assert (corner - want).abs().max() > 4 * 5e-4  # the whole run's corner is another thing
    # what the analysis holds counts the prefixes' queries and keys: layers·(heads + kv heads)·Σm·d·4 bytes more
    extra = an.n_layers * (an.n_heads + m.kv_heads) * sum(an.prefix_qk) * m.head_dim * 4
    norms = an.n_layers * an.n_heads * an.n * 5  # each row's normaliser (float32) and whether it is known
    assert an.nbytes - extra == sum(x.element_size() * x.numel() for x in (an.q, an.k, an.v)) + norms \
        + 100 * an.n + len(an.text)
    assert m.arch.analysis_bytes(an.n) == sum(x.element_size() * x.numel() for x in (an.q, an.k, an.v)) + extra
    # the closing token is the tokenizer's own end, never an unknown word the text ends on
    unk = m.tokenizer.unk_token_id
    assert m._closing(ids) == ids[-1] and m._closing(ids[:3] + [unk]) is None
    # a text cut at the budget still closes on its [SEP]
    cut = m.analyze(TEXT * 2, max_tokens=20)
    assert cut.n == 20 and cut.ids[:19] == ids[:19] and cut.ids[19] == ids[-1] and cut.truncated == len(ids) - 20


def test_a_decoders_prefixes_are_the_corner_of_its_one_run(loaded):
    m = loaded("llama")
    an = m.analyze(TEXT)
    assert an.prefix_qk == {}
    assert torch.equal(an.prefix(16).dense(), an.weights().dense()[..., :16, :16])
    with pytest.raises(ValueError):
        an.prefix(an.n + 1)


def test_gemma2s_soft_cap_bites_on_these_weights(loaded):
    """Without the cap the recomputed weights differ: the test above could tell."""
    m = loaded("gemma2")
    an = m.analyze(TEXT)
    q, k, _ = an.qkv(1)
    scores = (q[0] @ k[0].transpose(-1, -2)) * m.arch.scales[1]
    keep = hand_mask(an.n, True, None)
    uncapped = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    assert (uncapped - an.weights().dense()[1].float()).abs().max() > 0.1


@pytest.mark.parametrize("family", mf.FAMILIES)
def test_the_model_runs_as_its_own_eager_attention_does(loaded, family):
    """The hidden states with the captured path equal transformers' own eager ones."""
    m = loaded(family)
    ids, _ = m.encode(TEXT)
    x = torch.tensor([ids])
    with torch.no_grad():
        own = m.model.base_model(input_ids=x, **m._forward_kwargs).last_hidden_state
    n, L = len(ids), m.n_layers
    rec = {"q": torch.empty(L, 1, m.n_heads, n, m.head_dim), "k": torch.empty(L, 1, m.kv_heads, n, m.head_dim),
           "v": torch.empty(L, 1, m.kv_heads, n, m.head_dim), "w": torch.empty(L, m.n_heads, n, n,
                                                                             dtype=torch.float16)}
    ours = m.run_plan(model.Capture(rec), lambda: m.hidden(x))
    assert torch.allclose(ours, own, atol=1e-5), (ours - own).abs().max()


@pytest.mark.parametrize("family", mf.DECODERS)
def test_a_decoders_own_pattern_through_the_fused_path_changes_nothing(loaded, family):
    m = loaded(family)
    ids, _ = m.encode(TEXT)
    x = torch.tensor([ids])
    base = m.base_hidden(ids)
    control = m.run_plan(model.Replace("own", frozenset(range(m.n_layers))), lambda: m.hidden(x))
    assert torch.allclose(control, base, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma2"])
def test_next_token_logits_are_the_models_own(loaded, family):
    m = loaded(family)
    ids, _ = m.encode(TEXT)
    x = torch.tensor([ids])
    with torch.no_grad():
        want = m.model(input_ids=x).logits.float()
    assert torch.allclose(m.logits(m.base_hidden(ids)), want, atol=1e-4)


@pytest.mark.parametrize("family", mf.ENCODERS)
def test_an_encoder_refuses_the_causal_replacements_and_next_token_logits(loaded, family):
    m = loaded(family)
    ids, _ = m.encode(TEXT)
    with pytest.raises(ValueError, match="both ways"):
        m.run_plan(model.Replace("window", frozenset({0})), lambda: None)
    with pytest.raises(ValueError, match="causal"):
        m.logits(m.base_hidden(ids))


@pytest.mark.parametrize("family", mf.ENCODERS)
def test_an_encoders_swaps_are_measured_on_masked_words_as_the_model_predicts_them(loaded, family):
    """Pseudo-perplexity: a seeded sample of the text's own positions, each masked in its
    copy; the unmodified model's figure recomputed here one copy at a time through
    transformers' own masked-LM model, and the replacements read both ways."""
    from transformers import AutoModelForMaskedLM

    m = loaded(family)
    text = TEXT * 2
    ids, _ = m.encode(text)
    control, wide, narrow = swap.sweep(m, text, [swap.Swap("own"), swap.Swap("window", window=len(ids)),
                                                 swap.Swap("window", window=2)])
    own_positions = [i for i, t in enumerate(ids) if m.tokenizer.special_label(t) is None]
    assert len(control.predicted) == min(swap.MASKED_POSITIONS, len(own_positions)) == 32
    assert set(control.predicted) <= set(own_positions) and list(control.predicted) == sorted(set(control.predicted))
    ref = AutoModelForMaskedLM.from_pretrained(m.model.config._name_or_path, attn_implementation="eager").eval()
    nll = []
    with torch.no_grad():
        for pos in control.predicted:
            x = torch.tensor([ids])
            x[0, pos] = m.mask_token_id
            nll.append(-torch.log_softmax(ref(input_ids=x).logits[0, pos].float(), -1)[ids[pos]])
    want = float(torch.exp(torch.stack(nll).mean()))
    assert control.base_perplexity == pytest.approx(want, rel=1e-4)
    assert control.perplexity == pytest.approx(want, rel=1e-4) and control.top1_agreement == 1.0
    assert abs(control.kl) < 1e-6
    assert wide.perplexity == pytest.approx(want, rel=1e-4)  # a window as wide as the text: every pair
    assert narrow.kl > 1e-7 and narrow.perplexity != pytest.approx(want, rel=1e-6)
    with pytest.raises(ValueError, match="both ways"):  # a causal replacement would not read as it does
        m.run_plan(model.Replace("window", frozenset({0}), methods.Params(window=2, causal=True)), lambda: None)


def test_the_first_token_is_what_the_tokenizer_makes_it(loaded):
    """GPT-2's tokenizer adds no start token: its first token is a piece of the text;
    Llama's adds <s>, BERT's [CLS] and [SEP] around the text."""
    gpt2, llama = loaded("gpt2").analyze(TEXT), loaded("llama").analyze(TEXT)
    assert gpt2.tokens[0] != "<s>" and not gpt2.first_is_special
    assert TEXT.startswith(TEXT[gpt2.offsets[0][0]:gpt2.offsets[0][1]]) and gpt2.offsets[0][1] > 0
    assert llama.tokens[0] == "<s>" and llama.first_is_special
    bert = loaded("bert").analyze(TEXT)
    assert (bert.tokens[0], bert.tokens[-1]) == ("[CLS]", "[SEP]")


def test_budgets_follow_the_models_positions_and_size(loaded):
    """The analysis and a swap never read past the model's positions (128 here, as GPT-2's
    1,024); a model whose analysis is bigger than the packaged one's reads fewer tokens."""
    m = loaded("gpt2")
    long_text = TEXT * 20
    assert len(m.encode(long_text)[0]) > 128
    assert m.analyze(long_text).n == 128
    res = swap.measure(m, long_text, swap.Swap("own"), max_tokens=256)
    assert res.n == 128 and res.perplexity == pytest.approx(res.base_perplexity, rel=1e-6)
    # what an analysis holds, by hand: layers·(heads + 2·kv)·n·d·4 bytes (no weights: linear in n)
    a = m.arch
    assert a.analysis_bytes(100) == 3 * (4 + 2 * 4) * 100 * 32 * 4
    assert a.analysis_bytes(200) == 2 * a.analysis_bytes(100)
    big = dataclasses.replace(a, n_layers=32, n_heads=32, kv_heads=8, head_dim=128, max_positions=None)
    room = budgets.reference_bytes("cpu")  # Gemma-3-270m's analysis at 32,768 tokens
    assert room == 18 * (4 + 2) * 32768 * 256 * 4
    n = big.token_budget(32768, room)
    assert big.analysis_bytes(n) <= room < big.analysis_bytes(n + 1)
    assert a.token_budget(32768, room) == 128  # the tiny model: its positions, not memory


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_a_family_imported_ahead_registers_what_loading_it_would(tmp_path, family):
    """In a fresh process (this one imported every family at its start): after
    import_family, loading the model registers no pytree node, so a FlexAttention kernel
    compiled in between compiles nothing again (dynamo guards their number)."""
    folder = mf.build(family, tmp_path / family)
    script = ("import sys, torch.utils._pytree as pt\n"
              "from attn import folders\n"
              "n0 = len(pt.SUPPORTED_NODES); folders.import_family(sys.argv[1]); n1 = len(pt.SUPPORTED_NODES)\n"
              "folders.load_folder(sys.argv[1], device='cpu'); print(n0, n1, len(pt.SUPPORTED_NODES))\n")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", script, str(folder)], cwd=root, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(root)})
    n0, n1, n2 = map(int, out.stdout.split()[-3:])
    assert n1 > n0 and n2 == n1, out.stderr[-2000:]


def refusal(folder) -> folders.ModelFolderError:
    with pytest.raises(folders.ModelFolderError) as e:
        folders.load_folder(folder)
    return e.value


def with_config(folder, config: str):
    folder.mkdir()
    (folder / "config.json").write_text(config)
    return folder


def test_a_folder_that_cannot_serve_says_why(tmp_path):
    e = refusal(tmp_path / "nowhere")
    assert e.reason == "missing" and "nowhere" in str(e)
    (tmp_path / "empty").mkdir()
    e = refusal(tmp_path / "empty")
    assert e.reason == "no_config" and "config.json" in str(e)
    assert refusal(with_config(tmp_path / "odd", '{"model_type": "no-such-family"}')).reason == "unknown"
    t5 = '{"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}'
    assert refusal(with_config(tmp_path / "t5", t5)).reason == "no_head"
    bare = mf.build("llama", tmp_path / "bare")
    for f in bare.glob("*.safetensors"):
        f.unlink()
    assert refusal(bare).reason == "no_weights"


def test_weights_too_big_are_refused_before_loading_with_the_figures(tmp_path):
    folder = mf.build("llama", tmp_path / "llama")
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    # by hand: embeddings and the untied head, per layer q, k, v, o (two key/value heads of
    # 32), the MLP's three matrices and two norms, the final norm
    d, kv_width, ff, layers = 128, 2 * 32, 64, 3
    per_layer = 2 * d * d + 2 * d * kv_width + 3 * d * ff + 2 * d
    want = 2 * vocab * d + layers * per_layer + d
    assert folders.weight_parameters(folder) == want
    with pytest.raises(folders.ModelFolderError) as e:
        folders.load_folder(folder, memory=want * 4 - 1)
    assert e.value.reason == "too_big" and "GiB" in str(e.value)
    assert e.value.figures == {"parameters": want, "need": want * 4, "have": want * 4 - 1}
    assert folders.load_folder(folder, device="cpu", memory=want * 4).arch.parameters == want


@pytest.mark.parametrize("family, tied, missing", [
    ("bert", None, True),  # a BertModel checkpoint (a sentence-transformers folder): the head's transform and biases
    ("llama", False, True),  # a decoder saved as a bare AutoModel, its head not tied to the embeddings
    ("llama", True, False),  # … tied: the embeddings are its head, nothing is missing
])
def test_a_folder_without_its_language_model_head_is_said_to_lack_it_and_measures_nothing_with_it(
        tmp_path, family, tied, missing):
    from attn import swap

    folder = mf.build(family, tmp_path / family, head=False, tied=tied)
    m = folders.load_folder(folder, device="cpu")
    assert m.has_head is (not missing)
    base = f"{m.model.base_model_prefix}."
    assert all(not k.startswith(base) for k in m.head_missing)  # a part outside the base model each
    if family == "bert":
        assert "cls.predictions.transform.dense.weight" in m.head_missing
        assert not any("decoder.weight" in k for k in m.head_missing)  # tied to the embeddings: its own
    if family == "llama" and missing:
        assert m.head_missing == ("lm_head.weight",)
    a = m.analyze("A window keeps the nearby words and lets the distant ones go.")
    assert a.n > 5 and torch.isfinite(a.weights().dense().float()).all()  # its attention is real either way
    if missing:
        with pytest.raises(swap.NoLanguageHead):
            swap.measure(m, "A window keeps the nearby words.", swap.Swap("own"))
        with pytest.raises(swap.NoLanguageHead):
            swap.sweep(m, "A window keeps the nearby words.", [swap.Swap("own")])
    else:
        assert swap.measure(m, "A window keeps the nearby words.", swap.Swap("own")).perplexity > 0


# --- the layer's own attention, read once (attn.layer.LayerAttention) ---------------------


def eager_outputs(m, x, **extra) -> list[torch.Tensor]:
    """Each layer's attention output as transformers' own eager attention computes it (the
    model with no plan of ours): what enters the layer's output projection, ``(1, heads, n, d)``."""
    names = [name for name, _ in m.model.named_modules()
             if name.endswith("self_attn.o_proj") or name.endswith("attention.output.dense")]
    assert len(names) == m.n_layers
    got = {}
    hooks = [m.model.get_submodule(name).register_forward_pre_hook(
        lambda mod, args, i=i: got.__setitem__(i, args[0].detach())) for i, name in enumerate(names)]
    try:
        with torch.no_grad():
            m.model.base_model(input_ids=x, **m._forward_kwargs, **extra)
    finally:
        for h in hooks:
            h.remove()
    n = x.shape[1]
    return [got[i].reshape(1, n, m.n_heads, m.head_dim).transpose(1, 2) for i in range(m.n_layers)]


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma2", "gemma3_text", "bert"])
def test_the_exact_reference_is_the_models_own_eager_attention_output(loaded, family):
    """Step 6's reference, written out from the layer's description (its scale, soft cap,
    window, direction, grouped key/value heads), equals the output of transformers' own
    eager attention in every layer: a soft cap (gemma2), windows per layer (qwen2,
    gemma3_text) and both directions (bert) each change it."""
    from attn import outputs

    m = loaded(family)
    a = m.analyze(TEXT)
    own = eager_outputs(m, torch.tensor([a.ids]))
    assert tuple(x.window for x in a.layers) == EXPECTED[family]["windows"]
    assert {x.causal for x in a.layers} == {EXPECTED[family]["causal"]}
    for layer in range(a.n_layers):
        q, k, v = a.qkv(layer)
        ref = outputs.exact_output(q, k, v, a.layers[layer], a.bias(layer)).float()
        torch.testing.assert_close(ref, own[layer], atol=2e-5, rtol=1e-4)
    if family == "gemma2":  # the cap is read and bites: the same layer without it is another output
        plain = dataclasses.replace(a.layers[0], softcap=None)
        assert a.layers[0].softcap == mf.SOFTCAP
        q, k, v = a.qkv(0)
        assert (outputs.exact_output(q, k, v, plain).float() - own[0]).abs().max() > 1e-2


def alibi_mask(n: int, heads: int) -> torch.Tensor:
    """A causal additive mask with a per-head linear distance bias (as ALiBi makes), written
    by hand: 0 − slope·(i − j) on pairs j ≤ i, the dtype's minimum on the others."""
    mask = torch.full((1, heads, n, n), torch.finfo(torch.float32).min)
    for h in range(heads):
        slope = 2.0 ** -(h + 1)
        for i in range(n):
            for j in range(i + 1):
                mask[0, h, i, j] = -slope * (i - j)
    return mask


def test_a_bias_in_the_mask_is_kept_in_the_reference_and_in_every_swap(loaded):
    """A tiny Llama given a custom 4-D additive mask (transformers passes it through): the
    analysis keeps each layer's bias, the reference with it equals the model's eager output,
    and a swapped layer keeps it (a window as long as the text changes nothing)."""
    from attn import outputs

    m = loaded("llama")
    ids, _ = m.encode(TEXT)
    n, x = len(ids), torch.tensor([ids])
    mask = alibi_mask(n, m.n_heads)
    a = m.analyze(TEXT, mask=mask)
    own = eager_outputs(m, x, attention_mask=mask)
    for layer in range(a.n_layers):
        bias = a.bias(layer)
        assert bias is not None and bias.shape == (m.n_heads, n, n)
        assert bias[1, 5, 2].item() == pytest.approx(-0.25 * 3)
        q, k, v = a.qkv(layer)
        torch.testing.assert_close(outputs.exact_output(q, k, v, a.layers[layer], bias).float(), own[layer],
                                   atol=2e-5, rtol=1e-4)
    # the captured weights are the biased softmax: recomputed by hand from q, k and the mask
    q, k, _ = a.qkv(0)
    by_hand = torch.softmax(q[0] @ k[0].transpose(-1, -2) * a.layers[0].scale + mask[0], dim=-1)
    torch.testing.assert_close(a.weights().dense()[0].float(), by_hand, atol=1e-3, rtol=0)

    def hidden(plan=None, **extra):
        run = lambda: m.model.base_model(input_ids=x, **m._forward_kwargs, **extra).last_hidden_state  # noqa: E731
        if plan is None:
            with torch.no_grad():
                return run()
        return m.run_plan(plan, run)

    biased = hidden(attention_mask=mask)
    everything = model.Replace("window", frozenset(range(m.n_layers)), methods.Params(window=n, causal=True))
    assert torch.allclose(hidden(everything, attention_mask=mask), biased, atol=1e-5)
    assert (hidden(everything) - biased).abs().max() > 1e-3  # the bias matters: without it, another output


def test_a_swap_keeps_the_soft_cap_of_a_layer(loaded):
    """Gemma 2's full layer (1) swapped for a window as long as the text: the same pairs, the
    same capped scores, the same output (the cap bites on these weights: see above)."""
    m = loaded("gemma2")
    ids, _ = m.encode(TEXT)
    x = torch.tensor([ids])
    assert m.arch.layers[1].window is None and m.arch.layers[1].softcap == mf.SOFTCAP
    whole = model.Replace("window", frozenset({1}), methods.Params(window=len(ids), causal=True))
    torch.testing.assert_close(m.run_plan(whole, lambda: m.hidden(x)), m.base_hidden(ids), atol=1e-5, rtol=1e-5)



def test_a_folder_whose_rows_give_weight_to_learned_sinks_is_refused_with_a_sentence(tmp_path):
    """gpt-oss passes a learned sink logit per head (``s_aux``) that joins each row's
    softmax: read, and refused, since every share of the app assumes a row sums to one."""
    e = refusal(mf.build("gpt_oss", tmp_path / "gpt_oss"))
    assert e.reason == "sinks"
    from ui import i18n

    for lang in ("en", "ja", "pt"):
        assert i18n.translate(lang, "model.why_sinks") != "model.why_sinks"


@pytest.mark.parametrize("method", ["topk", "topk_indexer"])
def test_top_k_on_a_soft_capped_model_keeps_the_layers_own_scores(loaded, method):
    """Gemma 2 caps its scores, so a swap writes the softmax out (model.py's plain path, the
    pairs from Method.allowed_scored): top-k keeping every key is the model itself, two keys
    a row are not. In its sliding layers top-k chooses only inside the layer's own window,
    so keeping every key is the model's own window there, not a window over the whole text."""
    m = loaded("gemma2")
    n = len(m.encode(TEXT)[0])
    assert any(w is not None and w < n for w in m.arch.windows)  # a sliding layer that drops far keys
    every, two, window = swap.sweep(m, TEXT, [swap.Swap(method, k=n), swap.Swap(method, k=2),
                                              swap.Swap("window", window=n)])
    # every key kept is the model's own softmax written out, up to float32 rounding; a window
    # of n (every layer reading the whole text, past the sliding layers' own windows) is not
    assert every.kl < 1e-5 and every.top1_agreement == 1.0
    assert window.kl > 10 * every.kl
    assert two.kl > 2 * every.kl  # this random little model barely leans on attention: a clear rise, no more


@pytest.mark.parametrize("chunk", [4, 7])  # smaller and larger than the sliding layers' window (6)
@pytest.mark.parametrize("family", mf.DECODERS)
def test_a_decoder_read_in_chunks_records_what_its_whole_run_does(loaded, family, chunk, monkeypatch):
    """A causal model reads a longer text a chunk at a time, each layer keeping its keys and
    values (a sliding layer its window): every layer's q, k and v, and so every weight, are
    those of the one run on the whole text (soft cap, grouped keys and windows included);
    the queue was offered the model between the chunks, with the tokens left."""
    m = loaded(family)
    monkeypatch.setattr(model, "CHUNK", 10**9)
    whole = m.analyze(TEXT)
    monkeypatch.setattr(model, "CHUNK", chunk)
    told, read = [], []
    parts = m.analyze(TEXT, between=lambda left, n: told.append((left, n)), progress=lambda d, n: read.append((d, n)))
    n = whole.n
    assert told == [(n, n)] + [(n - e, n) for e in range(chunk, n, chunk)]
    assert read[-1] == (n, n) and all(b[0] >= a[0] for a, b in zip(read, read[1:]))
    for name in ("q", "k", "v"):
        a, b = getattr(whole, name), getattr(parts, name)
        assert a.shape == b.shape and torch.allclose(a, b, atol=2e-5, rtol=1e-4), (family, name, (a - b).abs().max())
    assert torch.allclose(whole.weights().dense(), parts.weights().dense(), atol=2e-5)
