"""The loaded model: tokens, attention weights and q/k/v of a text.

One :class:`LoadedModel` serves every reader. Its attention runs through a
function registered with transformers' ``AttentionInterface``
(``set_attn_implementation``), under a lock, following a *plan*: a
:class:`Capture` (record what attention did) or a :class:`Replace` (compute chosen
layers with a method of the registry, :mod:`attn.methods`; used by
:mod:`attn.swap`). The model is always restored afterwards.

:meth:`LoadedModel.analyze` records, per layer, the attention weights (float16)
and the q, k, v the attention really used (after projections, norms and rotary
embedding), so that ``softmax(q·kᵀ·scale + mask)`` gives the weights back.

Conversion of the packaged GGUF is :mod:`attn.convert`; token labels are
:mod:`attn.tokens`; settings from the environment are :mod:`attn.settings`.
"""

from __future__ import annotations

from . import settings  # first: puts the Hugging Face libraries offline

import inspect
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from transformers import (AttentionInterface, AutoModelForCausalLM, AutoTokenizer, Gemma3ForCausalLM,
                          Gemma3TextConfig)
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from . import arch as arch_, convert, methods, patterns, stats
from .device import pick_device
from .tokens import ByteTokenizer, HFTokenizer, Tokenizer, labels_from_offsets, words_from_offsets

MODEL_LABEL = "Gemma-3-270m"
QUANT_LABEL = "Q4_K_M GGUF"

# Tokens analysed at most, from measured time and memory (docs/performance.md):
# attention weights are kept as float16, (layers·heads·n²·2 bytes): 151 MB at
# 1,024 tokens, 604 MB at 2,048. ATLAS_MAX_TOKENS overrides it.
MAX_TOKENS = {"cpu": 1024, "cuda": 2048}
_BASE_CACHE = 8  # unmodified hidden states kept (by token ids), for swaps on the same text

_counter = itertools.count()


# Gemma-3-270m's attention (layers, heads, key/value heads, head size): the device budgets
# above were measured on it, so any model's analysis may hold what Gemma's holds at its
# device's budget (264 MB on the CPU, 830 MB on CUDA) and no more
_REFERENCE = (18, 4, 1, 256)


def token_budget(device) -> int:
    """Tokens an analysis reads at most: ATLAS_MAX_TOKENS, else the device's budget."""
    return settings.read().max_tokens or MAX_TOKENS.get(torch.device(device).type, 1024)


def reference_bytes(device) -> int:
    """What an analysis of the packaged model holds at the device's budget."""
    L, H, kv, d = _REFERENCE
    n = MAX_TOKENS.get(torch.device(device).type, 1024)
    return L * H * n * n * 2 + L * (H + 2 * kv) * n * d * 4


def model_token_budget(arch: arch_.Architecture, device) -> int:
    """Tokens an analysis of this model reads at most: ATLAS_MAX_TOKENS where set, else
    the device's budget shrunk until the analysis holds no more than the packaged
    model's would; never past the model's positions."""
    explicit = settings.read().max_tokens
    if explicit:
        return min(explicit, arch.max_positions or explicit)
    return arch.token_budget(token_budget(device), reference_bytes(device))


# --- results -----------------------------------------------------------------


