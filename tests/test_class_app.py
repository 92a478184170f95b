"""A live class through AppTest: one teacher and students in one process, sessions
sharing the store. AppTest cannot fire a fragment's ``run_every``; a full run draws the
poll fragment once, so a student's rerun stands for one tick of their poll (what a tick
decides is tested alone in tests/test_room.py)."""

import pytest

from helpers import page_path
from server.class_reads import Asked
from ui import analyses, handout, i18n, keys, prebuild, walk
from ui.classroom import handle
from ui.classroom import teacher as teacher_mod

pytestmark = pytest.mark.apptest

TEXT = "The teacher's own text for today's class: every student reads these same words."


def title(at) -> str:
    return at.title[0].value


def tick(at):
    """One tick of a member's poll (the version cache is a second long: start afresh)."""
    handle.versions.clear()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def teacher(make_app, store):
    at = make_app("tiny", "en")
    at.run()
    at.sidebar.text_area(key="text").input(TEXT).run()
    for _ in range(2):  # to step 3 as a teacher moves (AppTest keeps a page from at.switch_page for good)
        at.button(key="nav_next").click().run()
    at.slider(key="s3_w").set_value(5).run()
    at.sidebar.button(key="class_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def student_of(make_app, code: str, lang: str, **extra):
    at = make_app("tiny", lang)
    at.query_params["class"] = code
    for k, v in extra.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_student_joins_by_link_in_their_own_language_with_the_class_text_and_settings(make_app, teacher):
    code = teacher.session_state[keys.CLASS]
    shown = i18n.translate("en", "class.code", code=f"{code[:3]} {code[3:]}")
    assert shown in [m.value for m in teacher.sidebar.markdown]
    typed = code.lower().replace("0", "o").replace("1", "l")  # look-alikes, as a phone types them
    student = student_of(make_app, typed, "pt")
    assert title(student) == i18n.translate("pt", "neighbours.title")  # the class's step, in Portuguese
    assert student.sidebar.text_area(key="text").value == TEXT
    assert student.slider(key="s3_w").value == 5  # the teacher's setting
    assert i18n.translate("pt", "class.joined", code=f"{code[:3]} {code[3:]}") in [t.value for t in student.toast]
    me = student.session_state[keys.STUDENT]
    assert student.query_params.get("me") in (me, [me]) and keys.HOST not in student.session_state
    host = teacher.session_state[keys.HOST]
    for where in (dict(student.query_params), dict(teacher.query_params)):
        assert host not in str(where)  # the host key is in no address


def test_students_follow_the_teachers_step_explore_alone_and_come_back(make_app, teacher):
    code = teacher.session_state[keys.CLASS]
    student = student_of(make_app, code, "ja")
    teacher.button(key="nav_next").click().run()  # the teacher moves to step 4
    assert title(teacher) == i18n.translate("en", "hubs.title")
    assert title(tick(student)) == i18n.translate("ja", "hubs.title")
    student.sidebar.button(key="class_explore").click().run()
    teacher.button(key="nav_next").click().run()  # step 5: the exploring student stays
    assert title(tick(student)) == i18n.translate("ja", "hubs.title")
    student.sidebar.button(key="class_back").click().run()
    assert title(student) == i18n.translate("ja", "linear.title")
    teacher.button(key="nav_prev").click().run()
    assert title(tick(student)) == i18n.translate("ja", "hubs.title")


def test_a_following_student_who_changes_the_text_explores_on_their_own_and_is_told(make_app, teacher):
    student = student_of(make_app, teacher.session_state[keys.CLASS], "en")
    student.sidebar.text_area(key="text").input("My own words now, not the class's.").run()
    assert i18n.translate("en", "class.left") in [t.value for t in student.toast]
    assert not student.session_state[keys.FOLLOWING]
    teacher.button(key="nav_next").click().run()
    assert title(tick(student)) == i18n.translate("en", "neighbours.title")  # stays where they are


def test_a_following_student_who_moves_a_slider_explores_and_what_the_page_sets_itself_never_counts(
        make_app, teacher):
    """Only the reader's own hand leaves the class: a student's page setting its own
    values (the class's settings applied, defaults worked out on the class's text, a
    language switched) keeps them following; moving a slider does not."""
    student = student_of(make_app, teacher.session_state[keys.CLASS], "en")
    for move in ("nav_next", "nav_next", "nav_prev", "nav_prev"):  # steps 4, 5 and back: new widgets each
        teacher.button(key=move).click().run()
        tick(student)
    student.sidebar.selectbox(key="lang_choice").set_value("ja").run()
    assert student.session_state[keys.FOLLOWING] and not student.toast
    assert student.sidebar.text_area(key="text").value == TEXT  # the class's text stays, in any language
    student.slider(key="s3_w").set_value(7).run()
    assert i18n.translate("ja", "class.left") in [t.value for t in student.toast]
    assert not student.session_state[keys.FOLLOWING]


def test_the_class_follows_the_teachers_settings(make_app, teacher):
    student = student_of(make_app, teacher.session_state[keys.CLASS], "en")
    teacher.slider(key="s3_w").set_value(9).run()
    assert tick(student).slider(key="s3_w").value == 9


def test_a_code_typed_in_the_sidebar_joins_and_a_wrong_one_is_said(make_app, teacher):
    code = teacher.session_state[keys.CLASS]
    at = make_app("tiny", "pt")
    at.run()
    at.sidebar.text_input(key="class_code_typed").input("7KQ 2M!").run()
    at.sidebar.button(key="class_join").click().run()
    assert i18n.translate("pt", "class.bad_code") in [e.value for e in at.sidebar.error]
    at.sidebar.text_input(key="class_code_typed").input("zz zz zz").run()
    at.sidebar.button(key="class_join").click().run()
    assert i18n.translate("pt", "class.unknown") in [t.value for t in at.toast]
    at.sidebar.text_input(key="class_code_typed").input(f" {code[:3].lower()} - {code[3:]} ").run()
    at.sidebar.button(key="class_join").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[keys.CLASS] == code and title(at) == i18n.translate("pt", "neighbours.title")


def test_a_reload_keeps_the_student_and_their_place(make_app, teacher, store, live_classes):
    code = teacher.session_state[keys.CLASS]
    student = student_of(make_app, code, "en")
    me = student.session_state[keys.STUDENT]
    again = student_of(make_app, code, "en", me=me)  # the same address, a new session
    assert again.session_state[keys.STUDENT] == me
    room = live_classes
    assert room.present(code, since=0) == 1  # one student, not two


def test_ending_the_class_lets_its_students_go(make_app, teacher, live_classes):
    code = teacher.session_state[keys.CLASS]
    student = student_of(make_app, code, "en")
    teacher.sidebar.button(key="class_end").click().run()
    assert keys.CLASS not in teacher.session_state
    tick(student)
    assert keys.CLASS not in student.session_state
    assert i18n.translate("en", "class.ended") in [t.value for t in student.toast]
    assert live_classes.state(code) is None


def test_a_student_cannot_move_the_class(make_app, teacher, live_classes):
    code = teacher.session_state[keys.CLASS]
    student = student_of(make_app, code, "en")
    student.button(key="nav_next").click().run()  # the student's own screen moves…
    assert title(student) == i18n.translate("en", "hubs.title")
    assert live_classes.state(code).page == "neighbours"  # …the class does not


def held(at) -> None:
    """A member's page held for a vote whose answer is not revealed: no metric, no chart but
    the class's answers, no table, and the question's panel saying why the page waits."""
    assert not at.metric and not at.get("arrow_data_frame") and not at.get("dataframe")
    charts = [c.key or "" for c in at.get("plotly_chart")]
    assert all("vote_chart" in k for k in charts), charts


def test_predict_together_open_answer_close_reveal_and_vote_again(make_app, teacher, live_classes):
    """The room's loop on one step: the teacher opens the vote; from then until she reveals
    the answer — open, closed for the discussion, a second vote — a student's page and the
    projector hold the question, the class's answers and nothing of the step's numbers, and
    a student's share link and handout wait; one answer each; closed, the room's answers as a
    chart; revealed, the measured answer, the share of the room that chose it, and the
    page's numbers back; a second vote after the reveal holds the page only while open."""
    code = teacher.session_state[keys.CLASS]
    student = student_of(make_app, code, "pt")
    projector = make_app("tiny", "en")  # the teacher's second screen, in presenter mode
    projector.query_params["present"] = "1"
    projector.query_params["class"] = code
    projector.query_params["host"] = teacher.session_state[keys.HOST]
    projector.run()
    assert projector.session_state[keys.HOST] == teacher.session_state[keys.HOST]
    assert i18n.translate("pt", "vote.not_open") in " ".join(m.value for m in student.markdown)
    assert student.metric and tick(projector).metric  # no vote yet: the whole page
    teacher.button(key="vote_open_s3_reach").click().run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    tick(student)
    held(student)  # the page's numbers wait
    assert i18n.translate("pt", "vote.page_waits") in [c.value for c in student.caption]
    # no other road to the answers while the vote is open: the handout and share links wait
    assert student.sidebar.button(key="share").disabled and student.sidebar.button(key="handout_build").disabled
    vote = live_classes.state(code).vote_on("s3.reach")
    labels = vote.question.labels
    # the right option is the reach worked out by hand: L layers of a causal window of 3 (the teacher's
    # step-3 defaults, 3 and min(4, layers)) reach L·(3 − 1) + 1 tokens, at most the 64 the step draws
    layers = min(4, analyses.get_analysis(TEXT, "tiny").n_layers)
    assert set(labels) == {"en", "ja", "pt"}
    assert vote.question.options[vote.question.answer] == min(layers * 2 + 1, 64)
    student.radio(key=f"vote_pick_{vote.vote}").set_value(0).run()
    student.button(key=f"vote_send_{vote.vote}").click().run()
    sent = i18n.translate("pt", "vote.sent", answer=labels["pt"][0])
    assert sent in [m.value for m in student.markdown]
    assert live_classes.answer(code, vote.vote, student.session_state[keys.STUDENT], 1) == "again"
    tick(teacher)
    assert i18n.translate("en", "vote.answered", k="1", n="1") in [m.value for m in teacher.markdown]
    held(teacher)  # the teacher's screen holds too: it may be on the projector
    held(tick(projector))
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    # closed, for the discussion: the class's answers as a chart, and still none of the step's numbers
    for at, lang in ((tick(student), "pt"), (tick(projector), "en"), (tick(teacher), "en")):
        held(at)
        chart = [c for c in at.get("plotly_chart") if "vote_chart" in (c.key or "")]
        assert chart, lang
    assert i18n.translate("pt", "vote.page_waits") in [c.value for c in student.caption]
    assert i18n.translate("en", "vote.held_teacher") in [c.value for c in teacher.caption]
    assert i18n.translate("en", "vote.page_waits") in [c.value for c in projector.caption]  # what the class reads
    assert student.sidebar.button(key="share").disabled and student.sidebar.button(key="handout_build").disabled
    assert live_classes.answer(code, vote.vote, "a-late-student", 0) == "unknown"
    assert live_classes.counts(code, vote.vote) == [1] + [0] * (len(labels["pt"]) - 1)
    # a second vote before the reveal: held while open, and closed again
    teacher.button(key=f"vote_again_{vote.vote}").click().run()
    second = live_classes.state(code).vote_on("s3.reach")
    assert second.round == 2 and second.state == "open" and second.vote != vote.vote
    held(tick(student))
    right = vote.question.answer
    student.radio(key=f"vote_pick_{second.vote}").set_value(right).run()
    student.button(key=f"vote_send_{second.vote}").click().run()
    assert live_classes.counts(code, second.vote)[right] == 1
    teacher.button(key=f"vote_close_{second.vote}").click().run()
    for at in (tick(student), tick(projector)):
        held(at)
    assert student.sidebar.button(key="share").disabled and student.sidebar.button(key="handout_build").disabled
    # moving on without revealing keeps the step held: a student who goes back to it sees no numbers
    teacher.button(key="nav_next").click().run()
    assert tick(student).metric  # step 4: no vote on it, the whole page
    assert student.sidebar.button(key="share").disabled  # step 3's answer is still unrevealed
    teacher.button(key="nav_prev").click().run()
    held(tick(student))
    teacher.button(key=f"vote_reveal_{second.vote}").click().run()
    for at in (tick(student), tick(projector), teacher):
        assert at.metric  # revealed: the page's numbers are back
    said = i18n.translate("pt", "vote.revealed", value=vote.question.value_text["pt"], answer=labels["pt"][right],
                          right=i18n.fmt_pct(1.0, "pt", 0))
    assert said in [m.value for m in student.markdown]
    assert not student.sidebar.button(key="share").disabled and not student.sidebar.button(key="handout_build").disabled


def test_the_teacher_takes_her_class_back_with_her_link_and_a_forged_key_gets_nothing(make_app, teacher, live_classes):
    code, key = teacher.session_state[keys.CLASS], teacher.session_state[keys.HOST]
    link = next(c.value for c in teacher.sidebar.code if "host=" in c.value)
    assert link.endswith(f"?class={code}&host={key}")
    again = make_app("tiny", "ja")  # a reload, or another device
    again.query_params["class"] = code
    again.query_params["host"] = key
    again.run()
    assert not again.exception, [e.value for e in again.exception]
    assert "host" not in again.query_params and "class" not in again.query_params  # the key left the address
    assert again.session_state[keys.HOST] == key and keys.STUDENT not in again.session_state
    assert title(again) == i18n.translate("ja", "neighbours.title")
    again.button(key="nav_next").click().run()
    assert live_classes.state(code).page == "hubs"  # hers to move again
    forged = make_app("tiny", "en")
    forged.query_params["class"] = code
    forged.query_params["host"] = key[:-2] + "xx"
    forged.run()
    assert i18n.translate("en", "class.not_host") in [t.value for t in forged.toast]
    assert keys.HOST not in forged.session_state and keys.CLASS not in forged.session_state
    assert "host" not in forged.query_params


def test_the_teacher_takes_her_class_back_by_typing_her_key_and_a_wrong_key_or_none_is_refused(
        make_app, teacher, live_classes):
    code, key = teacher.session_state[keys.CLASS], teacher.session_state[keys.HOST]
    assert key in [c.value for c in teacher.sidebar.code]  # shown to her alone, to type elsewhere
    elsewhere = make_app("tiny", "pt")
    elsewhere.run()
    field = elsewhere.sidebar.text_input(key="class_take_key")
    assert field.proto.type == field.proto.PASSWORD  # typed where the room cannot read it
    elsewhere.sidebar.text_input(key="class_take_code").input(code.lower())
    elsewhere.sidebar.button(key="class_take").click().run()  # no key
    assert i18n.translate("pt", "class.take_back_no_key") in [e.value for e in elsewhere.sidebar.error]
    assert keys.HOST not in elsewhere.session_state
    elsewhere.sidebar.text_input(key="class_take_key").input(key[:-3] + "abc")
    elsewhere.sidebar.button(key="class_take").click().run()
    assert i18n.translate("pt", "class.not_host") in [t.value for t in elsewhere.toast]
    assert keys.HOST not in elsewhere.session_state and keys.CLASS not in elsewhere.session_state
    elsewhere.sidebar.text_input(key="class_take_key").input(f"  {key} ")
    elsewhere.sidebar.button(key="class_take").click().run()
    assert not elsewhere.exception, [e.value for e in elsewhere.exception]
    assert elsewhere.session_state[keys.HOST] == key and elsewhere.session_state[keys.CLASS] == code
    assert key not in str(dict(elsewhere.query_params))
    elsewhere.button(key="nav_next").click().run()
    assert live_classes.state(code).page == "hubs"  # hers to move from here


def test_the_teacher_link_and_key_are_never_offered_in_presenter_mode(make_app, teacher):
    key = teacher.session_state[keys.HOST]
    teacher.sidebar.toggle(key="presenter_choice").set_value(True).run()
    assert not [c for c in teacher.sidebar.code if "host=" in c.value or key in c.value]
    room = make_app("tiny", "en")
    room.query_params["present"] = "1"
    room.run()
    assert not [w for w in room.sidebar.text_input if w.key == "class_take_key"]  # never typed on a projector


def summary_line(t, step: str, first: str, second: str, matched: str) -> str:
    return "- " + t("vote.result_line", step=step, first=first, second=second, matched=matched,
                    first_label=t("vote.col_first"), second_label=t("vote.col_second"),
                    matched_label=t("vote.col_matched"))


def answer(students, vote, choices) -> None:
    for s, choice in zip(students, choices):
        tick(s)
        s.radio(key=f"vote_pick_{vote.vote}").set_value(choice).run()
        s.button(key=f"vote_send_{vote.vote}").click().run()


def test_the_teachers_summary_counts_each_vote_and_the_matched_question_and_the_handout_carries_it(
        make_app, teacher, monkeypatch, live_classes):
    """Peer instruction's three numbers: one right of three alone, three of three after
    talking it over, two of three on the matched question (the same idea on another window,
    answered alone) — on the teacher's sidebar, in her handout and in the shares' CSV, each
    share only once its question's answer was revealed."""
    import csv
    import io

    from server import exports

    code = teacher.session_state[keys.CLASS]
    students = [student_of(make_app, code, lang) for lang in ("en", "ja", "pt")]
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach")
    right = vote.question.answer
    wrong = (right + 1) % len(vote.question.options)
    answer(students, vote, (right, wrong, wrong))  # one right of three
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    teacher.button(key=f"vote_again_{vote.vote}").click().run()
    second = live_classes.state(code).vote_on("s3.reach")
    answer(students, second, (right,) * 3)  # after talking it over, all three right
    teacher.button(key=f"vote_close_{second.vote}").click().run()
    t = i18n.Translator("en")
    # closed, not revealed: how many answered, and nothing that tells the right option (three
    # answers split 1 / 2 would give it away as a share right)
    hidden = t("vote.result_cell_hidden", n="3")
    lines = [m.value for m in teacher.sidebar.markdown]
    assert summary_line(t, t("vote.result_step", step=3), hidden, hidden, "—") in lines
    assert not [m.value for m in teacher.sidebar.markdown if "%" in m.value]
    assert not [b for b in teacher.button if b.key == "vote_open_s3_reach_other_window"]  # only after the reveal
    teacher.button(key=f"vote_reveal_{second.vote}").click().run()

    # the matched question: the reach on another window, measured as the page measures its own
    teacher.button(key="vote_open_s3_reach_other_window").click().run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    matched = live_classes.state(code).vote_on("s3.reach_other_window")
    q = matched.question
    assert matched.round == 1 and q.matches == "s3.reach" and q.text["en"] != vote.question.text["en"]
    rw = 3 + 2  # the page's reach window at first (3), two wider; 4 layers, the last of 64 tokens
    assert f"window of {rw}" in q.text["en"]
    assert q.options[q.answer] == 4 * (rw - 1) + 1  # by hand: L·(w − 1) tokens back, and itself
    tick(students[1])
    assert i18n.translate("ja", "vote.matched_alone") in [c.value for c in students[1].caption]
    assert not [w for w in students[1].text_input if w.key == f"vote_reason_{matched.vote}"]  # answered alone
    m_right = q.answer
    answer(students, matched, (m_right, m_right, (m_right + 1) % len(q.options)))  # two of three
    teacher.button(key=f"vote_close_{matched.vote}").click().run()
    cells = [t("vote.result_step", step=3), t("vote.result_cell", right=t.pct(1 / 3, 0), n="3"),
             t("vote.result_cell", right=t.pct(1.0, 0), n="3")]
    lines = [m.value for m in teacher.sidebar.markdown]
    assert summary_line(t, *cells, t("vote.result_cell_hidden", n="3")) in lines  # the matched one not revealed
    teacher.button(key=f"vote_reveal_{matched.vote}").click().run()
    cells.append(t("vote.result_cell", right=t.pct(2 / 3, 0), n="3"))
    assert summary_line(t, *cells) in [m.value for m in teacher.sidebar.markdown]
    rows = list(csv.DictReader(io.StringIO(exports.shares_csv(live_classes.read(code)))))
    assert rows == [{"question": "s3.reach", "page": "neighbours", "first_right": "0.3333", "first_answered": "3",
                     "first_joined_during": "0", "second_right": "1.0", "second_answered": "3",
                     "second_joined_during": "0", "matched_question": "s3.reach_other_window",
                     "matched_right": "0.6667", "matched_answered": "3", "matched_joined_during": "0"}]
    # the handout her sidebar builds carries the same table (the page it built, caught on its way out)
    import html as html_lib

    built = []
    real_build = handout.build
    monkeypatch.setattr(handout, "build", lambda *a, **k: built.append(real_build(*a, **k)) or built[-1])
    teacher.sidebar.button(key="handout_build").click().run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    assert teacher.get("download_button") and len(built) == 1
    assert html_lib.escape(t("vote.results_heading")) in built[0]
    assert f"<th>{html_lib.escape(t('vote.col_matched'))}</th>" in built[0]
    for cell in cells:
        assert f"<td>{html_lib.escape(cell)}</td>" in built[0]


def estimate_chart(at, qid: str) -> dict:
    """The estimate's chart on a page, by trace name: (x values) of each trace."""
    import json

    from ui import keys as ui_keys

    found = [c for c in at.get("plotly_chart") if (c.key or "").endswith(f"vote_chart_{ui_keys.slug(qid)}")]
    assert len(found) == 1, [c.key for c in at.get("plotly_chart")]
    return {tr.get("name"): tr["x"] for tr in json.loads(found[0].proto.spec)["data"]}


def test_an_estimate_draws_the_class_numbers_against_the_measured_one_and_counts_a_factor_of_1_5_right(
        make_app, teacher, live_classes):
    """Step 3's reach asked for a number: 4 layers of a window of 3 reach 4 · 2 + 1 = 9
    tokens (by hand). Three students type 9, 14 and 6.5: 14 is 1.56× too many (off), 6.5 is
    9 / 1.38 (within). Closed: the three numbers on the chart, no measured line; revealed:
    the line at 9, the band 6 … 13.5, each student's distance, and two of three right on the
    teacher's sidebar."""
    code = teacher.session_state[keys.CLASS]
    students = [student_of(make_app, code, lang) for lang in ("en", "ja", "pt")]
    assert not [b for b in students[0].button if b.key == "vote_open_s3_reach_estimate"]
    teacher.button(key="vote_open_s3_reach_estimate").click().run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    vote = live_classes.state(code).vote_on("s3.reach_estimate")
    assert vote.question.is_estimate and vote.question.estimate == 9
    for s, x in zip(students, ("9", "１４", "6,5")):  # as en, ja and pt readers write 9, 14 and 6.5
        tick(s)
        assert not s.radio and not [w for w in s.text_input if w.key == f"vote_reason_{vote.vote}"]
        s.text_input(key=f"vote_number_{vote.vote}").input(x).run()
        s.button(key=f"vote_send_{vote.vote}").click().run()
        assert not s.exception, [e.value for e in s.exception]
    en, ja = i18n.Translator("en"), i18n.Translator("ja")
    assert ja("vote.estimate_sent", number="14") in [m.value for m in tick(students[1]).markdown]
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    chart = estimate_chart(tick(students[0]), "s3.reach_estimate")
    assert chart == {en("vote.estimate_guesses"): [6.5, 9.0, 14.0]}  # no measured value before the reveal
    teacher.button(key=f"vote_reveal_{vote.vote}").click().run()
    chart = estimate_chart(tick(students[1]), "s3.reach_estimate")
    assert chart[ja("vote.estimate_guesses")] == [6.5, 9.0, 14.0] and chart[ja("vote.estimate_measured")] == [9, 9]
    assert chart[ja("vote.estimate_band", f="1.5")][:2] == [6.0, 13.5]
    assert ja("vote.estimate_far_off", number="14", times="1.56", f="1.5") in [c.value for c in students[1].caption]
    tick(students[2])
    pt = i18n.Translator("pt")
    assert pt("vote.estimate_far_near", number="6,5", times="0,722", f="1,5") in [c.value for c in students[2].caption]
    cell = en("vote.result_cell", right=en.pct(2 / 3, 0), n="3")
    line = summary_line(en, f"{en('vote.result_step', step=3)} · {en('vote.estimate_row')}", cell, "—", "—")
    assert line in [m.value for m in teacher.sidebar.markdown]


def test_the_join_slide_places_only_a_join_code_in_its_html():
    assert "7KQ 2M9" in teacher_mod.code_html("7KQ2M9")
    for bad in ("<script>alert(1)</script>", "7kq2m9", "7KQ 2M9", "7KQ2M9<b>", "", None, "IIIIII"):
        assert teacher_mod.code_html(bad) is None, bad


def test_starting_a_class_builds_every_steps_summary_in_every_language_before_a_student_opens_it(
        make_app, teacher, live_classes):
    """The class's start builds each step's summary in all three languages in the
    background; a student in ja and one in pt then walk every step with the teacher and
    no page builds a summary of its own (each finds the one built for it)."""
    from ui import summaries

    code = teacher.session_state[keys.CLASS]
    found = live_classes.state(code)
    assert found.view["text"] == TEXT and found.view["settings"]["s3_w"] == 5  # the teacher's own view
    thread = prebuild.prebuild(found.view)  # the thread the start began (one per text and settings)
    assert thread is not None and thread is prebuild.prebuild(found.view)  # one, however often it is asked
    thread.join(timeout=300)
    assert not thread.is_alive()
    before = sum(summaries.BUILT.values())
    students = [student_of(make_app, code, lang) for lang in ("ja", "pt")]
    for move in ["nav_next"] * 4 + ["nav_prev"] * 6:  # step 3 → 7, then back to 1
        teacher.button(key=move).click().run()
        for s in students:
            tick(s)
    assert [title(s) for s in students] == [i18n.translate(lang, "every_pair.title") for lang in ("ja", "pt")]
    assert sum(summaries.BUILT.values()) == before


def test_the_teachers_summary_line_takes_each_languages_colon():
    """Japanese writes a full-width colon (１ 回目の投票：…), as everywhere else on its pages."""
    from ui.i18n import Translator

    ja = Translator("ja")
    line = ja("vote.result_line", step="ステップ 3", first="正解率 100%（3 人）", second="—", matched="—",
              first_label=ja("vote.col_first"), second_label=ja("vote.col_second"),
              matched_label=ja("vote.col_matched"))
    assert line == "**ステップ 3** · 1 回目の投票：正解率 100%（3 人） · 2 回目の投票：— · 類題：—"
    en = Translator("en")
    said = en("vote.result_line", step="Step 3", first="a", second="b", matched="c", first_label=en("vote.col_first"),
              second_label=en("vote.col_second"), matched_label=en("vote.col_matched"))
    assert said == "**Step 3** · First vote: a · Second vote: b · Matched question: c"


def test_with_the_store_away_mid_class_the_vote_panel_and_back_say_so_and_never_raise(make_app, teacher,
                                                                                        monkeypatch):
    """The database goes away during a vote: the student's page, the teacher's and the
    student's *Back to the class* each run to their end with a notice in the reader's
    language — no StoreError reaches the page (the panel, its open-vote half and *Back*
    read the store without a catch before)."""
    from server.classes import Classes
    from server.store import StoreError

    code = teacher.session_state[keys.CLASS]
    student = student_of(make_app, code, "ja")
    teacher.button(key="vote_open_s3_reach").click().run()
    student.button(key="class_explore").click().run()  # exploring: Back is offered
    tick(student)

    def away(*args, **kw):
        raise StoreError("unavailable", "the database cannot be reached")

    for method in ("state", "read", "shared_read", "own", "versions", "pulse", "counts", "my_answer", "present",
                   "all_counts", "version", "join", "exists", "answer"):
        monkeypatch.setattr(Classes, method, away)
    for at in (student, teacher):
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    student.sidebar.button(key="class_back").click().run()
    assert not student.exception, [e.value for e in student.exception]
    assert i18n.translate("ja", "share.store_unavailable") in [t.value for t in student.toast]
    assert student.session_state[keys.CLASS] == code  # not thrown out of the class for a moment's trouble


def test_a_full_server_ends_an_unused_class_for_a_new_one_tells_its_teacher_and_refuses_only_when_all_are_used(
        make_app, teacher, monkeypatch, live_classes):
    """The server holds two classes (ATLAS_MAX_CLASSES=2), both started from this machine's
    address and joined by no student: the teacher's and another. Another teacher starts hers:
    the oldest ends to make room (its address holds the most), and its teacher is told it ended
    unused, in her language; once every class left has a student, a third start is refused in
    the words that say why."""
    from server import classes as class_rules

    monkeypatch.setenv("ATLAS_MAX_CLASSES", "2")
    monkeypatch.setattr(class_rules, "HOST_AWAY", -60.0)  # no teacher counts as connected (tests/test_room_bounds)
    first = teacher.session_state[keys.CLASS]
    spare, _ = live_classes.create({"text": "", "settings": {}}, page="every-pair", address="local")
    other = make_app("tiny", "ja")
    other.run()
    other.sidebar.button(key="class_start").click().run()
    assert not other.exception, [e.value for e in other.exception]
    second = other.session_state[keys.CLASS]
    assert second != first and live_classes.state(first) is None
    tick(teacher)
    said = i18n.translate("en", "class.ended_unused", code=f"{first[:3]} {first[3:]}")
    assert said in [t.value for t in teacher.toast] and keys.CLASS not in teacher.session_state
    student_of(make_app, second, "pt")
    student_of(make_app, spare, "en")
    third = make_app("tiny", "pt")
    third.run()
    third.sidebar.button(key="class_start").click().run()
    assert i18n.translate("pt", "class.too_many_classes") in [t.value for t in third.toast]
    assert keys.CLASS not in third.session_state and live_classes.state(second) is not None


def test_a_server_with_a_start_passphrase_asks_for_it(make_app, store, monkeypatch):
    monkeypatch.setenv("ATLAS_START_KEY", "blue heron")
    at = make_app("tiny", "pt")
    at.run()
    field = at.sidebar.text_input(key="class_start_key")
    assert field.proto.type == field.proto.PASSWORD and field.label == i18n.translate("pt", "class.start_key_label")
    field.input("red heron")
    at.sidebar.button(key="class_start").click().run()
    assert i18n.translate("pt", "class.start_key_wrong") in [t.value for t in at.toast]
    assert keys.CLASS not in at.session_state
    at.sidebar.text_input(key="class_start_key").input("blue heron")
    at.sidebar.button(key="class_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[keys.CLASS] and at.session_state[keys.HOST]
    monkeypatch.delenv("ATLAS_START_KEY")
    plain = make_app("tiny", "en")
    plain.run()
    assert not [w for w in plain.sidebar.text_input if w.key == "class_start_key"]  # unset: anyone may start


def test_a_reason_with_the_first_vote_reaches_only_the_teacher_until_she_shows_it_as_plain_text(
        make_app, teacher, live_classes):
    """Two students answer with a reason (one written as Markdown and HTML would read it);
    the teacher sees both, grouped by option and without names; neither student sees the
    other's; the teacher shows one: both students see that one, as plain text, and never the
    other; she takes it back; the second vote asks for no reason."""
    code = teacher.session_state[keys.CLASS]
    ana, bea = student_of(make_app, code, "pt"), student_of(make_app, code, "ja")
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach")
    marked = "**bold** <b>tag</b> [link](http://x)"
    for at, choice, reason in ((tick(ana), 0, marked), (tick(bea), 1, "three hops, each one a window")):
        at.radio(key=f"vote_pick_{vote.vote}").set_value(choice).run()
        at.text_input(key=f"vote_reason_{vote.vote}").input(reason).run()
        at.button(key=f"vote_send_{vote.vote}").click().run()
        assert not at.exception, [e.value for e in at.exception]
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    tick(teacher)
    texts = [x.value for x in teacher.text]
    assert marked in texts and "three hops, each one a window" in texts  # the teacher reads both, as typed
    heading = i18n.translate("en", "vote.reasons_heading", n=2)
    assert heading in [e.label for e in teacher.expander]
    for at in (tick(ana), tick(bea)):  # nothing a student wrote is on another student's screen
        assert not [x.value for x in at.text if x.value in (marked, "three hops, each one a window")]
    shown = [b for b in teacher.button if (b.key or "").startswith(f"reason_{vote.vote}_")]
    assert len(shown) == 2
    shown[0].click().run()  # the first written: ana's
    assert live_classes.state(code).shown == {vote.vote: ((0, marked),)}
    for at, lang in ((tick(ana), "pt"), (tick(bea), "ja")):
        assert [x.value for x in at.text] == [marked]  # plain text, never Markdown or HTML
        assert i18n.translate(lang, "vote.shown_heading") in " ".join(m.value for m in at.markdown)
        assert not any("<b>" in m.value or "bold" in m.value for m in at.markdown)
        assert "three hops, each one a window" not in " ".join(x.value for x in at.text)
    tick(teacher)
    hide = i18n.translate("en", "vote.hide_reason")
    [b for b in teacher.button if b.label == hide][0].click().run()
    assert live_classes.state(code).shown == {}
    assert not tick(ana).text
    teacher.button(key=f"vote_again_{vote.vote}").click().run()
    second = live_classes.state(code).vote_on("s3.reach")
    tick(ana)
    assert second.round == 2 and not [w for w in ana.text_input if w.key == f"vote_reason_{second.vote}"]


def test_on_a_projector_the_reasons_stay_folded_and_private_and_a_removed_one_is_gone_for_good(
        make_app, teacher, live_classes):
    """Presenter mode is the projector: after the vote closes, the teacher's page there says
    how many reasons were written and that they are private, and holds none of them, nor the
    late joiners' toggle (the wall shows only what she shows); off the projector her panel
    opens as before. «Remove» erases a reason's words for good: from her panel, from
    what the class is shown and from the CSV; the answer still counts."""
    from server import exports

    code = teacher.session_state[keys.CLASS]
    ana, bea = student_of(make_app, code, "pt"), student_of(make_app, code, "ja")
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach")
    unkind, kind = "unkind words about a classmate", "three hops, each one a window"
    for at, choice, reason in ((tick(ana), 0, unkind), (tick(bea), 1, kind)):
        at.radio(key=f"vote_pick_{vote.vote}").set_value(choice).run()
        at.text_input(key=f"vote_reason_{vote.vote}").input(reason).run()
        at.button(key=f"vote_send_{vote.vote}").click().run()
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    teacher.session_state[keys.PRESENTER] = True
    tick(teacher)
    private = i18n.translate("en", "vote.reasons_private", n=2)
    assert private in [c.value for c in teacher.caption]  # the count, marked private …
    drawn = [x.value for x in teacher.text] + [m.value for m in teacher.markdown] + [c.value for c in teacher.caption]
    assert not [x for x in drawn if unkind in x or kind in x]  # … and no reason, not even folded
    assert not [e for e in teacher.expander if e.label.startswith("Reasons written")]
    assert not [b for b in teacher.button if b.key.startswith(f"reason_{vote.vote}_")]
    teacher.session_state[keys.PRESENTER] = False
    tick(teacher)
    panel = [e for e in teacher.expander if e.label == i18n.translate("en", "vote.reasons_heading", n=2)]
    assert len(panel) == 1 and panel[0].proto.expanded  # on her own screen it opens
    [b for b in teacher.button if b.key == f"reason_{vote.vote}_0"][0].click().run()  # shows ana's …
    assert live_classes.state(code).shown == {vote.vote: ((0, unkind),)}
    tick(teacher)
    [b for b in teacher.button if b.key == f"reason_drop_{vote.vote}_0"][0].click().run()  # … then removes it
    assert live_classes.state(code).shown == {}
    tick(teacher)
    assert unkind not in [x.value for x in teacher.text] and kind in [x.value for x in teacher.text]
    assert unkind not in [x.value for x in tick(bea).text]
    assert live_classes.all_counts(code)[vote.vote][:2] == [1, 1]  # both answers still count
    assert unkind not in exports.votes_csv(live_classes.state(code), live_classes.answers_of(code))


def test_answers_from_students_who_joined_during_the_vote_are_said_apart_under_its_chart(
        make_app, teacher, live_classes):
    """One student seated before the vote opened, two who joined while it was open: the
    chart counts the one, and the caption under it says the two apart, by option."""
    code = teacher.session_state[keys.CLASS]
    ana = student_of(make_app, code, "pt")
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach")
    late = [student_of(make_app, code, "en"), student_of(make_app, code, "ja")]
    for at, choice in ((tick(ana), 0), *((tick(s), 2) for s in late)):
        at.radio(key=f"vote_pick_{vote.vote}").set_value(choice).run()
        at.button(key=f"vote_send_{vote.vote}").click().run()
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    tick(teacher)
    found = live_classes.read(code)
    labels = [str(x) for x in vote.question.options]
    assert found.seated(vote.vote) == [1, 0, 0] and found.late[vote.vote] == [0, 0, 2]
    t = i18n.Translator("en")
    said = t("vote.late", n="2", seated="1", split=t.list(f"{lab}: {c}" for lab, c in zip(labels, ["0", "0", "2"])))
    assert said in [c.value for c in teacher.caption]


def test_a_vote_held_on_a_page_the_walk_no_longer_has_is_on_the_teachers_sidebar_to_close_and_reveal(
        make_app, teacher, live_classes):
    """A class kept across an upgrade holds a vote on a page this server's walk lacks: the
    students' share link and handout wait, and no page draws the vote. The teacher's sidebar
    says so, with Close and Reveal; once revealed, the students' links come back."""
    code, key = teacher.session_state[keys.CLASS], teacher.session_state[keys.HOST]
    ana = student_of(make_app, code, "pt")
    question = {"text": {"en": "A question of a page now gone?", "pt": "Uma pergunta de uma página que se foi?"},
                "labels": {"en": ["a", "b"]}, "options": [1, 2], "answer": 0, "value_text": {"en": "1"}}
    vote = live_classes.open_vote(code, key, "a-page-now-gone", "gone.q", Asked.from_json(question))
    tick(ana)
    assert gate_locked(ana)
    tick(teacher)
    said = i18n.translate("en", "vote.orphan", question="A question of a page now gone?")
    assert said in [w.value for w in teacher.sidebar.warning]
    teacher.sidebar.button(key=f"orphan_close_{vote}").click().run()
    assert live_classes.state(code).votes[-1].state == "closed"
    tick(teacher).sidebar.button(key=f"orphan_reveal_{vote}").click().run()
    assert live_classes.state(code).votes[-1].state == "revealed"
    assert not [w for w in tick(teacher).sidebar.warning if w.value == said]
    assert not gate_locked(tick(ana))


def gate_locked(at) -> bool:
    """Whether the student's share and handout wait (both buttons there, and disabled)."""
    found = [b for b in at.sidebar.button if b.key in ("share", "handout_build")]
    assert len(found) == 2
    return all(b.disabled for b in found)


def test_the_teacher_says_how_many_students_she_expects_and_is_told_when_more_join(make_app, teacher, live_classes):
    code = teacher.session_state[keys.CLASS]
    teacher.sidebar.number_input(key="class_expected").set_value(1).run()
    assert live_classes.pulse(code, 0.0).expected == 1
    for lang in ("pt", "ja"):
        student_of(make_app, code, lang)
    said = i18n.translate("en", "class.more_than_expected", joined="2", expected="1")
    assert said in [w.value for w in tick(teacher).sidebar.warning]


def test_the_teacher_may_lock_the_walk_while_a_vote_is_held_and_it_is_off_by_default(make_app, teacher, live_classes):
    """Step 3's vote open, a student exploring alone opens step 7 (whose numbers answer
    other steps): by default the page is there; with the walk locked it says why it waits,
    and shows none of its numbers nor its lead; revealed, the page comes back."""
    code = teacher.session_state[keys.CLASS]
    ana = student_of(make_app, code, "pt")
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach")
    locked = i18n.translate("pt", "class.walk_locked")

    def on_step_7():
        explore = [b for b in tick(ana).sidebar.button if b.key == "class_explore"]
        if explore:  # following the class: explore alone first
            explore[0].click().run()
        ana.switch_page(page_path(walk.get("payoff"))).run()
        assert not ana.exception, [e.value for e in ana.exception]
        return ana

    lead = i18n.translate("pt", "payoff.lead")
    assert locked not in [i.value for i in on_step_7().info] and ana.metric  # off: the page as it is
    assert [m for m in ana.markdown if m.value.startswith(lead[:40])]
    teacher.sidebar.toggle(key="class_lock_walk").set_value(True).run()
    assert live_classes.state(code).lock_walk
    page = on_step_7()
    assert locked in [i.value for i in page.info] and not page.metric
    # the notice and the way back only: not even the lead («double the text, four times the work»)
    assert not [m for m in page.markdown if m.value.startswith(lead[:40])]
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    teacher.button(key=f"vote_reveal_{vote.vote}").click().run()
    assert locked not in [i.value for i in on_step_7().info]


def test_reasons_from_students_who_joined_during_the_vote_are_folded_under_one_line_with_their_count(
        make_app, teacher, live_classes):
    code = teacher.session_state[keys.CLASS]
    ana = student_of(make_app, code, "pt")
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach")
    crowd = [student_of(make_app, code, "en") for _ in range(2)]
    for at, reason in ((tick(ana), "the window widens each layer"), *((tick(s), f"minted {i}") for i, s in
                                                                     enumerate(crowd))):
        at.radio(key=f"vote_pick_{vote.vote}").set_value(0).run()
        at.text_input(key=f"vote_reason_{vote.vote}").input(reason).run()
        at.button(key=f"vote_send_{vote.vote}").click().run()
    teacher.button(key=f"vote_close_{vote.vote}").click().run()
    texts = [x.value for x in tick(teacher).text]
    assert "the window widens each layer" in texts and not [x for x in texts if x.startswith("minted")]
    fold = [w for w in teacher.toggle if w.key == f"reasons_late_{vote.vote}"]
    assert len(fold) == 1 and fold[0].label == i18n.translate("en", "vote.reasons_late", n=2)
    fold[0].set_value(True).run()
    assert {"minted 0", "minted 1"} <= {x.value for x in teacher.text}


def test_a_burst_during_a_vote_is_left_out_of_it_from_the_teachers_panel(make_app, teacher, live_classes):
    """Step 3's vote open; 12 students join from one network in a few seconds and answer:
    her panel says the burst, how many answers leaving it out would set aside, and offers
    «Leave them out of this vote»; pressed, their answers count no more, the panel counts
    them left out and their answers set aside, and one more answer from them is refused;
    «Count their answers again» undoes it while the vote is open."""
    code = teacher.session_state[keys.CLASS]
    teacher.button(key="vote_open_s3_reach").click().run()
    vote = live_classes.state(code).vote_on("s3.reach").vote
    crowd = [f"crowd-{i:04d}" for i in range(12)]
    for s in crowd:
        assert live_classes.join(code, s, address="198.51.100.99") == "in"
    for s in crowd[:11]:
        assert live_classes.answer(code, vote, s, 0) == "taken"
    panel = tick(teacher)
    said = i18n.translate("en", "class.burst", n="12", s="20")
    assert said in [w.value for w in panel.sidebar.warning]
    assert i18n.translate("en", "class.leave_out_count", answers=11) in [c.value for c in panel.sidebar.caption]
    panel.sidebar.button(key="class_leave_out").click().run()
    assert sum(live_classes.read(code).counts[vote]) == 0
    left = i18n.translate("en", "class.left_out", n=12)
    assert left in [c.value for c in tick(teacher).sidebar.caption]
    assert live_classes.answer(code, vote, crowd[11], 0) == "left_out"
    after = tick(teacher)
    assert not [b for b in after.sidebar.button if b.key == "class_leave_out"]  # done: offered no more
    assert i18n.translate("en", "class.left_out_aside", answers=11) in [c.value for c in after.sidebar.caption]
    after.sidebar.button(key="class_leave_out_undo").click().run()
    assert sum(live_classes.read(code).counts[vote]) == 11  # counted again
    assert live_classes.answer(code, vote, crowd[11], 0) == "taken"
