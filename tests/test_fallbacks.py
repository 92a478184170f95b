"""The paths a request takes when the fast one is not there: a FlexAttention compile
that fails (the blocked kernel answers, and the failure is logged once), the composed
pattern through the compiled-kernel path, and the bfloat16 branches of CUDA — all
taken on the CPU by monkeypatching the one function that decides."""

import dataclasses
import logging
from types import SimpleNamespace

import pytest
import torch

from attn import backend, bench, composition, flex, kernels, methods, outputs, patterns
from attn.costs import Shape
from attn.layer import LayerAttention

PATTERN = methods.get("pattern")
N = 200  # more than two flex blocks: the length from which a warm kernel serves


def qkv(n=N, d=16, heads=2, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, n, d, generator=g).to(dtype) for _ in range(3))


@pytest.fixture
def flex_state(monkeypatch):
    """A fresh record of what is compiled, failed and warned, put back after the test."""
    monkeypatch.setattr(flex, "_ready", set())
    monkeypatch.setattr(flex, "_failed", {})
    monkeypatch.setattr(flex, "_log", [])
    monkeypatch.setattr(flex, "_warned", False)
    return flex


@pytest.fixture
def broken_compile(flex_state, monkeypatch):
    """Every compile raises, as it does without a working C++ compiler; counts the tries."""
    tries = []

    def compile_that_fails():
        tries.append(1)
        raise RuntimeError("the compiler is broken today")

    monkeypatch.setattr(flex, "_get_compiled", compile_that_fails)
    return tries


@pytest.fixture
def composed_flex_on_cpu(monkeypatch):
    """``auto`` runs a composition through FlexAttention once warm on CUDA only
    (backend.pattern_uses_flex); here on the CPU too, with the same readiness check."""
    monkeypatch.setattr(backend, "pattern_uses_flex",
                        lambda q, v, causal: flex.is_ready(q, v, causal, kernel="pattern"))


# --- a compile that fails never fails a request ---------------------------------------


@pytest.mark.parametrize("hubs", [(), (0, 120)], ids=["window", "window+hubs"])
def test_a_failing_flex_compile_falls_back_to_the_blocked_kernel_for_window_attention(broken_compile, hubs):
    q, k, v = qkv()
    flex.mark_ready(q, v, True, bool(hubs))  # as if a warm-up had finished
    assert backend.window_backend(q, v, True, 16, hubs) == "flex"
    got = backend.window_attention(q, k, v, window=16, hubs=hubs)
    assert broken_compile == [1]  # the flex path was tried
    torch.testing.assert_close(got, kernels.window_attention_reference(q, k, v, window=16, hubs=hubs),
                               atol=2e-5, rtol=2e-5)
    # the signature is marked failed: the next request goes straight to the blocked kernel
    assert backend.window_backend(q, v, True, 16, hubs) == "blocked"
    assert "RuntimeError: the compiler is broken today" in flex.status()["failed"].values()
    backend.window_attention(q, k, v, window=16, hubs=hubs)
    assert broken_compile == [1]


def test_a_failing_flex_compile_falls_back_to_the_blocked_kernel_for_a_composition(broken_compile,
                                                                                  composed_flex_on_cpu):
    q, k, v = qkv(seed=1)
    p = methods.Params(parts=composition.Composition(window=9, hubs=(3, 150), random=1, random_block=32, seed=2))
    flex.mark_ready(q, v, True, False, kernel="pattern")
    assert PATTERN.backend(q, v, p) == "flex"
    got = PATTERN.run(q, k, v, p)
    assert broken_compile == [1]
    torch.testing.assert_close(got, PATTERN.reference(q, k, v, p), atol=2e-5, rtol=2e-5)
    assert PATTERN.backend(q, v, p) == "blocked"
    assert flex.has_failed(q, v, True, False, kernel="pattern")


