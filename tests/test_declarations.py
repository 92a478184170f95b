"""Each page of the walk declared once, in its own package of pages/: its id and order,
its settings, what its summary is built from and its questions by id — walked here, and
held against the summaries, the setting table, the guess keys and the class's background
build."""

import logging
import re

import pytest

from pages.hubs import hub_sets
from ui import keys, measures, prebuild, setting_table, walk, summaries
from ui.i18n import LANGS, Translator
from ui.samples import sample_text


def test_every_setting_row_belongs_to_one_declared_page_and_each_summary_reads_its_own_steps_rows():
    ids = {p.id for p in walk.pages()}
    assert all(row.page in ids for row in setting_table.TABLE)
    for step in walk.steps():
        for key in step.summary_from:
            assert setting_table.row(key).page == step.id, (step.id, key)
    # a setting read by no summary is still its page's own (drawn there, kept, shared)
    first = walk.get("every-pair")
    assert set(setting_table.keys(first.id)) >= set(first.summary_from) | {"s1_token"}


def test_every_page_has_a_stable_id_apart_from_its_order_and_its_strings_under_its_id():
    """An id is a word (the URL's path, the locale group with ``_`` for ``-``); the walk is in
    the order its pages declare, and a step's number on screen is its place among the steps."""
    found = walk.pages()
    assert [p.order for p in found] == sorted(p.order for p in found)
    for p in found:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", p.id), p.id
        assert Translator("en").has(p.title_key) and Translator("en").has(p.nav_key)
    assert [walk.number(s) for s in walk.steps()] == list(range(1, len(walk.steps()) + 1))
    assert walk.number(walk.get("closing")) is None and walk.link(walk.home()) == ""


def test_question_ids_are_unique_stable_names_and_each_has_one_guess_row():
    ids = [qid for step in walk.steps() for qid in step.questions]
    assert len(ids) == len(set(ids)) and ids  # unique across the walk
    assert all(step.questions for step in walk.steps())  # every step asks something
    for step in walk.steps():
        for qid in step.questions:
            assert re.fullmatch(r"[a-z][a-z0-9]*\.[a-z][a-z0-9_]*", qid), qid  # a name: no order is required
            assert walk.questions()[qid] is step
            row = setting_table.row(keys.guess(qid))
            assert row.takes == "guess" and row.page == step.id
    guesses = [r.key for r in setting_table.TABLE if r.takes == "guess"]
    assert sorted(guesses) == sorted(keys.guess(q) for q in ids)
    # the widget keys of two questions never meet, nor those of a question and a setting
    made = [k(q) for q in ids for k in (keys.guess, keys.revealed, keys.reveal_button)]
    assert len(made) == len(set(made)) and not set(made) & (set(setting_table.KEYS) - set(guesses))


def test_the_setting_table_holds_each_row_once():
    """Its rows, not a dict made of them: a row declared twice (one key in two steps'
    declarations) is refused where the table is made."""
    keys_ = [r.key for r in setting_table.TABLE]
    assert len(keys_) == len(set(keys_)) == len(setting_table.KEYS)


def test_two_pages_that_share_a_settings_key_are_refused(monkeypatch):
    import dataclasses

    from ui.setting_rows import layer_row

    real = walk.pages()
    twin = dataclasses.replace(real[1], settings=(*real[1].settings, layer_row("s1_layer", real[1].id)))
    monkeypatch.setattr(walk, "pages", lambda: (real[0], twin, *real[2:]))
    with pytest.raises(ValueError, match="two settings share a key.*s1_layer"):
        setting_table.row("s1_layer")


@pytest.mark.parametrize("lang", LANGS)
def test_every_steps_summary_builds_from_its_declaration_with_its_questions_named(tiny_analysis, lang):
    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    t = Translator(lang)
    for step in walk.steps():
        if step.needs_text:
            sm = summaries.get(step, t, a, text, "tiny", summaries.inputs(step, cfg))
        else:
            sm = summaries.get(step, t, None, "", "", summaries.inputs(step, cfg))
        assert sm.step == step.id and [q.id for q in sm.questions] == list(step.questions)
        for q in sm.questions:
            assert q.text and len(q.options) >= 2 and q.right in q.options
            assert summaries.question(sm, q.id) is q


def test_a_summary_asked_with_settings_other_than_its_declarations_is_refused(tiny_analysis):
    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    t = Translator("en")
    step = walk.get("neighbours")
    given = summaries.inputs(step, cfg)
    with pytest.raises(ValueError, match="built from"):
        summaries.get(step, t, a, text, "tiny", {k: v for k, v in given.items() if k != "s3_rl"})  # one missing
    with pytest.raises(ValueError, match="built from"):
        summaries.get(step, t, a, text, "tiny", {**given, "s4_w": 8})  # one of another step's


