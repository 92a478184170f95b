"""How many tokens an analysis reads at most: ``ATLAS_MAX_TOKENS``, else the device's
budget (measured on the packaged model: docs/performance.md), shrunk for a larger model
so that its analysis holds no more than the packaged model's would."""

from __future__ import annotations

import torch

from . import settings
from .arch import Architecture

# Tokens analysed at most, from measured time and memory (docs/performance.md):
# attention weights are kept as float16, (layers·heads·n²·2 bytes): 151 MB at
# 1,024 tokens, 604 MB at 2,048. ATLAS_MAX_TOKENS overrides it.
MAX_TOKENS = {"cpu": 1024, "cuda": 2048}


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


def model_token_budget(arch: Architecture, device) -> int:
    """Tokens an analysis of this model reads at most: ATLAS_MAX_TOKENS where set, else
    the device's budget shrunk until the analysis holds no more than the packaged
    model's would; never past the model's positions."""
    explicit = settings.read().max_tokens
    if explicit:
        return min(explicit, arch.max_positions or explicit)
    return arch.token_budget(token_budget(device), reference_bytes(device))
