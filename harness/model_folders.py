"""Tiny random-weight model folders of many families, built from configs on this machine
(no download): a small tokenizer trained by the pinned ``tokenizers`` on a few
sentences, a config of two or three small layers, weights saved as safetensors. They
are what ``ATLAS_MODEL=<folder>`` reads, for tests.

    build("llama", folder)  →  folder with config.json, model.safetensors, tokenizer.json
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, DistilBertConfig,
                          Gemma2Config, Gemma3TextConfig, GPT2Config, GptOssConfig, LlamaConfig, MistralConfig,
                          Phi3Config, PreTrainedTokenizerFast, Qwen2Config, Qwen3Config, RobertaConfig,
                          XLMRobertaConfig)

# sentences the tokenizers learn from (written for these tests), in the app's three languages
CORPUS = [
    "A window keeps the nearby words and lets the distant ones go.",
    "Each token looks back at the ones before it, and the cost grows with the square.",
    "Uma janela guarda as palavras vizinhas e deixa as distantes de lado.",
    "Cada token olha para os anteriores, e o custo cresce com o quadrado.",
    "窓は近くの語を残し、遠くの語を手放します。",
    "各トークンは前のトークンを見るので、コストは二乗で増えます。",
]
WINDOW = 6  # the sliding window of the families that slide
SOFTCAP = 1.0  # Gemma 2's logit cap; its weights are drawn wide enough for scores past it
DECODERS = ("llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3_text", "phi3", "gpt2")
ENCODERS = ("bert", "roberta", "xlm-roberta", "distilbert")
FAMILIES = DECODERS + ENCODERS
REFUSED = ("gpt_oss",)  # families the app refuses, with a sentence (attn.folders): learned sink logits


def _decoder_tokenizer(bos: bool) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>" if bos else None, eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


def _encoder_tokenizer(cls: str, sep: str) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", cls, sep, "[MASK]"]
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(single=f"{cls} $A {sep}", special_tokens=[(cls, 2), (sep, 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, cls_token=cls, sep_token=sep, pad_token="[PAD]",
                                   unk_token="[UNK]", mask_token="[MASK]")


def config_of(family: str, vocab: int, layers: int = 3):
    """A small config of the family: 4 query heads of size 32 (the shape FlexAttention's
    warm-up compiles for: another head size would make later calls recompile), 2 key/value
    heads where the family groups them, a window of WINDOW where it slides."""
    small = dict(vocab_size=vocab, hidden_size=128, intermediate_size=64, num_hidden_layers=layers,
                 num_attention_heads=4, max_position_embeddings=128, pad_token_id=0)
    if family == "llama":
        return LlamaConfig(**small, num_key_value_heads=2, bos_token_id=1, eos_token_id=2)
    if family == "qwen2":  # layers from max_window_layers on slide
        return Qwen2Config(**small, num_key_value_heads=2, use_sliding_window=True, sliding_window=WINDOW,
                           max_window_layers=1)
    if family == "qwen3":
        return Qwen3Config(**small, num_key_value_heads=2, head_dim=32, use_sliding_window=True,
                           sliding_window=WINDOW, max_window_layers=2)
    if family == "mistral":
        return MistralConfig(**small, num_key_value_heads=2, sliding_window=WINDOW, bos_token_id=1, eos_token_id=2)
    if family == "gemma2":
        return Gemma2Config(**small, num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32,
                            sliding_window=WINDOW, attn_logit_softcapping=SOFTCAP, bos_token_id=1, eos_token_id=2,
                            initializer_range=0.5)
    if family == "gemma3_text":
        return Gemma3TextConfig(**small, num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32,
                                sliding_window=WINDOW, layer_types=["sliding_attention"] * (layers - 1)
                                + ["full_attention"], bos_token_id=1, eos_token_id=2)
    if family == "phi3":
        return Phi3Config(**small, num_key_value_heads=2, sliding_window=WINDOW, bos_token_id=1, eos_token_id=2)
    if family == "gpt2":  # each layer's scale divided by its number
        return GPT2Config(vocab_size=vocab, n_embd=128, n_layer=layers, n_head=4, n_positions=128,
                          scale_attn_by_inverse_layer_idx=True, bos_token_id=2, eos_token_id=2)
    if family in ("bert", "roberta", "xlm-roberta"):
        cls = {"bert": BertConfig, "roberta": RobertaConfig, "xlm-roberta": XLMRobertaConfig}[family]
        extra = {} if family == "bert" else {"bos_token_id": 2, "eos_token_id": 3}
        return cls(**{**small, "max_position_embeddings": 130}, **extra)
    if family == "distilbert":
        return DistilBertConfig(vocab_size=vocab, dim=128, hidden_dim=64, n_layers=layers, n_heads=4,
                                max_position_embeddings=128, pad_token_id=0)
    if family == "gpt_oss":  # a learned sink logit per head joins each row's softmax
        return GptOssConfig(**small, num_key_value_heads=2, head_dim=32, num_local_experts=2, num_experts_per_tok=1,
                            sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"] * (layers // 2)
                            + ["sliding_attention"] * (layers % 2), bos_token_id=1, eos_token_id=2)
    raise ValueError(f"no tiny config for {family!r}")


def import_families() -> None:
    """Import every family's modeling module now. Each registers its output classes as
    pytree nodes, and dynamo guards the number of those: a family first imported after
    FlexAttention compiled would make the next call of every compiled kernel compile
    again (the test process imports them all before any compile: tests/conftest.py)."""
    for family in FAMILIES + REFUSED:
        name = {"gemma3_text": "gemma3"}.get(family, family).replace("-", "_")
        importlib.import_module(f"transformers.models.{name}.modeling_{name}")


def build(family: str, folder, seed: int = 0, layers: int = 3, head: bool = True, tied: bool | None = None) -> Path:
    """A tiny random-weight model of ``family`` saved in ``folder`` (made), with its
    tokenizer; returns the folder. ``head=False`` saves the bare base model (``BertModel``,
    ``LlamaModel``: what a sentence-transformers folder holds), without its language-model
    head; ``tied`` sets whether the head shares the embeddings' weights (else the family's
    default)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if family in ENCODERS:
        tok = _encoder_tokenizer("<s>", "</s>") if "roberta" in family else _encoder_tokenizer("[CLS]", "[SEP]")
    else:
        tok = _decoder_tokenizer(bos=family not in ("gpt2", "qwen2", "qwen3"))
    config = config_of(family, len(tok), layers)
    if tied is not None:
        config.tie_word_embeddings = tied
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        loader = AutoModelForMaskedLM if family in ENCODERS else AutoModelForCausalLM
        model = (loader if head else AutoModel).from_config(config, attn_implementation="eager")
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder
