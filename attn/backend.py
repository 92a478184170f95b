"""The one place that chooses a kernel: compiled FlexAttention (:mod:`attn.flex`) once
a warm-up for that kind of call has compiled it and checked it against the blocked
pure-torch kernel (:mod:`attn.kernels`), else the blocked kernel; a compile problem
never fails a request (the blocked kernel answers, and flex remembers the failure).

Window (+ hubs) attention and the playground's compositions (:mod:`attn.composition`)
both go through here; the registry (:mod:`attn.methods`) asks this module to run them
and to say which kernel would run.
"""

from __future__ import annotations

import dataclasses

import torch

from . import flex, kernels, patterns, sparse_kernels
from .composition import Composition, composed_blocks, composed_mask, covers_every_pair, window_and_hubs

BACKENDS = ("auto", "blocked", "flex")


def window_attention(q, k, v, *, window: int, hubs=(), causal: bool = True, scale: float | None = None,
                     backend: str = "auto") -> torch.Tensor:
    """Softmax attention over the window (+ hubs) pattern of :mod:`attn.patterns`.

    ``backend``: ``"auto"`` (compiled FlexAttention when warm, else blocked),
    ``"blocked"`` or ``"flex"`` (compiles on first use). Hubs: the window's output and
    log-sum-exp merge with the hub columns (:func:`attn.kernels.add_hub_columns`), and
    the hub rows are whole rows; the compiled kernel serves the window part only where
    it returns the log-sum-exp (:func:`attn.flex.returns_lse`), else the blocked one."""
    _, _, n, _ = kernels.check_qkv(q, k, v)
    window = patterns.check_window(window)
    hubs = patterns.check_hubs(n, hubs)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use auto, blocked or flex")
    s = kernels.scale_of(q, scale)
    if window >= n:  # the pattern is every (causal) pair: exactly full attention
        return kernels.full_attention(q, k, v, causal=causal, scale=s)
    if backend == "flex" and not compiled_serves(q.device, bool(hubs)):
        raise ValueError("compiled FlexAttention cannot return the log-sum-exp on this device, which the hub "
                         "merge needs: window + hubs runs on the blocked kernel here (backend='blocked' or 'auto')")
    if backend == "flex":
        out = flex.window_attention(q, k, v, window=window, causal=causal, scale=s, with_lse=bool(hubs))
        return _with_hubs(out, q, k, v, window, hubs, causal, s)
    if backend == "auto" and flex.is_ready(q, v, causal, bool(hubs)):
        out = _compiled_or_none(lambda: flex.try_window_attention(q, k, v, window=window, causal=causal, scale=s,
                                                                  with_lse=bool(hubs)),
                                q, v, causal, bool(hubs), "window")
        if out is not None:
            return _with_hubs(out, q, k, v, window, hubs, causal, s)
    return kernels.window_attention_blocked(q, k, v, window=window, hubs=hubs, causal=causal, scale=s)


def _with_hubs(out, q, k, v, window: int, hubs: tuple[int, ...], causal: bool, scale: float) -> torch.Tensor:
    """The compiled window's output, or ``(out, lse)`` with the hubs merged in."""
    if not hubs:
        return out
    return kernels.merge_hubs(q, k, v, *out, window=window, hubs=hubs, causal=causal, scale=scale)


def compiled_serves(device, hubs: bool) -> bool:
    """Whether the compiled kernel can run a window with (or without) hubs on this device:
    with hubs it must return the log-sum-exp the merge needs (:func:`attn.flex.returns_lse`)."""
    return not hubs or flex.returns_lse(device)


def window_backend(q, v, causal: bool = True, window: int | None = None, hubs=()) -> str:
    """Which kernel :func:`window_attention` with ``backend="auto"`` would run."""
    if window is not None and window >= q.shape[2]:
        return "sdpa"
    return "flex" if flex.is_ready(q, v, causal, bool(hubs)) else "blocked"


