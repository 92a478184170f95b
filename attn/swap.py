"""The model feels the catch: run it with the attention of chosen layers replaced by a
method of the registry (:mod:`attn.methods`, tag ``swap``) and measure what it
loses on the text, against the unmodified model, over the n − 1 predicted
positions: perplexity, mean KL(unmodified ‖ swapped) and top-1 agreement.

On an encoder (attention both ways) nothing is "next": each of a seeded sample of at
most :data:`MASKED_POSITIONS` positions is masked in its own copy of the text, and the
model's masked-word head predicts it (pseudo-perplexity), with every replacement
reading both ways as the model does; all the copies go through one batched forward.

``own`` keeps each swapped layer's own pattern (causal or both ways, as the model reads;
its own window in a layer that slides one) through the fused SDPA kernel: the control,
which must reproduce the model.
``window`` / ``window_hubs`` replace the pattern of the swapped layers, whatever it
was (so w means w in a sliding layer too); ``topk`` / ``topk_indexer`` keep each query's
k highest-scoring keys among the keys the layer reads (its direction, and in a sliding layer
its own window; k: the swap's, else the window's cells a row); ``linear_φ`` replaces softmax
by φ.
Layers not swapped keep their own attention.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import composition, methods, patterns
from .model import LoadedModel, Replace

SWAP_MAX_TOKENS = 256
_LOGIT_CHUNK = 64  # positions whose next-token distributions are held at once (64 × 262,144 float32: 67 MB;
# the head's weights are read once a chunk, so 32 took half as long again: bench/model_sweep.py)
WINDOWS = (4, 16, 64)  # the standard sweep's windows
MASKED_POSITIONS = 32  # an encoder's positions masked and predicted, each in its own copy
MASK_SEED = 0  # the same positions for every swap of a text


@dataclass(frozen=True)
class Swap:
    """One setting: which method replaces the attention of which layers.

    ``layers``: ``"all"``, ``"sliding"`` or layer indices. ``series`` names the line or
    group a page draws it in (it does not change the measurement)."""

    method: str
    layers: str | tuple[int, ...] = "all"
    window: int | None = None
    hubs: tuple[int, ...] = ()
    series: str = ""
    parts: composition.Composition | None = None  # the ``pattern`` method's composition (always made causal)
    k: int | None = None  # top-k's keys a query keeps (None: as many cells a row as ``window``)


@dataclass(frozen=True)
class SwapResult:
    swap: Swap
    layers: tuple[int, ...]  # resolved
    n: int  # tokens used (budget applied)
    truncated: int
    perplexity: float
    base_perplexity: float
    top1_agreement: float
    kl: float
    seconds: float
    predicted: tuple[int, ...] = ()  # an encoder's masked positions (a decoder predicts positions 1 … n − 1)


STACK_EVERY = 4  # a hybrid stack: the method in three of every four layers, every fourth kept exact
WINDOW_STACK_EVERY = 6  # a window in five of every six layers, every sixth full (Gemma 3's own layout)


def stack_layers(n_layers: int, every: int) -> tuple[int, ...]:
    """The layers a hybrid stack replaces: each layer i except those with (i + 1) mod
    ``every`` = 0, which keep their own attention."""
    return tuple(i for i in range(n_layers) if (i + 1) % every)


def kept_exact(n_layers: int, every: int) -> tuple[int, ...]:
    """The layers a hybrid stack leaves as the model has them."""
    return tuple(i for i in range(n_layers) if (i + 1) % every == 0)


def standard_sweep(hubs: tuple[int, ...], single_layer: int, sliding: bool = True, *, n_layers: int = 0,
                   sliding_layers: tuple[int, ...] = ()) -> list[Swap]:
    """Step 6's sweep: the control; window and window + hubs at each of
    :data:`WINDOWS` in every layer and (``sliding``: where the model has sliding layers)
    in the sliding layers only; top-k (oracle and indexer) at each window's cells a row in
    every layer; each linear φ in every layer and in one layer. With ``n_layers`` (at least
    :data:`STACK_EVERY`), the hybrid stacks too: each linear φ and top-k (the oracle, at
    each window's cells) in three of every four layers, and a window in five of every six
    (left out where that is the model's own sliding layers, ``sliding_layers``: the
    sliding-layers series measures it already)."""
    out = [Swap(methods.own().name, "all", series="control")]
    plain, with_hubs = methods.window().name, methods.window(hubs=True).name
    for layers in ("all", "sliding") if sliding else ("all",):
        for w in WINDOWS:
            out.append(Swap(plain, layers, window=w, series=f"{plain}/{layers}"))
            out.append(Swap(with_hubs, layers, window=w, hubs=hubs, series=f"{with_hubs}/{layers}"))
    for m in methods.tagged(methods.SWAP, lambda m: m.data_dependent):  # top-k at each window's cells a row
        for w in WINDOWS:
            out.append(Swap(m.name, "all", window=w, series=f"{m.name}/all"))
    for m in methods.tagged(methods.SWAP, lambda m: m.family == "linear"):
        out.append(Swap(m.name, "all", series="linear/all"))
        out.append(Swap(m.name, (single_layer,), series="linear/one"))
    if n_layers >= STACK_EVERY:
        stack = stack_layers(n_layers, STACK_EVERY)
        for m in methods.tagged(methods.SWAP, lambda m: m.family == "linear"):
            out.append(Swap(m.name, stack, series="linear/stack"))
        oracle = methods.top_k().name
        for w in WINDOWS:
            out.append(Swap(oracle, stack, window=w, series=f"{oracle}/stack"))
    if n_layers >= WINDOW_STACK_EVERY:
        stack = stack_layers(n_layers, WINDOW_STACK_EVERY)
        if stack != tuple(sliding_layers):
            plain = methods.window().name
            for w in WINDOWS:
                out.append(Swap(plain, stack, window=w, series=f"{plain}/stack"))
    return out


def hub_pair(window: int = 4) -> list[Swap]:
    """Step 4's evidence: a small window in every layer, without and with the first
    token as hub."""
    return [Swap(methods.window().name, "all", window=window),
            Swap(methods.window(hubs=True).name, "all", window=window, hubs=(0,))]


class NoLanguageHead(ValueError):
    """The model's folder lacks the weights of its language-model head: a swap's numbers
    (perplexity, KL, top-1) would read a head initialised at random, so none is made."""


class TextTooShort(ValueError):
    """The text has fewer than two tokens: nothing to predict from (the one failure a
    reader can mend by writing more; any other is the app's)."""


def _ids(model: LoadedModel, text: str, max_tokens: int) -> tuple[list[int], int]:
    budget = int(max_tokens)
    if budget < 2:
        raise ValueError(f"max_tokens must be >= 2, got {max_tokens}")
    budget = min(budget, model.arch.max_positions or budget)  # never past the model's positions (GPT-2's)
    ids, _ = model.encode(text)
    if len(ids) < 2:
        raise TextTooShort("the text is too short: at least two tokens are needed (one to predict from)")
    return ids[:budget], len(ids)


def _needs_head(model: LoadedModel) -> None:
    if not model.has_head:
        raise NoLanguageHead("the model's folder has no language-model head (missing: "
                             + ", ".join(model.head_missing) + ")")


def _check(model: LoadedModel, swap: Swap) -> tuple[methods.Method, list[int]]:
    _needs_head(model)
    if not isinstance(swap, Swap):
        raise ValueError(f"a swap must be a Swap, got {swap!r}")
    method = methods.get(swap.method)
    if methods.SWAP not in method.tags:
        raise ValueError(f"method {swap.method!r} cannot replace the model's attention")
    if method.family == "pattern" and swap.parts is None and swap.window is None:
        raise ValueError("the pattern method needs its parts")
    if method.family == "window":
        if swap.window is None:
            raise ValueError(f"method {swap.method!r} needs a window size")
        patterns.check_window(swap.window)
    if method.data_dependent:
        method.keep_of(methods.Params(window=swap.window, k=swap.k))  # a k, or a window to take it from
    return method, model.resolve_layers(swap.layers)


def measure(model: LoadedModel, text: str, swap: Swap, *, max_tokens: int = SWAP_MAX_TOKENS) -> SwapResult:
    """The model with ``swap`` applied, against the unmodified model, on ``text``."""
    _, layers = _check(model, swap)
    ids, total = _ids(model, text, max_tokens)
    if not model.causal:
        masked = _masked(model, ids)
        return _measure_masked(model, ids, total, masked, _masked_logprobs(model, masked, None), swap, layers)
    return _measure(model, ids, total, model.base_hidden(ids), swap, layers)


def masked_positions(model: LoadedModel, ids: list[int]) -> list[int]:
    """An encoder's positions to mask: a seeded sample of at most MASKED_POSITIONS of the
    text's own tokens (never a special one such as [CLS] or [SEP]), in order."""
    own = [i for i, t in enumerate(ids) if model.tokenizer.special_label(t) is None]
    return sorted(random.Random(MASK_SEED).sample(own, min(MASKED_POSITIONS, len(own))))


def _masked(model: LoadedModel, ids: list[int]) -> dict:
    """One copy of the text per masked position, that position replaced by the mask token."""
    if model.mask_token_id is None:
        raise ValueError("this encoder's tokenizer has no mask token to predict")
    positions = masked_positions(model, ids)
    if not positions:
        raise TextTooShort("the text has no token of its own to mask")
    batch = torch.tensor([ids] * len(positions), device=model.device)
    rows = torch.arange(len(positions), device=model.device)
    where = torch.tensor(positions, device=model.device)
    batch[rows, where] = model.mask_token_id
    return {"batch": batch, "rows": rows, "where": where, "positions": tuple(positions),
            "targets": torch.tensor([ids[p] for p in positions], device=model.device)}


def _masked_logprobs(model: LoadedModel, masked: dict, plan: Replace | None) -> torch.Tensor:
    """Log-probabilities ``(positions, vocab)`` of each masked word, unmodified or under ``plan``."""
    def run():
        return model.masked_logits(masked["batch"])[masked["rows"], masked["where"]]

    logits = run() if plan is None else model.run_plan(plan, run)
    return torch.log_softmax(logits, dim=-1)


def _measure_masked(model: LoadedModel, ids, total, masked: dict, base: torch.Tensor, swap: Swap,
                    layers: list[int]) -> SwapResult:
    t0 = time.perf_counter()
    n = len(ids)
    hubs = patterns.check_hubs(n, swap.hubs) if methods.get(swap.method).with_hubs else ()
    if swap.parts is not None:
        composition.check_composition(n, swap.parts)
    params = methods.Params(window=swap.window, hubs=hubs, parts=swap.parts, causal=False, k=swap.k)
    ls = _masked_logprobs(model, masked, Replace(swap.method, frozenset(layers), params))
    t = masked["targets"][:, None]
    p = len(masked["positions"])
    nll, base_nll = float(-ls.gather(1, t).sum()) / p, float(-base.gather(1, t).sum()) / p
    return SwapResult(swap=swap, layers=tuple(layers), n=n, truncated=total - n,
                      perplexity=math.exp(nll), base_perplexity=math.exp(base_nll),
                      top1_agreement=float((base.argmax(-1) == ls.argmax(-1)).float().mean()),
                      kl=float((base.exp() * (base - ls)).sum()) / p, seconds=time.perf_counter() - t0,
                      predicted=masked["positions"])


def sweep(model: LoadedModel, text: str, swaps: list[Swap], *, max_tokens: int = SWAP_MAX_TOKENS,
          progress: Callable[[int, object], None] | None = None) -> list:
    """:func:`measure` for several swaps on one text, the unmodified model's
    predictions computed once. Each entry is a SwapResult, or the ValueError that
    swap raised."""
    _needs_head(model)
    ids, total = _ids(model, text, max_tokens)
    masked = None if model.causal else _masked(model, ids)
    base = _base_logprobs(model, ids) if model.causal else _masked_logprobs(model, masked, None)
    out = []
    for i, s in enumerate(swaps):
        try:
            _, layers = _check(model, s)
            r = (_measure(model, ids, total, base, s, layers) if model.causal
                 else _measure_masked(model, ids, total, masked, base, s, layers))
        except ValueError as exc:
            r = exc
        out.append(r)
        if progress:
            progress(i, r)
    return out


def _measure(model: LoadedModel, ids, total, base, swap: Swap, layers: list[int]) -> SwapResult:
    t0 = time.perf_counter()
    n = len(ids)
    hubs = patterns.check_hubs(n, swap.hubs) if methods.get(swap.method).with_hubs else ()
    x = torch.tensor([ids], device=model.device)
    # causal always: a token that could see the one it is asked to predict would make
    # the model look better than it is
    params = methods.Params(window=swap.window, hubs=hubs, parts=swap.parts, causal=True, k=swap.k)
    if swap.parts is not None:
        composition.check_composition(n, swap.parts)
    plan = Replace(swap.method, frozenset(layers), params)
    swapped = model.run_plan(plan, lambda: model.hidden(x))
    m = _compare(model, base, swapped, torch.tensor(ids[1:], device=model.device))
    return SwapResult(swap=swap, layers=tuple(layers), n=n, truncated=total - n,
                      perplexity=math.exp(m["nll"]), base_perplexity=math.exp(m["base_nll"]),
                      top1_agreement=m["top1"], kl=m["kl"], seconds=time.perf_counter() - t0)


def _base_logprobs(model: LoadedModel, ids: list[int]) -> list[torch.Tensor]:
    """The unmodified model's next-token log-probabilities, chunk by chunk (held only
    for the length of a sweep)."""
    hidden = model.base_hidden(ids)
    with torch.no_grad():
        n_pred = len(ids) - 1
        return [torch.log_softmax(model.logits(hidden[0, s:min(n_pred, s + _LOGIT_CHUNK)]), dim=-1)
                for s in range(0, n_pred, _LOGIT_CHUNK)]


def _compare(model: LoadedModel, base, swapped_hidden, targets) -> dict:
    """Mean NLL of both, top-1 agreement and mean KL(base ‖ swapped) over the
    predicted positions, a few positions at a time (each distribution has a
    vocabulary's worth of entries). ``base``: the unmodified hidden states, or their
    log-probabilities by chunk."""
    n_pred = targets.shape[0]
    nll = base_nll = kl = agree = 0.0
    with torch.no_grad():
        for c, s in enumerate(range(0, n_pred, _LOGIT_CHUNK)):
            e = min(n_pred, s + _LOGIT_CHUNK)
            if isinstance(base, list):
                lb = base[c]
            else:
                lb = torch.log_softmax(model.logits(base[0, s:e]), dim=-1)  # (c, vocab)
            ls = torch.log_softmax(model.logits(swapped_hidden[0, s:e]), dim=-1)
            t = targets[s:e]
            base_nll += float(-lb.gather(1, t[:, None]).sum())
            nll += float(-ls.gather(1, t[:, None]).sum())
            kl += float((lb.exp() * (lb - ls)).sum())
            agree += float((lb.argmax(-1) == ls.argmax(-1)).sum())
    return {"nll": nll / n_pred, "base_nll": base_nll / n_pred, "kl": kl / n_pred, "top1": agree / n_pred}
