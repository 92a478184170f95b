"""The handout (one offline HTML file of the seven steps) and the glossary terms each
page links where it first uses them. Tiny model; the browser test opens the handout
with every outside request blocked (tests/test_browser.py)."""

import html
import re

import pytest

from attn import bench, swap
from attn.costs import Shape
from attn.device import pick_device
from helpers import LANGS, PAGE, PAGES, revealed
from ui import analyses, glossary, handout, live_bench, measures, model_swaps, served_model, setting_table, walk
from ui.step_parts import ANSWER_FROM
from pages import neighbours
from ui.i18n import Translator, translate
from ui.samples import sample_text

pytestmark = pytest.mark.apptest

ANSWER = re.compile(r"<strong>(.*?)</strong>")


def answers(page: str, lang: str = "en") -> list[str]:
    """The value each step's reveal states, in order (measured on the text, worked out by
    the cost model, or timed on this device: each says which)."""
    heads = [html.escape(translate(lang, key, value="§").split("§")[0].replace("**", ""), quote=False)
             for key in ANSWER_FROM.values()]
    found = sorted((m.end(), m.group(0)) for h in heads for m in re.finditer(re.escape(h), page))
    return [html.unescape(ANSWER.match(page[end:]).group(1)) for end, _ in found]


def walk_answers(at) -> list[str]:
    """Each step's revealed answer, walking the steps with the page's settings."""
    out = []
    for page in PAGES[:len(walk.steps())]:
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        out.append(revealed(at))
    return out


@pytest.mark.parametrize("text", [None, "Short, then longer: a line of text that goes on for a few more words."])
def test_the_handout_reveals_the_same_answers_as_the_pages_with_the_readers_settings(make_app, text, unmeasured):
    at = make_app("tiny", "en")
    at.run()
    if text is not None:
        at.sidebar.text_area(key="text").input(text).run()
    at.switch_page(PAGE["neighbours"]).run()
    at.slider(key="s3_rw").set_value(5).run()
    at.slider(key="s3_rl").set_value(2).run()
    at.slider(key="s3_w").set_value(3).run()
    at.radio(key="guess_s3_reach").set_value(at.radio(key="guess_s3_reach").options[0]).run()
    shown = walk_answers(at)
    kept = {k: at.session_state[k] for k in setting_table.KEYS if k in at.session_state}
    text = text or sample_text("en")
    a = analyses.get_analysis(text, "tiny")
    t = Translator("en")
    page = handout.build(t, a, text, "tiny", kept, device="cpu", model="tiny")  # step 7 not run
    assert answers(page) == shown
    # every step (and the glossary), one figure each, Plotly's JavaScript embedded once, nothing fetched
    steps = len(walk.steps())
    assert page.count("<h2") == steps + 1 and all(f'<h2 id="{p.id}">' in page for p in walk.steps())
    figures = steps
    assert page.count('class="plotly-graph-div"') == figures
    assert page.count(handout._plotly_js()) == 1
    rest = page.replace(handout._plotly_js(), "")
    assert rest.count("<script") == 1 + figures and "src=" not in rest and "http" not in rest.replace(
        "http://www.w3.org", "")
    # the settings used are stated: step 3's window of 3 and its reach of 5 over 2 layers
    step3 = page.split("<h2")[3]
    for label, value in (("neighbours.pick_w", "3"), ("neighbours.pick_reach_w", "5"), ("neighbours.pick_layers", "2")):
        assert f"<td>{html.escape(translate('en', label))}</td><td>{value}</td>" in step3
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), kept)
    guess = neighbours.summary(t, a, text, "tiny", cfg).questions[0]
    assert html.escape(translate("en", "handout.guess", guess=guess.label(kept["guess_s3_reach"]))) in step3
    assert translate("en", "handout.no_guess") in page.split("<h2")[1]
    # unmeasured runs are said to be unmeasured
    assert html.escape(translate("en", "handout.live_not_run")) in page
    assert html.escape(translate("en", "handout.sweep_not_run")) in page


def test_settings_that_do_not_fit_the_text_fall_back_to_the_pages_defaults(tiny_analysis):
    text, a = tiny_analysis
    bad = {"s4_hubs": [0, a.n + 5], "s1_layer": 99, "s2_p": 0.42, "s5_feature": "nope", "s1_head": 7}
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), {**bad, "s3_w": 10_000})
    defaults = setting_table.defaults(a, measures.setting_context(text, "tiny"))
    assert all(cfg[k] == defaults[k] for k in bad)
    assert cfg["s3_w"] == a.n  # a window past the text: the widest this text takes (its slider's end)
    good = {"s3_w": 2, "s4_hubs": [1], "s1_layer": 0, "s2_p": 0.5, "s5_feature": "relu", "s1_head": 0}
    cfg = setting_table.settings_for(a, measures.setting_context(text, "tiny"), good)
    assert all(cfg[k] == v for k, v in good.items())


@pytest.fixture(scope="module")
def tiny_analysis():
    text = 'Angle <script>alert("x")</script> and <img src=x onerror="y()"> & "quotes" — then words.'
    return text, analyses.get_analysis(text, "tiny")


@pytest.mark.parametrize("lang", LANGS)
def test_the_readers_text_and_tokens_are_escaped_and_our_prose_is_rendered(tiny_analysis, lang):
    text, a = tiny_analysis
    page = handout.build(Translator(lang), a, text, "tiny", {}, device="cpu", model="tiny")
    assert "<script>alert" not in page and "<img src=x" not in page and 'onerror="y()"' not in page
    assert html.escape(text) in page  # the text, as characters
    assert f'<html lang="{lang}">' in page
    assert "**" not in re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # our Markdown is rendered
    assert page.count('class="plotly-graph-div"') == len(walk.steps())