def test_a_failing_warm_up_reports_failure_and_leaves_the_blocked_kernel_in_use(broken_compile, monkeypatch):
    monkeypatch.setattr(flex, "available", lambda: True)  # a compiler is there, but it fails
    assert backend.warm((1, 2, 256, 16)) is False
    q, k, v = qkv(n=256)
    assert backend.window_backend(q, v, True, 16) == "blocked"
    assert flex.status()["failed"] and "warm-up failed" in flex.status()["log"][-1]


# --- a failure is logged once -----------------------------------------------------------


def test_a_flex_failure_is_logged_as_one_warning_however_many_calls_fail(broken_compile, composed_flex_on_cpu,
                                                                         monkeypatch, caplog):
    monkeypatch.setattr(flex, "available", lambda: True)
    caplog.set_level(logging.WARNING, logger="attn.flex")
    q, k, v = qkv()
    for hubs in ((), (0,), (5, 60)):  # each ready (again) and failing: three failed requests
        flex.mark_ready(q, v, True, bool(hubs))
        backend.window_attention(q, k, v, window=8, hubs=hubs)
    flex.mark_ready(q, v, True, False, kernel="pattern")
    PATTERN.run(q, k, v, methods.Params(parts=composition.Composition(window=8, local=32)))
    backend.warm((1, 2, 256, 16))
    assert len(broken_compile) == 5  # three window requests, a composition and a warm-up
    warnings = [r for r in caplog.records if r.name == "attn.flex" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "the compiler is broken today" in warnings[0].getMessage()
    assert len([line for line in flex.status()["log"] if "failed" in line]) == 5  # status keeps them all


# --- the composed pattern through the compiled-kernel path -----------------------------


def compiled_stand_in(calls: list):
    """What compiled FlexAttention computes, in plain torch: softmax over the cells that
    both a visited block of the BlockMask and its mask_mod allow. (Torch's eager flex
    attention ignores the blocks, so it would hide a block left out of the lists.)"""

    def run(q, k, v, *, block_mask, scale, return_aux=None):
        calls.append(block_mask)
        n = q.shape[2]
        size = flex.FLEX_BLOCK
        blocks = block_mask.to_dense()[0, 0].bool()  # (query blocks, key blocks)
        in_blocks = blocks.repeat_interleave(size, 0).repeat_interleave(size, 1)[:n, :n]
        allowed = in_blocks & patterns.dense(block_mask.mask_mod, n)
        out = kernels.masked_softmax_reference(q, k, v, allowed, scale)
        if return_aux is None:
            return out
        scores = (q.double() @ k.double().transpose(-1, -2) * scale).masked_fill(~allowed, float("-inf"))
        return out, SimpleNamespace(lse=torch.logsumexp(scores, dim=-1).float())

    return run


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_a_composition_through_the_compiled_kernel_path_matches_the_dense_reference(
        flex_state, composed_flex_on_cpu, monkeypatch, causal):
    calls = []
    monkeypatch.setattr(flex, "_get_compiled", lambda: compiled_stand_in(calls))
    q, k, v = qkv(n=333, seed=3)
    flex.mark_ready(q, v, causal, False, kernel="pattern")
    for c in (composition.Composition(window=40, hubs=(0, 200), random=2, random_block=32, seed=1),
              composition.Composition(window=5, dilated=4, stride=30, local=64)):
        p = methods.Params(parts=c, causal=causal, scale=0.3)
        assert PATTERN.backend(q, v, p) == "flex"
        torch.testing.assert_close(PATTERN.run(q, k, v, p), PATTERN.reference(q, k, v, p), atol=1e-5, rtol=1e-5)
    assert len(calls) == 2 and not flex.status()["failed"]  # both ran on the compiled path
    # the block lists skip far blocks: the compiled kernel is not handed the whole grid
    blocks = -(-333 // flex.FLEX_BLOCK)
    assert int(calls[1].to_dense().sum()) < blocks * (blocks + 1) // 2


def test_where_the_compiled_kernel_returns_its_log_sum_exp_a_compositions_hubs_are_merged(
        flex_state, composed_flex_on_cpu, monkeypatch):
    """On CUDA the compiled kernel returns its log-sum-exp: a composition's hubs leave its
    block lists (the kernel runs the other parts; the hub columns merge in, each hub
    counted once, and the hub rows are whole rows). Here on the CPU, with the stand-in
    for the compiled kernel returning the log-sum-exp as CUDA's does."""
    calls = []
    monkeypatch.setattr(flex, "_get_compiled", lambda: compiled_stand_in(calls))
    monkeypatch.setattr(flex, "returns_lse", lambda device: True)
    q, k, v = qkv(n=333, seed=4)
    for causal in (True, False):
        flex.mark_ready(q, v, causal, False, kernel="pattern")
        # hub 200 lies inside the random blocks or the window of some rows: counted once there
        for c in (composition.Composition(window=40, hubs=(0, 200, 332), random=2, random_block=32, seed=1),
                  composition.Composition(window=5, dilated=4, stride=30, hubs=(17,))):
            p = methods.Params(parts=c, causal=causal, scale=0.3)
            assert PATTERN.backend(q, v, p) == "flex"
            torch.testing.assert_close(PATTERN.run(q, k, v, p), PATTERN.reference(q, k, v, p), atol=1e-5, rtol=1e-5)
            rest = composition.composed_blocks(333, dataclasses.replace(c, hubs=()), causal,
                                               flex.FLEX_BLOCK)
            assert torch.equal(calls[-1].to_dense()[0, 0].bool(), rest)  # no hub line among the visited blocks
    assert len(calls) == 4 and not flex.status()["failed"]


# --- the bfloat16 branches (CUDA's compute dtype) ---------------------------------------


@pytest.fixture
def bfloat16_compute(monkeypatch):
    """The device's compute dtype is bfloat16 (as on CUDA) while the tensors stay on the CPU."""
    for module in (outputs, bench):  # each imported compute_dtype by name
        monkeypatch.setattr(module, "compute_dtype", lambda device: torch.bfloat16)


BF16 = {"atol": 2e-2, "rtol": 2e-2}  # bfloat16 keeps 8 bits of mantissa: ≈ 0.4 % per rounding


@pytest.mark.parametrize("own_window", [None, 8], ids=["full layer", "sliding layer"])
def test_output_errors_in_bfloat16_show_the_fused_kernel_beside_its_float32_twin(bfloat16_compute, own_window):
    q, k, v = qkv(n=90, seed=4)
    layer = LayerAttention(causal=True, window=own_window, scale=0.25)
    res = outputs.method_outputs(q, k, v, layer, window=4, hubs=(0,), features_list=())
    assert res["dtype"] == "bfloat16"
    exact = res["exact"].float()
    torch.testing.assert_close(res["outputs"]["own"], exact, **BF16)
    torch.testing.assert_close(res["outputs"]["own_float32"], exact, atol=1e-5, rtol=1e-5)
    err = outputs.output_errors(q, k, v, layer, window=4, hubs=(0,), features_list=())
    # the error of bfloat16 is rounding: above float32's, below a percent
    assert err["mean"]["own_float32"] < 1e-5 < err["mean"]["own"] < 1e-2


def test_the_benchmark_runs_fused_and_window_kernels_in_bfloat16_near_the_float32_reference(bfloat16_compute):
    s = Shape(heads=2, d=32)
    n = 300
    for name in ("full", "window", "window_hubs", "linear_elu", "pattern"):
        m = methods.get(name)
        want = torch.bfloat16 if name in ("full", "window", "window_hubs") else torch.float32
        assert bench.dtype_of(m, "cpu") == want, name
        q, k, v = bench._inputs(n, s, "cpu", want)
        got = bench.run_method(name, q, k, v, s)()
        assert got.dtype == want, name
        ref = bench.run_method(name, q.float(), k.float(), v.float(), s, backend="reference")()
        torch.testing.assert_close(got.float(), ref, **(BF16 if want == torch.bfloat16 else {"atol": 2e-5,
                                                                                            "rtol": 2e-5}))
    row = bench.measure("window_hubs", n, s, "cpu", repeats=1, memory=False)
    assert row.extra["dtype"] == "bfloat16" and row.backend == "blocked"
