"""The models the app runs, loaded: the packaged Gemma-3-270m (converted once, then
loaded from the cache folder) and a tiny random-weight model of the same classes for the
tests and the app's test mode. A folder's model is attn.folders'."""

from __future__ import annotations

from . import settings  # noqa: F401 (first: puts the Hugging Face libraries offline)

from collections.abc import Callable

import torch
from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, PreTrainedTokenizerFast

from . import convert
from .device import pick_device
from .model import BUILDING, LoadedModel
from .tokens import ByteTokenizer, HFTokenizer

MODEL_LABEL = "Gemma-3-270m"
QUANT_LABEL = "Q4_K_M GGUF"


def load(device=None, progress: convert.Progress | None = None,
         on_stage: Callable[[str], None] = lambda stage: None) -> LoadedModel:
    """The real model, converted on first use, on the picked device (float32).
    ``on_stage`` hears what it reads next: "tokenizer", then "weights".
    Cache the returned object per process (the app does, with st.cache_resource)."""
    device = pick_device() if device is None else torch.device(device)
    path = convert.convert(progress)
    with BUILDING:
        on_stage("tokenizer")
        # tokenizers' own class reads tokenizer.json (33 MB) once, in Rust; Gemma's class
        # rebuilds it from a Python parse of the same file (≈ 1 s more of every start). The
        # same ids and offsets: tests/test_real_model.py
        tok = PreTrainedTokenizerFast.from_pretrained(str(path))
        on_stage("weights")
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
    with BUILDING, torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Gemma3ForCausalLM(config)
        model.to(device)
    return LoadedModel(model, ByteTokenizer(), device, name="tiny random-weight Gemma3")
