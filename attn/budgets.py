"""How many tokens an analysis reads at most: ``ATLAS_MAX_TOKENS``, else the device's
budget (measured on the packaged model: docs/performance.md), shrunk for a larger model
so that its analysis holds no more than the packaged model's would."""

from __future__ import annotations

import torch

from . import settings
from .arch import Architecture

# Tokens analysed at most: the packaged model's own positions on either device. An analysis
# keeps only what grows with n — q, k, v in float32, 18·6·256·4 bytes a token for the packaged
# model (110 KB: 906 MB at 8,192 tokens, 3.6 GB at 32,768) — and recomputes the weights a
# block of rows at a time; past half the memory budget (ATLAS_ANALYSIS_MB) q, k, v are kept in
# files and read back a layer at a time (attn.spill). ATLAS_MAX_TOKENS overrides it.
MAX_TOKENS = {"cpu": 32768, "cuda": 32768}

# Step 5's and step 6's measures of one layer write its whole grid out (the exact reference in
# float64, linear attention's grid order, each method's output): on a longer text they read its
# first LAYER_TOKENS tokens (a causal model's attention there is the run on those tokens), and
# the page says so. 134 MB for the exact reference of Gemma's 4 heads at 2,048 tokens.
LAYER_TOKENS = 2048


# Gemma-3-270m's attention (layers, heads, key/value heads, head size): the device budgets
# above were measured on it, so any model's analysis may hold what Gemma's holds at its
# device's budget (3.6 GB, in memory or in files) and no more
_REFERENCE = (18, 4, 1, 256)


def token_budget(device) -> int:
    """Tokens an analysis reads at most: ATLAS_MAX_TOKENS, else the device's budget."""
    return settings.read().max_tokens or MAX_TOKENS.get(torch.device(device).type, 1024)


def reference_bytes(device) -> int:
    """What an analysis of the packaged model holds at the device's budget."""
    L, H, kv, d = _REFERENCE
    n = MAX_TOKENS.get(torch.device(device).type, 1024)
    return L * (H + 2 * kv) * n * d * 4


def model_token_budget(arch: Architecture, device) -> int:
    """Tokens an analysis of this model reads at most: ATLAS_MAX_TOKENS where set, else
    the device's budget shrunk until the analysis holds no more than the packaged
    model's would; never past the model's positions."""
    explicit = settings.read().max_tokens
    if explicit:
        return min(explicit, arch.max_positions or explicit)
    return arch.token_budget(token_budget(device), reference_bytes(device))