@dataclass
class Analysis:
    """What one run of the model on a text gives the pages (read-only)."""

    text: str
    ids: list[int]
    tokens: list[str]  # one readable label per token
    words: list[int]  # word index per token (−1: special / whitespace)
    offsets: list[tuple[int, int]]
    attentions: torch.Tensor  # (layers, heads, n, n) float16, rows sum to 1
    layer_types: list[str]  # "sliding" / "full"
    sliding_window: int  # the sliding layers' window (0 when none slides)
    truncated: int  # tokens dropped beyond the budget
    total_tokens: int
    scale: float  # the factor q·kᵀ is multiplied by (the first layer's: see ``scales``)
    unknown: int  # tokens the tokenizer could not place
    seconds: float
    q: torch.Tensor = field(repr=False)  # (layers, 1, heads, n, d) float32
    k: torch.Tensor = field(repr=False)  # (layers, 1, kv_heads, n, d): one shared key/value head
    v: torch.Tensor = field(repr=False)
    causal: bool = True  # False: an encoder, each token attends both ways
    scales: tuple[float, ...] = ()  # each layer's factor (GPT-2 can divide it by the layer's number)
    softcaps: tuple[float | None, ...] = ()  # each layer's logit soft cap (Gemma 2), or None
    first_is_special: bool = True  # False: the tokenizer adds no start token (GPT-2), the first token is text
    # an encoder's runs on the text's first m tokens (stats.prefix_lengths, the whole text
    # left out), m → (layers, heads, m, m) float16: see ``prefix``
    prefix_attentions: dict = field(default_factory=dict, repr=False)
    specials: tuple[int, ...] = ()  # positions of the tokenizer's own tokens (<bos>, [CLS], [SEP]; not [UNK])

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def nbytes(self) -> int:
        """Memory the analysis holds: its tensors, plus its token lists and text (a rough
        100 bytes per token and 1 per character)."""
        held = (self.attentions, self.q, self.k, self.v, *self.prefix_attentions.values())
        tensors = sum(x.element_size() * x.numel() for x in held)
        return tensors + 100 * self.n + len(self.text)

    @property
    def n_heads(self) -> int:
        return self.attentions.shape[1]

    def qkv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q, k, v) of one layer, each ``(1, heads, n, d)`` float32; keys and values
        repeated to the query heads (grouped-query attention shares them)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        q, k, v = self.q[layer], self.k[layer], self.v[layer]
        h = q.shape[1]
        return q, arch_.repeat_kv(k, h), arch_.repeat_kv(v, h)

    def grid(self, layer: int, head: int | None = None) -> torch.Tensor:
        """float32 (n, n): one head's weights, or the mean over heads (head=None)."""
        w = self.attentions[layer]
        return w.float().mean(dim=0) if head is None else w[head].float()

    def prefix(self, m: int) -> torch.Tensor:
        """(layers, heads, m, m): the model's attention on the text's first m tokens as
        though the text stopped there. In a causal model that is the top-left block of the
        whole run (no row sees later tokens); an encoder's rows see the tokens after them,
        so its prefixes were run on their own (``analyze``: the first m − 1 tokens and the
        text's closing special token, where it has one)."""
        if m == self.n:
            return self.attentions
        if self.causal:
            if not 1 <= m <= self.n:
                raise ValueError(f"a prefix of 1..{self.n} tokens, got {m}")
            return self.attentions[..., :m, :m]
        if m not in self.prefix_attentions:
            raise ValueError(f"no run on the first {m} tokens (runs on {sorted(self.prefix_attentions)})")
        return self.prefix_attentions[m]

    def own_window(self, layer: int) -> int | None:
        """The layer's own sliding window, or None in a full layer."""
        return self.sliding_window if self.layer_types[layer] == "sliding" else None

    def layer_scale(self, layer: int) -> float:
        return self.scales[layer] if self.scales else self.scale

    def model_mask(self, layer: int) -> torch.Tensor:
        """bool (n, n): the pairs the model's own layer attends to (causal, plus its
        sliding window in sliding layers: the registry's ``own`` pattern; both ways on an
        encoder)."""
        params = methods.Params(window=self.own_window(layer), causal=self.causal)
        return patterns.dense(methods.own().mask(self.n, params), self.n)


@dataclass(frozen=True)
class Capture:
    """A plan: record q, k, v and the weights of every layer into ``record``: tensors
    of every layer, ``record[name][layer]`` copied into (float32 q, k, v; float16
    weights; on the CPU)."""

    record: dict


@dataclass(frozen=True)
class Replace:
    """A plan: compute the attention of ``layers`` with ``method`` (a registry name);
    the other layers keep their own. ``own`` in a swapped layer is the layer's own
    pattern through the fused kernel: the control."""

    method: str
    layers: frozenset[int]
    params: methods.Params = methods.Params()


# --- the loaded model ----------------------------------------------------------


