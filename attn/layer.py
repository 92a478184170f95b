"""How one layer attends, as one object: the pairs it reads and what it does to a score.
Read from the model by attn.arch; every measurement of the app takes it (the kernels
keep their plain arguments)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LayerAttention:
    """How one layer attends, read from the model. Which pairs it reads — ``causal`` (each
    token looks back only) or both ways, and its own ``window`` (None: the whole text; one
    for all its heads: no family in transformers 5.23 gives each head its own) — is the
    registry's ``own`` pattern (attn.patterns:
    FlexAttention's ``mask_mod``). What is done to a score — times ``scale``, then the soft
    cap ``tanh(s / cap) · cap`` where the layer has one (Gemma 2), then a ``bias`` the model
    passes in its additive mask (an ALiBi-like bias: kept per text in the Analysis, since it
    depends on n) — is :meth:`score` (FlexAttention's ``score_mod``). Learned per-head
    ``sinks`` join each row's softmax as a column with no value (gpt-oss). ``heads`` query
    heads read ``kv_heads`` key/value heads."""

    causal: bool
    window: int | None
    scale: float
    softcap: float | None = None
    sinks: tuple[float, ...] | None = None
    heads: int = 1
    kv_heads: int = 1

    @property
    def sliding(self) -> bool:
        """It slides a window of its own."""
        return self.window is not None

    @property
    def plain_scores(self) -> bool:
        """Nothing is done to a score but its scale: the fused kernels compute this layer."""
        return self.softcap is None

    def score(self, scores: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """q·kᵀ (unscaled) made the layer's scores: scaled, soft-capped, biased."""
        scores = scores * self.scale
        if self.softcap is not None:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        if bias is not None:
            scores = scores + bias
        return scores
