import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn import backend, features, flex, kernels, linear_kernels, patterns
from helpers import dtype_for, tolerance


def rand(shape, device="cpu", dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(device=device, dtype=dtype)


def qkv(b, h, n, d, device="cpu", dtype=torch.float32, dv=None, seed=0):
    return (rand((b, h, n, d), device, dtype, seed), rand((b, h, n, d), device, dtype, seed + 1),
            rand((b, h, n, dv or d), device, dtype, seed + 2))


@pytest.mark.parametrize("causal", [True, False])
def test_full_attention_matches_the_dense_reference(device, causal):
    q, k, v = qkv(2, 3, 37, 16, device, dtype_for(device))
    got = kernels.full_attention(q, k, v, causal=causal, scale=0.3)
    ref = kernels.full_attention_reference(q.float(), k.float(), v.float(), causal=causal, scale=0.3)
    torch.testing.assert_close(got.float(), ref, **tolerance(device))


CASES = [
    # n, window, hubs: n not a multiple of the block, n < window, window = 1,
    # hubs at the start, middle and end, duplicate hubs
    (1, 1, ()), (2, 1, (1,)), (7, 1, ()), (65, 1, (0,)), (63, 200, ()), (130, 129, (5,)),
    (100, 7, (0,)), (100, 7, (50,)), (100, 7, (99,)), (100, 7, (0, 50, 50, 99)),
    (257, 16, (3, 128)), (200, 64, tuple(range(0, 200, 9))), (129, 64, ()),
]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n,w,hubs", CASES)
def test_window_attention_matches_the_dense_reference(device, n, w, hubs, causal):
    q, k, v = qkv(2, 3, n, 16, device, dtype_for(device), dv=8, seed=n + w)
    ref = kernels.window_attention_reference(q.float(), k.float(), v.float(), window=w, hubs=hubs, causal=causal)
    got = backend.window_attention(q, k, v, window=w, hubs=hubs, causal=causal)
    torch.testing.assert_close(got.float(), ref, **tolerance(device))
    got_blocked = kernels.window_attention_blocked(q, k, v, window=w, hubs=hubs, causal=causal, block=16)
    torch.testing.assert_close(got_blocked.float(), ref, **tolerance(device))


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "pure-torch"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n,w,hubs", CASES)
def test_both_blocked_window_kernels_return_the_window_and_its_log_sum_exp(n, w, hubs, causal, fused):
    """The window alone and each row's log-sum-exp, from torch's fused CPU kernel over
    strided blocks and from the pure-torch blocks (CUDA's), against the dense grid: the
    log-sum-exp is log Σ exp(s·q·k) over the row's window cells, brute force in float64.
    Then the hub merge on top of each equals the dense reference of window + hubs."""
    q, k, v = qkv(2, 3, n, 16, seed=n + w)
    s = 16 ** -0.5
    out, lse = kernels.window_blocked_lse(q, k, v, window=w, causal=causal, scale=s, block=16, fused=fused)
    allowed = patterns.pattern_grid(n, w, (), causal)
    scores = (q.double() @ k.double().transpose(-1, -2) * s).masked_fill(~allowed, float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, kernels.window_attention_reference(q, k, v, window=w, causal=causal),
                               atol=1e-5, rtol=1e-5)
    hubs = patterns.check_hubs(n, hubs)
    merged = kernels.merge_hubs(q, k, v, out, lse, window=w, hubs=hubs, causal=causal, scale=s)
    torch.testing.assert_close(merged, kernels.window_attention_reference(q, k, v, window=w, hubs=hubs, causal=causal),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n, w, causal", [(1, 1, True), (100, 7, True), (100, 7, False), (300, 128, True),
                                          (1000, 50, False), (77, 200, True)])
