"""The room through the app (AppTest, tiny model): students send texts from the class
panel without leaving the class's lead; the texts are measured (here by the test, as a
replica's worker would); the teacher shows the room and every step that measures a
claim draws it for every text — each student's own ringed — with numbers that are the
stored ones; no student ever sees another's words; the teacher sees first words only
off the projector; the exports hold what the room measured."""

import csv
import io
import json

import numpy as np
import pytest

from attn import room_numbers
from ui import i18n, keys, room_work, walk
from ui.classroom import handle
from ui.classroom import room as room_panel

pytestmark = pytest.mark.apptest

TEACHERS = "The teacher's own text for today: the class reads it together, slowly, word by word."
MINE = {"ja": "わたしの文章です。教室のみんなの文章と一緒に測ります。だれにも見せません。" * 2,
        "pt": "Este é o meu texto para a turma: ninguém mais vai ler estas palavras secretas." * 2}


def clean(at):
    assert not at.exception, [e.value for e in at.exception]
    return at


def tick(at):
    handle.versions.clear()
    return clean(at.run())


@pytest.fixture
def klass(make_app, store):
    teacher = make_app("tiny", "en")
    teacher.run()
    teacher.sidebar.text_area(key="text").input(TEACHERS).run()
    teacher.button(key="nav_next").click().run()  # step 2: the experiment
    teacher.sidebar.button(key="class_start").click().run()
    code = clean(teacher).session_state[keys.CLASS]
    students = {}
    for lang in ("ja", "pt"):
        s = make_app("tiny", lang)
        s.query_params["class"] = code
        students[lang] = clean(s.run())
    return teacher, students, code


def send(student, text):
    student.sidebar.text_area(key="room_text").input(text)
    return clean(student.sidebar.button(key="room_send").click().run())


def measure_all():
    room = room_work.rooms()
    while room_work.work_once(room, "test-worker", ["tiny"]):
        pass


def everything_shown(at) -> str:
    """Every word an AppTest page holds: its text elements and its charts' data."""
    kinds = ("markdown", "caption", "text", "info", "warning", "error", "toast", "title", "subheader", "code")
    parts = [str(getattr(e, "value", "")) for kind in kinds for e in getattr(at, kind)]
    parts += [c.proto.spec for c in at.get("plotly_chart")]
    parts += [str(getattr(w, "value", "")) for w in at.text_area if w.key != "room_text"]
    return "\n".join(parts)


def test_students_send_their_texts_without_leaving_the_class_and_the_room_draws_each(klass, live_classes):
    teacher, students, code = klass
    for lang, s in students.items():
        send(s, MINE[lang])
        assert s.session_state[keys.FOLLOWING]  # sending to the room is no change of the page's text
        assert s.sidebar.text_area(key="text").value == TEACHERS
    measure_all()
    texts = room_work.rooms().texts(code)
    assert sorted(t.lang for t in texts) == ["ja", "pt"] and all(t.state == "done" for t in texts)
    teacher.sidebar.toggle(key="room_shown").set_value(True).run()
    assert live_classes.state(code).room
    for s in students.values():
        tick(s)
        chart = next(c for c in s.get("plotly_chart") if c.key == "room_chart_nearly_empty_useful")
        spec = json.loads(chart.proto.spec)
        mine = next(t for t in texts if t.owner == s.session_state[keys.STUDENT])
        whole = mine.numbers.useful[min(8, mine.numbers.layers - 1)][-1]
        ringed = [tr for tr in spec["data"] if tr.get("marker", {}).get("line", {}).get("color") == "#000000"]
        assert ringed and ringed[0]["x"] == [whole.n] and ringed[0]["y"] == [whole.share]  # their own text, ringed
        lines = [tr for tr in spec["data"] if tr.get("mode") == "lines+markers"]
        ys = [y for tr in lines for y in tr["y"] if y is not None]
        for t in texts:  # every text's line holds its stored shares, in the page's layer
            layer = min(8, t.numbers.layers - 1)
            assert all(point.share in ys for point in t.numbers.useful[layer])
    # what the chart says is what the store holds, and the store holds what a row-by-row count gives
    t = texts[0]
    assert t.numbers.n == t.n and t.numbers.p == room_numbers.ROOM_P


def test_no_student_ever_sees_another_students_words_and_the_teacher_sees_first_words_off_the_projector(klass):
    teacher, students, code = klass
    send(students["pt"], MINE["pt"])
    measure_all()
    teacher.sidebar.toggle(key="room_shown").set_value(True).run()
    secret = "secretas"
    for step_move in ("nav_next", "nav_next", "nav_next"):  # steps 3, 4, 5: the room on some, not on 5
        teacher.button(key=step_move).click().run()
        tick(students["ja"])
        assert secret not in everything_shown(students["ja"])
        assert "ninguém" not in everything_shown(students["ja"])
    tick(teacher)
    first = "meu texto para a"  # among the first words (the secret word comes later: never in a preview)
    assert any(first in c.value for c in teacher.sidebar.caption)  # her list: the first words…
    assert secret not in everything_shown(teacher)
    teacher.sidebar.toggle(key="presenter_choice").set_value(True).run()
    assert first not in everything_shown(teacher)  # …never on a projector