def composed_attention(q, k, v, c: Composition, *, causal: bool = True, scale: float | None = None,
                       backend: str = "auto") -> torch.Tensor:
    """Softmax attention over a composition: full attention when it covers every pair;
    the window kernels (:func:`window_attention`) when it is a window with or without
    hubs; else compiled FlexAttention over the parts' visited blocks when asked
    (``"flex"``) or warm on CUDA (``"auto"``), or the block-sparse pure-torch kernel."""
    n = kernels.check_qkv(q, k, v)[2]
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use auto, blocked or flex")
    if covers_every_pair(n, c):
        return kernels.full_attention(q, k, v, causal=causal, scale=scale)
    if window_and_hubs(c):  # the window kernels, fastest for what they run
        return window_attention(q, k, v, window=c.window, hubs=c.hubs, causal=causal, scale=scale, backend=backend)
    if backend == "flex" or (backend == "auto" and pattern_uses_flex(q, v, causal)):
        s = kernels.scale_of(q, scale)  # a float, as the warm-up compiled it
        if backend == "flex":
            return _composed_compiled(q, k, v, c, causal, s, flex.sparse_attention)
        out = _compiled_or_none(lambda: _composed_compiled(q, k, v, c, causal, s, flex.try_sparse_attention),
                                q, v, causal, False, "pattern")
        if out is not None:
            return out
    mask_mod = composed_mask(n, c, causal, device=q.device)
    block, visit = sparse_plan(n, c, causal, device=q.device)
    return sparse_kernels.sparse_attention(q, k, v, mask_mod, visit, c.hubs, scale=scale, block=block)


def _composed_compiled(q, k, v, c: Composition, causal: bool, scale: float, call):
    """A composition through one compiled call ``call(q, k, v, mask_mod, visit, scale=,
    with_lse=)`` (None when it did not run). Where the compiled kernel returns its
    log-sum-exp (it always asks for it there: one compiled graph), the hubs leave the
    block lists: the kernel runs the other parts, the hub columns merge in
    (:func:`attn.kernels.add_hub_columns`, counting a hub only where the other parts do
    not) and the hub rows are whole rows. Elsewhere the hub lines are visited blocks."""
    n = q.shape[2]
    with_lse = flex.returns_lse(q.device)
    rest = dataclasses.replace(c, hubs=()) if with_lse else c
    mask_mod = composed_mask(n, rest, causal, device=q.device)
    visit = composed_blocks(n, rest, causal, flex.block_size(q.device), device=q.device)
    out = call(q, k, v, mask_mod, visit, scale=scale, with_lse=with_lse)
    if out is None or not with_lse:
        return out
    out, lse = out
    if not c.hubs:
        return out
    return kernels.merge_hubs(q, k, v, out, lse, hubs=c.hubs, causal=causal, scale=scale, inside=mask_mod)


SPARSE_BLOCKS = (64, 32)  # blocks the blocked composed kernel may take, the default first
SMALLER_IF = 0.75  # a smaller block only when it visits at most this share of the cells (it costs more a cell)


def sparse_plan(n: int, c: Composition, causal: bool, device=None) -> tuple[int, torch.Tensor]:
    """The blocked composed kernel's block and its visited block pairs (hub lines left
    out: the kernel adds the hub columns and rows itself): of SPARSE_BLOCKS, the one that
    visits fewest cells, a smaller one only when it saves a quarter. Narrow parts (a
    window or random blocks of 32) waste most of a 64-block: BigBird's preset visits 254
    keys a row with 64-blocks and 96 with 32-blocks, for 68 cells."""
    best = None
    for block in SPARSE_BLOCKS:
        visit = composed_blocks(n, c, causal, block, device=device, hub_lines=False)
        cells = int(visit.sum()) * block * block
        if best is None or cells <= SMALLER_IF * best[2]:
            best = (block, visit, cells)
    return best[0], best[1]


def composed_backend(q, v, n: int, c: Composition, causal: bool, backend: str = "auto") -> str:
    """Which kernel :func:`composed_attention` would run."""
    if covers_every_pair(n, c):
        return "sdpa"
    if backend != "auto":
        return backend
    if window_and_hubs(c):
        return window_backend(q, v, causal, c.window, c.hubs)
    return "flex" if pattern_uses_flex(q, v, causal) else "blocked"


def compiled(kernel: str, device) -> bool:
    """Whether a compiled kernel of this kind ("window" or "pattern") is warm on device."""
    return flex.has_ready(torch.device(device).type, kernel)


