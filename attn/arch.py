"""What a model's attention is, read from the model itself: layers, heads, key/value
heads, head size, each layer's scale, soft cap, learned sink logits and sliding window,
causal or bidirectional — one :class:`LayerAttention` a layer, the one object every
measurement of the app reads (never loose keywords).

Nothing here is assumed of a family. :func:`probe` runs the model once on two tokens
with an attention function that only records how each layer calls it (transformers'
``AttentionInterface``: query, key and value as the layer made them, its ``scaling``,
its ``softcap``, its ``sliding_window`` where the layer passes one, the module's
``is_causal``); :func:`windows_of` reads the windows a layer does not pass from the
config, as transformers' masks do (``layer_types``, else ``sliding_window`` on every
layer, else none). Which pairs a layer attends to is the registry's ``own`` pattern with
that window, causal or not (``Analysis.model_mask``, attn.patterns): ``|i − j| < w``, and
``j ≤ i`` when causal, as transformers' masks have it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from .layer import LayerAttention
from .stats import prefix_lengths

_NOT_PASSED = object()
_counter = itertools.count()


@dataclass(frozen=True)
class Architecture:
    """One model's attention, layer by layer (tuples have one entry per layer)."""

    family: str  # the config's model_type: "gemma3_text", "llama", "gpt2", "bert", …
    n_layers: int
    n_heads: int
    kv_heads: int  # key/value heads (grouped-query attention when fewer than n_heads)
    head_dim: int
    causal: bool
    windows: tuple[int | None, ...]  # each layer's sliding window (None: the whole text)
    scales: tuple[float, ...]  # the factor each layer multiplies q·kᵀ by
    softcaps: tuple[float | None, ...]  # tanh soft-capping of the logits (Gemma 2), or None
    max_positions: int | None  # the longest input the model's positions allow
    parameters: int
    sinks: tuple[tuple[float, ...] | None, ...] = ()  # each layer's learned sink logits per head (gpt-oss)

    @property
    def layers(self) -> tuple[LayerAttention, ...]:
        """Each layer's attention, as one object."""
        sinks = self.sinks or (None,) * self.n_layers
        return tuple(LayerAttention(causal=self.causal, window=w, scale=s, softcap=c, sinks=k, heads=self.n_heads,
                                    kv_heads=self.kv_heads)
                     for w, s, c, k in zip(self.windows, self.scales, self.softcaps, sinks))

    @property
    def groups(self) -> int:
        """Query heads per key/value head."""
        return self.n_heads // self.kv_heads

    @property
    def sliding_window(self) -> int:
        """The window of the sliding layers (0 when no layer slides)."""
        return next((w for w in self.windows if w is not None), 0)

    @property
    def layer_types(self) -> list[str]:
        return ["sliding" if w is not None else "full" for w in self.windows]

    def qkv_bytes(self, n: int) -> int:
        """The queries, keys and values of every layer on n tokens, as float32."""
        return self.n_layers * self.head_dim * 4 * (self.n_heads + 2 * self.kv_heads) * n

    def analysis_bytes(self, n: int) -> int:
        """What an analysis of n tokens keeps: the queries, keys and values as float32 (its
        weights are recomputed, never kept); an encoder's queries and keys on the text's
        prefixes too (Analysis.prefix: less than as many again). Linear in n."""
        prefixes = 0 if self.causal else sum(prefix_lengths(n)[:-1])
        return self.qkv_bytes(n) + self.n_layers * self.head_dim * 4 * (self.n_heads + self.kv_heads) * prefixes

    def token_budget(self, ceiling: int, room: int) -> int:
        """The most tokens an analysis reads: at most ``ceiling`` (the device's), at most
        the model's positions, and no more than keep within ``room`` bytes (at least 16)."""
        top = min(ceiling, self.max_positions or ceiling)
        if self.analysis_bytes(top) <= room:
            return top
        lo, hi = 16, top  # the largest n whose analysis fits: analysis_bytes grows with n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.analysis_bytes(mid) <= room else (lo, mid - 1)
        return lo