def test_the_cost_model_counts_the_cells_the_fused_blocked_kernel_computes(monkeypatch, n, w, causal):
    """kernels.blocked_cells (the table's 'computed' column) against the cells of every
    call the fused kernel makes, counted as they happen: queries × keys per call."""
    counted = []
    real = kernels._FUSED_CPU

    def counting(q, k, v, *args, **kwargs):
        counted.append(q.shape[-2] * k.shape[-2] * q.shape[1] * q.shape[0] // 6)  # per head: batch 2 × heads 3
        return real(q, k, v, *args, **kwargs)

    monkeypatch.setattr(kernels, "_FUSED_CPU", counting)
    q, k, v = qkv(2, 3, n, 8)
    kernels.window_attention_blocked(q, k, v, window=w, causal=causal)
    assert sum(counted) == kernels.blocked_cells(n, w, causal, "cpu")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 150), w=st.integers(1, 160), b=st.integers(1, 2), h=st.integers(1, 3),
    hub_frac=st.lists(st.floats(0, 1), max_size=4), causal=st.booleans(), block=st.sampled_from([1, 8, 32, 64]),
)
def test_blocked_window_kernel_equals_reference_on_random_shapes(n, w, b, h, hub_frac, causal, block):
    hubs = tuple(int(f * (n - 1)) for f in hub_frac)
    q, k, v = qkv(b, h, n, 8, seed=n)
    ref = kernels.window_attention_reference(q, k, v, window=w, hubs=hubs, causal=causal)
    got = kernels.window_attention_blocked(q, k, v, window=w, hubs=hubs, causal=causal, block=block)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_window_of_n_or_more_equals_full_attention(device):
    q, k, v = qkv(1, 4, 50, 32, device, dtype_for(device))
    full = kernels.full_attention(q, k, v, causal=True)
    for w in (50, 51, 1000):
        torch.testing.assert_close(backend.window_attention(q, k, v, window=w), full, atol=0, rtol=0)
    blocked = kernels.window_attention_blocked(q, k, v, window=50)
    torch.testing.assert_close(blocked.float(), full.float(), **tolerance(device))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("feature", list(features.FEATURE_MAPS))
@pytest.mark.parametrize("n,chunk", [(1, 64), (63, 64), (64, 64), (200, 64), (131, 16), (300, 128),
                                     (1100, 32), (600, 8)])  # several groups of chunks, the last one short
def test_linear_attention_matches_the_explicit_feature_grid(feature, causal, n, chunk):
    q, k, v = qkv(2, 3, n, 16, dv=8, seed=n)
    got = linear_kernels.linear_attention(q, k, v, feature=feature, causal=causal, chunk=chunk, feature_dim=32)
    ref = linear_kernels.linear_attention_reference(q, k, v, feature=feature, causal=causal, feature_dim=32)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("feature", list(features.FEATURE_MAPS))
def test_linear_attention_on_cuda_matches_the_cpu_reference(feature):
    q, k, v = qkv(1, 4, 300, 32)
    got = linear_kernels.linear_attention(q.cuda(), k.cuda(), v.cuda(), feature=feature).cpu()
    ref = linear_kernels.linear_attention_reference(q, k, v, feature=feature)
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)


def test_the_two_multiplication_orders_agree_for_each_feature_map():
    q, k, v = qkv(1, 2, 90, 16)
    for feature in features.FEATURE_MAPS:
        for causal in (True, False):
            a = linear_kernels.linear_attention(q, k, v, feature=feature, causal=causal)
            b = linear_kernels.linear_attention_quadratic(q, k, v, feature=feature, causal=causal)
            assert (a - b).abs().max() < 1e-5


def test_feature_sizes_and_seeding():
    assert features.feature_size("elu", 64) == 64
    assert features.feature_size("relu", 64, 999) == 64  # feature_dim ignored where m is fixed
    assert features.feature_size("favor", 64, 128) == 128
    assert features.feature_size("taylor", 256) == 1 + 16 + 256
    q, k, _ = qkv(1, 1, 10, 16)
    a = features.apply_feature_map("favor", q, k, seed=1)[0]
    assert torch.equal(a, features.apply_feature_map("favor", q, k, seed=1)[0])
    assert not torch.equal(a, features.apply_feature_map("favor", q, k, seed=2)[0])
    for name in features.FEATURE_MAPS:
        fq, fk = features.apply_feature_map(name, q, k)
        assert (fq @ fk.transpose(-1, -2) >= 0).all()  # every implied weight is >= 0