def test_a_summary_that_asks_other_than_its_step_declares_is_refused(tiny_analysis):
    import dataclasses

    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    step = walk.get("nearly-empty")

    def two_questions(*args, **kw):
        made = step.summary(*args, **kw)
        made.questions = made.questions * 2
        return made

    twice = dataclasses.replace(step, summary=two_questions)
    with pytest.raises(ValueError, match="declares 1 questions and its summary asks 2"):
        summaries.build(twice, Translator("en"), a, text, "tiny", summaries.inputs(step, cfg))


def test_a_failure_in_the_class_background_build_is_logged_with_its_traceback_and_counted(monkeypatch, caplog,
                                                                                            tiny_analysis):
    text, a = tiny_analysis
    monkeypatch.setattr(prebuild.analyses, "analysis_unseen", lambda text, model_id: a)

    def broken(*args, **kw):
        raise KeyError("s3_new_setting")

    monkeypatch.setattr(summaries, "build_all", broken)
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


def test_no_page_reads_its_numbers_by_a_string_key():
    """Each page draws its step's typed record and the engine's typed results: no page file
    reads a value by a string key (``values["cells"]``: a KeyError waiting for a rename)."""
    import ast
    import pathlib

    import pages as package

    pages = sorted(pathlib.Path(package.__file__).parent.glob("*/page.py"))
    assert len(pages) == len(walk.pages())
    found = [(p.parent.name, node.lineno, ast.unparse(node)) for p in pages
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
             and isinstance(node.slice.value, str)]
    assert not found, found


def test_the_background_build_builds_the_pages_other_measures_so_a_first_visit_finds_them(monkeypatch, fresh_caches,
                                                                                            tiny_analysis):
    """ui.summaries.build_all (the start's warm-up, a class's prebuild) runs each step's
    ``ahead``: step 6's sharpness, implied maps and top-k recall and step 4's windows (alone,
    with its hubs, with the first token) and sink share, read in one pass, on the pages'
    default settings, are in the
    cache afterwards, so a page asking for them computes nothing; before, they are not."""
    from attn import methods, outputs, stats, topk

    text, a = tiny_analysis
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {})
    args = (text, "tiny", cfg["s6_layer"], cfg["s6_w"])
    hubs = tuple(sorted(cfg["s6_hubs"]))
    step4 = (text, "tiny", cfg["s4_w"], hub_sets(tuple(sorted(cfg["s4_hubs"]))))
    maps = (text, "tiny", cfg["s6_layer"], int(cfg["s6_head"]), cfg["s6_w"], hubs, cfg["s6_feature"])

    def computed(*_, **__):
        raise AssertionError("computed on the page, not built ahead")

    with monkeypatch.context() as m:  # nothing built yet: the page would compute both
        m.setattr(outputs, "peak_weights", computed)
        m.setattr(topk, "recall", computed)
        m.setattr(methods, "tagged", computed)
        m.setattr(stats, "shares_kept_and_sink", computed)
        with pytest.raises(AssertionError, match="not built ahead"):
            measures.kept_and_sink(*step4)
        with pytest.raises(AssertionError, match="not built ahead"):
            measures.implied_maps(*maps)
        with pytest.raises(AssertionError, match="not built ahead"):
            measures.sharpness(*args, hubs)
        with pytest.raises(AssertionError, match="not built ahead"):
            measures.topk_recall(*args)
    summaries.build_all(a, text, "tiny", {}, langs=("en",))
    monkeypatch.setattr(outputs, "peak_weights", computed)
    monkeypatch.setattr(topk, "recall", computed)
    monkeypatch.setattr(methods, "tagged", computed)
    monkeypatch.setattr(stats, "shares_kept_and_sink", computed)
    kept, sink, _ = measures.kept_and_sink(*step4)
    assert all(0.0 < k.mean <= 1.0 for k in kept) and 0.0 < sink < 1.0
    assert methods.window(hubs=True).name in measures.sharpness(*args, hubs).peak  # read from the cache
    assert methods.own().name in measures.implied_maps(*maps)
    assert 0.0 <= measures.topk_recall(*args) <= 1.0


def test_steps_4_and_6_opened_after_the_background_build_compute_none_of_what_it_built(make_app, fresh_caches,
                                                                                         monkeypatch):
    """The pages ask for the measures their ``ahead`` built, with the same arguments: opened
    after ui.summaries.build_all on the sample text, step 6 computes no sharpness and no
    top-k recall, step 4 no sink share (each made to raise if it were computed)."""
    from attn import outputs, stats, topk
    from ui import served_model

    at = make_app("tiny", "en")
    at.run()  # the sample text analysed, as the start's warm-up finds it
    text = sample_text("en")
    summaries.build_all(served_model.get_model("tiny").analyze(text), text, "tiny", {}, langs=("en",))

    def computed(*_, **__):
        raise AssertionError("computed on the page, not built ahead")

    for module, name in ((outputs, "peak_weights"), (topk, "recall"), (stats, "sink_rows")):
        monkeypatch.setattr(module, name, computed)
    for step_id in ("honest-catch", "hubs"):
        at.switch_page(walk.get(step_id).page).run()
        assert not at.exception, (step_id, [e.value for e in at.exception])
