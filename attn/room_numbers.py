"""The numbers a class's room keeps of one text: a few hundred numbers, taken from one
run of the model at settings the room fixes (never a slider's value, since a position or
a window chosen on one text means nothing on another), so that every step that measures
a claim can show it for every text of the class at once.

* step 1: n, the tokens analysed (the cells of each kind of layer follow from it);
* step 2: on growing prefixes (stats.prefix_lengths), for every layer, k̄ at p = ROOM_P
  (each head's own k, averaged) and the useful share n·k̄ / cells, with the equal-weights
  reference: whether "k/n shrinks as the text grows" holds on this text, layer by layer (an
  encoder's prefixes are runs of their own: Analysis.prefix);
* step 3: the share of every row's weight a window of each of ROOM_WINDOWS keeps, for
  every layer and overall; beside it, what each row's top k cells keep at the same cells a
  row (top-k selection by the real weights: the most any choice of k cells keeps);
* step 4: the first token's share of each row's weight, per layer; what a window of
  HUB_WINDOW keeps alone, and with the first token and the text's own anchors as hubs;
* step 6: each shortcut's output error against exact softmax in one layer (ERROR_LAYER,
  or the last) at window ERROR_WINDOW with those hubs, beside the fused kernel's;
* any other step: its own record, which it declares and measures itself (ui.step_parts.
  RoomMeasure), carried here as JSON under the step's id with the step's own layout version
  (``steps``: the engine neither reads nor upgrades it).

``text_numbers(a)`` takes an Analysis and gives a ``RoomNumbers``, the one typed record the
room's charts, verdicts and CSV read; every number is rounded to 5 significant digits (what
a chart and a CSV show). It is kept as JSON with its layout ``VERSION``: ``RoomNumbers.
from_json`` reads any layout written before and upgrades it, in one place. No Streamlit
here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from . import hub_stats, outputs, stats, topk

ROOM_P = 0.9
ROOM_WINDOWS = (4, 16, 64, 256)
HUB_WINDOW = 8
ERROR_LAYER = 8  # a sliding layer of the packaged model, as the steps' own first layer
ERROR_WINDOW = 16
ANCHOR_HUBS = 3  # the text's own anchors taken as hubs, besides the first token
ROOM_TOKENS = 512  # a room text is analysed on its first tokens at most (the screen says so)
DIGITS = 5
VERSION = 5  # 1: the numbers as a plain dict, without a version (and, before encoders, without "causal");
# 2: no ``model``; 3: no ``kept_top``; 4: no ``steps``


@dataclass(frozen=True)
class UsefulPoint:
    """Step 2 on the text's first ``n`` tokens, in one layer: k̄ at ROOM_P, the useful
    share n·k̄ / cells, and an even spread's share."""

    n: int
    k: float
    share: float
    uniform_share: float


@dataclass(frozen=True)
class KeptShare:
    """The share of the weight a window keeps: overall, and per layer."""

    mean: float
    layers: tuple[float, ...]


