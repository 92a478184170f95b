"""FlexAttention compiled in the background, once per process, once the server is idle."""

from __future__ import annotations

import threading
import time

import streamlit as st
import torch

from attn import backend, settings
from attn.device import compute_dtype, pick_device

from .page_run import idle_for
from .served_model import get_model, model_id

IDLE_BEFORE_COMPILE = 5.0  # seconds without a page run before FlexAttention compiles


def start_flex_warmup():
    """The background compile (``_flex_warmup``), unless ``ATLAS_FLEX_WARMUP=0``."""
    return _flex_warmup() if settings.read().flex_warmup else None


@st.cache_resource(show_spinner=False)
def _flex_warmup():
    """Compile FlexAttention in the background, once per process, for the live
    benchmark's kind of call (head size 64; with and without hubs) — but only once no
    page has run for IDLE_BEFORE_COMPILE seconds, so that the compile does not compete
    with the first readers. Until it is ready, step 7 uses the blocked kernel. On CUDA,
    then the playground's composed-pattern kernel on the model's own heads (one kernel
    serves every composition); on the CPU the playground's blocked kernel is as fast
    (docs/performance.md), so nothing more is compiled there."""
    device = pick_device()
    dtype = compute_dtype(device)
    chosen = model_id()

    def wait_then_compile():
        while idle_for() < IDLE_BEFORE_COMPILE:
            time.sleep(0.5)
        warm = [{"q_shape": (1, 4, 1024, 64), "dtype": dtype, "device": device, "causal": True, "hubs": hubs}
                for hubs in (False, True)]
        if device.type == "cuda":  # the playground's one kernel for every composition, on the model's heads
            model = get_model(chosen)  # loaded by then (the first page needed it): found in the cache
            warm.append({"q_shape": (1, model.n_heads, 1024, model.head_dim), "dtype": torch.float32,
                         "device": device, "kernel": "pattern"})
        backend.start_warmup(warm)

    waiter = threading.Thread(target=wait_then_compile, name="flex-warmup-waiter", daemon=True)
    waiter.start()
    return waiter
