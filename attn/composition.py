"""The playground's composed patterns, once: a :class:`Composition` of parts (a
sliding window, a dilated window, hubs, BigBird's random blocks, block-local
attention), each part's predicate over :mod:`attn.patterns`, the block pairs it may
touch and the check of its settings; the known designs (presets); the composition's
mask, its visited blocks and its exact cell count. No kernel and no dispatch here: the
kernels run what this describes (:mod:`attn.backend` chooses which)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import patterns


@dataclass(frozen=True)
class Composition:
    """The playground's composed pattern: the union of the parts of :data:`PARTS` that
    are on (each off at its neutral value), always with the diagonal. Causality is the
    :class:`Params`' own."""

    window: int = 0  # sliding window w (0: off)
    dilated: int = 0  # dilated window: tokens on each side, itself the first (0: off)
    stride: int = 2  # … every stride-th token
    hubs: tuple[int, ...] = ()  # hub positions (empty: off)
    random: int = 0  # BigBird's random blocks per query block (0: off)
    random_block: int = 16  # … of this many tokens
    seed: int = 0  # … drawn with this seed
    local: int = 0  # block-local: blocks of this many tokens (0: off)


# --- the playground's parts: one entry each ------------------------------------------


class CompositionError(ValueError):
    """A setting of a composition that does not fit the text; ``code`` names it for the
    reader's language (``playground.err_<code>``), ``values`` fill its message."""

    def __init__(self, code: str, **values):
        super().__init__(f"{code}: {values}")
        self.code, self.values = code, values


def _count(value, lo: int, hi: int, code: str, **values) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise CompositionError(code, lo=lo, hi=hi, value=value, **values)


@dataclass(frozen=True)
class Part:
    """One part of a composed pattern: its predicate (from :mod:`attn.patterns`, built
    with tensors, neutral when the part is off), the block pairs it may touch, and the
    check of its settings on a text of n tokens."""

    name: str
    label_key: str
    on: Callable[[Composition], bool]
    off: dict  # the settings that switch it off
    mask: Callable[..., patterns.MaskMod]  # (n, composition, device) -> mask_mod
    blocks: Callable[..., torch.Tensor] | None  # (n, composition, q_lo, q_hi, k_lo, k_hi, block) -> bool pairs
    check: Callable[[int, Composition], None]


def _t(x, device):
    return torch.tensor(x, device=device)


def _check_window(n, c):
    # wider than the text is allowed: the model's own window of 512 on a shorter text
    # sees every earlier token, which is the lesson (the page says so)
    _count(c.window, 1, 2**31 - 1, "window", n=n)


