"""A reader's pages in a real browser (the shared fixtures: tests/browser_parts.py): every
page of the real model in this file, so that one server builds them once — the screenshots
of every step in every language (in test-artifacts/) with accessibility (axe-core),
presenter mode on every page in every language (sizes, axe-core, no label cut), the
handout and the playground; moving between steps, a kept window, the measuring buttons,
a bookmark and term links on the tiny model."""

import datetime
import math
import os
import time

import pytest

from browser_parts import ARTIFACTS, URLS, axe_violations, h1, markup_and_cuts, wait_title, walk
from helpers import LANGS, WALK
from harness.serve import POLL_MS, SERVER_LOGS, app_server, paste, ready_after, wait_idle
from ui import i18n
from ui import walk as the_walk

pytestmark = pytest.mark.browser

JAPANESE = "東京の朝は早い。電車が来るたびに、駅員さんは時計を見て、旗を上げます。雨の日も雪の日も同じです。" * 3


def test_switch_language_paste_japanese_and_see_the_chart(page, url):
    page.goto(url + "/?lang=en")
    wait_idle(page, 600_000)
    assert h1(page) == i18n.translate("en", "every_pair.title")
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
    page.get_by_role("option", name="日本語").click()
    wait_title(page, i18n.translate("ja", "every_pair.title"))
    assert "lang=ja" in page.url
    paste(page, JAPANESE)
    # the grid and the followed token's row (Plotly draws each when it comes into view)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=120_000,
                           polling=POLL_MS)
    assert "東京" in page.locator('[data-testid="stSidebar"] textarea').input_value()
    # the text survives a page switch
    page.locator('[data-testid="stSidebarNav"] a').nth(2).click()
    wait_title(page, i18n.translate("ja", "neighbours.title"))
    assert page.locator('[data-testid="stSidebar"] textarea').input_value().startswith("東京の朝")
    page.screenshot(path=os.path.join(ARTIFACTS, "ja-pasted-text.png"))


@pytest.mark.parametrize("lang", LANGS)
def test_every_step_draws_its_chart_in_every_language(page, url, lang):
    """A screenshot of every page in every language; in Japanese and English each page
    also passes axe-core's WCAG 2 A and AA rules (nothing serious or critical)."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    found = {}
    for i, _ in walk(page, url, f"lang={lang}", lang, idle=False):
        path = URLS[i]
        if WALK[i].is_step or WALK[i].id == "playground":
            page.wait_for_selector(".js-plotly-plot", timeout=120_000)
            wait_idle(page)
            assert page.locator(".js-plotly-plot").count() >= 1
        else:
            main = '[data-testid="stMain"] [data-testid="stTable"]'
            page.wait_for_selector(main, timeout=60_000)
            wait_idle(page)
            assert page.locator(f"{main} tbody tr").count() == 15  # the glossary
        assert page.locator('[data-testid="stException"]').count() == 0, path
        wrong = markup_and_cuts(page)
        assert not wrong["marks"] and not wrong["cut"] and not wrong["covered"], (path, wrong)
        page.screenshot(path=os.path.join(ARTIFACTS, f"{lang}-{i + 1}-{path or 'every-pair'}.png"), full_page=True)
        if lang in ("ja", "en"):
            bad = axe_violations(page)
            if bad:
                found[path or "every-pair"] = bad
    assert not page.dialogs
    assert not found, found
    assert not page.outside, page.outside  # nothing fetched from the network (a Material tab icon was)


def test_a_pasted_text_stays_through_next_pagedown_pageup_previous_and_a_page_link(page, tiny_url):
    """Next and PageDown move with st.switch_page; the pasted text (and the numbers on
    it) must come along each time, and through the sidebar's page links too."""
    page.goto(tiny_url + "/?lang=pt")
    wait_title(page, i18n.translate("pt", "every_pair.title"), 300_000)
    mine = "Um texto colado pela professora, que tem de seguir a turma de passo em passo sem voltar ao exemplo."
    shown = paste(page, mine)
    box = page.locator('[data-testid="stSidebar"] textarea')

    def still_mine(step: int):
        wait_title(page, i18n.translate("pt", the_walk.steps()[step - 1].title_key))
        assert box.input_value() == mine, step

    page.locator(".st-key-nav_next button").first.click()
    still_mine(2)
    page.locator("h1").first.click()  # away from the text box, as a clicker finds the page
    page.keyboard.press("PageDown")
    still_mine(3)
    page.locator("h1").first.click()
    page.keyboard.press("PageUp")
    still_mine(2)
    page.locator(".st-key-nav_prev button").first.click()
    still_mine(1)
    assert "lang=pt" in page.url
    box.click()
    box.press("PageDown")  # typing in the text area: the key stays there
    wait_idle(page)
    assert h1(page) == i18n.translate("pt", "every_pair.title")
    page.wait_for_selector('[data-testid="stMetricValue"]', timeout=60_000)
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == shown  # the text's numbers
    page.locator('[data-testid="stSidebarNav"] a').nth(3).click()
    still_mine(4)