class LoadedModel:
    """One model shared by every reader. Every method that switches its attention
    holds ``self.lock`` and restores the model before returning."""

    def __init__(self, model, tokenizer: Tokenizer, device: torch.device, name: str = MODEL_LABEL):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.name = name
        self.lock = threading.RLock()
        cfg = model.config
        self.config = cfg
        forward = inspect.signature(model.base_model.forward).parameters
        self._forward_kwargs = {"use_cache": False} if "use_cache" in forward else {}
        # the attention as the model runs it, read from one probe (attn.arch), never assumed
        self.arch, self._layer_of = arch_.read(model, self._forward_kwargs)
        self.n_layers = self.arch.n_layers
        self.n_heads = self.arch.n_heads
        self.kv_heads = self.arch.kv_heads
        self.head_dim = self.arch.head_dim
        self.causal = self.arch.causal
        self.sliding_window = self.arch.sliding_window
        self.layer_types = self.arch.layer_types
        self.scale = self.arch.scales[0]
        self.max_tokens = model_token_budget(self.arch, self.device)
        self._own_impl = cfg._attn_implementation
        self._plan: Capture | Replace | None = None
        self._base_cache: OrderedDict = OrderedDict()
        # one attention function per loaded model, bound to it
        self._impl = f"atlas_{next(_counter)}"
        AttentionInterface.register(self._impl, self._attention)
        # the same name must pick a mask, or layers would silently get none
        AttentionMaskInterface.register(self._impl, eager_mask)

    # -- attention hook ---------------------------------------------------------

    def _attention(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        """Called by every attention layer while one of our plans is active.
        query (b, heads, n, d); key, value (b, kv_heads, n, d); returns
        ((b, n, heads, d), weights or None)."""
        plan = self._plan
        layer = self._layer_of[id(module)]
        scale = self.arch.scales[layer] if scaling is None else scaling
        softcap = kwargs.get("softcap")
        heads = query.shape[1]
        if plan is None:
            raise RuntimeError("attention called outside a plan")
        if isinstance(plan, Capture):
            out, weights = arch_.attend(query, key, value, attention_mask, scale, softcap)
            rec = plan.record  # each layer into its slice of the analysis' tensors, made up front
            for name, x in (("q", query), ("k", key), ("v", value)):
                if rec[name] is not None:
                    rec[name][layer].copy_(x.detach())
            rec["w"][layer].copy_(weights.detach()[0])
            return out, None
        k, v = arch_.repeat_kv(key, heads), arch_.repeat_kv(value, heads)  # (b, heads, n, d)
        if layer in plan.layers and plan.method != methods.own().name:
            out = methods.get(plan.method).run(query, k, v, replace(plan.params, scale=scale))
        elif softcap is not None:  # the fused kernel has no soft cap: the plain path
            return arch_.attend(query, key, value, attention_mask, scale, softcap)[0], None
        else:
            # the own method and layers not swapped: the model's own pattern (its mask), through
            # the fused SDPA kernel
            out = F.scaled_dot_product_attention(query, k, v, attn_mask=attention_mask, scale=scale)
        return out.transpose(1, 2).contiguous(), None  # (b, n, heads, d)

    @property
    def plan(self) -> Capture | Replace | None:
        """The plan running now (None when the model is its own self)."""
        return self._plan

    def run_plan(self, plan: Capture | Replace, fn):
        """``fn()`` with the attention following ``plan``, under the lock; the model's
        own attention is restored afterwards, also when ``fn`` raises. A replacement reads
        as the model does: causal on a decoder, both ways on an encoder (ValueError else)."""
        if isinstance(plan, Replace) and plan.params.causal != self.causal:
            raise ValueError("a replacement must read as the model does: this model attends "
                             + ("only back" if self.causal else "both ways"))
        with self.lock:
            self._plan = plan
            self.model.set_attn_implementation(self._impl)
            try:
                with torch.no_grad():
                    return fn()
            finally:
                self.model.set_attn_implementation(self._own_impl)
                self._plan = None

    # -- tokens -------------------------------------------------------------------

    def encode(self, text: str):
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        ids, offsets = self.tokenizer.encode_with_offsets(text)
        return ids, offsets

    # -- analysis -----------------------------------------------------------------

    def analyze(self, text: str, max_tokens: int | None = None) -> Analysis:
        """Run the model on ``text`` (at most ``max_tokens`` tokens, default the model's
        budget for the device; never past its positions) and record its attention; on an
        encoder, its runs on the text's beginnings too (Analysis.prefix)."""
        budget = self.max_tokens if max_tokens is None else int(max_tokens)
        if budget < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        budget = min(budget, self.arch.max_positions or budget)  # never past the model's positions
        t0 = time.perf_counter()
        ids, offsets = self.encode(text)
        total = len(ids)
        closing = self._closing(ids)
        if total > budget and closing is not None and budget >= 2:
            # an encoder cut short still ends as it was trained to read: on its [SEP]
            ids, offsets = ids[:budget - 1] + ids[-1:], offsets[:budget - 1] + offsets[-1:]
        else:
            ids, offsets = ids[:budget], offsets[:budget]
        special = [self.tokenizer.special_label(i) for i in ids]
        n = len(ids)
        rec = self._capture(ids)
        prefixes = {}
        if not self.causal:  # an encoder's prefixes are runs of their own (Analysis.prefix)
            for m in stats.prefix_lengths(n)[:-1]:
                head = ids[:m - 1] + ids[-1:] if closing is not None else ids[:m]
                prefixes[m] = self._capture(head, keep=("w",))["w"]
        return Analysis(
            text=text,
            ids=ids,
            tokens=labels_from_offsets(text, offsets, special),
            words=words_from_offsets(text, offsets, special),
            offsets=offsets,
            attentions=rec["w"],  # (layers, heads, n, n) float16
            layer_types=list(self.layer_types),
            sliding_window=self.sliding_window,
            truncated=total - n,
            total_tokens=total,
            scale=self.scale,
            unknown=sum(1 for i in ids if i == self.tokenizer.unk_token_id),
            seconds=time.perf_counter() - t0,
            q=rec["q"],  # (layers, 1, heads, n, d) float32
            k=rec["k"],  # (layers, 1, kv_heads, n, d)
            v=rec["v"],
            causal=self.causal,
            scales=self.arch.scales,
            softcaps=self.arch.softcaps,
            first_is_special=bool(special) and special[0] is not None,
            prefix_attentions=prefixes,
            specials=tuple(i for i, (label, token) in enumerate(zip(special, ids))  # an unknown word is text
                           if label is not None and token != self.tokenizer.unk_token_id),
        )

    def _closing(self, ids: list[int]) -> int | None:
        """An encoder's closing special token ([SEP], </s>) when the encoding ends on one;
        None on a decoder."""
        last = ids[-1] if ids else None
        if self.causal or len(ids) < 2 or self.tokenizer.special_label(last) is None \
                or last == self.tokenizer.unk_token_id:  # a text that ends on an unknown word ends on text
            return None
        return ids[-1]

    def _capture(self, ids: list[int], keep=("q", "k", "v", "w")) -> dict:
        """One run of the model on ``ids`` with its attention recorded: ``q`` (layers, 1,
        heads, n, d), ``k``, ``v`` (layers, 1, kv heads, n, d) float32 and ``w`` (layers,
        heads, n, n) float16, on the CPU — those named in ``keep``."""
        n = len(ids)
        # the analysis' tensors, made once and filled layer by layer: stacking per-layer
        # copies at the end held every number twice (≈ 250 MB more at 1,024 tokens)
        cpu = torch.device("cpu")
        kv = self.kv_heads
        shapes = {"q": (self.n_layers, 1, self.n_heads, n, self.head_dim),
                  "k": (self.n_layers, 1, kv, n, self.head_dim), "v": (self.n_layers, 1, kv, n, self.head_dim)}
        rec = {name: torch.empty(shape, device=cpu) if name in keep else None for name, shape in shapes.items()}
        rec["w"] = torch.empty(self.n_layers, self.n_heads, n, n, dtype=torch.float16, device=cpu)
        input_ids = torch.tensor([ids], device=self.device)
        self.run_plan(Capture(rec), lambda: self.model.base_model(input_ids=input_ids, **self._forward_kwargs))
        return rec

    # -- running the model ------------------------------------------------------------

    def resolve_layers(self, layers) -> list[int]:
        """``"all"``, ``"sliding"`` (the layers with a window of their own) or layer
        indices, as a sorted list; ``ValueError`` otherwise."""
        if isinstance(layers, str):
            if layers == "all":
                return list(range(self.n_layers))
            if layers == "sliding":
                return [i for i, t in enumerate(self.layer_types) if t == "sliding"]
            raise ValueError(f"layers must be 'all', 'sliding' or a list of layer indices, got {layers!r}")
        try:
            out = sorted({int(i) for i in layers})
        except (TypeError, ValueError):
            raise ValueError(f"layers must be 'all', 'sliding' or a list of layer indices, got {layers!r}") from None
        if not out:
            raise ValueError("choose at least one layer to swap")
        bad = [i for i in out if not 0 <= i < self.n_layers]
        if bad:
            raise ValueError(f"layer {bad[0]} does not exist (the model has layers 0..{self.n_layers - 1})")
        return out

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """Last hidden states ``(1, n, hidden)`` of token ids ``(1, n)``, with whatever
        attention is active (call inside :meth:`run_plan` to change it)."""
        return self.model.base_model(input_ids=ids, **self._forward_kwargs).last_hidden_state

    @property
    def mask_token_id(self) -> int | None:
        """The token an encoder's masked-word head is asked to fill (None: no such token)."""
        return getattr(getattr(self.tokenizer, "tok", None), "mask_token_id", None)

    def masked_logits(self, batch: torch.Tensor) -> torch.Tensor:
        """An encoder's masked-word logits ``(b, n, vocab)`` for token ids ``(b, n)``,
        under the plan running now (call it inside :meth:`run_plan`) or the model's own."""
        if self.causal:
            raise ValueError("masked-word logits need an encoder; this model predicts the next token")
        with torch.no_grad():
            return self.model(input_ids=batch).logits.float()  # an encoder keeps no cache

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits (float32) from hidden states, with the model's soft cap."""
        if not self.causal:
            raise ValueError("next-token logits need a causal model (an encoder predicts masked tokens)")
        logits = self.model.get_output_embeddings()(hidden)
        cap = getattr(self.config, "final_logit_softcapping", None)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()

    def base_hidden(self, ids: list[int]) -> torch.Tensor:
        """The unmodified model's hidden states of ``ids`` (its own attention), kept for
        the last few texts."""
        key = tuple(ids)
        with self.lock:
            if key in self._base_cache:
                self._base_cache.move_to_end(key)
                return self._base_cache[key]
            x = torch.tensor([ids], device=self.device)
            with torch.no_grad():
                hidden = self.hidden(x)
            self._base_cache[key] = hidden
            while len(self._base_cache) > _BASE_CACHE:
                self._base_cache.popitem(last=False)
            return hidden



# --- loading -------------------------------------------------------------------


def load(device=None, progress: convert.Progress | None = None) -> LoadedModel:
    """The real model, converted on first use, on the picked device (float32).
    Cache the returned object per process (the app does, with st.cache_resource)."""
    device = pick_device() if device is None else torch.device(device)
    path = convert.convert(progress)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="eager", dtype=torch.float32)
    model.to(device)
    return LoadedModel(model, HFTokenizer(tok), device)


def tiny(device=None, seed: int = 0, layers: int = 4, sliding_window: int = 8) -> LoadedModel:
    """A tiny random-weight model of the same Gemma3 classes, with a byte tokenizer:
    for fast tests and for the app's test mode (``ATLAS_MODEL=tiny``)."""
    device = pick_device() if device is None else torch.device(device)
    types = ["sliding_attention"] * (layers - 1) + ["full_attention"]
    config = Gemma3TextConfig(
        vocab_size=ByteTokenizer.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=sliding_window, layer_types=types, max_position_embeddings=1 << 16,
        pad_token_id=0, bos_token_id=2, eos_token_id=1,
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Gemma3ForCausalLM(config)
    model.to(device)
    return LoadedModel(model, ByteTokenizer(), device, name="tiny random-weight Gemma3")