def _check_dilated(n, c):
    _count(c.stride, 1, n, "stride", n=n)
    _count(c.dilated, 1, max(1, (n - 1) // c.stride + 1), "dilated", n=n, stride=c.stride)


def _check_hubs(n, c):
    for h in c.hubs:
        _count(h, 0, n - 1, "hub", n=n)


def _check_random(n, c):
    _count(c.random_block, 1, n, "random_block", n=n)
    others = max(1, -(-n // c.random_block) - 1)
    _count(c.random, 1, others, "random", n=n, block=c.random_block)
    _count(c.seed, 0, 2**32 - 1, "seed")


def _check_local(n, c):
    _count(c.local, 2, max(2, n), "local", n=n)


def _dynamic(t: torch.Tensor) -> torch.Tensor:
    """A tensor a mask closes over, its sizes dynamic for the compiler from the first
    compile (else a text of another length recompiles the kernel)."""
    for dim in range(t.dim()):
        torch._dynamo.maybe_mark_dynamic(t, dim)
    return t


def _random_mask(n, c, device):
    table = _dynamic(patterns.random_table(n, max(1, c.random_block), c.random, c.seed, device=device))
    return patterns.random_block_mask(table, _t(max(1, c.random_block), device))


def _random_pairs(n, c, q_lo, q_hi, k_lo, k_hi, block):
    table = patterns.random_table(n, c.random_block, c.random, c.seed, device=q_lo.device)
    return patterns.random_blocks(table, c.random_block, n, block)


PARTS: dict[str, Part] = {p.name: p for p in [
    Part("window", "parts.window", lambda c: c.window > 0, {"window": 0},
         lambda n, c, dev: patterns.window_mask(_t(c.window, dev)),
         lambda n, c, ql, qh, kl, kh, b: patterns.band_blocks(ql, qh, kl, kh, c.window), _check_window),
    Part("dilated", "parts.dilated", lambda c: c.dilated > 0, {"dilated": 0},
         lambda n, c, dev: patterns.dilated_mask(_t(c.dilated, dev), _t(max(1, c.stride), dev)),
         lambda n, c, ql, qh, kl, kh, b: patterns.dilated_blocks(ql, qh, kl, kh, c.dilated, c.stride), _check_dilated),
    Part("hubs", "parts.hubs", lambda c: bool(c.hubs), {"hubs": ()},
         lambda n, c, dev: patterns.hub_mask(_dynamic(patterns.hub_flags(n, c.hubs, device=dev))),
         None, _check_hubs),  # hub rows and columns: whole rows and columns, handled by the kernels
    Part("random", "parts.random", lambda c: c.random > 0, {"random": 0},
         _random_mask, _random_pairs, _check_random),
    Part("local", "parts.local", lambda c: c.local > 1, {"local": 0},
         lambda n, c, dev: patterns.block_local_mask(_t(max(1, c.local), dev)),
         lambda n, c, ql, qh, kl, kh, b: patterns.local_blocks(ql, qh, kl, kh, c.local), _check_local),
]}


def check_composition(n: int, c: Composition) -> Composition:
    """The composition, when every part that is on fits a text of n tokens; else a
    :class:`CompositionError` naming the first setting that does not."""
    if not isinstance(c, Composition):
        raise ValueError(f"a composition must be a Composition, got {c!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for f in dataclasses.fields(c):
        values = getattr(c, f.name)
        for v in values if isinstance(values, tuple) else (values,):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{f.name} must hold whole numbers >= 0, got {values!r}")
    for part in PARTS.values():
        if part.on(c):
            part.check(n, c)
    return c


# the playground's presets: known designs in one click (the page and bench/scaling.py)
PRESETS = ("longformer", "bigbird", "model", "sink")
PRESET_WINDOW = 32


def preset(name: str, hubs: tuple[int, ...], model_window: int) -> Composition:
    """Longformer: a window and global tokens (``hubs``); BigBird: the same plus two
    random blocks of 32 per query block; the model's own: its sliding window (applied to
    its sliding layers); the sink lesson: a window and the first token alone as hub."""
    if name == "longformer":
        return Composition(window=PRESET_WINDOW, hubs=tuple(hubs))
    if name == "bigbird":
        return Composition(window=PRESET_WINDOW, hubs=tuple(hubs), random=2, random_block=32)
    if name == "model":
        return Composition(window=model_window)
    if name == "sink":
        return Composition(window=PRESET_WINDOW, hubs=(0,))
    raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")


def composition_on_prefix(n: int, c: Composition) -> Composition:
    """The composition on a text's first n tokens (the reach grids, the swap's token
    budget): hubs past them dropped, every size at most n, as many random blocks as
    the shorter text has; the random blocks are drawn again for n tokens."""
    block = min(c.random_block, n)
    others = max(0, -(-n // max(1, block)) - 1)
    return dataclasses.replace(c, window=min(c.window, n), hubs=tuple(h for h in c.hubs if h < n),
                    dilated=min(c.dilated, max(1, (n - 1) // max(1, c.stride) + 1)) if c.dilated else 0,
                    stride=min(c.stride, n), random=min(c.random, others), random_block=block,
                    local=min(c.local, n) if c.local > 1 else c.local)


def composed_mask(n: int, c: Composition, causal: bool = True, device=None) -> patterns.MaskMod:
    """The union of every part (those off are empty), the diagonal, then causality
    when on: one code path for every composition, its settings in tensors."""
    visible = patterns.or_masks(patterns.diagonal_mask, *(p.mask(n, c, device) for p in PARTS.values()))
    return patterns.and_masks(visible, patterns.causal_switch(_t(bool(causal), device)))


def composed_blocks(n: int, c: Composition, causal: bool, block: int, device=None, hub_lines: bool = True):
    """bool (blocks × blocks): the block pairs of ``block`` tokens holding the pattern's
    cells. ``hub_lines=False`` leaves out the whole rows and columns of the hubs (the
    blocked kernel adds those itself)."""
    starts, ends = patterns.block_bounds(n, block, device)
    q_lo, q_hi, k_lo, k_hi = starts[:, None], ends[:, None], starts[None, :], ends[None, :]
    visit = torch.eye(len(starts), dtype=torch.bool, device=device)
    for p in PARTS.values():
        if p.on(c) and p.blocks is not None:
            visit |= p.blocks(n, c, q_lo, q_hi, k_lo, k_hi, block)
    if hub_lines and c.hubs:
        hub_blocks = torch.zeros(len(starts), dtype=torch.bool, device=device)
        hub_blocks[torch.tensor(c.hubs, device=device) // block] = True
        visit |= hub_blocks[None, :] | hub_blocks[:, None]
    if causal:
        visit &= k_lo <= q_hi
    return visit


def window_and_hubs(c: Composition) -> bool:
    """Whether the composition is a sliding window with or without hubs and nothing
    else: the window (+ hubs) pattern of :mod:`attn.patterns`, which the window kernels
    run (three of the four presets are)."""
    return PARTS["window"].on(c) and not any(p.on(c) for name, p in PARTS.items() if name not in ("window", "hubs"))


def covers_every_pair(n: int, c: Composition) -> bool:
    """A composition that sees every pair (a window, a stride-1 dilated window or a
    local block as long as the text): run as full attention."""
    return c.window >= n or (c.stride == 1 and c.dilated >= n) or c.local >= n


def composed_cells(n: int, c: Composition, causal: bool = True, block: int = 64) -> int:
    """Exact count of the composed pattern's cells (the predicate on every cell of the
    block pairs that can hold one)."""
    check_composition(n, c)
    full = n * (n + 1) // 2 if causal else n * n
    if covers_every_pair(n, c):
        return full
    return patterns.count_cells(n, composed_mask(n, c, causal), composed_blocks(n, c, causal, block), block)
