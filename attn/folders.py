"""A model from a local folder (``ATLAS_MODEL=<folder>``): any Hugging Face decoder
(a causal LM head) or encoder (a masked LM head) that transformers loads offline and
whose attention goes through its attention interface.

Nothing is downloaded. A folder that cannot serve raises :class:`ModelFolderError`:
one sentence naming the folder and why, and a ``reason`` code (with ``figures``) that
the app words in the reader's language. Weights too big for this machine's memory are
refused before loading, from the files' own headers.
"""

from __future__ import annotations

from . import settings  # noqa: F401  (first: puts the Hugging Face libraries offline)

import functools
import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer
from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                    MODEL_FOR_MASKED_LM_MAPPING_NAMES)

from .device import pick_device
from .model import BUILDING, LoadedModel
from .tokens import HFTokenizer

BYTES_PER_PARAMETER = 4  # loaded as float32
MEMORY_SHARE = 0.6  # of the memory available now: the rest is for analyses and the app
LICENCE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "license.txt", "USE_POLICY.md")


class ModelFolderError(ValueError):
    """A folder that cannot serve as the model: ``reason`` is one of missing, no_config,
    unknown, no_head, no_weights, too_big, tokenizer, unreadable, sinks, broken."""

    def __init__(self, folder, reason: str, detail: str, **figures):
        self.folder, self.reason, self.figures = str(folder), reason, figures
        super().__init__(f"{folder}: {detail}")


@functools.lru_cache(maxsize=16)
def fingerprint(folder) -> str:
    """What identifies a folder's model besides its path: a short hash of its config and of
    its weight files' names, sizes and times (the same folder with other weights is another
    model; nothing is read but the config)."""
    folder = Path(folder)
    h = hashlib.sha256()
    config = folder / "config.json"
    h.update(config.read_bytes() if config.is_file() else b"")
    for f in sorted([*folder.glob("*.safetensors"), *folder.glob("*.bin")]):
        stat = f.stat()
        h.update(f"{f.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def memory_available() -> int:
    """Bytes of memory available now (Linux's MemAvailable), or the physical total."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def weight_parameters(folder: Path) -> int:
    """Parameters stored in the folder's weights, read from the safetensors headers
    (no tensor is loaded); a ``.bin`` checkpoint counts its bytes ÷ 4. 0: no weights."""
    total = 0
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                n = 1
                for d in st.get_slice(key).get_shape():
                    n *= d
                total += n
    if total == 0:
        total = sum(f.stat().st_size for f in folder.glob("*.bin")) // 4
    return total


def head_of(folder: Path, config) -> str:
    """``"causal"`` or ``"masked"``: the head the folder's model is read with."""
    names = " ".join(getattr(config, "architectures", None) or [])
    if "ForMaskedLM" in names:
        return "masked"
    if "ForCausalLM" in names or "LMHeadModel" in names:
        return "causal"
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not getattr(config, "is_encoder_decoder", False):
        if config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
            return "causal"
    if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "masked"
    raise ModelFolderError(folder, "no_head", f"a {config.model_type} model has neither a causal nor a masked "
                                             "language-model head in transformers")


def licence_file(folder) -> Path | None:
    """The folder's licence file, where it has one."""
    for name in LICENCE_FILES:
        p = Path(folder) / name
        if p.is_file():
            return p
    return None


def describe(folder) -> dict:
    """What the sidebar says of a folder's model without loading it: its family, its
    parameters and its licence file (None where it has none)."""
    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    lic = licence_file(folder)
    return {"family": cfg.get("model_type", "?"), "parameters": weight_parameters(folder),
            "licence": lic.name if lic else None}


def import_family(folder) -> None:
    """Import the modeling module of the folder's family, without loading its weights.
    Importing one registers its output classes as pytree nodes, whose number every
    compiled FlexAttention kernel guards: done before the warm-up compiles (the app does
    it for every offered folder on its first run), a model loaded later recompiles nothing.
    A folder that cannot be read is left to :func:`load_folder` to refuse."""
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
        for mapping in (AutoModelForCausalLM._model_mapping, AutoModelForMaskedLM._model_mapping):
            if type(config) in mapping:
                mapping[type(config)]  # the lazy mapping imports the family's module here
    except (ValueError, KeyError, OSError):
        pass


def head_missing(model, info: dict) -> tuple[str, ...]:
    """The weights of the language-model head its folder lacked (transformers initialised
    them at random): any missing key outside the base model. A head tied to the embeddings
    (GPT-2, Gemma: ``decoder.weight`` of BERT) is no missing key, and really is its head."""
    base = f"{model.base_model_prefix}."
    return tuple(sorted(k for k in info.get("missing_keys", ()) if not k.startswith(base)))


def load_folder(folder, device=None, memory: int | None = None) -> LoadedModel:
    """The model in ``folder``, on the picked device (float32), read through its own
    tokenizer. ``memory``: the bytes it may take (default: a share of what is free)."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ModelFolderError(folder, "missing", "there is no such folder")
    if not (folder / "config.json").is_file():
        raise ModelFolderError(folder, "no_config", "it has no config.json: not a Hugging Face model folder")
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (ValueError, KeyError, OSError) as exc:
        raise ModelFolderError(folder, "unknown", f"transformers cannot read its config ({exc})") from exc
    head = head_of(folder, config)
    params = weight_parameters(folder)
    if params == 0:
        raise ModelFolderError(folder, "no_weights", "it holds no weights (*.safetensors or *.bin)")
    need = params * BYTES_PER_PARAMETER
    have = int((memory_available() if memory is None else memory) * (MEMORY_SHARE if memory is None else 1))
    if need > have:
        raise ModelFolderError(folder, "too_big",
                               f"its {params:,} parameters need {need / 2**30:.1f} GiB as float32, "
                               f"and {have / 2**30:.1f} GiB is free for them", parameters=params, need=need,
                               have=have)
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (ValueError, OSError, TypeError) as exc:
        raise ModelFolderError(folder, "tokenizer", f"its tokenizer cannot be loaded ({exc})") from exc
    if not getattr(tok, "is_fast", False):
        raise ModelFolderError(folder, "tokenizer", "its tokenizer is not a fast one (no character offsets)")
    loader = AutoModelForCausalLM if head == "causal" else AutoModelForMaskedLM
    device = pick_device() if device is None else torch.device(device)
    with BUILDING:
        try:
            model, info = loader.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32,
                                                 local_files_only=True, output_loading_info=True)
        except (ValueError, OSError, RuntimeError, KeyError) as exc:
            raise ModelFolderError(folder, "broken", f"transformers cannot load it ({exc})") from exc
        model.to(device)
    try:
        loaded = LoadedModel(model, HFTokenizer(tok), device, name=f"{config.model_type} ({folder.name})",
                             head_missing=head_missing(model, info))
    except ValueError as exc:
        raise ModelFolderError(folder, "unreadable", f"its attention cannot be read: {exc}") from exc
    if any(x.sinks is not None for x in loaded.arch.layers):
        # a learned sink logit per head joins each row's softmax (gpt-oss): the captured weights
        # would no longer sum to one over the tokens, and every share of the app assumes they do
        raise ModelFolderError(folder, "sinks", "its attention adds learned sink logits to each row, "
                               "which the app's shares of a row's weight do not account for")
    return loaded
