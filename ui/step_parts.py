"""What every step is made of, and nothing of any one step: its declaration (``Step``: a
stable id apart from its order, its questions, its settings' rows, how its summary is
built, its room charts and the room's CSV columns it adds), its summary (``Summary``: the
main figure, the key numbers, the settings used, the questions, and the step's own typed
record of numbers) and the predict-then-reveal ``Question``; the labels several steps
share. A step is one package of pages/; importing pages fills ui.walk with them.

No Streamlit here."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from . import figures
from .i18n import Translator
from .setting_rows import AVERAGE, Setting


@dataclass
class Question:
    """Predict, then reveal: ``answer`` is the page's own number; the option nearest to
    it counts as right."""

    text: str
    options: list
    answer: Any
    label: Callable[[Any], str]
    value_text: str
    note: str | None = None
    source: str = "text"  # where the answer comes from: "text" (measured on the reader's text)
    # or "model" (worked out by the cost model; a timing on this device is only a note beside it)
    id: str = ""  # its stable id, from the step's declaration: ui.summaries.build sets it
    form: str = "options"  # or "estimate": a number asked for (no options), ``answer`` the measured one

    @property
    def right(self):
        return None if self.form == "estimate" else nearest_option(self.options, self.answer)


@dataclass(frozen=True)
class Matched:
    """A question's matched question: the same idea on other numbers (another window,
    length or layer), which a teacher asks after the reveal — the class's share right on it,
    answered alone, says whether the discussion taught the idea (peer instruction's third
    number beside the two votes). ``of`` is the question it matches, ``id`` its own stable
    id. Either ``change(a, cfg)`` gives other settings, on which the step's own summary asks
    ``of`` again (its words name the numbers that changed), or ``ask(t, a, text, model_id,
    cfg)`` builds it (numbers no setting holds: a text three times as long)."""

    of: str
    id: str
    change: Callable[[Any, dict], dict] | None = None
    ask: Callable[..., Question] | None = None


@dataclass(frozen=True)
class Estimate:
    """A question a teacher may ask for a number instead of an option (a count or a
    ratio: steps 1, 2, 3 and 7): each student types an estimate, the class's estimates are
    drawn against the measured value on a log axis, and one within a factor of
    server.answers.ESTIMATE_FACTOR counts as right. ``of`` is the question it comes from,
    ``id`` its own stable id; ``ask(t, a, text, model_id, cfg)`` builds it (a Question whose
    ``answer`` is the measured number), or, without it, ``of`` is asked as it is, its answer
    as the number."""

    of: str
    id: str
    ask: Callable[..., Question] | None = None


@dataclass
class Summary:
    """A step's summary for one text, language and settings: what its page and the
    handout both show. ``numbers`` is the step's own typed record (each step declares
    its class); ``measured`` the runs a button started, where they were run."""

    step: str  # the step's id
    params: list[tuple[str, str]]  # the settings used, as (label, value) in the reader's language
    key: list[tuple[str, str]]  # the step's key numbers, as (label, value)
    figure: go.Figure
    questions: list[Question]  # in the order the step declares their ids, each with its id
    numbers: Any = None
    measured: list[go.Figure] = field(default_factory=list)


@dataclass(frozen=True)
class RoomView:
    """What one of a step's room charts shows of a class's texts: a figure (with where each
    student's own point lies, to ring it: owner → (x, y)) or a table (column → values),
    and the sentences beneath."""

    said: list[str]
    figure: Any = None
    where: dict = field(default_factory=dict)
    table: dict | None = None


@dataclass(frozen=True)
class RoomChart:
    """One of a step's room charts: ``build(t, done, settings)`` → RoomView, from the
    class's measured texts (``done``: server.texts.RoomText, their numbers an
    attn.room_numbers.RoomNumbers each) and the page's own settings it follows (its layer,
    its window: ``settings``)."""

    id: str
    build: Callable[[Translator, list, dict], RoomView]


@dataclass(frozen=True)
class RoomMeasure:
    """A step's own number of each text sent to a class's room, beside those the engine
    keeps for every step (attn.room_numbers): ``measure(a)`` takes the text's Analysis (its
    first ROOM_TOKENS tokens, on the class's model) and gives the step's record;
    ``to_json(record)`` is how the store keeps it, ``from_json(raw, version)`` reads one kept
    in any of the step's layouts up to ``version`` (the step upgrades its own older ones).
    The room's store and queue never look inside it."""

    version: int
    measure: Callable[[Any], Any]
    to_json: Callable[[Any], dict]
    from_json: Callable[[dict, int], Any]