@dataclass(frozen=True)
class RoomNumbers:
    """What the room keeps of one text (see the module's doc)."""

    n: int
    causal: bool
    layers: int
    layer_types: tuple[str, ...]
    window: int  # the model's sliding window (0: none)
    p: float
    useful: tuple[tuple[UsefulPoint, ...], ...]  # per layer, per prefix
    kept: dict  # window → KeptShare, for each of ROOM_WINDOWS
    sink: tuple[float, ...]  # the first token's share, per layer
    sink_mean: float
    hub_window: int
    hubs: tuple[int, ...]
    kept_window: float
    kept_window_hubs: float
    error_layer: int
    error_window: int
    errors: dict  # method name (and "uniform") → its output error
    model: str = ""  # what measured them: the model's id and, for a folder, its weights' fingerprint ("" before 3)
    kept_top: dict | None = None  # window → KeptShare of top-k at the window's cells a row (None before 4)
    steps: dict = field(default_factory=dict)  # step id → {"version": its layout, "record": its JSON} ({} before 5)
    version: int = VERSION

    def to_json(self) -> dict:
        """The record as the store keeps it (JSON: the windows' keys as strings)."""
        out = asdict(self)
        out["kept"] = {str(w): {"mean": k.mean, "layers": list(k.layers)} for w, k in self.kept.items()}
        if self.kept_top is not None:
            out["kept_top"] = {str(w): {"mean": k.mean, "layers": list(k.layers)} for w, k in self.kept_top.items()}
        out["useful"] = [[[u.n, u.k, u.share, u.uniform_share] for u in layer] for layer in self.useful]
        return out

    @classmethod
    def from_json(cls, raw: dict) -> RoomNumbers:
        """A stored record of any layout, upgraded here (the one place that knows the
        layouts): 1 had no version, and before encoders no ``causal`` (every text was read
        by a causal model); 1 and 2 name no model ("": drawn on every model's charts, as
        they were); before 4 no ``kept_top`` (None: not measured, and said so); before 5 no
        step's own record ({}: each step says its numbers were not measured); a step's entry
        without a version or a record is left out (that step: not measured)."""
        version = raw.get("version", 1)
        if version > VERSION:
            raise ValueError(f"room numbers of layout {version}, newer than this release's {VERSION}")
        if version == 1:
            raw = {**raw, "causal": raw.get("causal", True)}
        return cls(
            n=int(raw["n"]), causal=bool(raw["causal"]), layers=int(raw["layers"]),
            layer_types=tuple(raw["layer_types"]), window=int(raw["window"] or 0), p=float(raw["p"]),
            useful=tuple(tuple(UsefulPoint(int(n), k, share, uni) for n, k, share, uni in layer)
                         for layer in raw["useful"]),
            kept={int(w): KeptShare(v["mean"], tuple(v["layers"])) for w, v in raw["kept"].items()},
            sink=tuple(raw["sink"]), sink_mean=raw["sink_mean"], hub_window=int(raw["hub_window"]),
            hubs=tuple(raw["hubs"]), kept_window=raw["kept_window"], kept_window_hubs=raw["kept_window_hubs"],
            error_layer=int(raw["error_layer"]), error_window=int(raw["error_window"]), errors=dict(raw["errors"]),
            model=str(raw.get("model", "")),
            kept_top=({int(w): KeptShare(v["mean"], tuple(v["layers"])) for w, v in raw["kept_top"].items()}
                      if raw.get("kept_top") is not None else None),
            steps={str(step): {"version": int(own["version"]), "record": own["record"]}
                   for step, own in (raw.get("steps") or {}).items()
                   if isinstance(own, dict) and isinstance(own.get("version"), int) and "record" in own})


def _r(x: float) -> float:
    """``x`` to DIGITS significant digits (what a chart or a CSV shows)."""
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return x
    return round(x, DIGITS - 1 - int(math.floor(math.log10(abs(x)))))


def hubs_of(a, weights=None) -> tuple[int, ...]:
    """The room's hubs on a text: the first token and the text's own strongest anchors
    (``weights``: its attention, Analysis.weights)."""
    found = [p for p, _ in hub_stats.anchors(a.weights() if weights is None else weights, a.causal, top=ANCHOR_HUBS)]
    return tuple(sorted({0, *found}))


def text_numbers(a, model: str = "") -> RoomNumbers:
    """The room's numbers of one analysed text (see the module's doc), recording ``model``:
    what made them."""
    n, layers = a.n, a.n_layers
    prefixes = stats.prefix_lengths(n)
    useful, tops = [], []
    keeps = {w: topk.for_window(w, a.causal) for w in ROOM_WINDOWS}
    weights = a.weights()  # its rows recomputed a block at a time (the room's texts are short: every row)
    for layer in range(layers):
        k_rows, top = stats.k_and_top(weights[layer], ROOM_P, keeps.values())  # one selection of each row's largest
        rows = stats.useful_share_by_prefix(weights[layer], ROOM_P, prefixes, a.layers[layer], k_rows=k_rows,
                                            prefix=lambda m, layer=layer: a.prefix(m)[layer])
        useful.append(tuple(UsefulPoint(r["n"], _r(r["k"]), _r(r["share"]), _r(r["uniform_share"])) for r in rows))
        tops.append(top)
    kept = {}
    for w in ROOM_WINDOWS:
        res = stats.share_kept_by_pattern(weights, w, (), a.causal)
        kept[w] = KeptShare(_r(res["mean"]), tuple(_r(x) for x in res["per_layer"].tolist()))
    kept_top = {}
    for w, keep in keeps.items():  # top-k by the real weights at the window's cells a row
        res = stats.kept_by_rows(torch.stack([top[keep] for top in tops]))
        kept_top[w] = KeptShare(_r(res["mean"]), tuple(_r(x) for x in res["per_layer"].tolist()))
    hubs = hubs_of(a, weights)
    alone = stats.share_kept_by_pattern(weights, HUB_WINDOW, (), a.causal)["mean"]
    with_hubs = stats.share_kept_by_pattern(weights, HUB_WINDOW, hubs, a.causal)["mean"]
    sink = tuple(_r(stats.sink_share(weights[layer])) if n > 1 else 0.0 for layer in range(layers))
    layer = min(ERROR_LAYER, layers - 1)
    q, k, v = a.qkv(layer)
    errors = outputs.output_errors(q, k, v, a.layers[layer], window=ERROR_WINDOW, hubs=hubs,
                                   bias=a.bias(layer))["mean"]
    return RoomNumbers(
        n=n, causal=a.causal, layers=layers, layer_types=tuple(a.layer_types), window=a.sliding_window, p=ROOM_P,
        useful=tuple(useful), kept=kept, sink=sink, sink_mean=_r(stats.sink_share(weights)),
        hub_window=HUB_WINDOW, hubs=tuple(hubs), kept_window=_r(alone), kept_window_hubs=_r(with_hubs),
        error_layer=layer, error_window=ERROR_WINDOW, errors={name: _r(e) for name, e in errors.items()}, model=model,
        kept_top=kept_top)