@dataclass
class Call:
    """How one attention layer called the attention function."""

    module: torch.nn.Module
    heads: int
    kv_heads: int
    head_dim: int
    scale: float
    softcap: float | None
    window: object  # the layer's sliding_window argument, or _NOT_PASSED
    causal: bool | None
    sinks: tuple[float, ...] | None = None  # the learned sink logits it passes (``s_aux``), per head


def probe(model, forward_kwargs: dict | None = None) -> list[Call]:
    """Each attention layer's call, in the order the model makes them, from one forward
    pass on two tokens. Raises ValueError when no layer calls through transformers'
    attention interface (its attention cannot be read)."""
    calls: list[Call] = []

    def record(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        scale = scaling if scaling is not None else getattr(module, "scaling", query.shape[-1] ** -0.5)
        calls.append(Call(module=module, heads=query.shape[1], kv_heads=key.shape[1], head_dim=query.shape[-1],
                          scale=float(scale), softcap=kwargs.get("softcap"),
                          window=kwargs.get("sliding_window", _NOT_PASSED),
                          causal=getattr(module, "is_causal", None),
                          sinks=tuple(float(x) for x in kwargs["s_aux"].detach().flatten().tolist())
                          if kwargs.get("s_aux") is not None else None))
        heads = query.shape[1]
        k = repeat_kv(key, heads)
        v = repeat_kv(value, heads)
        out = torch.nn.functional.scaled_dot_product_attention(query, k, v)
        return out.transpose(1, 2).contiguous(), None

    name = f"atlas_probe_{next(_counter)}"
    AttentionInterface.register(name, record)
    AttentionMaskInterface.register(name, eager_mask)
    own = model.config._attn_implementation
    model.set_attn_implementation(name)
    try:
        with torch.no_grad():
            device = next(model.parameters()).device
            model.base_model(input_ids=torch.zeros(1, 2, dtype=torch.long, device=device), **(forward_kwargs or {}))
    finally:
        model.set_attn_implementation(own)
    if not calls:
        raise ValueError("its attention layers do not call transformers' attention interface")
    return calls


def repeat_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """Key or value heads ``(b, kv, n, d)`` repeated to ``heads`` query heads, each key
    head serving ``heads // kv`` consecutive query heads (grouped-query attention);
    one shared head is a view, not a copy."""
    kv = x.shape[1]
    if kv == heads:
        return x
    if kv == 1:
        return x.expand(-1, heads, -1, -1)
    return x.repeat_interleave(heads // kv, dim=1)


def windows_of(config, n_layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window as the config gives it: ``layer_types`` where it has
    them (Gemma 2 / 3; Qwen 2 / 3 derive them from ``use_sliding_window`` and
    ``max_window_layers``), else ``sliding_window`` on every layer (Mistral, Phi-3),
    else none."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types is not None and len(types) == n_layers:
        return tuple(int(window) if t == "sliding_attention" and window else None for t in types)
    return tuple(int(window) if window else None for _ in range(n_layers))


def read(model, forward_kwargs: dict | None = None) -> tuple[Architecture, dict[int, int]]:
    """The model's Architecture, and each attention module's layer index (by the
    module's id: DistilBERT's layers do not know their own)."""
    calls = probe(model, forward_kwargs)
    cfg = model.config
    n = len(calls)
    first = calls[0]
    if any((c.heads, c.kv_heads, c.head_dim) != (first.heads, first.kv_heads, first.head_dim) for c in calls):
        raise ValueError("its layers do not all have the same heads and head size")
    configured = windows_of(cfg, n)
    windows = tuple(configured[i] if c.window is _NOT_PASSED else (int(c.window) if c.window else None)
                    for i, c in enumerate(calls))
    causal_flags = {c.causal for c in calls}
    if None in causal_flags or len(causal_flags) != 1:
        causal = bool(getattr(cfg, "is_decoder", False)) or "ForCausalLM" in type(model).__name__
    else:
        causal = causal_flags.pop()
    max_pos = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    # RoBERTa's family numbers positions from its padding index + 1: that many fewer are left
    pad = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)
    if max_pos and isinstance(pad, int):
        max_pos = int(max_pos) - (pad + 1)
    arch = Architecture(
        family=str(getattr(cfg, "model_type", type(model).__name__)),
        n_layers=n, n_heads=first.heads, kv_heads=first.kv_heads, head_dim=first.head_dim, causal=bool(causal),
        windows=windows, scales=tuple(c.scale for c in calls),
        softcaps=tuple(float(c.softcap) if c.softcap is not None else None for c in calls),
        max_positions=int(max_pos) if max_pos else None,
        parameters=sum(p.numel() for p in model.parameters()),
        sinks=tuple(c.sinks for c in calls),
    )
    return arch, {id(c.module): i for i, c in enumerate(calls)}


def additive_bias(attention_mask) -> torch.Tensor | None:
    """What an additive attention mask adds to the scores it allows (an ALiBi-like bias, a
    custom mask's values), apart from the pairs it forbids (its most negative values):
    ``(b, heads or 1, n, n)`` with 0 on the forbidden pairs, or None when it adds nothing
    (a plain causal or padding mask, a boolean one)."""
    if attention_mask is None or attention_mask.dtype == torch.bool:
        return None
    allowed = attention_mask > torch.finfo(attention_mask.dtype).min / 2
    bias = torch.where(allowed, attention_mask, torch.zeros((), dtype=attention_mask.dtype,
                                                            device=attention_mask.device))
    return bias if bool(bias.abs().max() > 0) else None


ROWS_AT_ONCE = 256  # attend_rows: query rows computed at once (4 heads × 256 × 8,192 keys: 32 MB)


def attend_rows(query, key, value, attention_mask, scale: float, softcap: float | None = None,
                causal: bool = True, rows: int = ROWS_AT_ONCE) -> torch.Tensor:
    """The layer's output as :func:`attend` computes it, a block of query rows at a time
    (never its n×n weights): ``(b, n, heads, d)``. The fused kernel where nothing but the
    scale touches a score (a boolean mask, or none: then ``causal`` says the direction);
    written out by blocks where a soft cap or an additive mask does."""
    heads = query.shape[1]
    plain = softcap is None and (attention_mask is None or attention_mask.dtype == torch.bool)
    if plain:
        k, v = repeat_kv(key, heads), repeat_kv(value, heads)
        out = torch.nn.functional.scaled_dot_product_attention(
            query, k, v, attn_mask=attention_mask, is_causal=attention_mask is None and causal, scale=scale)
        return out.transpose(1, 2).contiguous()
    n = query.shape[2]
    outs = []
    for s in range(0, n, rows):
        e = min(n, s + rows)
        if attention_mask is not None:
            mask = attention_mask[:, :, s:e]
        elif causal:
            mask = (torch.arange(key.shape[2], device=query.device)[None, :]
                    <= torch.arange(s, e, device=query.device)[:, None])[None, None]
        else:
            mask = None
        outs.append(attend(query[:, :, s:e], key, value, mask, scale, softcap)[0])
    return torch.cat(outs, dim=1)


def attend(query, key, value, attention_mask, scale: float, softcap: float | None = None):
    """The plain dense attention every family's eager path computes: softmax(q·kᵀ·scale,
    soft-capped, plus the model's additive mask) · v in float32 softmax. Returns
    ``(out (b, n, heads, d), weights (b, heads, n, n))``."""
    heads = query.shape[1]
    k, v = repeat_kv(key, heads), repeat_kv(value, heads)
    scores = torch.matmul(query, k.transpose(2, 3)) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask[:, :, :, : k.shape[-2]], float("-inf"))
        else:
            scores = scores + attention_mask[:, :, :, : k.shape[-2]]
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(weights, v)
    return out.transpose(1, 2).contiguous(), weights
