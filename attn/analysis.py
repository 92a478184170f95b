"""What one run of the model on a text gives the pages: its tokens and the q, k, v every
layer's attention really used (``Analysis``, read-only). Nothing in it grows faster
than the text: the weights are never kept, but recomputed a block of rows at a time
from q and k by each layer's own rule (:meth:`Analysis.weights`, :mod:`attn.rows`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import arch as arch_
from . import methods, patterns, spill
from .layer import LayerAttention
from .rows import RowNorms, Weights


@dataclass
class Analysis:
    """What one run of the model on a text gives the pages (read-only)."""

    text: str
    ids: list[int]
    tokens: list[str]  # one readable label per token
    words: list[int]  # word index per token (−1: special / whitespace)
    offsets: list[tuple[int, int]]
    layers: tuple[LayerAttention, ...]  # how each layer attends (attn.arch): read from the model, never assumed
    truncated: int  # tokens dropped beyond the budget
    total_tokens: int
    unknown: int  # tokens the tokenizer could not place
    seconds: float  # the model's own time reading it (the tokenizer's, and the queue's waits in between, excluded)
    # (layers, 1, heads, n, d) float32; past half the memory budget: an attn.spill.LayerFile
    q: torch.Tensor = field(repr=False)
    k: torch.Tensor = field(repr=False)  # (layers, 1, kv_heads, n, d): the model's own key/value heads
    v: torch.Tensor = field(repr=False)
    # an additive score bias the model passed in its mask, per layer that had one (layer →
    # (heads or 1, n, n) float32): LayerAttention.score adds it
    biases: dict = field(default_factory=dict, repr=False)
    first_is_special: bool = True  # False: the tokenizer adds no start token (GPT-2), the first token is text
    # an encoder's runs on the text's first m tokens (stats.prefix_lengths, the whole text
    # left out), m → their (q, k), each (layers, 1, heads or kv heads, m, d): see ``prefix``
    prefix_qk: dict = field(default_factory=dict, repr=False)
    specials: tuple[int, ...] = ()  # positions of the tokenizer's own tokens (<bos>, [CLS], [SEP]; not [UNK])
    # the characters of the text read that the tokenizer's normaliser changes (character →
    # what it reads), and their share of the text's non-space characters
    changed: dict = field(default_factory=dict)
    changed_share: float = 0.0
    # each row's softmax normaliser, kept as the rows are made (attn.rows.RowNorms: n numbers
    # a head of a layer), so that a measure of a few cells a row needs no second pass
    norms: RowNorms = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self.norms = RowNorms(self.q.shape[0], self.q.shape[2], self.q.shape[3])

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return self.q.shape[0]

    @property
    def nbytes(self) -> int:
        """Memory the analysis holds: its tensors, plus its token lists and text (a rough
        100 bytes per token and 1 per character)."""
        held = (self.q, self.k, self.v, *(x for qk in self.prefix_qk.values() for x in qk), *self.biases.values())
        tensors = sum(spill.nbytes(x) for x in held)  # a layer file: the layers it keeps read back
        return tensors + self.norms.nbytes + 100 * self.n + len(self.text)

    @property
    def n_heads(self) -> int:
        return self.q.shape[2]

    def layer_on(self, layer: int, m: int):
        """(q, k, v, bias) of one layer on the text's first m tokens — keys and values repeated
        to the query heads, the bias (or None) cut to those tokens: in a causal model,
        exactly what a run on those tokens alone gives (no row sees a later token)."""
        if not self.causal and m != self.n:
            raise ValueError("an encoder's rows see the tokens after them: its first tokens are a run of their own")
        q, k, v = self.qkv(layer)
        bias = self.bias(layer)
        if m < self.n:
            q, k, v = q[:, :, :m], k[:, :, :m], v[:, :, :m]
            bias = None if bias is None else bias[..., :m, :m]
        return q, k, v, bias

    def weights(self) -> Weights:
        """Every layer's attention weights, ``(layers, heads, n, n)``, as a view that is never
        held: its rows are recomputed a block at a time (:class:`attn.rows.Weights`)."""
        return Weights(self.q, self.k, self.layers, self.biases, norms=self.norms)

    def rows(self, layer: int, head: int | None, positions) -> torch.Tensor:
        """float32 ``(len(positions), n)``: the weights of the rows at ``positions`` (ascending)
        of one head, or their mean over the layer's heads (head=None)."""
        w = self.weights()[layer] if head is None else self.weights()[layer, head]
        return w.mean_rows(torch.as_tensor(positions, dtype=torch.int64).reshape(-1))

    def qkv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q, k, v) of one layer, each ``(1, heads, n, d)`` float32; keys and values
        repeated to the query heads (grouped-query attention shares them)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        q, k, v = self.q[layer], self.k[layer], self.v[layer]
        h = q.shape[1]
        return q, arch_.repeat_kv(k, h), arch_.repeat_kv(v, h)

    def prefix(self, m: int) -> Weights:
        """(layers, heads, m, m): the model's attention on the text's first m tokens as
        though the text stopped there. In a causal model that is the top-left block of the
        whole run (no row sees later tokens); an encoder's rows see the tokens after them,
        so its prefixes were run on their own (``analyze``: the first m − 1 tokens and the
        text's closing special token, where it has one)."""
        if m == self.n:
            return self.weights()
        if self.causal:
            return self.weights().prefix(m)
        if m not in self.prefix_qk:
            raise ValueError(f"no run on the first {m} tokens (runs on {sorted(self.prefix_qk)})")
        q, k = self.prefix_qk[m]
        return Weights(q, k, self.layers)

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
