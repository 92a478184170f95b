"""Every setting a reader can change, once: its key, its page, its kind, its default on
a text and the values its widget takes. The pages' widgets, the settings kept across
pages, a share link's checks, the handout's settings and the playground's give-backs
all read a row of this table; nothing else says what a setting may be.

A value is checked twice, by the same row:

* ``valid(key, value)`` — its kind and the range its widget would take on the longest
  text and the largest model (a share link is checked with this before anything of it
  is used);
* ``fits(key, value, a)`` — the exact range of its widget on this text (``a``, an
  analysis: tokens, layers, heads). Each page drops a value that does not fit before it
  draws the widget, saying so when the value came from a link.

No Streamlit here: the table is plain data, read by ``ui.widgets`` and the tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attn import composition, methods
from attn.features import FEATURE_MAPS

from .keys import guess
from .steps import PLAYGROUND, STEPS

AVERAGE = "avg"  # the head picker's "average over heads"
DEFAULT_LAYER = 8  # a sliding layer whose local band and sink read clearly on the sample texts
P_OPTIONS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
W_MAX = {3: 512, 4: 256, 6: 256}  # the window sliders' upper ends
REACH_W, REACH_W_DEFAULT = (2, 8), 3  # step 3's reach: window 2..8, 3 at first
SWEEP_METRICS = ("kl", "perplexity", "top1_agreement")  # what step 6's sweep draws
# the playground's settings
RANDOM_BLOCKS = (16, 32, 64, 128)
MAX_SETTING = 100_000  # the number inputs' upper end: anything past the text gets a message
HUB_MODES = ("anchors", "chosen")
SCOPES = ("all", "sliding")
SEED_CHARS = 40
GUESS_CHARS = 200  # a guess is one of its question's options: a short label or a number


@dataclass(frozen=True)
class Dims:
    """What a widget's range depends on: the text's tokens, the model's layers and heads."""

    n: int
    n_layers: int
    n_heads: int
    causal: bool = True  # False: an encoder, whose own attention reads both ways

    @classmethod
    def of(cls, a) -> Dims:
        return cls(a.n, a.n_layers, a.n_heads, getattr(a, "causal", True))