def test_measured_runs_join_the_handout_only_when_measured(tiny_analysis, unmeasured):
    """Step 7's live run and step 6's sweep, once this server has run them (each kept where
    its page keeps it), join the handout; step 7's question still takes the cost model's
    answer, the live ratio said beside it."""
    text, a = tiny_analysis
    t = Translator("pt")
    sizes = bench.live_sizes(pick_device())
    rows = bench.run_plan([(m, n, b) for n in sizes for m, b in live_bench.plan_methods()], Shape(), "cpu",
                          repeats=1, max_seconds=0.5)
    live_bench.keep(live_bench.key(pick_device(), sizes), rows)
    model = served_model.get_model("tiny")
    swaps = model_swaps.sweep_of(a, 0)  # the page's sweep on this model (its stacks included)
    results = swap.sweep(model, text, swaps)
    assert all(not isinstance(r, Exception) for r in results)
    model_swaps.keep(text, swaps, results, model_id="tiny")
    page = handout.build(t, a, text, "tiny", {}, device="cpu", model="tiny")
    # live time and memory; the sweep's three charts (the tiny model's 4 layers make a stack of 3 in 4)
    assert page.count('class="plotly-graph-div"') == len(walk.steps()) + 2 + 3
    assert html.escape(t("handout.live_not_run")) not in page and html.escape(t("handout.sweep_not_run")) not in page
    ratio = bench.ratios(rows)[("window", sizes[-1])]
    # step 7's answer stays the cost model's; the live run's ratio is said beside it, with its lengths
    assert html.escape(t("predict.from_live", value=t.float(ratio, 2), n=t.int(sizes[-2]), n2=t.int(sizes[-1]))) in page
    assert answers(page, "pt")[6] == t.float(2.0, 2)


def test_the_sidebar_builds_the_handout_with_progress_then_offers_it(make_app):
    at = make_app("tiny", "ja")
    at.run()
    assert not at.get("download_button")
    at.sidebar.button(key="handout_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    buttons = at.get("download_button")
    assert len(buttons) == 1 and buttons[0].proto.label == translate("ja", "handout.download")
    at.sidebar.text_area(key="text").input("   ").run()
    at.sidebar.button(key="handout_build").click().run()
    assert translate("ja", "handout.need_text") in [i.value for i in at.info]


# --- glossary terms linked where first used -----------------------------------------------

LINK = re.compile(r"\[([^\]]+)\]\(#" + glossary.TERMS_ANCHOR + r"\)")


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("step", walk.steps(), ids=lambda s: s.id)
def test_each_term_is_linked_once_where_the_page_first_uses_it(lang, step):
    t = Translator(lang)
    texts, used = glossary.linked_prose(lang, tuple(step.prose_keys()))
    entries = glossary.entries()
    assert used, "every step links at least one term"
    linked = []
    for key in step.prose_keys():
        if key not in texts:
            continue
        original = t(key)
        assert LINK.sub(r"\1", texts[key]) == original  # only links added, nothing else changed
        for m in LINK.finditer(texts[key]):
            linked.append(m.group(1).strip("*"))  # a bold term keeps its bold inside the link
    assert len(linked) == len(used) == len(set(used))
    for i in used:  # each link is a form of its own term
        forms = entries[i][lang]["forms"]
        word = next((w for w in linked if any(w.casefold().startswith(f.casefold()) for f in forms)), None)
        assert word is not None, (forms, linked)
        linked.remove(word)


@pytest.mark.parametrize("lang", LANGS)
def test_a_step_page_links_its_terms_to_their_meanings_at_its_end(make_app, lang):
    at = make_app("tiny", lang)
    at.run()
    at.switch_page(PAGE["hubs"]).run()
    assert not at.exception
    assert at.main.subheader[-1].value == translate(lang, "glossary.on_page")
    body = " ".join(m.value for m in at.markdown)
    assert f"](#{glossary.TERMS_ANCHOR})" in body
    entries = glossary.entries()
    for i in glossary.linked_prose(lang, tuple(walk.get("hubs").prose_keys()))[1]:
        assert f"**{entries[i][lang]['term']}** — {entries[i][lang]['meaning']}" in at.main.markdown[-1].value


def test_the_handout_drops_nul_and_other_control_characters_from_the_text():
    text = "Before\x00NUL, bell\x07, escape\x1b[31m, C1\x85 and DEL\x7f; a tab\tand a line\nstay. Enough words here."
    a = analyses.get_analysis(text, "tiny")
    page = handout.build(Translator("en"), a, text, "tiny", {}, device="cpu", model="tiny")
    shown = page.split('<pre class="text">')[1].split("</pre>")[0]
    want = "BeforeNUL, bell, escape[31m, C1 and DEL; a tab\tand a line\nstay. Enough words here."
    assert html.unescape(shown) == want
    for c in ("\x00", "\x07", "\x1b", "\x85", "\x7f"):
        assert c not in page


@pytest.mark.parametrize("lang", LANGS)
def test_linked_prose_renders_its_bold_and_links_with_no_mark_left_over(lang):
    """CommonMark (as Streamlit's Markdown reads it) must close every ** of a step's
    prose once its terms are linked: a link inside bold before a Japanese letter left
    "**ハブ**" on screen."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    for step in walk.steps():
        for key, text in glossary.linked_prose(lang, tuple(step.prose_keys()))[0].items():
            shown = re.sub(r"<[^>]+>", "", md.render(text))
            assert "**" not in shown, (lang, key, text)
