"""What a setting is, and the rows a step declares: a setting's key, its page (the step's
id), its kind, its default on a text and the values its widget takes. Each step declares
its own rows (pages.<step>); ui.setting_table gathers them into the one table that the
widgets, the kept settings, a share link's checks and the handout read.

No Streamlit here, and nothing of any step: plain data and the helpers that make rows."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attn import methods

AVERAGE = "avg"  # the head picker's "average over heads"
DEFAULT_LAYER = 8  # a sliding layer whose local band and sink read clearly on the sample texts
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


class Context:
    """What a default may need besides the sizes: the anchors of the text (positions,
    strongest first), asked for only by the settings whose default is made of them."""

    def __init__(self, anchors: Callable[[int], list[int]] | None = None):
        self._anchors = anchors or (lambda k: [0])

    def anchors(self, k: int) -> list[int]:
        return self._anchors(k)


@dataclass(frozen=True)
class Setting:
    """One setting. ``takes`` says what its widget takes:

    * ``"int"``: a whole number in ``bounds(d)`` (a slider or number input);
    * ``"choice"``: one of ``choices(d)`` (select box, radio, select slider);
    * ``"many"``: a list of distinct ``choices(d)`` (multiselect, pills);
    * ``"bool"``: a toggle;
    * ``"text"``: a string of at most ``chars`` characters;
    * ``"guess"``: a question's answer or none (its options are the page's).

    ``page`` is the id of the step that draws it. ``default(d, ctx)`` is the widget's
    first value on a text; ``ctx`` gives what a default may need besides the sizes (the
    text's anchors, for hubs). ``widget`` is the Streamlit widget its page draws
    (ui.widgets.setting draws it from this row), and ``names`` what its options are named
    by when the row says so: the text's tokens (``"token"``), the model's layers
    (``"layer"``) or heads (``"head"``)."""

    key: str
    page: str
    takes: str
    default: Callable[[Dims, Context], Any]
    bounds: Callable[[Dims], tuple[int, int]] | None = None
    choices: Callable[[Dims], tuple] | None = None
    chars: int = 0
    widget: str = ""  # slider, select_slider, selectbox, radio, multiselect, pills, toggle, number, text
    names: str = ""  # "token", "layer", "head": options named by the text or the model (else by the page)
    clamp: bool = False  # a number past its range on this text is kept at the nearest end (a window), not reset

    @property
    def tokens(self) -> bool:
        """Its options are positions, named by the text's tokens."""
        return self.names == "token"

    def valid(self, value, d: Dims = WIDEST) -> bool:
        """Whether the widget takes ``value`` on a text and model of sizes ``d``."""
        if self.takes == "int":
            lo, hi = self.bounds(d)
            return _int(value) and lo <= value <= hi
        if self.takes == "choice":
            return _hashable(value) and value in self.choices(d)
        if self.takes == "many":
            options = self.choices(d)
            return (isinstance(value, (list, tuple)) and all(_hashable(v) and v in options for v in value)
                    and len(set(value)) == len(value))
        if self.takes == "bool":
            return isinstance(value, bool)
        if self.takes == "text":
            return isinstance(value, str) and len(value) <= self.chars
        if self.takes == "guess":
            return value is None or (isinstance(value, str) and len(value) <= GUESS_CHARS) or (
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
        raise ValueError(f"unknown kind of setting {self.takes!r}")


def _hashable(v) -> bool:
    """Values a widget's options can hold (a link may carry a list where a word belongs)."""
    return isinstance(v, (str, int, float, bool)) or v is None


def first_layer(d: Dims) -> int:
    return min(DEFAULT_LAYER, d.n_layers - 1)


def layers_of(d: Dims) -> tuple:
    return tuple(range(d.n_layers))


def heads_or_average(d: Dims) -> tuple:
    return (AVERAGE, *range(d.n_heads))


def positions(d: Dims) -> range:
    return range(d.n)  # a range: membership without listing a million positions


def linear_features() -> tuple[str, ...]:
    """The feature maps of the error table's linear methods."""
    return tuple(m.feature for m in methods.tagged(methods.ERRORS) if m.family == "linear")


def layer_row(key: str, page: str) -> Setting:
    """Which layer a page shows (a sliding layer at first)."""
    return Setting(key, page, "choice", lambda d, c: first_layer(d), choices=layers_of, widget="selectbox",
                   names="layer")


def head_row(key: str, page: str) -> Setting:
    """Which head a page shows, or their average (at first)."""
    return Setting(key, page, "choice", lambda d, c: AVERAGE, choices=heads_or_average, widget="selectbox",
                   names="head")


def window_hi(cap: int, n: int) -> int:
    """The upper end of a window slider capped at ``cap`` on a text of n tokens."""
    return max(2, min(n, cap))


def window_row(key: str, page: str, first: int, cap: int) -> Setting:
    """A window slider: 1 up to the text's length or ``cap``, ``first`` at first."""
    return Setting(key, page, "int", lambda d, c: min(first, d.n), bounds=lambda d: (1, window_hi(cap, d.n)),
                   widget="slider", clamp=True)


def hubs_row(key: str, page: str, first: Callable[[Dims, Context], Any]) -> Setting:
    """Hub positions, named by the text's tokens."""
    return Setting(key, page, "many", first, choices=positions, widget="multiselect", names="token")


def guess_row(key: str, page: str) -> Setting:
    """A reader's guess on one of a page's questions (its options are the page's)."""
    return Setting(key, page, "guess", lambda d, c: None, widget="radio")