def share_fell(numbers: RoomNumbers, layer: int) -> bool | None:
    """Whether the useful share fell from the first prefix to the whole text in a layer
    (None: the text is too short to have two prefixes)."""
    rows = numbers.useful[layer]
    if len(rows) < 2:
        return None
    return rows[-1].share < rows[0].share


def layers_fell(numbers: RoomNumbers) -> tuple[int, int] | None:
    """In how many of a text's layers the useful share fell, of how many (None: too short)."""
    fell = [share_fell(numbers, layer) for layer in range(numbers.layers)]
    if any(f is None for f in fell):
        return None
    return sum(fell), len(fell)


def uniform_sink(n: int, causal: bool = True) -> float:
    """The first token's share if every row spread its weight evenly over the tokens it
    sees: the mean of 1/(i+1) over the rows after the first (what a sink must beat); in
    an encoder every row sees all n tokens, so 1/n."""
    if n <= 1:
        return 0.0
    return sum(1.0 / (i + 1) for i in range(1, n)) / (n - 1) if causal else 1.0 / n


def median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    m = len(values) // 2
    return values[m] if len(values) % 2 else (values[m - 1] + values[m]) / 2


@dataclass(frozen=True)
class Shrinks:
    """The texts in which the useful share fell in more than half of the layers (``held``),
    of those long enough to have two prefixes (``of``); per language, [held, of]."""

    held: int
    of: int
    langs: dict


@dataclass(frozen=True)
class WindowVerdict:
    """A window's median share kept and in how many texts it keeps more than half, over
    the texts longer than it (``of``); ``shorter``: those it keeps whole, left out."""

    median: float | None
    most: int
    of: int
    shorter: int


@dataclass(frozen=True)
class SinkVerdict:
    """The first token's median share, and in how many texts (of ``of``) it takes more than
    an even spread would give it."""

    median: float | None
    above: int
    of: int


@dataclass(frozen=True)
class Verdicts:
    texts: int
    shrinks: Shrinks
    window: dict  # window → WindowVerdict, for each of ROOM_WINDOWS
    sink: SinkVerdict
    errors: dict  # method → its median error


def verdicts(texts: list[tuple[str, RoomNumbers]]) -> Verdicts:
    """The room's verdict on each claim of the lesson, from its measured texts
    (``texts``: (language, RoomNumbers) pairs): whether the useful share shrinks, what each
    window keeps, the first token's share, each method's median error."""
    held = of = 0
    langs: dict[str, list[int]] = {}
    for lang, nums in texts:
        fell = layers_fell(nums)
        if fell is None:
            continue
        ok = fell[0] * 2 > fell[1]
        of += 1
        held += ok
        got = langs.setdefault(lang, [0, 0])
        got[0] += ok
        got[1] += 1
    window = {}
    for w in ROOM_WINDOWS:  # a text no longer than the window keeps all of it: it proves nothing
        kept = [nums.kept[w].mean for _, nums in texts if nums.n > w]
        window[w] = WindowVerdict(median(kept), sum(1 for x in kept if x > 0.5), len(kept), len(texts) - len(kept))
    sinks = [(nums.sink_mean, uniform_sink(nums.n, nums.causal)) for _, nums in texts if nums.n > 1]
    sink = SinkVerdict(median([s for s, _ in sinks]), sum(1 for s, u in sinks if s > u), len(sinks))
    names = sorted({name for _, nums in texts for name in nums.errors})
    errors = {name: median([nums.errors[name] for _, nums in texts if name in nums.errors]) for name in names}
    return Verdicts(len(texts), Shrinks(held, of, langs), window, sink, errors)