SHORTER = "A shorter text of our own: forty-odd tokens, so that the window the reader chose still fits it well."


@pytest.mark.parametrize("step_id, key", [("neighbours", "s3_w"), ("hubs", "s4_w"), ("honest-catch", "s6_w")])
def test_the_readers_window_is_kept_when_a_shorter_text_is_pasted(page, tiny_url, step_id, key):
    """The reader moves a window slider, then pastes a shorter text that still has room for
    it: the slider keeps its value (a slider whose range changes is a new widget to
    Streamlit, which started at 1) and the page's numbers use it — the weight the window
    keeps, recomputed here from the tiny model's own attention on the new text."""
    import torch

    from attn import loading

    step = the_walk.by_id(step_id)
    page.goto(f"{tiny_url}/{the_walk.link(step)}?lang=en")
    wait_title(page, i18n.translate("en", step.title_key))
    label = i18n.translate("en", f"{step.key}.pick_w")
    thumb = page.locator(f'input[type=range][aria-label="{label}"]')  # the slider's own input
    start = int(thumb.input_value())
    thumb.focus()
    for _ in range(4):
        thumb.press("ArrowRight")
    page.wait_for_function("([l, v]) => document.querySelector(`input[type=range][aria-label=\"${l}\"]`).value == v",
                           arg=[label, str(start + 4)], timeout=30_000, polling=POLL_MS)
    wait_idle(page)
    chosen = start + 4
    a = loading.tiny(device="cpu").analyze(SHORTER)
    assert chosen < a.n  # the shorter text still has room for the reader's window
    paste(page, SHORTER)
    assert int(thumb.input_value()) == chosen
    metrics = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')]
        .map(m => [m.querySelector('[data-testid="stMetricLabel"]').innerText.trim(),
                   m.querySelector('[data-testid="stMetricValue"]').innerText.trim()]))""")
    if step_id == "honest-catch":  # the errors are those of the reader's window: its label says which
        assert any(label.startswith(f"window {chosen}") for label in metrics), metrics
        return
    i = torch.arange(a.n)[:, None]
    j = torch.arange(a.n)[None, :]
    inside = (j <= i) & (i - j < chosen)  # the causal window, by hand
    kept = float((a.weights().dense() * inside).sum(-1).mean())
    label = "neighbours.metric_kept_all" if step_id == "neighbours" else "hubs.metric_kept_window"
    assert metrics[i18n.translate("en", label)] == i18n.fmt_pct(kept, "en"), metrics


def test_html_in_the_text_is_shown_as_text_never_run(page, url):
    payload = ('<img src="x" onerror="window.__atlasPwned = 1"><b id="atlas-bold">bold</b> **not bold** '
               '<script>window.__atlasPwned = 2</script>')
    page.goto(url + "/?lang=en")
    wait_idle(page, 600_000)
    paste(page, payload)
    page.wait_for_selector(".js-plotly-plot", timeout=120_000)
    assert page.evaluate("() => window.__atlasPwned === undefined")
    assert page.locator("#atlas-bold").count() == 0
    assert page.locator('img[src="x"]').count() == 0
    assert not page.dialogs
    # the token picker shows the tags as plain characters
    picker = page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').first
    picker.click()
    options = " ".join(page.get_by_role("option").all_inner_texts())
    assert "1 · <" in options and "2 · img" in options  # the tokens of '<img', as characters


def test_measuring_buttons_show_progress_then_live_numbers(page, tiny_url):
    """Step 4's borrowed number (the model with a 4-token window, with and without the
    first token as hub) and step 7's live benchmark, pressed once: the plumbing (progress,
    then the numbers), so on the tiny model; the real model's numbers are tests/
    test_real_model.py's."""
    url = tiny_url
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.goto(url + "/hubs?lang=en")
    wait_title(page, i18n.translate("en", "hubs.title"), 600_000)
    page.get_by_role("button", name=i18n.translate("en", "swap.measure_hub")).click()
    label = i18n.translate("en", "swap.w4_hub_ppl")
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=label, timeout=300_000, polling=POLL_MS)
    wait_idle(page, 300_000)
    page.screenshot(path=os.path.join(ARTIFACTS, "en-4-hubs-measured.png"), full_page=True)

    page.goto(url + "/payoff?lang=en")
    wait_title(page, i18n.translate("en", "payoff.title"), 600_000)
    wait_idle(page, 300_000)
    # the key/value cache's tables (the model's own context, and a longer-context model's) are
    # there from the start: the live run's is one more
    before = page.locator('[data-testid="stDataFrame"]').count()
    page.get_by_role("button", name=i18n.translate("en", "payoff.run")).click()
    page.wait_for_selector('[data-testid="stProgress"]', timeout=60_000)  # progress is shown
    page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stDataFrame\"]').length > n",
                           arg=before, timeout=600_000, polling=POLL_MS)
    wait_idle(page, 300_000)
    assert page.locator(".js-plotly-plot").count() >= 4  # the cost model, the cache, time and memory
    page.screenshot(path=os.path.join(ARTIFACTS, "en-7-payoff-measured.png"), full_page=True)


