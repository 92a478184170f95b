"""The loaded model: tokens, attention weights and q/k/v of a text.

One :class:`LoadedModel` serves every reader. Its attention runs through a
function registered with transformers' ``AttentionInterface``
(``set_attn_implementation``), under a lock, following a *plan*: a
:class:`Capture` (record what attention did) or a :class:`Replace` (compute chosen
layers with a method of the registry, :mod:`attn.methods`; used by
:mod:`attn.swap`). The model is always restored afterwards.

:meth:`LoadedModel.analyze` records, per layer, the q, k, v the attention really used
(after projections, norms and rotary embedding), so that ``softmax(q·kᵀ·scale + mask)``
gives the weights back; they are never kept (attn.rows recomputes them by blocks).

What a run gives is an :class:`attn.analysis.Analysis`; how many tokens it reads,
:mod:`attn.budgets`; loading the packaged or the tiny model, :mod:`attn.loading`.
"""

from __future__ import annotations

from . import settings  # noqa: F401 (first: puts the Hugging Face libraries offline)

import inspect
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, DynamicCache
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from . import arch as arch_
from . import methods, spill, stats
from .analysis import Analysis
from .budgets import model_token_budget
from .tokens import Tokenizer, labels_from_offsets, words_from_offsets

OWN_ROWS = 1024  # query rows the layer's own attention scores at a time on a long causal text
# A causal model reads a longer text CHUNK tokens at a time through every layer, each layer
# keeping its keys and values (the chunked prefill of serving systems; a sliding layer keeps
# its window): between chunks the process's queue may give the model to a shorter text
# (server.work_queue), so a long text holds it up for one chunk at most, and no layer scores
# a chunk's rows against more than the keys before them.
CHUNK = 512

_BASE_CACHE = 8  # unmodified hidden states kept (by token ids), for swaps on the same text
_counter = itertools.count()
# transformers' loading patches process-wide state while it builds a model (torch.nn.init's
# functions emptied, parameters made on the meta device): a model built in another thread
# meanwhile comes out uninitialised or on the meta device. Every model is built under this.
BUILDING = threading.RLock()


def _bool_mask(*args, **kwargs):
    """transformers' SDPA mask, always built (a boolean grid of the pairs each layer reads,
    never skipped for ``is_causal``): every plan reads the pairs from it."""
    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


@dataclass(frozen=True)
class Capture:
    """A plan: record the q, k, v of every layer into ``record``: tensors of every layer,
    ``record[name][layer]`` copied into (float32, on the CPU); the weights are never kept
    (:meth:`attn.analysis.Analysis.weights` recomputes them)."""

    record: dict
    progress: object = None  # called with (tokens read, tokens) after each layer, where given
    rows: tuple[int, int] | None = None  # the text's tokens [s, e) this run reads (a chunk), None: all
    tokens: int = 0  # the text's length (a chunk's run: for the progress)


@dataclass(frozen=True)
class Replace:
    """A plan: compute the attention of ``layers`` with ``method`` (a registry name);
    the other layers keep their own. ``own`` in a swapped layer is the layer's own
    pattern through the fused kernel: the control."""

    method: str
    layers: frozenset[int]
    params: methods.Params = methods.Params()


class _WholeRun(Exception):
    """A chunk's run met a score bias (an additive mask): the text is read whole."""


# --- the loaded model ----------------------------------------------------------


