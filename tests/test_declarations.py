"""Each step declared once (ui.steps): its settings, what its summary is built from and
its questions by id — walked here, and held against the summaries, the setting table,
the guess keys and the class's background build."""

import logging
import re

import pytest

from ui import keys, measures, prebuild, setting_table, summary
from ui.i18n import LANGS, Translator
from ui.samples import sample_text
from ui.steps import PAGES, QUESTIONS, STEPS, first_questions, page_of


def test_every_setting_row_belongs_to_one_declared_page_and_each_summary_reads_its_own_steps_rows():
    numbers = {p.number for p in PAGES}
    assert all(row.page in numbers for row in setting_table.TABLE)
    for step in STEPS:
        for key in step.summary_from:
            assert setting_table.row(key).page == step.number, (step.number, key)
    # a setting read by no summary is still its page's own (drawn there, kept, shared)
    assert set(setting_table.keys(1)) >= set(page_of(1).summary_from)


def test_question_ids_are_unique_stable_names_and_each_has_one_guess_row():
    ids = [qid for step in STEPS for qid in step.questions]
    assert len(ids) == len(set(ids)) and ids  # unique across the walk
    assert all(step.questions for step in STEPS)  # every step asks something
    for step in STEPS:
        for qid in step.questions:
            assert re.fullmatch(rf"s{step.number}\.[a-z][a-z0-9_]*", qid), qid
            assert QUESTIONS[qid] == step.number
            row = setting_table.row(keys.guess(qid))
            assert row.kind == "guess" and row.page == step.number
    guesses = [r.key for r in setting_table.TABLE if r.kind == "guess"]
    assert sorted(guesses) == sorted(keys.guess(q) for q in ids)
    assert first_questions() == {s.number: s.questions[0] for s in STEPS}
    # the widget keys of two questions never meet, nor those of a question and a setting
    made = [k(q) for q in ids for k in (keys.guess, keys.revealed, keys.reveal_button)]
    assert len(made) == len(set(made)) and not set(made) & (set(setting_table.KEYS) - set(guesses))


@pytest.mark.parametrize("lang", LANGS)
def test_every_steps_summary_builds_from_its_declaration_with_its_questions_named(tiny_analysis, lang):
    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    t = Translator(lang)
    for step in STEPS:
        sm = summary.get(step.number, t, a, text, "tiny", summary.inputs(step.number, cfg))
        assert [q.id for q in sm.questions] == list(step.questions)
        for q in sm.questions:
            assert q.text and len(q.options) >= 2 and q.right in q.options
            assert summary.question(sm, q.id) is q


def test_a_summary_asked_with_settings_other_than_its_declarations_is_refused(tiny_analysis):
    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    t = Translator("en")
    given = summary.inputs(3, cfg)
    with pytest.raises(ValueError, match="built from"):
        summary.get(3, t, a, text, "tiny", {k: v for k, v in given.items() if k != "s3_rl"})  # one missing
    with pytest.raises(ValueError, match="built from"):
        summary.get(3, t, a, text, "tiny", {**given, "s4_w": 8})  # one of another step's


def test_a_summary_that_asks_other_than_its_step_declares_is_refused(tiny_analysis, monkeypatch):
    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    real = summary.STEP_SUMMARIES[2]

    def two_questions(*args, **kw):
        made = real(*args, **kw)
        made.questions = made.questions * 2
        return made

    monkeypatch.setitem(summary.STEP_SUMMARIES, 2, two_questions)
    with pytest.raises(ValueError, match="declares 1 questions and its summary asks 2"):
        summary.build(2, Translator("en"), a, text, "tiny", summary.inputs(2, cfg))


def test_a_failure_in_the_class_background_build_is_logged_with_its_traceback_and_counted(monkeypatch, caplog,
                                                                                            tiny_analysis):
    text, a = tiny_analysis
    monkeypatch.setattr(prebuild.analyses, "analysis_unseen", lambda text, kind: a)

    def broken(*args, **kw):
        raise KeyError("s3_new_setting")

    monkeypatch.setattr(summary, "build_all", broken)
    before = prebuild.PREBUILD_FAILED["KeyError"]
    with caplog.at_level(logging.ERROR, logger=prebuild.__name__):
        prebuild._build_summaries(("tiny", text, "{}"), text, "tiny", {})
    assert prebuild.PREBUILD_FAILED["KeyError"] == before + 1
    logged = [r for r in caplog.records if r.name == prebuild.__name__ and r.exc_info]
    assert logged and "s3_new_setting" in str(logged[-1].exc_info[1])


@pytest.fixture(scope="module")
def tiny_analysis():
    from ui import served_model

    text = sample_text("en")
    return text, served_model.get_model("tiny").analyze(text)


def test_the_setting_table_is_plain_data_without_streamlit():
    """Its doc says so: the rows, their checks and their defaults import no Streamlit
    (the text's anchors come in from ui.measures.setting_context)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", "import sys, ui.setting_table; print('streamlit' in sys.modules)"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr[-800:]