# the widest any text and model could make a range: what a share link is checked with
WIDEST = Dims(n=10**6, n_layers=10**3, n_heads=10**3)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class Setting:
    """One setting. ``kind`` says what its widget takes:

    * ``"int"``: a whole number in ``bounds(d)`` (a slider or number input);
    * ``"choice"``: one of ``choices(d)`` (select box, radio, select slider);
    * ``"many"``: a list of distinct ``choices(d)`` (multiselect, pills);
    * ``"bool"``: a toggle;
    * ``"text"``: a string of at most ``chars`` characters;
    * ``"guess"``: a question's answer or none (its options are the page's).

    ``default(d, ctx)`` is the widget's first value on a text; ``ctx`` gives what a
    default may need besides the sizes (the text's anchors, for hubs). ``widget`` is the
    Streamlit widget its page draws (ui.widgets.setting draws it from this row), and
    ``names`` what its options are named by when the row says so: the text's tokens
    (``"token"``), the model's layers (``"layer"``) or heads (``"head"``)."""

    key: str
    page: int
    kind: str
    default: Callable[[Dims, Context], Any]
    bounds: Callable[[Dims], tuple[int, int]] | None = None
    choices: Callable[[Dims], tuple] | None = None
    chars: int = 0
    widget: str = ""  # slider, select_slider, selectbox, radio, multiselect, pills, toggle, number, text
    names: str = ""  # "token", "layer", "head": options named by the text or the model (else by the page)

    @property
    def tokens(self) -> bool:
        """Its options are positions, named by the text's tokens."""
        return self.names == "token"

    def valid(self, value, d: Dims = WIDEST) -> bool:
        """Whether the widget takes ``value`` on a text and model of sizes ``d``."""
        if self.kind == "int":
            lo, hi = self.bounds(d)
            return _int(value) and lo <= value <= hi
        if self.kind == "choice":
            return _hashable(value) and value in self.choices(d)
        if self.kind == "many":
            options = self.choices(d)
            return (isinstance(value, (list, tuple)) and all(_hashable(v) and v in options for v in value)
                    and len(set(value)) == len(value))
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "text":
            return isinstance(value, str) and len(value) <= self.chars
        if self.kind == "guess":
            return value is None or (isinstance(value, str) and len(value) <= GUESS_CHARS) or (
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
        raise ValueError(f"unknown kind of setting {self.kind!r}")


def _hashable(v) -> bool:
    """Values a widget's options can hold (a link may carry a list where a word belongs)."""
    return isinstance(v, (str, int, float, bool)) or v is None


class Context:
    """What a default may need besides the sizes: the anchors of the text (positions,
    strongest first), asked for only by the settings whose default is made of them."""

    def __init__(self, anchors: Callable[[int], list[int]] | None = None):
        self._anchors = anchors or (lambda k: [0])

    def anchors(self, k: int) -> list[int]:
        return self._anchors(k)


def _first_layer(d: Dims) -> int:
    return min(DEFAULT_LAYER, d.n_layers - 1)


def w_hi(step: int, n: int) -> int:
    """The upper end of a step's window slider on a text of n tokens."""
    return max(2, min(n, W_MAX[step]))


def _layers(d: Dims) -> tuple:
    return tuple(range(d.n_layers))


def _heads_or_average(d: Dims) -> tuple:
    return (AVERAGE, *range(d.n_heads))


def _positions(d: Dims) -> range:
    return range(d.n)  # a range: membership without listing a million positions


def linear_features() -> tuple[str, ...]:
    """Step 6's feature maps: the linear methods of the error table."""
    return tuple(m.feature for m in methods.tagged(methods.ERRORS) if m.family == "linear")


def _layer(key: str, page: int) -> Setting:
    return Setting(key, page, "choice", lambda d, c: _first_layer(d), choices=_layers, widget="selectbox",
                   names="layer")


def _head(key: str, page: int) -> Setting:
    return Setting(key, page, "choice", lambda d, c: AVERAGE, choices=_heads_or_average, widget="selectbox",
                   names="head")


def _window(key: str, page: int, first: int) -> Setting:
    return Setting(key, page, "int", lambda d, c: min(first, d.n), bounds=lambda d: (1, w_hi(page, d.n)),
                   widget="slider")


def _count(key: str, lo: int, first: int) -> Setting:
    return Setting(key, PLAYGROUND.number, "int", lambda d, c: first, bounds=lambda d: (lo, MAX_SETTING),
                   widget="number")


def _hubs(key: str, page: int, first) -> Setting:
    return Setting(key, page, "many", first, choices=_positions, widget="multiselect", names="token")


_PG = PLAYGROUND.number

TABLE: tuple[Setting, ...] = (
    _layer("s1_layer", 1), _head("s1_head", 1),
    Setting("s1_token", 1, "choice", lambda d, c: d.n - 1, choices=_positions, widget="selectbox", names="token"),
    _layer("s2_layer", 2), _head("s2_head", 2),
    Setting("s2_p", 2, "choice", lambda d, c: 0.9, choices=lambda d: P_OPTIONS, widget="select_slider"),
    _layer("s3_layer", 3), _head("s3_head", 3), _window("s3_w", 3, 16),
    Setting("s3_rw", 3, "int", lambda d, c: REACH_W_DEFAULT, bounds=lambda d: REACH_W, widget="slider"),
    Setting("s3_rl", 3, "int", lambda d, c: min(4, d.n_layers), bounds=lambda d: (1, d.n_layers), widget="slider"),
    _hubs("s4_hubs", 4, lambda d, c: c.anchors(5)[:3]),
    _window("s4_w", 4, 8),
    _layer("s5_layer", 5), _head("s5_head", 5),
    Setting("s5_feature", 5, "choice", lambda d, c: next(iter(FEATURE_MAPS)), choices=lambda d: tuple(FEATURE_MAPS),
            widget="radio"),
    Setting("s5_causal", 5, "bool", lambda d, c: d.causal, widget="toggle"),
    _layer("s6_layer", 6),
    Setting("s6_head", 6, "choice", lambda d, c: 0, choices=lambda d: tuple(range(d.n_heads)), widget="selectbox",
            names="head"),
    _window("s6_w", 6, 16),
    _hubs("s6_hubs", 6, lambda d, c: c.anchors(3)),
    Setting("s6_feature", 6, "choice", lambda d, c: linear_features()[0], choices=lambda d: linear_features(),
            widget="radio"),
    Setting("s6_swap_layer", 6, "choice", lambda d, c: 0, choices=_layers, widget="selectbox", names="layer"),
    Setting("s6_swap_metric", 6, "choice", lambda d, c: SWEEP_METRICS[0], choices=lambda d: SWEEP_METRICS,
            widget="radio"),
    *(Setting(guess(qid), s.number, "guess", lambda d, c: None, widget="radio") for s in STEPS for qid in s.questions),
    Setting("pg_on", _PG, "many", lambda d, c: ["window", "hubs"], choices=lambda d: tuple(composition.PARTS),
            widget="pills"),
    _count("pg_w", 1, composition.PRESET_WINDOW), _count("pg_dilated", 1, 8), _count("pg_stride", 1, 4),
    Setting("pg_hub_mode", _PG, "choice", lambda d, c: "anchors", choices=lambda d: HUB_MODES, widget="radio"),
    _hubs("pg_hubs", _PG, lambda d, c: [0]),
    _count("pg_random", 1, 2),
    Setting("pg_rblock", _PG, "choice", lambda d, c: 32, choices=lambda d: RANDOM_BLOCKS, widget="selectbox"),
    Setting("pg_seed", _PG, "text", lambda d, c: "0", chars=SEED_CHARS, widget="text"),
    _count("pg_local", 2, 64),
    Setting("pg_causal", _PG, "bool", lambda d, c: d.causal, widget="toggle"),
    Setting("pg_scope", _PG, "choice", lambda d, c: "all", choices=lambda d: SCOPES, widget="radio"),
    Setting("pg_layer", _PG, "choice", lambda d, c: _first_layer(d), choices=_layers, widget="selectbox",
            names="layer"),
    Setting("pg_rl", _PG, "int", lambda d, c: min(2, d.n_layers), bounds=lambda d: (1, d.n_layers), widget="slider"),
)
ROWS = {s.key: s for s in TABLE}
KEYS = tuple(ROWS)


def row(key: str) -> Setting:
    return ROWS[key]


def keys(page: int) -> tuple[str, ...]:
    """The settings one page draws, in the table's order."""
    return tuple(s.key for s in TABLE if s.page == page)


def valid(key: str, value) -> bool:
    """A share link's check: a setting of ours, of its kind, in the range its widget has
    on the longest text and the largest model."""
    return key in ROWS and ROWS[key].valid(value)


def fits(key: str, value, a) -> bool:
    """Whether the widget of ``key`` takes ``value`` on this text (analysis ``a``)."""
    return ROWS[key].valid(value, Dims.of(a))


def default(key: str, a, ctx: Context) -> Any:
    """The first value of key's widget on this text."""
    return ROWS[key].default(Dims.of(a), ctx)


def defaults(a, ctx: Context) -> dict:
    """Every setting as its page starts it on this text (``ctx``: its anchors, from
    ui.measures.setting_context)."""
    return {s.key: s.default(Dims.of(a), ctx) for s in TABLE}


def settings_for(a, ctx: Context, given: dict) -> dict:
    """The pages' defaults, with each given setting that fits this text in its place."""
    out = defaults(a, ctx)
    for key, value in given.items():
        if key in out and fits(key, value, a):
            out[key] = value
    return out