def pattern_uses_flex(q, v, causal: bool) -> bool:
    """Whether ``auto`` runs a composition through compiled FlexAttention: on CUDA once
    warm. On the CPU the block-sparse pure-torch kernel was as fast or faster for every
    preset at every n measured (bench/scaling.py, docs/performance.md), so it runs there."""
    return q.device.type == "cuda" and flex.is_ready(q, v, causal, kernel="pattern")


def _compiled_or_none(call, q, v, causal: bool, hubs: bool, kernel: str):
    """The compiled call's output; None while a warm-up compiles (the blocked kernel
    answers instead) or when it fails (remembered: the blocked kernel serves from then on)."""
    try:
        return call()
    except Exception as exc:  # a compile problem never fails a request
        flex.mark_failed(q, v, causal, hubs, exc, kernel=kernel)
        return None


# --- warm-up: compile, then check against the blocked kernel ------------------------------


def _check_window(q, v, n, causal, hubs, dtype) -> None:
    """Compile the window kernel (with hubs: the one that also returns the log-sum-exp),
    then check it against the blocked kernel on two lengths (the second checks that the
    dynamic-shape kernel serves it unchanged)."""
    for nn_, w, hub_set in [(n, 64, (0, n // 3)), (n // 2 + 3, 17, (5,))]:
        hub_set = hub_set if hubs else ()
        # fresh contiguous tensors, as requests pass (a slice's strides would be another specialisation)
        qq, kk, vv = (t.new_empty(*t.shape[:2], nn_, t.shape[-1]).normal_() for t in (q, q, v))
        s = qq.shape[-1] ** -0.5  # a float, as requests pass
        got = _with_hubs(flex.call_window(qq, kk, vv, w, causal, s, with_lse=bool(hubs)), qq, kk, vv, w, hub_set,
                         causal, s)
        want = kernels.window_attention_blocked(qq, kk, vv, window=w, hubs=hub_set, causal=causal)
        tol = 2e-2 if dtype != torch.float32 else 1e-4
        if not torch.allclose(got.float(), want.float(), atol=tol, rtol=tol):
            raise RuntimeError("compiled FlexAttention disagrees with the blocked kernel")


def _check_pattern(q, v, n, causal, hubs, dtype) -> None:
    """Compile the composed-pattern kernel, then check it against the blocked kernel on
    two lengths and two compositions, causal and not (the first with hubs: where the
    kernel returns its log-sum-exp, they are merged in)."""
    cases = ((n, True, Composition(window=64, hubs=(0, n // 3), random=2, random_block=32, seed=1)),
             (n // 2 + 3, False, Composition(window=9, dilated=4, stride=5, local=32)))
    for nn_, causal_, c in cases:
        qq, kk, vv = (torch.randn_like(t[:, :, :nn_]).contiguous() for t in (q, q, v))
        got = _composed_compiled(qq, kk, vv, c, causal_, qq.shape[-1] ** -0.5, flex.call_sparse)
        mask_mod = composed_mask(nn_, c, causal_, device=q.device)
        want = sparse_kernels.sparse_attention(qq, kk, vv, mask_mod,
                                               composed_blocks(nn_, c, causal_, kernels.BLOCK, q.device,
                                                                              hub_lines=False), c.hubs)
        tol = 2e-2 if dtype != torch.float32 else 1e-4
        if not torch.allclose(got.float(), want.float(), atol=tol, rtol=tol):
            raise RuntimeError("compiled FlexAttention disagrees with the blocked kernel on a composition")


def warm(q_shape=(1, 4, 1024, 64), dtype=torch.float32, device="cpu", causal=True, dv=None, hubs=False,
         kernel: str = "window") -> bool:
    """Compile one kind of call and check it (see :func:`attn.flex.warm`); True when ready."""
    return flex.warm(q_shape, dtype, device, causal, dv, hubs, kernel,
                     check=_check_pattern if kernel == "pattern" else _check_window)


def start_warmup(signatures: list[dict]):
    """Warm several kinds of call in one background thread (daemon); returns it."""
    return flex.start_warmup(signatures, warm)