class LoadedModel:
    """One model shared by every reader. Every method that switches its attention
    holds ``self.lock`` and restores the model before returning."""

    def __init__(self, model, tokenizer: Tokenizer, device: torch.device, name: str = "Gemma-3-270m",
                 head_missing: tuple[str, ...] = ()):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.name = name
        # the weights of its language-model head its folder lacked (initialised at random on
        # loading): nothing that reads the head (a perplexity, a masked word) is measured then
        self.head_missing = tuple(head_missing)
        self.lock = threading.RLock()
        cfg = model.config
        self.config = cfg
        forward = inspect.signature(model.base_model.forward).parameters
        self._forward_kwargs = {"use_cache": False} if "use_cache" in forward else {}
        # the attention as the model runs it, read from one probe (attn.arch), never assumed
        self.arch, self._layer_of = arch_.read(model, self._forward_kwargs)
        self.n_layers = self.arch.n_layers
        self.n_heads = self.arch.n_heads
        self.kv_heads = self.arch.kv_heads
        self.head_dim = self.arch.head_dim
        self.causal = self.arch.causal
        self.sliding_window = self.arch.sliding_window
        self.layer_types = self.arch.layer_types
        self.max_tokens = model_token_budget(self.arch, self.device)
        self._own_impl = cfg._attn_implementation
        self._plan: Capture | Replace | None = None
        self._base_cache: OrderedDict = OrderedDict()
        # one attention function per loaded model, bound to it
        self._impl = f"atlas_{next(_counter)}"
        AttentionInterface.register(self._impl, self._attention)
        # the same name must pick a mask, or layers would silently get none
        AttentionMaskInterface.register(self._impl, _bool_mask)

    # -- attention hook ---------------------------------------------------------

    def _attention(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        """Called by every attention layer while one of our plans is active.
        query (b, heads, n, d); key, value (b, kv_heads, n, d); returns
        ((b, n, heads, d), weights or None)."""
        plan = self._plan
        layer = self._layer_of[id(module)]
        scale = self.arch.scales[layer] if scaling is None else scaling
        softcap = kwargs.get("softcap")
        heads = query.shape[1]
        if plan is None:
            raise RuntimeError("attention called outside a plan")
        if isinstance(plan, Capture):
            bias = arch_.additive_bias(attention_mask)
            if bias is not None and plan.rows is not None:
                raise _WholeRun()  # a bias the model adds to its scores: recorded from a whole run
            out = arch_.attend_rows(query, key, value, attention_mask, scale, softcap, causal=self.causal)
            rec = plan.record  # each layer into its slice of the analysis' tensors, made up front
            s, e = plan.rows or (0, query.shape[2])
            for name, x in (("q", query), ("k", key), ("v", value)):
                if rec[name] is not None:  # a chunk's keys and values are the last of those passed
                    spill.write(rec[name], layer, s, x.detach()[:, :, x.shape[2] - (e - s):])
            if bias is not None and "bias" in rec:  # a score the model adds to (an ALiBi-like bias)
                rec["bias"][layer] = bias[0].detach().float().cpu()
            if plan.progress is not None:
                n = plan.tokens or e
                plan.progress(s + (e - s) * (layer + 1) // self.n_layers, n)
            return out, None
        k, v = arch_.repeat_kv(key, heads), arch_.repeat_kv(value, heads)  # (b, heads, n, d)
        if layer in plan.layers and plan.method != methods.own().name:
            method = methods.get(plan.method)
            # a shortcut chooses among the keys this layer reads: top-k within its own window
            params = replace(plan.params, scale=scale, span=self.arch.layers[layer].window)
            bias = arch_.additive_bias(attention_mask)
            if method.family != "linear" and (softcap is not None or bias is not None):
                # the layer's own scores (soft cap, bias) over the shortcut's pattern: written out
                own = self.arch.layers[layer]
                scores = own.score(query @ k.transpose(-1, -2), bias)
                allowed = method.allowed_scored(query, k, params, scores)
                w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1,
                                  dtype=torch.float32).to(query.dtype)
                out = w @ v
            else:  # a linear method replaces the softmax, and with it the cap and the bias
                out = method.run(query, k, v, params)
        elif softcap is not None:  # the fused kernel has no soft cap: the plain path
            return arch_.attend_rows(query, key, value, attention_mask, scale, softcap, causal=self.causal), None
        else:
            # the own method and layers not swapped: the model's own pattern (its mask), through
            # the fused SDPA kernel
            out = self._own_sdpa(layer, query, k, v, attention_mask, scale)
        return out.transpose(1, 2).contiguous(), None  # (b, n, heads, d)

    def _own_sdpa(self, layer: int, query, k, v, attention_mask, scale: float) -> torch.Tensor:
        """The layer's own attention through the fused SDPA kernel, with the model's own mask.
        On a long causal text, a block of OWN_ROWS query rows at a time, each with only the
        keys its rows can see (those before its last row, and in a sliding layer not before
        its first row's window): where the mask (a boolean grid: _bool_mask) is False on
        every other key, the output is the same, and the kernel no longer scores the n² pairs
        that the mask throws away (a sliding layer of Gemma 3 at 8,192 tokens: 1/5 of them).
        A mask that lets a block's rows see any key outside its band (a model whose mask
        reads ahead somewhere, or a window wider than the one read from its config), or one
        that is not boolean, runs on the whole grid."""
        n = query.shape[2]
        whole = (attention_mask is None or not self.causal or n <= OWN_ROWS or attention_mask.dtype != torch.bool
                 or tuple(attention_mask.shape[-2:]) != (n, n))
        bands = [] if whole else self._bands(layer, attention_mask, n)
        if not bands:
            return F.scaled_dot_product_attention(query, k, v, attn_mask=attention_mask, scale=scale,
                                                  is_causal=attention_mask is None and self.causal)
        return torch.cat([F.scaled_dot_product_attention(query[:, :, r0:r1], k[:, :, lo:r1], v[:, :, lo:r1],
                                                         attn_mask=attention_mask[..., r0:r1, lo:r1], scale=scale)
                          for r0, r1, lo in bands], dim=2)

    def _bands(self, layer: int, mask: torch.Tensor, n: int) -> list[tuple[int, int, int]]:
        """Each block of OWN_ROWS rows with the first key its rows can see, (r0, r1, lo); []
        when the mask lets a block's rows see a key outside [lo, r1)."""
        window = self.arch.layers[layer].window
        bands = []
        for r0 in range(0, n, OWN_ROWS):
            r1 = min(n, r0 + OWN_ROWS)
            lo = 0 if window is None else max(0, r0 - window + 1)
            if bool(mask[..., r0:r1, :lo].any()) or bool(mask[..., r0:r1, r1:].any()):
                return []
            bands.append((r0, r1, lo))
        return bands

    @property
    def has_head(self) -> bool:
        """Whether its language-model head is the folder's own (not initialised at random)."""
        return not self.head_missing

    @property
    def plan(self) -> Capture | Replace | None:
        """The plan running now (None when the model is its own self)."""
        return self._plan

    def run_plan(self, plan: Capture | Replace, fn):
        """``fn()`` with the attention following ``plan``, under the lock; the model's
        own attention is restored afterwards, also when ``fn`` raises. A replacement reads
        as the model does: causal on a decoder, both ways on an encoder (ValueError else)."""
        if isinstance(plan, Replace) and plan.params.causal != self.causal:
            raise ValueError("a replacement must read as the model does: this model attends "
                             + ("only back" if self.causal else "both ways"))
        with self.lock:
            self._plan = plan
            self.model.set_attn_implementation(self._impl)
            try:
                with torch.no_grad():
                    return fn()
            finally:
                self.model.set_attn_implementation(self._own_impl)
                self._plan = None

    def memory_bytes(self, n: int) -> int:
        """What an analysis of n tokens holds in memory (attn.spill.held_by)."""
        return spill.held_by(self.arch, n, settings.read().analysis_bytes)

    # -- tokens -------------------------------------------------------------------

    def encode(self, text: str):
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        ids, offsets = self.tokenizer.encode_with_offsets(text)
        return ids, offsets

    # -- analysis -----------------------------------------------------------------

    def analyze(self, text: str, max_tokens: int | None = None, mask: torch.Tensor | None = None,
                progress=None, between=None) -> Analysis:
        """Run the model on ``text`` (at most ``max_tokens`` tokens, default the model's
        budget for the device; never past its positions) and record its attention; on an
        encoder, its runs on the text's beginnings too (Analysis.prefix). ``mask``: an
        additive 4-D mask handed to the model as it is, for a model whose scores carry a
        bias (the app passes none: its families take none). ``progress``: called with (tokens
        read, tokens) as the run goes (a long text's takes a minute on a CPU); ``between``:
        called with (tokens left, tokens) once the text is tokenized, and between the chunks
        of a long causal text — the process's queue may let shorter work run there (CHUNK)."""
        budget = self.max_tokens if max_tokens is None else int(max_tokens)
        if budget < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        budget = min(budget, self.arch.max_positions or budget)  # never past the model's positions
        paused = 0.0
        if between is not None:  # the waits there are the queue's, not the model's: not in Analysis.seconds
            outer = between

            def between(left: int, tokens: int) -> None:
                nonlocal paused
                stood = time.perf_counter()
                outer(left, tokens)
                paused += time.perf_counter() - stood
        ids, offsets = self.encode(text)
        total = len(ids)
        closing = self._closing(ids)
        if total > budget and closing is not None and budget >= 2:
            # an encoder cut short still ends as it was trained to read: on its [SEP]
            ids, offsets = ids[:budget - 1] + ids[-1:], offsets[:budget - 1] + offsets[-1:]
        else:
            ids, offsets = ids[:budget], offsets[:budget]
        special = [self.tokenizer.special_label(i) for i in ids]
        n = len(ids)
        read = text[:max((e for _, e in offsets), default=0)]  # the characters the tokens cover
        changed = getattr(self.tokenizer, "changed_characters", lambda s: {})(read)
        letters = [c for c in read if not c.isspace()]
        changed_share = sum(1 for c in letters if c in changed) / len(letters) if letters else 0.0
        t0 = time.perf_counter()  # the model's own time from here (the tokenizer's first use is slow)
        if between is not None:  # its size is known now, in the unit the queue measures
            between(n, n)
        rec = self._capture(ids, mask=mask, progress=progress, between=between)
        prefixes = {}
        if not self.causal:  # an encoder's prefixes are runs of their own (Analysis.prefix)
            for m in stats.prefix_lengths(n)[:-1]:
                head = ids[:m - 1] + ids[-1:] if closing is not None else ids[:m]
                run = self._capture(head, keep=("q", "k"))
                prefixes[m] = (run["q"], run["k"])
        return Analysis(
            text=text,
            ids=ids,
            tokens=labels_from_offsets(text, offsets, special),
            words=words_from_offsets(text, offsets, special),
            offsets=offsets,
            layers=self.arch.layers,
            truncated=total - n,
            total_tokens=total,
            unknown=sum(1 for i in ids if i == self.tokenizer.unk_token_id),
            seconds=time.perf_counter() - t0 - paused,
            q=rec["q"],  # (layers, 1, heads, n, d) float32
            k=rec["k"],  # (layers, 1, kv_heads, n, d)
            v=rec["v"],
            biases=rec["bias"],
            first_is_special=bool(special) and special[0] is not None,
            prefix_qk=prefixes,
            specials=tuple(i for i, (label, token) in enumerate(zip(special, ids))  # an unknown word is text
                           if label is not None and token != self.tokenizer.unk_token_id),
            changed=changed,
            changed_share=changed_share,
        )

    def _closing(self, ids: list[int]) -> int | None:
        """An encoder's closing special token ([SEP], </s>) when the encoding ends on one;
        None on a decoder."""
        last = ids[-1] if ids else None
        if self.causal or len(ids) < 2 or self.tokenizer.special_label(last) is None \
                or last == self.tokenizer.unk_token_id:  # a text that ends on an unknown word ends on text
            return None
        return ids[-1]

    def _capture(self, ids: list[int], keep=("q", "k", "v"), mask: torch.Tensor | None = None,
                 progress=None, between=None) -> dict:
        """One run of the model on ``ids`` with its attention recorded: ``q`` (layers, 1,
        heads, n, d), ``k``, ``v`` (layers, 1, kv heads, n, d) float32, on the CPU — those
        named in ``keep``; ``bias``: each layer's additive score bias, where the model passed
        one. ``mask``: an additive 4-D mask handed to the model as it is (a model whose
        scores carry a bias). Nothing n×n is kept. A causal model reads a text longer than
        CHUNK a chunk at a time (``between`` called after each but the last)."""
        n = len(ids)
        # the analysis' tensors, made once and filled layer by layer: stacking per-layer
        # copies at the end held every number twice (≈ 250 MB more at 1,024 tokens)
        kv = self.kv_heads
        shapes = {"q": (self.n_layers, 1, self.n_heads, n, self.head_dim),
                  "k": (self.n_layers, 1, kv, n, self.head_dim), "v": (self.n_layers, 1, kv, n, self.head_dim)}
        # past half the memory budget, q, k, v are kept in files, a layer at a time in memory (attn.spill)
        rec = spill.empty({name: shape for name, shape in shapes.items() if name in keep}, settings.read())
        rec.update({name: None for name in shapes if name not in keep})
        rec["bias"] = {}
        input_ids = torch.tensor([ids], device=self.device)
        if mask is None and self.causal and n > CHUNK and "use_cache" in self._forward_kwargs:
            try:
                return self._capture_chunks(input_ids, rec, progress, between)
            except _WholeRun:
                rec["bias"] = {}
        extra = {} if mask is None else {"attention_mask": mask.to(self.device)}
        self.run_plan(Capture(rec, progress, tokens=n),
                      lambda: self.model.base_model(input_ids=input_ids, **self._forward_kwargs, **extra))
        return rec

    def _capture_chunks(self, input_ids: torch.Tensor, rec: dict, progress=None, between=None) -> dict:
        """The run of :meth:`_capture` CHUNK tokens at a time, each layer keeping its keys and
        values in the model's own cache (transformers' DynamicCache: a sliding layer keeps
        its window) between chunks; the queue may run other work between them."""
        n = input_ids.shape[1]
        cache = DynamicCache(config=self.config)
        for s in range(0, n, CHUNK):
            e = min(n, s + CHUNK)
            chunk = input_ids[:, s:e]
            self.run_plan(Capture(rec, progress, rows=(s, e), tokens=n),
                          lambda chunk=chunk: self.model.base_model(input_ids=chunk, past_key_values=cache,
                                                                    use_cache=True))
            if between is not None and e < n:
                between(n - e, n)
        return rec

    # -- running the model ------------------------------------------------------------

    def resolve_layers(self, layers) -> list[int]:
        """``"all"``, ``"sliding"`` (the layers with a window of their own) or layer
        indices, as a sorted list; ``ValueError`` otherwise."""
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

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """Last hidden states ``(1, n, hidden)`` of token ids ``(1, n)``, with whatever
        attention is active (call inside :meth:`run_plan` to change it)."""
        return self.model.base_model(input_ids=ids, **self._forward_kwargs).last_hidden_state

    @property
    def mask_token_id(self) -> int | None:
        """The token an encoder's masked-word head is asked to fill (None: no such token)."""
        return getattr(getattr(self.tokenizer, "tok", None), "mask_token_id", None)

    def masked_logits(self, batch: torch.Tensor) -> torch.Tensor:
        """An encoder's masked-word logits ``(b, n, vocab)`` for token ids ``(b, n)``,
        under the plan running now (call it inside :meth:`run_plan`) or the model's own."""
        if self.causal:
            raise ValueError("masked-word logits need an encoder; this model predicts the next token")
        with torch.no_grad():
            return self.model(input_ids=batch).logits.float()  # an encoder keeps no cache

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits (float32) from hidden states, with the model's soft cap."""
        if not self.causal:
            raise ValueError("next-token logits need a causal model (an encoder predicts masked tokens)")
        logits = self.model.get_output_embeddings()(hidden)
        cap = getattr(self.config, "final_logit_softcapping", None)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()

    def base_hidden(self, ids: list[int]) -> torch.Tensor:
        """The unmodified model's hidden states of ``ids`` (its own attention), kept for
        the last few texts."""
        key = tuple(ids)
        with self.lock:
            if key in self._base_cache:
                self._base_cache.move_to_end(key)
                return self._base_cache[key]
            x = torch.tensor([ids], device=self.device)
            with torch.no_grad():
                hidden = self.hidden(x)
            self._base_cache[key] = hidden
            while len(self._base_cache) > _BASE_CACHE:
                self._base_cache.popitem(last=False)
            return hidden