@dataclass(frozen=True)
class Step:
    """A page of the walk, declared once in its own package of pages/.

    ``id`` never changes: the page's URL, the store's classes and votes, share links and
    the locale group of its strings (``id`` with ``_`` for ``-``) name it. ``order`` places
    it in the walk (its number on screen is its place among the steps). ``page`` is its
    page file; ``questions`` its predict-then-reveal questions, each by a stable id (a vote
    names it); ``settings`` its rows of the setting table, and ``summary_from`` those its
    summary is built from; ``summary(t, a, text, model_id, cfg, **inputs)`` builds it, with
    ``inputs()``'s extra inputs (step 7's live run) where it has them; ``needs_text`` False
    for a page that measures no text; ``room`` its charts of a class's texts and ``csv``
    the columns it adds to the room's CSV (``csv(numbers)`` → [(header, value of a
    RoomNumbers)], given every measured text's numbers); ``room_measure`` its own number of
    each room text, where the engine's are not enough (:class:`RoomMeasure`; its charts and
    columns read it with ``room_record``); ``prose`` the locale keys whose
    glossary terms are linked on it; ``measured(t, a, text, model_id, cfg)`` what the handout adds
    that a button ran on the server: (a heading's key, figures), or the key of a note
    saying it was not run; ``matched`` a matched question for each of its questions
    (:class:`Matched`); ``estimates`` those a teacher may ask for a number (:class:`Estimate`);
    ``ahead(a, text, model_id, cfg)`` builds the page's other cached measures (besides its
    summary) on the settings ``cfg``, so that a first visit finds them built too
    (ui.summaries.build_all: the start's warm-up and a class's prebuild)."""

    id: str
    order: int
    icon: str
    page: str
    is_step: bool = True
    questions: tuple[str, ...] = ()
    settings: tuple[Setting, ...] = ()
    summary_from: tuple[str, ...] = ()
    summary: Callable[..., Summary] | None = None
    inputs: Callable[[], dict] | None = None
    needs_text: bool = True
    room: tuple[RoomChart, ...] = ()
    csv: Callable[[list], list] | None = None
    prose: tuple[str, ...] = ("lead", "outro")
    measured: Callable | None = None
    matched: tuple[Matched, ...] = ()
    estimates: tuple[Estimate, ...] = ()
    ahead: Callable | None = None
    room_measure: RoomMeasure | None = None

    def room_record(self, numbers) -> Any:
        """Its own record of a room text (``numbers``: the text's RoomNumbers), or None where
        it was not measured: a text measured before the step declared it, kept in a layout
        newer than this release reads, or one its ``from_json`` cannot read (logged)."""
        own = numbers.steps.get(self.id) if self.room_measure is not None else None
        if own is None or own["version"] > self.room_measure.version:
            return None
        try:
            return self.room_measure.from_json(own["record"], own["version"])
        except Exception:  # a record the step cannot read: not measured, rather than a broken room
            logging.getLogger(__name__).exception("step %s's own room record could not be read", self.id)
            return None

    def matched_to(self, qid: str) -> Matched | None:
        """The matched question of its question ``qid``, if it declares one."""
        return next((m for m in self.matched if m.of == qid), None)

    def estimate_of(self, qid: str) -> Estimate | None:
        """Its question ``qid`` asked for a number, if it declares that."""
        return next((e for e in self.estimates if e.of == qid), None)

    @property
    def key(self) -> str:
        """The group of its strings in the locales."""
        return self.id.replace("-", "_")

    @property
    def title_key(self) -> str:
        return f"{self.key}.title"

    @property
    def nav_key(self) -> str:
        """Its name in the navigation."""
        return f"{self.key}.nav"

    def lead_key(self, t, both_ways: bool) -> str:
        """The locale key of its lead: the one an encoder's direction needs where it has one."""
        lead = f"{self.key}.lead"
        return f"{lead}_both" if both_ways and t.has(f"{lead}_both") else lead

    def prose_keys(self) -> list[str]:
        """The locale keys of its prose, in the order the page draws them."""
        return [k if "." in k else f"{self.key}.{k}" for k in self.prose]


