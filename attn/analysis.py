"""What one run of the model on a text gives the pages: its tokens, every layer's
attention weights and the q, k, v the attention really used (``Analysis``, read-only)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import arch as arch_
from . import methods, patterns
from .layer import LayerAttention


@dataclass
class Analysis:
    """What one run of the model on a text gives the pages (read-only)."""

    text: str
    ids: list[int]
    tokens: list[str]  # one readable label per token
    words: list[int]  # word index per token (−1: special / whitespace)
    offsets: list[tuple[int, int]]
    attentions: torch.Tensor  # (layers, heads, n, n) float16, rows sum to 1
    layers: tuple[LayerAttention, ...]  # how each layer attends (attn.arch): read from the model, never assumed
    truncated: int  # tokens dropped beyond the budget
    total_tokens: int
    unknown: int  # tokens the tokenizer could not place
    seconds: float
    q: torch.Tensor = field(repr=False)  # (layers, 1, heads, n, d) float32
    k: torch.Tensor = field(repr=False)  # (layers, 1, kv_heads, n, d): the model's own key/value heads
    v: torch.Tensor = field(repr=False)
    # an additive score bias the model passed in its mask, per layer that had one (layer →
    # (heads or 1, n, n) float32): LayerAttention.score adds it
    biases: dict = field(default_factory=dict, repr=False)
    first_is_special: bool = True  # False: the tokenizer adds no start token (GPT-2), the first token is text
    # an encoder's runs on the text's first m tokens (stats.prefix_lengths, the whole text
    # left out), m → (layers, heads, m, m) float16: see ``prefix``
    prefix_attentions: dict = field(default_factory=dict, repr=False)
    specials: tuple[int, ...] = ()  # positions of the tokenizer's own tokens (<bos>, [CLS], [SEP]; not [UNK])
    # the characters of the text read that the tokenizer's normaliser changes (character →
    # what it reads), and their share of the text's non-space characters
    changed: dict = field(default_factory=dict)
    changed_share: float = 0.0

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

    @property
    def causal(self) -> bool:
        """Each token looks back only (a decoder); False: both ways (an encoder)."""
        return self.layers[0].causal

    @property
    def layer_types(self) -> list[str]:
        """"sliding" or "full", per layer."""
        return ["sliding" if x.sliding else "full" for x in self.layers]

    @property
    def sliding_window(self) -> int:
        """The window the sliding layers slide (the first sliding layer's; 0 when none
        slides): for sentences about the model as a whole — a layer's own is
        ``layers[i].window``."""
        return next((x.window for x in self.layers if x.sliding), 0)

    def bias(self, layer: int) -> torch.Tensor | None:
        """The additive score bias the model passed to this layer (None: none)."""
        return self.biases.get(layer)

    def model_mask(self, layer: int) -> torch.Tensor:
        """bool (n, n): the pairs the model's own layer attends to (causal, plus its
        sliding window in sliding layers: the registry's ``own`` pattern; both ways on an
        encoder)."""
        params = methods.Params(window=self.layers[layer].window, causal=self.layers[layer].causal)
        return patterns.dense(methods.own().mask(self.n, params), self.n)