@pytest.mark.parametrize("plain", [False, True], ids=["launch", "streamlit-run"])
def test_a_bookmarked_page_opens_through_the_app_on_a_fresh_server(browser, plain):
    """The very first request a server gets is a page URL: that page opens, inside
    app.py (sidebar, language, text), not alone as Streamlit's pages/ folder mode would
    run it — also on a server started as Streamlit's convention starts an app
    (``streamlit run app.py``: folder mode is turned off by the first run, which then
    goes on to the step the link named, with its query)."""
    with app_server("tiny", timeout=300, plain=plain) as fresh:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
        pg = ctx.new_page()
        pg.goto(fresh + "/neighbours?lang=pt")
        wait_title(pg, i18n.translate("pt", "neighbours.title"), 300_000)
        assert pg.locator('[data-testid="stSidebar"] textarea').input_value().startswith("Na vila")
        nav = pg.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
        assert nav[0].endswith(i18n.translate("pt", "every_pair.nav")) and len(nav) == len(WALK)
        pg.wait_for_selector(".js-plotly-plot", timeout=120_000)
        assert pg.url.split("?")[0].endswith("/neighbours") and "lang=pt" in pg.url
        ctx.close()


def test_a_later_starts_first_visitor_sees_step_1_before_torch_is_imported_and_when_it_was_computed(browser):
    """A start that builds the sample's pages writes step 1's view (ui.first_view); the next
    start's first visitor is sent it before the server imports torch — its numbers, its
    figure and when the model computed them — and the page comes alive once the model is in."""
    from babel import dates

    from ui import first_view

    t0 = time.perf_counter()
    with app_server("gemma", timeout=900, warm=True) as first:
        assert math.isfinite(ready_after(first, t0, 600))  # its pages built (nan: never)
    view = first_view.load("pt")
    assert view is not None and view["key"]
    with app_server("gemma", timeout=900, warm=True) as later:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
        pg = ctx.new_page()
        pg.goto(later + "/?lang=pt")
        pg.wait_for_selector(".js-plotly-plot", timeout=120_000)
        when = dates.format_datetime(datetime.datetime.fromtimestamp(view["computed"]), "medium", locale="pt_BR")
        assert i18n.translate("pt", "first_view.notice", when=when) in pg.inner_text('[data-testid="stAlert"]')
        shown = pg.locator('[data-testid="stMetricValue"]').all_inner_texts()
        assert shown == [value for _, value in view["key"]]
        with open(SERVER_LOGS[later], encoding="utf-8") as log:
            assert "step 1's view sent before the model (pt; torch imported: no)" in log.read()
        pg.wait_for_selector('[data-testid="stSidebar"] textarea', timeout=300_000)  # alive: the model is in
        wait_title(pg, i18n.translate("pt", "every_pair.title"), 300_000)
        ctx.close()