ANSWER_FROM = {"text": "predict.answer", "model": "predict.answer_model"}


def verdict(t: Translator, q: Question, guess) -> str:
    """The measured answer with its note (where it comes from) beside it, then whether
    the guess (or None) was right."""
    said = [t(ANSWER_FROM[q.source], value=q.value_text)]
    if q.note:
        said.append(q.note)
    if guess is not None:
        said.append(t("predict.right") if guess == q.right else t("predict.wrong", nearest=q.label(q.right)))
    return t.sentences(said)


def nearest_option(options: list, answer):
    """The option that counts as right: the answer itself among categories, else the
    number nearest to it on a log scale (so 3.6 is nearer 4 than 2, 9 nearer 10 than 2)."""
    if not all(isinstance(o, (int, float)) for o in options):
        return answer

    def log(x):
        return math.log(max(float(x), 1e-12))

    return min(options, key=lambda o: abs(log(o) - log(answer)))


def head_of(value):
    """A head setting: the picker's "average" (or None, as pickers return it) or a number."""
    return None if value is None or value == AVERAGE else int(value)


def layer_label(t: Translator, a, layer: int) -> str:
    window = a.layers[layer].window
    if window is not None:
        return t("common.layer_sliding", layer=layer, w=t.int(window))
    return t("common.layer_full", layer=layer)


def head_label(t: Translator, head) -> str:
    return t("common.head_average") if head is None else t("common.head_n", h=head)


def head_caption(t: Translator, a, layer: int, head) -> str:
    return f"{layer_label(t, a, layer)} · {head_label(t, head)}"


def who(t: Translator, a, layer: int, head) -> list[tuple[str, str]]:
    """The layer and head a step shows, as its summary's settings say them."""
    return [(t("common.layer"), layer_label(t, a, layer)), (t("common.head"), head_label(t, head))]


def sampled_note(t: Translator, sampled, unit: str = "points") -> str | None:
    """The sentence a statistic read on a sample of a long text's rows carries (None when
    it read every row): which rows, how many, and the spread of such samples — in
    percentage points of a share (``unit`` "points") or in cells (k̄: "cells")."""
    if sampled is None or sampled.every_row:
        return None
    spread = t.float(100 * sampled.spread if unit == "points" else sampled.spread, 2)
    return t(f"common.sampled_{unit}", rows=t.int(sampled.rows), n=t.int(sampled.n), first=t.int(sampled.first),
             spaced=t.int(sampled.rows - sampled.first), spread=spread)


def heatmap(t: Translator, grid, tokens, title: str, **kw):
    """An attention grid as the steps draw it: (figure, the factor it was pooled by)."""
    n = len(tokens)
    return figures.attention_heatmap(
        grid, tokens, title=title, x_title=t("common.key_axis"), y_title=t("common.query_axis"),
        hover=t("common.hover_cell_tokens") if n <= 128 else t("common.hover_cell"),
        separators=t.separators, colorbar=t("common.weight"), **kw)