def test_a_student_replaces_and_withdraws_their_text_and_the_teacher_removes_one(klass):
    teacher, students, code = klass
    send(students["ja"], "最初の文章です。あとで差し替えます。")
    send(students["ja"], "差し替えた文章です。")
    texts = room_work.rooms().texts(code)
    assert len(texts) == 1 and texts[0].preview == "差し替えた文章です。"
    clean(students["ja"].sidebar.button(key="room_withdraw").click().run())
    assert room_work.rooms().texts(code) == []
    send(students["pt"], MINE["pt"])
    tick(teacher)
    owner = room_work.rooms().texts(code)[0].owner
    removes = [b for b in teacher.sidebar.button if (b.key or "").startswith("room_remove_")]
    assert len(removes) == 1 and owner not in removes[0].key  # no student's id travels to her browser
    assert not [b for b in teacher.sidebar.button if owner in (b.key or "")]
    clean(removes[0].click().run())
    assert room_work.rooms().texts(code) == []


def test_every_step_that_measures_a_claim_draws_the_room_and_the_closing_page_gives_its_verdict(klass):
    teacher, students, code = klass
    for lang, s in students.items():
        send(s, MINE[lang])
    measure_all()
    teacher.sidebar.toggle(key="room_shown").set_value(True).run()
    s = students["pt"]
    drawn, said = {}, {}
    # step 1, then each step after it and the closing page (the walk's length, not a number)
    for move in ["nav_prev"] + ["nav_next"] * len(walk.steps()):
        teacher.button(key=move).click().run()
        tick(s)
        drawn[s.title[0].value] = [c.key for c in s.get("plotly_chart") if (c.key or "").startswith("room_chart_")]
        said[s.title[0].value] = [c.value for c in s.caption]
    assert [k for keys_ in drawn.values() for k in keys_] == [
        f"room_chart_{page}" for page in ("every_pair_cells", "nearly_empty_useful", "neighbours_window", "hubs_sink",
                                          "honest_catch_errors")]
    tables = [t for t in s.get("dataframe")] + [t for t in s.get("table")]
    assert tables  # the closing page's verdict on each claim
    # both texts are shorter than 256 tokens: a window that long keeps them whole, and the
    # room says so rather than count them as a window keeping "most of the weight"
    sizes = [t.numbers.n for t in room_work.rooms().texts(code)]
    assert max(sizes) <= 256
    verdict = [row for t in tables for row in t.value.astype(str).values.tolist()]
    assert [i18n.translate("pt", "room.claim_window", w="256"),
            i18n.translate("pt", "room.verdict_window_none", w="256")] in verdict
    step3 = said[i18n.translate("pt", "neighbours.title")]
    shown = [w for w in room_numbers.ROOM_WINDOWS  # the window step 3's room chart says it shows
             if i18n.translate("pt", "room.window_measured", ws="4, 16, 64 e 256", w=str(w)) in step3]
    assert len(shown) == 1, step3
    short = sum(n <= shown[0] for n in sizes)
    assert (i18n.translate("pt", "room.window_shorter", n=short, w=str(shown[0])) in step3) == (short > 0)


def test_the_exports_hold_what_the_room_measured_and_how_the_votes_went(klass, live_classes):
    from server import exports

    teacher, students, code = klass
    for lang, s in students.items():
        send(s, MINE[lang])
    measure_all()
    texts = room_work.rooms().texts(code)
    rows = list(csv.DictReader(io.StringIO(exports.room_csv(texts, room_panel.csv_columns))))
    assert [r["language"] for r in rows] == [t.lang for t in texts]
    for r, t in zip(rows, texts):
        assert int(r["tokens"]) == t.numbers.n
        assert float(r["sink_share"]) == t.numbers.sink_mean
        assert float(r["kept_window16"]) == t.numbers.kept[16].mean
        assert float(r["share_whole_layer0"]) == t.numbers.useful[0][-1].share
        assert MINE[t.lang][:20] not in json.dumps(r, ensure_ascii=False)  # numbers, never words
    # a vote twice on step 2: the first round's answers a, b; the second's a, a: one student changed
    teacher.button(key="vote_open_s2_cells").click().run()
    vote = live_classes.state(code).vote_on("s2.cells")
    for s, choice in zip(students.values(), (0, 1)):
        tick(s)
        s.radio(key=f"vote_pick_{vote.vote}").set_value(choice).run()
        clean(s.button(key=f"vote_send_{vote.vote}").click().run())
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    teacher.button(key=f"vote_again_{vote.vote}").click().run()
    again = live_classes.state(code).vote_on("s2.cells")
    for s in students.values():
        tick(s)
        s.radio(key=f"vote_pick_{again.vote}").set_value(0).run()
        clean(s.button(key=f"vote_send_{again.vote}").click().run())
    found = live_classes.read(code)
    got = list(csv.DictReader(io.StringIO(exports.votes_csv(found, live_classes.answers_of(code)))))
    first = [r for r in got if r["round"] == "1"]
    second = [r for r in got if r["round"] == "2"]
    assert [int(r["count"]) for r in first][:2] == [1, 1] and [int(r["count"]) for r in second][0] == 2
    assert {r["changed_answer"] for r in second} == {"1"} and {r["changed_answer"] for r in first} == {""}
    right = vote.question.answer
    assert [r["measured_answer"] for r in first] == ["1" if i == right else "0" for i in range(len(first))]
    assert np.isclose(len(first), len(vote.question.options))


