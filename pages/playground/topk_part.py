"""The playground's one part chosen on the text itself: each query's k highest-scoring keys
(by the exact scores, the oracle, or by the indexer), kept beside the fixed parts of
``attn.composition.PARTS``. Its cells depend on the text, the layer and the head, so they are
counted on the layer's own q and k (``attn.methods``' top-k with ``Params.parts``); the
choosing (every visible pair scored) is counted apart from the attention over the cells."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn import composition as algebra
from attn import costs as costs_model
from attn import methods, outputs, topk
from attn.composition import Composition
from attn.costs import Shape
from ui import row_reads

NAME = "topk"  # its choice among the playground's parts (it is not one of attn.composition.PARTS)
CHOOSERS = ("oracle", "indexer")


@dataclass(frozen=True)
class TopK:
    """Each query keeps the ``keep`` keys it scores highest, chosen by the exact scores (the
    oracle) or by the indexer, beside the fixed parts."""

    keep: int
    indexer: bool

    @property
    def method(self) -> methods.Method:
        return methods.top_k(indexer=self.indexer)

    @property
    def key(self) -> tuple:
        """As a plain tuple (a cache key; :func:`of_key` makes it back)."""
        return (self.keep, self.indexer)


@dataclass(frozen=True)
class TopKCost:
    """Top-k beside the parts on one layer of the text: the cells computed in every head
    (the chosen keys and the parts' cells, each once), the operations of the attention over
    them and of the choosing apart, every visible pair, the numbers a block of queries'
    scores holds, and operations(2N)/operations(N) at a large N (the chosen keys counted
    apart from the parts: at most) beside full attention's."""

    cells: int  # over the heads
    heads: int
    every: int
    attend: float
    scoring: float
    full_flops: float
    numbers: int
    ratio: float
    full_ratio: float
    n: int = 0  # the tokens counted on: the text, or a long one's first (row_reads.layer_tokens)


def of_settings(cfg: dict) -> TopK | None:
    """The top-k part the playground's settings switch on, or None."""
    return TopK(int(cfg["pg_k"]), cfg["pg_chooser"] == "indexer") if NAME in cfg["pg_on"] else None


def of_key(key: tuple | None) -> TopK | None:
    return None if key is None else TopK(*key)


def every_pair(n: int, causal: bool) -> int:
    """Every pair a layer may compute: n(n+1)/2 looking back, n² both ways."""
    return methods.exact().cells(n, methods.Params(causal=causal))


def cells(a, parts: Composition, top: TopK, layer: int, causal: bool) -> torch.Tensor:
    """``(1, heads, m, m)`` bool: the cells top-k beside ``parts`` computes in a layer, the
    oracle choosing by the layer's own scores (its cap and bias), as the swap does — on the
    text's first m tokens (the whole text, or a long one's first: row_reads.layer_tokens)."""
    q, k, _, bias = row_reads.layer_on(a, layer)
    m = q.shape[2]
    params = methods.Params(parts=parts if m == a.n else algebra.composition_on_prefix(m, parts), k=top.keep,
                            causal=causal, span=a.layers[layer].window)
    return outputs.chosen_pairs(top.method, q, k, params, a.layers[layer], bias)


def cost(a, parts: Composition, top: TopK, layer: int, causal: bool, large: int) -> TopKCost:
    """:class:`TopKCost` on one layer of analysis ``a`` (the registry's cost model at the
    model's shape), operations(2N)/operations(N) at N = ``large``."""
    chosen = cells(a, parts, top, layer, causal)
    n, h, d = chosen.shape[-1], a.n_heads, a.q.shape[-1]  # n: the tokens the cells were chosen on
    shape = Shape(heads=h, d=d, causal=causal)
    counted = int(chosen.sum())

    def operations(m: int) -> float:  # at length m: the parts' cells and the chosen keys apart (at most)
        attended = algebra.composed_cells(m, algebra.composition_on_prefix(m, parts), causal)
        return (attended + topk.cells(m, top.keep, causal, a.layers[layer].window)) * costs_model.cell_flops(shape) + \
            top.method.scoring_flops(m, shape)

    every = every_pair(n, causal)
    return TopKCost(cells=counted, heads=h, every=every, attend=counted * 4.0 * d,
                    scoring=top.method.scoring_flops(n, shape), full_flops=every * costs_model.cell_flops(shape),
                    numbers=h * min(topk.PART_ROWS, n) * n, ratio=operations(2 * large) / operations(large),
                    full_ratio=every_pair(2 * large, causal) / every_pair(large, causal), n=n)
