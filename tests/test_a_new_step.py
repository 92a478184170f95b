"""A step is one package: a throwaway step written into a temporary package — its
declaration, its page and nothing else, its strings put beside the app's — is picked up by
the navigation, the predict-then-reveal question, a live class's vote, the handout, the
room's charts and the room's CSV, with no other file of the app touched. Its place in the
walk (between steps 2 and 3) renumbers the steps after it on screen; the ids that name them
in the store and in links do not move."""

import csv
import io
import json
import sys
import textwrap

import pytest

import pages
from helpers import page_path
from server import exports
from ui import handout, i18n, keys, room_work, setting_table, walk
from ui.classroom import handle
from ui.classroom import room as room_panel

pytestmark = pytest.mark.apptest

DECLARATION = '''
"""A throwaway step: how long the text is, and what doubling it gives."""

from dataclasses import dataclass

from ui import figures, room_figures
from ui.setting_rows import layer_row
from ui.step_parts import Question, RoomChart, RoomMeasure, RoomView, Step, Summary
from ui.walk import page_file

ID = "text-length"


@dataclass(frozen=True)
class Numbers:
    n: int


@dataclass(frozen=True)
class Distinct:
    """The step's own number of a room text, which the engine does not keep: its distinct tokens."""
    tokens: int


ROOM = RoomMeasure(1, measure=lambda a: Distinct(len(set(a.ids))), to_json=lambda d: {"tokens": d.tokens},
                   from_json=lambda raw, version: Distinct(raw["tokens"]))


def summary(t, a, text, model_id, cfg):
    n = a.n
    fig = figures.bars([t("text_length.bar")], [n], title=t("text_length.title"), y_title="n",
                       separators=t.separators)
    q = Question(t("text_length.question"), [n // 2, n, 2 * n], n, lambda x: t.int(x), t.int(n))
    return Summary(ID, [], [(t("text_length.bar"), t.int(n))], fig, [q], Numbers(n))


def room_lengths(t, done, cfg):
    langs = room_figures.languages(t, done)
    points = [{"group": langs[x.lang], "lang": x.lang, "y": STEP.room_record(x.numbers).tokens} for x in done]
    fig, xs = room_figures.strips(list(langs.values()), points, title=t("text_length.title"), y_title="n",
                                  separators=t.separators, lang_names=langs, hover="%{y}")
    return RoomView([t("text_length.room_said", n=len(done))], fig,
                    {x.owner: (xs[i], points[i]["y"]) for i, x in enumerate(done)})


STEP = Step(ID, order=25, icon=":material/straighten:", page=page_file(__file__), questions=("s9.length",),
            settings=(layer_row("tl_layer", ID),), summary_from=("tl_layer",), summary=summary,
            room=(RoomChart("lengths", room_lengths),), room_measure=ROOM,
            csv=lambda done: [("distinct_tokens", lambda x: STEP.room_record(x).tokens)])
'''

PAGE = '''
import streamlit as st

from ui import drawing, step_page, widgets
from pages import text_length

page = step_page.opened(text_length.STEP)
widgets.setting(page.t, "tl_layer", page.a, page.t("common.layer"))
sm = page.summary()
st.metric(page.t("text_length.bar"), page.t.int(sm.numbers.n))
drawing.show_figure(sm.figure, key="tl_bars")
page.room()
page.close(sm)
'''