def test_the_handout_downloads_and_opens_offline_with_seven_figures(browser, url, page, tmp_path):
    page.goto(url + "/neighbours?lang=ja")
    wait_title(page, i18n.translate("ja", "neighbours.title"), 600_000)
    page.get_by_role("button", name=i18n.translate("ja", "handout.button")).click()
    download_button = page.get_by_role("button", name=i18n.translate("ja", "handout.download"))
    download_button.wait_for(timeout=300_000)
    with page.expect_download(timeout=120_000) as info:
        download_button.click()
    saved = tmp_path / "handout.html"
    info.value.save_as(saved)
    assert info.value.suggested_filename == "attention-atlas-ja.html"
    offline = browser.new_context(viewport={"width": 1100, "height": 1400}, locale="ja-JP")
    try:
        outside = []

        def block(route):
            if route.request.url.startswith("file:"):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        offline.route("**/*", block)
        doc = offline.new_page()
        errors = []
        doc.on("pageerror", lambda e: errors.append(str(e)))
        doc.goto(saved.as_uri())
        steps = len(the_walk.steps())
        doc.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= {steps}",
                              timeout=60_000, polling=POLL_MS)
        assert doc.locator(".js-plotly-plot").count() >= steps
        assert doc.locator("h2").count() == steps + 1  # every step and the glossary
        assert not outside and not errors
        os.makedirs(ARTIFACTS, exist_ok=True)
        doc.screenshot(path=os.path.join(ARTIFACTS, "handout-ja.png"))
    finally:
        offline.close()


def test_a_term_link_scrolls_to_its_meaning_on_the_same_page(page, tiny_url):
    page.goto(tiny_url + "/hubs?lang=pt")
    wait_title(page, i18n.translate("pt", "hubs.title"), 600_000)
    shown = paste(page, "Um texto da turma, para ver que o link do termo não recarrega a página nem perde nada.")
    page.set_viewport_size({"width": 1400, "height": 700})
    in_view = ("() => { const h = document.querySelector('#terms'); if (!h) return false;"
               " const r = h.getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight; }")
    assert not page.evaluate(in_view)  # at the page's end, out of sight
    page.locator('[data-testid="stMain"] a[href="#terms"]').first.click()
    heading = page.locator("#terms")
    heading.wait_for(timeout=30_000)
    page.wait_for_function(in_view, timeout=30_000, polling=POLL_MS)
    assert i18n.translate("pt", "glossary.on_page") in heading.inner_text()
    # the same session: the pasted text and the numbers are still there
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == shown