def test_each_classs_texts_are_measured_on_its_model_and_drawn_on_its_charts(make_app, store, monkeypatch,
                                                                            tmp_path):
    """A server offering the tiny model and a BERT folder; one class on each. The worker
    measures every text on its class's model — read back from the numbers: the tiny
    model's 4 causal layers, the encoder's 3 layers reading both ways — each chart draws
    its own model's texts only, and the CSV names the model on each row."""
    from harness import model_folders

    folder = str(model_folders.build("bert", tmp_path / "bert").resolve())
    monkeypatch.setenv("ATLAS_MODELS", f"tiny, {folder}")
    classes = {}
    for model in ("tiny", folder):
        teacher = make_app("tiny", "en")
        teacher.run()
        teacher.sidebar.selectbox(key="model_choice").set_value(model).run()
        teacher.sidebar.button(key="class_start").click().run()
        code = clean(teacher).session_state[keys.CLASS]
        student = make_app("tiny", "pt")
        student.query_params["class"] = code
        clean(student.run())
        send(student, MINE["pt"])
        classes[model] = (teacher, student, code)
    room = room_work.rooms()
    while room_work.work_once(room, "test-worker", ["tiny", folder]):
        pass
    read = {model: [x.numbers for x in room.texts(code)] for model, (_, _, code) in classes.items()}
    assert [(n.layers, n.causal) for n in read["tiny"]] == [(4, True)]
    assert [(n.layers, n.causal) for n in read[folder]] == [(3, False)]
    assert read["tiny"][0].model == "tiny" and read[folder][0].model.startswith(f"{folder}#")
    for model, (teacher, student, code) in classes.items():
        teacher.sidebar.toggle(key="room_shown").set_value(True).run()
        tick(student)
        chart = next(json.loads(c.proto.spec) for c in student.get("plotly_chart")
                     if "room_chart_every_pair_cells" in c.proto.id)
        xs = {x for tr in chart["data"] for x in (tr.get("x") or []) if tr.get("mode") == "markers"}
        assert read[model][0].n in xs  # its own text's point
        rows = list(csv.DictReader(io.StringIO(room_panel.exports.room_csv(room.texts(code)))))
        assert [r["model"] for r in rows] == [read[model][0].model]
    # the teacher of the tiny class switches to the encoder: the texts measured on the tiny model are set aside
    teacher, student, code = classes["tiny"]
    teacher.sidebar.selectbox(key="model_choice").set_value(folder).run()
    tick(student)
    said = i18n.translate("pt", "room.other_model", n=1)
    assert said in [c.value for c in student.caption], [c.value for c in student.caption]


def test_a_send_wakes_the_idle_worker_at_once_rather_than_at_its_next_look(klass, monkeypatch):
    """The worker looks at the store every IDLE_WAIT seconds while no text waits; a text
    sent on this process wakes it (room_work.sent). With the look made two minutes apart,
    a text sent while the worker waits is measured long before its next look."""
    import threading
    import time

    _, students, code = klass
    waiting = threading.Event()

    class Watched(threading.Event):
        def wait(self, timeout=None):
            waiting.set()
            return super().wait(timeout)

    monkeypatch.setattr(room_work, "IDLE_WAIT", 120.0)
    monkeypatch.setattr(room_work, "_SENT", Watched())
    stop = threading.Event()
    thread = room_work._running("test-waker", stop)
    try:
        assert waiting.wait(60), "the worker never came to wait"
        sent_at = time.monotonic()
        send(students["ja"], MINE["ja"])
        while time.monotonic() - sent_at < 60:
            done = [t for t in room_work.rooms().texts(code) if t.state == "done"]
            if done:
                break
            time.sleep(0.1)
        assert done and done[0].numbers is not None, "the text waited for the worker's next look"
    finally:
        stop.set()
        room_work._SENT.set()
        thread.join(30)
    assert not thread.is_alive()