def test_relu_features_can_zero_the_denominator_without_nan():
    q = -torch.ones(1, 1, 5, 4)  # relu(q) = 0: numerator and denominator are both 0
    k, v = torch.ones(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    out = linear_kernels.linear_attention(q, k, v, feature="relu")
    assert torch.isfinite(out).all() and (out == 0).all()


@pytest.mark.parametrize("call", [
    lambda q, k, v: backend.window_attention(q, k, v, window=0),
    lambda q, k, v: backend.window_attention(q, k, v, window=-2),
    lambda q, k, v: backend.window_attention(q, k, v, window=3, hubs=(10,)),
    lambda q, k, v: backend.window_attention(q, k, v, window=3, hubs=(-1,)),
    lambda q, k, v: backend.window_attention(q, k[:, :, :5], v, window=3),
    lambda q, k, v: backend.window_attention(q[0], k[0], v[0], window=3),
    lambda q, k, v: kernels.full_attention(q, k[..., :3], v),
    lambda q, k, v: linear_kernels.linear_attention(q, k, v, feature="softmax"),
    lambda q, k, v: linear_kernels.linear_attention(q, k, v, feature="favor", feature_dim=0),
    lambda q, k, v: backend.window_attention(q, k, v, window=3, backend="gpu"),
])
def test_bad_arguments_raise_a_clear_value_error(call):
    q, k, v = qkv(1, 2, 10, 8)
    with pytest.raises(ValueError):
        call(q, k, v)


def _cells_of(grid, qb, kb, q_block, kv_block):
    return grid[qb * q_block:(qb + 1) * q_block, kb * kv_block:(kb + 1) * kv_block]


@pytest.mark.parametrize("n, w, causal, q_block, kv_block", [
    (300, 16, True, 32, 32), (300, 100, True, 64, 32), (257, 20, False, 32, 32), (513, 128, True, 64, 64),
    (129, 200, False, 64, 32)])
def test_flex_band_blocks_hold_every_pair_and_full_blocks_only_pairs(n, w, causal, q_block, kv_block):
    """The window kernel's block lists, against the pattern's dense grid: every allowed
    pair lies in a visited block, a full block (the kernel skips the predicate there)
    holds allowed pairs only, and no block is both."""
    partial, full = flex.band_lists(n, w, causal, q_block, kv_block)
    grid = patterns.pattern_grid(n, w, (), causal)
    assert not (partial & full).any()
    for qb in range(partial.shape[0]):
        for kb in range(partial.shape[1]):
            cells = _cells_of(grid, qb, kb, q_block, kv_block)
            if cells.any():
                assert partial[qb, kb] or full[qb, kb], (qb, kb)
            if full[qb, kb]:
                assert cells.all() and cells.shape == (q_block, kv_block), (qb, kb)
    assert full.any() or w < 2 * kv_block  # the band's inside is skipped, not tested cell by cell
    per_row = int((partial | full).sum(dim=1).max())
    assert per_row <= (w - 1) // kv_block + q_block // kv_block + 1 + (0 if causal else (w - 1) // kv_block + 1)


def test_blocked_kernel_merges_hub_columns_exactly_and_counts_a_hub_in_the_window_once():
    """The blocked kernel's hub columns (merged through the log-sum-exps) against a
    hand-made case: one query, its window holds a hub; the weights come out as the
    softmax over the pattern's cells, each key once."""
    n, w = 6, 2
    q = torch.zeros(1, 1, n, 1)
    q[0, 0, 5, 0] = 1.0
    k = torch.arange(n, dtype=torch.float32).reshape(1, 1, n, 1) / 10
    v = torch.eye(n).reshape(1, 1, n, n)  # the output row is the weights
    out = kernels.window_attention_blocked(q, k, v, window=w, hubs=(0, 4), causal=True, scale=1.0)
    # query 5 sees keys 4, 5 (its window; hub 4 inside it) and hub 0: scores 0.4, 0.5, 0.0
    e = torch.exp(torch.tensor([0.0, 0.4, 0.5]))
    want = torch.zeros(n)
    want[[0, 4, 5]] = e / e.sum()
    torch.testing.assert_close(out[0, 0, 5], want)


@pytest.mark.skipif(not flex.available(), reason="FlexAttention cannot compile here (no C++ compiler)")
@pytest.mark.filterwarnings("error:flex_attention called without torch.compile")  # the n×n unfused path
def test_compiled_flex_attention_matches_the_dense_reference():
    assert backend.warm((1, 4, 1024, 32)), "\n".join(flex.status()["log"])
    # the compiled CPU kernel cannot return its log-sum-exp: window + hubs stays on the
    # blocked kernel, and asking flex for it says why
    assert backend.warm((1, 4, 1024, 32), hubs=True) is False and not flex.status()["failed"]
    q, k, v = qkv(1, 4, 300, 32)
    with pytest.raises(ValueError, match="log-sum-exp"):
        backend.window_attention(q, k, v, window=16, hubs=(0,), backend="flex")
    for n, w, hubs, causal in [(300, 16, (), True), (513, 100, (), True), (700, 5, (699,), True),
                               (900, 50, tuple(range(0, 900, 20)), True)]:
        q, k, v = qkv(1, 4, n, 32, seed=n)
        assert backend.window_backend(q, v, causal, w, hubs) == ("blocked" if hubs else "flex")
        got = backend.window_attention(q, k, v, window=w, hubs=hubs, causal=causal)
        ref = kernels.window_attention_reference(q, k, v, window=w, hubs=hubs, causal=causal)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
        compiled_before = torch._dynamo.utils.counters["frames"]["ok"]
        backend.window_attention(q[:, :, : n - 7], k[:, :, : n - 7], v[:, :, : n - 7],  # other n, strides
                                 window=w + 3, hubs=tuple(h for h in hubs if h < n - 7), causal=causal)
        assert torch._dynamo.utils.counters["frames"]["ok"] == compiled_before  # no compile on a request
        with flex.compiling():  # a warm-up compiling elsewhere: a request does not wait for it
            # the request in a thread, so that one that waits fails here instead of
            # deadlocking until pytest's timeout (it ends once the lock is released)
            got = call_in_thread(backend.window_attention, q, k, v, window=w, hubs=hubs, causal=causal)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_the_compiled_path_with_hubs_merges_the_kernels_log_sum_exp(monkeypatch):
    """Where the compiled kernel returns its log-sum-exp (CUDA), window + hubs is that
    kernel's window merged with the hub columns, and the hub rows whole. Torch's eager
    flex attention (which returns it on the CPU too) stands in for the compiled kernel
    here: the calls, the block mask and the merge are the CUDA path's."""
    from torch.nn.attention.flex_attention import flex_attention

    calls = []

    def eager(q, k, v, **kwargs):
        calls.append(kwargs)
        return flex_attention(q, k, v, **kwargs)

    monkeypatch.setattr(flex, "_get_compiled", lambda: eager)
    monkeypatch.setattr(flex, "returns_lse", lambda device: True)
    for n, w, hubs, causal in [(200, 16, (0, 100, 199), True), (150, 40, (0, 30, 149), False),
                               (130, 64, (60, 100), True)]:  # hub 100 lies inside row 129's window: counted once
        q, k, v = qkv(1, 2, n, 16, seed=n)
        got = backend.window_attention(q, k, v, window=w, hubs=hubs, causal=causal, backend="flex")
        torch.testing.assert_close(got, kernels.window_attention_reference(q, k, v, window=w, hubs=hubs,
                                                                          causal=causal), atol=1e-5, rtol=1e-5)
    assert len(calls) == 3 and all(c["return_aux"].lse for c in calls)


def call_in_thread(fn, *args, timeout: float = 5.0, **kwargs):
    """fn(*args, **kwargs) in another thread; fails when it has not come back within
    ``timeout`` seconds."""
    result = {}

    def run():
        try:
            result["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the test's thread
            result["error"] = exc

    caller = threading.Thread(target=run, daemon=True)
    caller.start()
    caller.join(timeout)
    assert not caller.is_alive(), f"the call did not come back within {timeout} s"
    if "error" in result:
        raise result["error"]
    return result["value"]


NO_NN_SCRIPT = textwrap.dedent("""
    import resource, torch
    from attn import backend, kernels, linear_kernels
    torch.set_num_threads(2)
    small = torch.randn(1, 1, 300, 16)
    backend.window_attention(small, small, small, window=8, hubs=(0,))
    linear_kernels.linear_attention(small, small, small)
    n = 65536
    q, k, v = (torch.randn(1, 1, n, 16) for _ in range(3))
    limit = 3 * 2**30  # an n×n float32 grid alone would take 16 GiB, a bool one 4 GiB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        torch.empty(n, n, dtype=torch.bool)
    except (RuntimeError, MemoryError):
        print("nxn-refused")
    out = backend.window_attention(q, k, v, window=64, hubs=(0, 1000, n - 1))
    assert out.shape == (1, 1, n, 16) and torch.isfinite(out).all()
    for feature in ("elu", "favor", "taylor"):
        out = linear_kernels.linear_attention(q, k, v, feature=feature)
        assert out.shape == (1, 1, n, 16) and torch.isfinite(out).all()
    out = linear_kernels.linear_attention(q, k, v, causal=False)
    print("ok")
""")


def test_window_and_linear_attention_never_allocate_n_by_n():
    res = subprocess.run([sys.executable, "-c", NO_NN_SCRIPT], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "ATLAS_DEVICE": "cpu"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "nxn-refused" in res.stdout  # the limit really forbids an n×n tensor
    assert res.stdout.strip().endswith("ok")


@pytest.mark.parametrize("feature", ["relu", "elu", "favor"])
def test_linear_rows_with_a_tiny_but_real_denominator_are_still_normalised(feature):
    """The denominator guard only catches rows whose φ(q)·Σφ(k) is zero: rows whose
    denominator is small but real (tiny q and k with ReLU features, ≈ 1e-19 here) keep
    weights that sum to 1, and the kernel agrees with them."""
    g = torch.Generator().manual_seed(3)
    q = torch.rand(1, 2, 24, 8, generator=g) * 1e-10 + 1e-11
    k = torch.rand(1, 2, 24, 8, generator=g) * 1e-10 + 1e-11
    v = torch.randn(1, 2, 24, 8, generator=g)
    w = linear_kernels.linear_weights(q, k, feature=feature, causal=True)
    assert torch.allclose(w.double().sum(-1), torch.ones(1, 2, 24, dtype=torch.float64), atol=1e-5)
    out = linear_kernels.linear_attention(q, k, v, feature=feature, causal=True)
    assert torch.allclose(out, w @ v, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("causal", [True, False])
def test_favor_matches_a_float64_brute_force_on_a_layer_with_large_scores(causal):
    """Keys whose norms fall from 80 to 10 along the text, queries of norm 30, head size 256
    at Gemma's scale (1/16): the keys' FAVOR+ exponents span far more than float32 holds
    (e^-87), and the early rows of a causal scan see only keys far below the largest. The
    kernel's output against φ written out in float64 with no shift and no guard."""
    import math

    from attn.features import FAVOR_DEFAULT_DIM, orthogonal_gaussian

    torch.manual_seed(0)
    b, h, n, d, s = 1, 1, 128, 256, 1 / 16
    q = torch.randn(b, h, n, d)
    q = q / q.norm(dim=-1, keepdim=True) * 30
    k = torch.randn(b, h, n, d)
    k = k / k.norm(dim=-1, keepdim=True) * torch.linspace(80, 10, n).view(1, 1, n, 1)
    v = torch.randn(b, h, n, 64)
    omega = orthogonal_gaussian(d, FAVOR_DEFAULT_DIM, 0).double()

    def phi(x):  # exp(ωᵀx − ‖x‖²/2) / √m on x·√s, in float64, unshifted
        x = x.double() * math.sqrt(s)
        return torch.exp(x @ omega - (x * x).sum(-1, keepdim=True) / 2) / math.sqrt(FAVOR_DEFAULT_DIM)

    w = phi(q) @ phi(k).transpose(-1, -2)
    w = torch.tril(w) if causal else w
    expected = (w / w.sum(-1, keepdim=True)) @ v.double()
    assert float(w[w > 0].min()) < 1e-40  # weights far below float32's range: the case itself …
    if causal:  # … and early rows whose whole weight lies there
        assert float(w.sum(-1).min()) < 1e-40
    fast = linear_kernels.linear_attention(q, k, v, feature="favor", causal=causal, scale=s)
    assert fast.dtype == torch.float32
    assert float((fast.double() - expected).abs().max()) < 1e-4
    quadratic = linear_kernels.linear_attention_quadratic(q, k, v, feature="favor", causal=causal, scale=s)
    assert float((quadratic.double() - expected).abs().max()) < 1e-4
