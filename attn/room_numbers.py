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
  every layer and overall;
* step 4: the first token's share of each row's weight, per layer; what a window of
  HUB_WINDOW keeps alone, and with the first token and the text's own anchors as hubs;
* step 6: each shortcut's output error against exact softmax in one layer (ERROR_LAYER,
  or the last) at window ERROR_WINDOW with those hubs, beside the fused kernel's.

``text_numbers(a)`` takes an Analysis; every number is rounded to 5 significant digits
(what a chart and a CSV show). No Streamlit here.
"""

from __future__ import annotations

import math

from . import stats

ROOM_P = 0.9
ROOM_WINDOWS = (4, 16, 64, 256)
HUB_WINDOW = 8
ERROR_LAYER = 8  # a sliding layer of the packaged model, as the steps' own first layer
ERROR_WINDOW = 16
ANCHOR_HUBS = 3  # the text's own anchors taken as hubs, besides the first token
ROOM_TOKENS = 512  # a room text is analysed on its first tokens at most (the screen says so)
DIGITS = 5


def _r(x: float) -> float:
    """``x`` to DIGITS significant digits (what a chart or a CSV shows)."""
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return x
    return round(x, DIGITS - 1 - int(math.floor(math.log10(abs(x)))))


def hubs_of(a) -> tuple[int, ...]:
    """The room's hubs on a text: the first token and the text's own strongest anchors."""
    found = [p for p, _ in stats.anchors(a.attentions, top=ANCHOR_HUBS, causal=a.causal)]
    return tuple(sorted({0, *found}))


def text_numbers(a) -> dict:
    """The room's numbers of one analysed text (see the module's doc)."""
    n, layers = a.n, a.n_layers
    windows = [a.own_window(layer) for layer in range(layers)]
    prefixes = stats.prefix_lengths(n)
    useful = []
    for layer in range(layers):
        rows = stats.useful_share_by_prefix(a.attentions[layer].float(), ROOM_P, prefixes, windows[layer], a.causal,
                                            prefix=lambda m, layer=layer: a.prefix(m)[layer].float())
        useful.append([[r["n"], _r(r["k"]), _r(r["share"]), _r(r["uniform_share"])] for r in rows])
    weights = a.attentions.float()
    kept = {}
    for w in ROOM_WINDOWS:
        res = stats.share_kept_by_pattern(weights, w, (), a.causal)
        kept[str(w)] = {"mean": _r(res["mean"]), "layers": [_r(x) for x in res["per_layer"].tolist()]}
    hubs = hubs_of(a)
    alone = stats.share_kept_by_pattern(weights, HUB_WINDOW, (), a.causal)["mean"]
    with_hubs = stats.share_kept_by_pattern(weights, HUB_WINDOW, hubs, a.causal)["mean"]
    sink = [_r(weights[layer, :, 1:, 0].mean()) if n > 1 else 0.0 for layer in range(layers)]
    layer = min(ERROR_LAYER, layers - 1)
    q, k, v = a.qkv(layer)
    errors = stats.output_errors(q, k, v, scale=a.layer_scale(layer), own_window=a.own_window(layer),
                                 window=ERROR_WINDOW, hubs=hubs, causal=a.causal)["mean"]
    return {
        "n": n, "causal": a.causal, "layers": layers, "layer_types": list(a.layer_types), "window": a.sliding_window,
        "p": ROOM_P,
        "useful": useful, "kept": kept, "sink": sink,
        "sink_mean": _r(stats.sink_share(a.attentions)), "hub_window": HUB_WINDOW, "hubs": list(hubs),
        "kept_window": _r(alone), "kept_window_hubs": _r(with_hubs), "error_layer": layer,
        "error_window": ERROR_WINDOW, "errors": {name: _r(e) for name, e in errors.items()},
    }


def share_fell(numbers: dict, layer: int) -> bool | None:
    """Whether the useful share fell from the first prefix to the whole text in a layer
    (None: the text is too short to have two prefixes)."""
    rows = numbers["useful"][layer]
    if len(rows) < 2:
        return None
    return rows[-1][2] < rows[0][2]


def layers_fell(numbers: dict) -> tuple[int, int] | None:
    """In how many of a text's layers the useful share fell, of how many (None: too short)."""
    fell = [share_fell(numbers, layer) for layer in range(numbers["layers"])]
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


def verdicts(texts: list[tuple[str, dict]]) -> dict:
    """The room's verdict on each claim of the lesson, from its measured texts
    (``texts``: (language, text_numbers) pairs):

    * ``shrinks``: the texts in which the useful share fell (first prefix → whole text)
      in more than half of the layers, of those long enough to have two prefixes, in all
      and per language;
    * ``window``: each window's median share kept, and in how many texts it keeps more
      than half of the weight, over the texts longer than the window (``shorter``: those
      it keeps whole, left out);
    * ``sink``: the median share of the first token, and in how many texts it takes more
      than an even spread would give it (``uniform_sink``);
    * ``errors``: each method's median error."""
    shrinks = {"held": 0, "of": 0, "langs": {}}
    for lang, nums in texts:
        fell = layers_fell(nums)
        if fell is None:
            continue
        held = fell[0] * 2 > fell[1]
        shrinks["of"] += 1
        shrinks["held"] += held
        got = shrinks["langs"].setdefault(lang, [0, 0])
        got[0] += held
        got[1] += 1
    window = {}
    for w in ROOM_WINDOWS:  # a text no longer than the window keeps all of it: it proves nothing
        kept = [nums["kept"][str(w)]["mean"] for _, nums in texts if nums["n"] > w]
        window[w] = {"median": median(kept), "most": sum(1 for x in kept if x > 0.5), "of": len(kept),
                     "shorter": len(texts) - len(kept)}
    sinks = [(nums["sink_mean"], uniform_sink(nums["n"], nums.get("causal", True))) for _, nums in texts
             if nums["n"] > 1]
    sink = {"median": median([s for s, _ in sinks]), "above": sum(1 for s, u in sinks if s > u), "of": len(sinks)}
    names = sorted({name for _, nums in texts for name in nums["errors"]})
    errors = {name: median([nums["errors"][name] for _, nums in texts if name in nums["errors"]]) for name in names}
    return {"texts": len(texts), "shrinks": shrinks, "window": window, "sink": sink, "errors": errors}