STRINGS = {  # its strings, in the three languages (as its package would add them to locales/)
    "en": {"title": "How long is the text?", "nav": "Length", "lead": "A text is a number of tokens.",
           "question": "How many tokens does the text hold?", "bar": "tokens", "room_said": "{n} texts"},
    "ja": {"title": "文章の長さ", "nav": "長さ", "lead": "文章はトークンの数で測ります。",
           "question": "この文章はいくつのトークンでできているでしょうか？", "bar": "トークン数",
           "room_said": "{n} 件の文章"},
    "pt": {"title": "Qual é o tamanho do texto?", "nav": "Tamanho", "lead": "Um texto tem um número de tokens.",
           "question": "Quantos tokens o texto tem?", "bar": "tokens", "room_said": "{n} textos"},
}


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The step's package in a temporary folder on the pages package's path, and its strings."""
    package = tmp_path / "text_length"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(DECLARATION), encoding="utf-8")
    (package / "page.py").write_text(textwrap.dedent(PAGE), encoding="utf-8")
    monkeypatch.setattr(pages, "__path__", [*pages.__path__, str(tmp_path)])
    for lang, strings in STRINGS.items():
        table = i18n.strings(lang)
        for key, text in strings.items():
            monkeypatch.setitem(table, f"text_length.{key}", text)
    pages.find()
    yield walk.get("text-length")
    monkeypatch.undo()
    pages.find()
    sys.modules.pop("pages.text_length", None)


def test_a_new_step_in_a_package_of_its_own_joins_every_part_of_the_app(make_app, throwaway, store, live_classes):
    step = throwaway
    assert [p.id for p in walk.steps()][1:4] == ["nearly-empty", "text-length", "neighbours"]
    assert walk.number(walk.get("neighbours")) == 4  # renumbered on screen …
    assert "tl_layer" in setting_table.KEYS and setting_table.row("tl_layer").page == "text-length"

    # the navigation: Next from step 2 opens it, its question waits for a guess
    at = make_app("tiny", "pt")
    at.run()
    at.switch_page(page_path(walk.get("nearly-empty"))).run()
    at.button(key="nav_next").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == STRINGS["pt"]["title"]
    step_of = i18n.translate("pt", "common.step_of", step=walk.number(walk.get("nearly-empty")) + 1,
                             total=len(walk.steps()))  # the walk's own count, the new step in it
    assert step_of in [c.value for c in at.caption]
    n = int(at.metric[0].value.replace(".", ""))  # 1.024 in Portuguese
    assert at.radio(key=keys.guess("s9.length")).options == [i18n.fmt_int(x, "pt") for x in (n // 2, n, 2 * n)]

    # a live class on it: the teacher opens its vote, a student answers, she reveals
    teacher = make_app("tiny", "en")
    teacher.run()
    teacher.switch_page(page_path(step)).run()
    n = int(teacher.metric[0].value.replace(",", ""))  # the class reads the teacher's text (the English sample)
    teacher.sidebar.button(key="class_start").click().run()
    code = teacher.session_state[keys.CLASS]
    assert live_classes.state(code).page == "text-length"
    student = make_app("tiny", "ja")
    student.query_params["class"] = code
    student.run()
    assert student.title[0].value == STRINGS["ja"]["title"]
    teacher.button(key="vote_open_s9_length").click().run()
    vote = live_classes.state(code).vote_on("s9.length")
    assert vote.page == "text-length" and vote.question.labels["ja"] == [i18n.fmt_int(x, "ja") for x in
                                                                            (n // 2, n, 2 * n)]
    handle.versions.clear()
    student.run()
    student.radio(key=f"vote_pick_{vote.vote}").set_value(1).run()
    student.button(key=f"vote_send_{vote.vote}").click().run()
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    teacher.button(key=f"vote_reveal_{vote.vote}").click().run()
    assert live_classes.counts(code, vote.vote) == [0, 1, 0] and vote.question.answer == 1

    # the room: the student's text measured, drawn on the step's own chart, and its CSV column
    sent = "My own words for the class's experiment, sent once. " * 3
    student.sidebar.text_area(key="room_text").input(sent)
    student.sidebar.button(key="room_send").click().run()
    while room_work.work_once(room_work.rooms(), "test-worker", ["tiny"]):
        pass
    teacher.sidebar.toggle(key="room_shown").set_value(True).run()
    handle.versions.clear()
    student.run()
    charts = [c.key for c in student.get("plotly_chart")]
    assert "room_chart_text_length_lengths" in charts, charts
    texts = room_work.rooms().texts(code)
    rows = list(csv.DictReader(io.StringIO(exports.room_csv(texts, room_panel.csv_columns))))
    # its own number, kept under its id and layout, counted here from the bytes (the tiny model's tokens) and <bos>
    assert [t.numbers.steps for t in texts] == [{"text-length": {"version": 1, "record": {"tokens": len(set(
        sent.encode("utf-8"))) + 1}}}]
    assert [int(r["distinct_tokens"]) for r in rows] == [len(set(sent.encode("utf-8"))) + 1]
    chart = next(c for c in student.get("plotly_chart") if c.key == "room_chart_text_length_lengths")
    drawn = [y for trace in json.loads(chart.proto.spec)["data"] for y in trace.get("y") or ()]
    assert set(drawn) == {len(set(sent.encode("utf-8"))) + 1}, drawn  # its point, and the marks drawn at it

    # the handout: its section among the steps, in order, with its figure and question
    from ui import analyses

    text = at.session_state["text"]
    page = handout.build(i18n.Translator("en"), analyses.get_analysis(text, "tiny"), text, "tiny", {},
                         device="cpu", model="tiny")
    order = [page.index(f'<h2 id="{p.id}">') for p in walk.steps()]
    steps = len(walk.steps())  # the walk's, with this one among them
    assert order == sorted(order) and "text-length" in [p.id for p in walk.steps()]
    said = i18n.translate("en", "common.step_of", step=walk.number(walk.get("text-length")), total=steps)
    assert said in page.split('<h2 id="text-length">')[1][:200]
    assert page.count('class="plotly-graph-div"') == steps