@pytest.mark.parametrize("lang", ["ja"])  # each preset's words in every language: tests/test_playground.py
def test_the_playground_draws_every_preset_in_every_language(page, url, lang):
    from attn.composition import PRESETS

    os.makedirs(ARTIFACTS, exist_ok=True)
    page.goto(f"{url}/playground?lang={lang}")
    wait_title(page, i18n.translate(lang, "playground.title"), 600_000)
    page.wait_for_selector(".js-plotly-plot", timeout=120_000)
    for name in PRESETS:
        page.locator(f".st-key-pg_preset_{name} button").first.click()
        window = i18n.translate(lang, "parts.window_n", w="512" if name == "model" else "32")
        sink = " + ".join([i18n.translate(lang, "parts.window_n", w="32"), i18n.translate(lang, "parts.hubs_n",
                                                                                          hubs="0")])
        expect = {"bigbird": i18n.translate(lang, "parts.random_n", r="2", b="32", seed="0"),
                  "sink": i18n.translate(lang, "playground.composed", parts=sink,
                                         direction=i18n.translate(lang, "playground.causal_word"))}.get(name, window)
        page.locator('[data-testid="stAlertContentInfo"]', has_text=expect).first.wait_for(timeout=60_000)
        wait_idle(page)
        said = page.locator('[data-testid="stAlertContentInfo"]').first.inner_text()
        assert window in said, (name, said)
        assert (i18n.translate(lang, "parts.random_n", r="2", b="32", seed="0") in said) == (name == "bigbird")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=60_000,
                               polling=POLL_MS)
        assert page.locator('[data-testid="stException"]').count() == 0, name
        page.screenshot(path=os.path.join(ARTIFACTS, f"playground-{lang}-{name}.png"), full_page=True)
    assert not page.dialogs


@pytest.mark.parametrize("lang", LANGS)
def test_presenter_mode_on_every_page_shows_no_markup_cuts_no_label_and_in_japanese_passes_axe_and_is_large(
        page, url, lang):
    """Presenter mode's larger type, on every page in every language: no literal "**",
    "__" or "(s)", no navigation link, metric label or delta, widget label, button or table
    heading cut off, and no slider's value drawn over its thumb. In Japanese, the same walk
    also runs axe-core's WCAG 2 A and AA rules on every page (the normal mode is checked in
    Japanese and English as the screenshots are taken), and on a projector (1920 × 1080)
    body text is at least 22 px and each key number at least 48 px."""
    found, bad = {}, {}
    for i, step in walk(page, url, f"lang={lang}&present=1", lang, idle=lang != "ja"):
        path = URLS[i]
        assert "present=1" in page.url
        if lang == "ja":
            if step.is_step:
                page.wait_for_selector('[data-testid="stMetricValue"]', timeout=300_000)  # the numbers are in
            wait_idle(page)
            violations = axe_violations(page)
            if violations:
                bad[step.id] = violations
        wrong = markup_and_cuts(page)
        if wrong["marks"] or wrong["cut"] or wrong["covered"]:
            found[path or "every-pair"] = wrong
        if lang == "ja" and step.id == "neighbours":
            page.set_viewport_size({"width": 1920, "height": 1080})
            size = page.evaluate("""() => parseFloat(getComputedStyle(
                document.querySelector('[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')).fontSize)""")
            assert size >= 22
            value = page.evaluate("""() => { const v = document.querySelector('[data-testid="stMetricValue"]');
                let e = v; while (e.firstElementChild) e = e.firstElementChild;  // the element that holds the digits
                return parseFloat(getComputedStyle(e).fontSize); }""")
            assert value >= 48  # each key number large
            assert "present=1" in page.url
            page.wait_for_selector(".js-plotly-plot", timeout=120_000)
            wait_idle(page)
            os.makedirs(ARTIFACTS, exist_ok=True)
            page.screenshot(path=os.path.join(ARTIFACTS, "presenter-ja-3-neighbours.png"))
            page.set_viewport_size({"width": 1400, "height": 2600})
    assert not found, found
    assert not bad, bad
