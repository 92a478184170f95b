"""The app in a real browser: headless Chromium (Debian's) driven by Playwright, the
app started on a free port by the test. What does not depend on the model's weights
(moving between steps, share links, term links, readers at once) runs on the tiny
model (``tiny_url``); the screenshots of every step in every language (in
test-artifacts/), accessibility (axe-core), presenter mode, the measured runs and the
handout on the real one (``url``). In CI a missing browser fails."""

import os
import re

import pytest

from helpers import LANGS, ROOT, WALK
from harness.serve import app_server, chromium_path, launch, paste, wait_idle
from ui import i18n, steps

pytestmark = pytest.mark.browser

ARTIFACTS = os.path.join(ROOT, "test-artifacts")
URLS = [steps.link(p) for p in WALK]
JAPANESE = "東京の朝は早い。電車が来るたびに、駅員さんは時計を見て、旗を上げます。雨の日も雪の日も同じです。" * 3


@pytest.fixture(scope="module")
def browser():
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium in CI: the browser tests must run (install Debian's chromium)")
        pytest.skip("no Chromium here (install Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def url():
    with app_server("gemma", timeout=600) as u:
        yield u


@pytest.fixture(scope="module")
def tiny_url():
    with app_server("tiny", timeout=300, extra_env={"ATLAS_ROOM_WORKER": "1"}) as u:  # it measures the room's texts
        yield u


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 2600}, locale="en-US")
    pg = ctx.new_page()
    dialogs = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    yield pg
    ctx.close()


def h1(page) -> str:
    return page.locator("h1").first.inner_text().strip()


def wait_title(page, title: str, timeout: float = 300_000, idle: bool = True) -> None:
    """The page's h1 reads ``title``; then (unless the caller waits for something of its
    own and then for idle) the run has ended."""
    page.wait_for_function("t => { const h = document.querySelector('h1'); return h && h.innerText.trim() === t; }",
                           arg=title, timeout=timeout)
    if idle:
        wait_idle(page, timeout)


def test_a_share_link_opened_in_another_browser_shows_the_same_text_and_numbers(browser, tiny_url, page):
    page.goto(tiny_url + "/hubs?lang=pt")
    wait_title(page, i18n.translate("pt", "hubs.title"), 600_000)
    mine = "Cada aluno abre o mesmo link e vê as mesmas contas, no mesmo passo, com o mesmo texto de hoje."
    shown = paste(page, mine)
    page.locator('[data-testid="stSidebar"] button', has_text=i18n.translate("pt", "share.button")).click()
    code = page.locator('[role="dialog"] code')
    code.wait_for(timeout=60_000)
    link = code.inner_text().strip()
    assert "?s=" in link and "/hubs" in link
    assert page.locator('[role="dialog"] img').count() == 1  # the QR code
    other = browser.new_context(viewport={"width": 1400, "height": 1400}, locale="ja-JP")
    try:
        second = other.new_page()
        second.goto(link)
        wait_title(second, i18n.translate("pt", "hubs.title"), 600_000)
        second.wait_for_selector('[data-testid="stMetricValue"]', timeout=300_000)
        wait_idle(second)
        assert second.locator('[data-testid="stSidebar"] textarea').input_value() == mine
        assert second.locator('[data-testid="stMetricValue"]').first.inner_text() == shown
    finally:
        other.close()


def axe_violations(page) -> list:
    """axe-core's serious and critical WCAG 2 A/AA violations on the page as drawn."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa"]}})
    # axe-core ships inside the package: nothing is fetched
    return [(v["id"], [n["target"] for n in v["nodes"][:2]])
            for v in result.response["violations"] if v["impact"] in ("serious", "critical")]


def test_presenter_mode_is_large_on_a_projector_and_every_page_passes_axe(browser, url):
    """On a projector (1920 × 1080, in Japanese): body text at least 22 px and each key
    number at least 48 px; every page passes axe-core's WCAG 2 A and AA rules in
    presenter mode (the normal mode is checked in Japanese and English on every page as
    the screenshots are taken)."""
    ctx = browser.new_context(viewport={"width": 1920, "height": 1080}, locale="en-US")
    page = ctx.new_page()
    found = {}
    try:
        for step in WALK:
            page.goto(f"{url}/{steps.link(step)}?lang=ja&present=1")
            wait_title(page, i18n.translate("ja", step.title_key), 600_000, idle=False)
            if step.is_step:
                page.wait_for_selector('[data-testid="stMetricValue"]', timeout=300_000)  # the numbers are in
            wait_idle(page)
            bad = axe_violations(page)
            if bad:
                found[step.id] = bad
            if step.id != "neighbours":
                continue
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
    finally:
        ctx.close()
    assert not found, found


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
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=120_000)
    assert "東京" in page.locator('[data-testid="stSidebar"] textarea').input_value()
    # the text survives a page switch
    page.locator('[data-testid="stSidebarNav"] a').nth(2).click()
    wait_title(page, i18n.translate("ja", "neighbours.title"))
    assert page.locator('[data-testid="stSidebar"] textarea').input_value().startswith("東京の朝")
    page.screenshot(path=os.path.join(ARTIFACTS, "ja-pasted-text.png"))


MARKUP_AND_CUTS = """() => {
  const text = [...document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')]
    .map(e => e.innerText).join('\\n');
  const marks = ['**', '__', '(s)'].filter(m => text.includes(m));
  const boxes = '[data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"], [data-testid="stMetricLabel"], '
    + '[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"], [data-testid="stTable"] th, '
    + '[data-testid="stWidgetLabel"], [data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"], '
    + '[data-testid="stMetricDelta"] [data-testid="stMarkdownContainer"], button [data-testid="stMarkdownContainer"]';
  const cut = [...document.querySelectorAll(boxes)]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
    .map(e => e.innerText.slice(0, 60));
  // a slider's value drawn over its own thumb and track
  const covered = [...document.querySelectorAll('[data-testid="stSliderThumbValue"]')]
    .filter(v => v.offsetParent !== null
      && v.getBoundingClientRect().bottom > v.parentElement.getBoundingClientRect().top + 1)
    .map(v => v.innerText);
  return {marks, cut, covered};
}"""


def markup_and_cuts(page) -> dict:
    """What the reader would see wrong: literal Markdown marks or "(s)" in the rendered
    text; navigation links, metric labels and deltas, widget labels, buttons or table
    headings whose text is wider than their box (cut off); a slider's value over its thumb."""
    return page.evaluate(MARKUP_AND_CUTS)


@pytest.mark.parametrize("lang", LANGS)
def test_every_step_draws_its_chart_in_every_language(page, url, lang):
    """A screenshot of every page in every language; in Japanese and English each page
    also passes axe-core's WCAG 2 A and AA rules (nothing serious or critical)."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    found = {}
    for i, path in enumerate(URLS):
        page.goto(f"{url}/{path}?lang={lang}")
        wait_title(page, i18n.translate(lang, WALK[i].title_key), 600_000, idle=False)
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


@pytest.mark.parametrize("lang", LANGS)
def test_in_presenter_mode_no_page_shows_markup_or_cuts_a_label(page, url, lang):
    """Presenter mode's larger type, on every page in every language: no literal "**",
    "__" or "(s)", no navigation link, metric label or delta, widget label, button or table
    heading cut off, and no slider's value drawn over its thumb."""
    found = {}
    for i, path in enumerate(URLS):
        page.goto(f"{url}/{path}?lang={lang}&present=1")
        wait_title(page, i18n.translate(lang, WALK[i].title_key), 600_000)
        wrong = markup_and_cuts(page)
        if wrong["marks"] or wrong["cut"] or wrong["covered"]:
            found[path or "every-pair"] = wrong
    assert not found, found


def test_a_pasted_text_stays_through_next_pagedown_pageup_previous_and_a_page_link(page, tiny_url):
    """Next and PageDown move with st.switch_page; the pasted text (and the numbers on
    it) must come along each time, and through the sidebar's page links too."""
    page.goto(tiny_url + "/?lang=pt")
    wait_title(page, i18n.translate("pt", "every_pair.title"), 300_000)
    mine = "Um texto colado pela professora, que tem de seguir a turma de passo em passo sem voltar ao exemplo."
    shown = paste(page, mine)
    box = page.locator('[data-testid="stSidebar"] textarea')

    def still_mine(step: int):
        wait_title(page, i18n.translate("pt", steps.steps()[step - 1].title_key))
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

    step = steps.by_id(step_id)
    page.goto(f"{tiny_url}/{steps.link(step)}?lang=en")
    wait_title(page, i18n.translate("en", step.title_key))
    label = i18n.translate("en", f"{step.key}.pick_w")
    thumb = page.locator(f'input[type=range][aria-label="{label}"]')  # the slider's own input
    start = int(thumb.input_value())
    thumb.focus()
    for _ in range(4):
        thumb.press("ArrowRight")
    page.wait_for_function("([l, v]) => document.querySelector(`input[type=range][aria-label=\"${l}\"]`).value == v",
                           arg=[label, str(start + 4)], timeout=30_000)
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
    kept = float((a.attentions.float() * inside).sum(-1).mean())
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


def test_measuring_buttons_show_progress_then_live_numbers(page, url):
    """Step 4's borrowed number (the real model with a 4-token window, with and
    without the first token as hub) and step 7's live benchmark, pressed once."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.goto(url + "/hubs?lang=en")
    wait_title(page, i18n.translate("en", "hubs.title"), 600_000)
    page.get_by_role("button", name=i18n.translate("en", "swap.measure_hub")).click()
    label = i18n.translate("en", "swap.w4_hub_ppl")
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=label, timeout=300_000)
    wait_idle(page, 300_000)
    page.screenshot(path=os.path.join(ARTIFACTS, "en-4-hubs-measured.png"), full_page=True)

    page.goto(url + "/payoff?lang=en")
    wait_title(page, i18n.translate("en", "payoff.title"), 600_000)
    page.get_by_role("button", name=i18n.translate("en", "payoff.run")).click()
    page.wait_for_selector('[data-testid="stProgress"]', timeout=60_000)  # progress is shown
    # the key/value cache's table is there from the start: the live run's is the second
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stDataFrame\"]').length >= 2",
                           timeout=600_000)
    wait_idle(page, 300_000)
    assert page.locator(".js-plotly-plot").count() >= 4  # the cost model, the cache, time and memory
    page.screenshot(path=os.path.join(ARTIFACTS, "en-7-payoff-measured.png"), full_page=True)


def test_a_bookmarked_page_opens_through_the_app_on_a_fresh_server(browser):
    """The very first request a server gets is a page URL: the page still runs inside
    app.py (sidebar, language, text), not alone as Streamlit's pages/ folder mode
    would run it."""
    with app_server("tiny", timeout=300) as fresh:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
        pg = ctx.new_page()
        pg.goto(fresh + "/neighbours?lang=pt")
        wait_title(pg, i18n.translate("pt", "neighbours.title"), 300_000)
        assert pg.locator('[data-testid="stSidebar"] textarea').input_value().startswith("Na vila")
        nav = pg.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
        assert nav[0].endswith(i18n.translate("pt", "every_pair.nav")) and len(nav) == len(WALK)
        pg.wait_for_selector(".js-plotly-plot", timeout=120_000)
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
        doc.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 7",
                              timeout=60_000)
        assert doc.locator(".js-plotly-plot").count() >= 7
        assert doc.locator("h2").count() == 8  # the seven steps and the glossary
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
    page.wait_for_function(in_view, timeout=30_000)
    assert i18n.translate("pt", "glossary.on_page") in heading.inner_text()
    # the same session: the pasted text and the numbers are still there
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == shown


def test_three_readers_at_once_each_see_only_their_own_language_and_text(browser, tiny_url):
    """Three browser contexts use the app at the same moment, each in its language with
    its own text: each sees its own title and its own token count."""
    own = {
        "ja": "三人が同時に開いても、それぞれの画面にはその人の文章だけが出るはずです。確かめてみましょう。",
        "pt": "Três pessoas abrem o app ao mesmo tempo; cada tela deve mostrar só o texto de quem a abriu, nada mais.",
        "en": "Three readers at once, each with a text of their own: none of them may see another's words or counts.",
    }
    contexts = {lang: browser.new_context(viewport={"width": 1400, "height": 1600}) for lang in own}
    try:
        pages = {lang: ctx.new_page() for lang, ctx in contexts.items()}
        for lang, pg in pages.items():
            pg.goto(tiny_url + f"/?lang={lang}")
        for lang, pg in pages.items():
            wait_title(pg, i18n.translate(lang, "every_pair.title"), 600_000)
        for lang, pg in pages.items():  # type all three, then wait for all three
            pg.wait_for_selector('[data-testid="stMetricValue"]', timeout=300_000)
            box = pg.locator('[data-testid="stSidebar"] textarea')
            box.fill(own[lang])
            box.press("Control+Enter")
        counts = {}
        for lang, pg in pages.items():
            pg.wait_for_function(
                "t => { const a = document.querySelector('[data-testid=\"stSidebar\"] textarea');"
                " const m = document.querySelector('[data-testid=\"stMetricValue\"]');"
                " return a && a.value === t && m && !document.querySelector('[data-testid=\"stStatusWidget\"]'); }",
                arg=own[lang], timeout=300_000)
            wait_idle(pg)
            counts[lang] = pg.locator('[data-testid="stMetricValue"]').first.inner_text()
            assert h1(pg) == i18n.translate(lang, "every_pair.title")
            assert pg.locator('[data-testid="stSidebar"] textarea').input_value() == own[lang]
            body = pg.locator('[data-testid="stMain"]').inner_text()
            for other, text in own.items():
                if other != lang:
                    assert text[:12] not in body
        assert len(set(counts.values())) == 3, counts  # three texts, three token counts
    finally:
        for ctx in contexts.values():
            ctx.close()


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
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=60_000)
        assert page.locator('[data-testid="stException"]').count() == 0, name
        page.screenshot(path=os.path.join(ARTIFACTS, f"playground-{lang}-{name}.png"), full_page=True)
    assert not page.dialogs


SEND_ENABLED = ("() => { const b = document.querySelector('[class*=\"st-key-vote_send_\"] button');"
                " return b && !b.disabled; }")
OWN_TEXT = ("O rio atravessa a cidade velha devagar, passando por baixo de sete pontes de pedra. Nas manhãs de "
            "inverno, a névoa cobre as margens e os pescadores esperam em silêncio. Quando o sol aparece, as crianças "
            "correm para a escola e os barcos sobem o rio, carregados de frutas, peixe e notícias das aldeias.")


@pytest.mark.parametrize("text", ["own", "sample"])
def test_students_in_three_languages_follow_the_teacher_through_every_page_with_a_vote_on_each_step(
        browser, tiny_url, text):
    """A class on the teacher's own text (a Portuguese paragraph, not a sample) and on the
    sample: the teacher on a projector (presenter mode) and three students on phones, in
    ja, pt and en, who join by the link and follow her PageDown through the seven steps,
    the closing page and the playground; on each step she opens the vote, every phone
    answers, she closes and reveals it. No student is ever switched to exploring: what
    their page sets itself (a default worked out on the text, a token picker's labels for
    the new text) is no change of theirs. On the own text's walk, the phones are checked
    as a room uses them: no sideways scrolling, axe at a phone's size, the vote's controls
    large and on the first screen, the count live on the join slide; screenshots kept."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    checked = text == "own"
    desk = browser.new_context(viewport={"width": 1920, "height": 1080}, locale="en-US")
    phones = {lang: browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True,
                                        has_touch=True) for lang in ("ja", "pt", "en")}
    try:
        teacher = desk.new_page()
        teacher.goto(tiny_url + "/?lang=en&present=1")
        wait_title(teacher, i18n.translate("en", "every_pair.title"))
        teacher.locator('[data-testid="stSidebar"] [data-testid="stExpander"] summary',
                        has_text=i18n.translate("en", "sidebar.controls")).click()
        if text == "own":
            paste(teacher, OWN_TEXT)
        teacher.locator('[data-testid="stSidebar"] summary', has_text=i18n.translate("en", "class.heading")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "class.start")).click()
        said = teacher.locator('[data-testid="stSidebar"] strong').filter(has_text=re.compile(r"^\w{3} \w{3}$"))
        said.first.wait_for(timeout=60_000)
        code = said.first.inner_text().replace(" ", "")
        students = {}
        for lang, ctx in phones.items():
            pg = ctx.new_page()
            pg.goto(f"{tiny_url}/?lang={lang}&class={code.lower()}")
            wait_title(pg, i18n.translate(lang, "every_pair.title"))
            students[lang] = pg
        if checked:
            teacher.get_by_role("button", name=i18n.translate("en", "class.show_slide")).click()
            teacher.locator('[role="dialog"]').get_by_text(i18n.translate("en", "class.present", n="3")).wait_for(
                timeout=10_000)  # live on the slide
            teacher.screenshot(path=os.path.join(ARTIFACTS, "class-join-slide-en.png"))
            teacher.keyboard.press("Escape")
            for pg in students.values():
                assert pg.locator('[data-testid="stSidebar"] textarea').input_value() == OWN_TEXT  # the class's text
                assert "me=" in pg.url and "class=" in pg.url
                width = pg.evaluate("() => document.documentElement.scrollWidth")
                assert width <= 390 + 1, width  # no sideways scrolling on the phone
        exploring = {lang: i18n.translate(lang, "class.exploring") for lang in students}
        heads = {lang: re.compile("|".join(re.escape(i18n.translate(lang, key, value="§", answer="§", right="§")
                                                     .split("§")[0].replace("**", ""))
                                           for key in ("vote.revealed", "vote.revealed_model")))
                 for lang in students}
        for i, page in enumerate(WALK):
            if i:
                teacher.locator("h1").first.click()
                teacher.keyboard.press("PageDown")
                wait_title(teacher, i18n.translate("en", page.title_key))
            for lang, pg in students.items():
                wait_title(pg, i18n.translate(lang, page.title_key), 15_000, idle=False)  # followed
            if not page.questions:
                continue
            slug = page.questions[0].replace(".", "_")
            teacher.get_by_role("button", name=i18n.translate("en", "vote.open")).click()
            for pg in students.values():  # every phone picks an option as soon as the vote reaches it
                pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').first.wait_for(timeout=15_000)
                assert pg.locator('[data-testid="stMetricValue"]').count() == 0  # nothing answers it yet
                pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').first.click()
            for lang, pg in students.items():  # then sends it, once Send is enabled
                send = pg.locator('[class*="st-key-vote_send_"] button')
                pg.wait_for_function(SEND_ENABLED, timeout=15_000)
                if checked and page.id == "hubs":  # the vote's own controls, checked on a phone
                    assert not axe_violations(pg)
                    heights = pg.evaluate("""() => [...document.querySelectorAll(
                        '[class*="st-key-vote_pick_"] [role="radiogroup"] label, [class*="st-key-vote_send_"] button')]
                        .map(e => e.getBoundingClientRect().height)""")
                    assert heights and min(heights) >= 44, heights  # large touch targets
                    bottom = pg.evaluate("""() => { window.scrollTo(0, 0); const b = document.querySelector(
                        '[class*="st-key-vote_send_"] button'); return b.getBoundingClientRect().bottom; }""")
                    assert bottom <= 844, bottom  # the question, its options and Send on the first screen
                    pg.screenshot(path=os.path.join(ARTIFACTS, f"class-phone-{lang}-4-vote.png"))
                send.click()
            for lang, pg in students.items():
                pg.get_by_text(i18n.translate(lang, "vote.sent", answer="§").split("§")[0].replace("**", "")).wait_for(
                    timeout=15_000)
            answered = i18n.translate("en", "vote.answered", k="3", n="§").split("§")[0].replace("**", "")
            teacher.get_by_text(answered).wait_for(timeout=10_000)  # her count, live
            teacher.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
            for lang, pg in students.items():  # closed, for the discussion: the answers' chart and nothing else
                pg.locator(f".st-key-vote_chart_{slug} .js-plotly-plot").wait_for(timeout=15_000)
                pg.get_by_text(i18n.translate(lang, "vote.page_waits")).wait_for(timeout=15_000)
                assert pg.locator('[data-testid="stMetricValue"]').count() == 0, (page.id, lang)
                assert pg.locator(".js-plotly-plot").count() == 1, (page.id, lang)
                if checked and page.id == "hubs":
                    pg.screenshot(path=os.path.join(ARTIFACTS, f"class-phone-{lang}-4-closed.png"), full_page=True)
            assert teacher.locator('[data-testid="stMetricValue"]').count() == 0  # the projector holds too
            teacher.get_by_role("button", name=i18n.translate("en", "vote.reveal")).click()
            for lang, pg in students.items():
                pg.locator(f".st-key-vote_chart_{slug} .js-plotly-plot").wait_for(timeout=15_000)
                pg.get_by_text(heads[lang]).first.wait_for(timeout=15_000)
            for lang, pg in students.items():
                side = pg.evaluate("() => document.querySelector('[data-testid=stSidebar]').textContent")
                assert exploring[lang] not in side, (page.id, lang)
                assert i18n.translate(lang, "class.following") in side, (page.id, lang)
                if checked and page.id == "hubs":
                    wait_idle(pg)
                    assert not axe_violations(pg)  # WCAG 2 A/AA at a phone's size
                    pg.screenshot(path=os.path.join(ARTIFACTS, f"class-phone-{lang}-4-revealed.png"), full_page=True)
            bars = teacher.evaluate(f"""() => {{
                const g = document.querySelector('.st-key-vote_chart_{slug} .js-plotly-plot');
                return g.data.map(t => t.y.reduce((a, b) => a + b, 0)); }}""")
            assert bars == [3]  # one vote, the three answers counted
    finally:
        desk.close()
        for ctx in phones.values():
            ctx.close()


ROOM_TEXTS = {"ja": "山あいの小さな町では、朝いちばんの列車が来る前に、駅長さんがホームの雪をかきます。" * 2,
              "pt": "Na feira de sábado, as bancas de frutas abrem antes do sol e o cheiro de café enche a rua. " * 2}


def test_the_room_on_phones_each_student_sees_their_own_point_and_nobody_elses_words(browser, tiny_url):
    """Two students on phones send texts of their own to the room from the class panel;
    the teacher shows the room; each phone's step 1 draws every text's point with the
    student's own ringed, never another student's words; no sideways scrolling, and axe
    passes at a phone's size."""
    desk = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    phones = {lang: browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True,
                                        has_touch=True) for lang in ROOM_TEXTS}
    try:
        teacher = desk.new_page()
        teacher.goto(tiny_url + "/?lang=en")
        wait_title(teacher, i18n.translate("en", "every_pair.title"))
        teacher.locator('[data-testid="stSidebar"] summary', has_text=i18n.translate("en", "class.heading")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "class.start")).click()
        said = teacher.locator('[data-testid="stSidebar"] strong').filter(has_text=re.compile(r"^\w{3} \w{3}$"))
        said.first.wait_for(timeout=60_000)
        code = said.first.inner_text().replace(" ", "")
        students = {}
        for lang, ctx in phones.items():
            pg = ctx.new_page()
            pg.goto(f"{tiny_url}/?lang={lang}&class={code}")
            wait_title(pg, i18n.translate(lang, "every_pair.title"))
            pg.locator('[data-testid="stExpandSidebarButton"], [data-testid="stSidebarCollapsedControl"] button'
                       ).first.click()
            pg.get_by_role("button", name=i18n.translate(lang, "room.student_heading"), exact=True).click()
            pg.locator(".st-key-room_text textarea").fill(ROOM_TEXTS[lang])
            pg.get_by_role("button", name=i18n.translate(lang, "room.send"), exact=True).click()
            pg.get_by_text(i18n.translate(lang, "room.sent")).wait_for(timeout=15_000)
            pg.keyboard.press("Escape")
            students[lang] = pg
        teacher.get_by_role("button", name=i18n.translate("en", "room.teacher_heading"), exact=True).click()
        teacher.locator(".st-key-room_shown").click()
        teacher.keyboard.press("Escape")
        for lang, pg in students.items():
            chart = ".st-key-room_chart_every_pair_cells .js-plotly-plot"
            pg.locator(chart).wait_for(timeout=60_000)
            pg.wait_for_function("""() => { const g = document.querySelector('""" + chart + """');
                return g && g.data.filter(t => t.mode === 'markers' && !(t.marker.line && t.marker.line.color))
                    .reduce((a, t) => a + t.x.length, 0) >= 2 * 2; }""", timeout=60_000)  # 2 texts × 2 kinds of layer
            wait_idle(pg)
            ringed = pg.evaluate("""() => document.querySelector('""" + chart + """').data
                .filter(t => t.marker && t.marker.line && t.marker.line.color === '#000000').length""")
            assert ringed == 1, lang  # their own point, and no one else's
            other = next(text for other_lang, text in ROOM_TEXTS.items() if other_lang != lang)
            body = pg.evaluate("() => document.body.innerText + JSON.stringify([...document.querySelectorAll("
                               "'.js-plotly-plot')].map(g => g.data))")
            assert other[:12] not in body, lang  # never another student's words
            assert pg.evaluate("() => document.documentElement.scrollWidth") <= 391
            assert not axe_violations(pg)
            pg.screenshot(path=os.path.join(ARTIFACTS, f"room-phone-{lang}-1.png"), full_page=True)
    finally:
        desk.close()
        for ctx in phones.values():
            ctx.close()


REASONS = {"ja": "行が倍になり、列も倍になるから", "pt": "cada token olha para todos os outros",
           "en": "the grid is a square: rows and columns both double"}


def test_three_phones_send_reasons_see_the_one_shown_then_answer_the_matched_question(browser, tiny_url, tmp_path):
    """Peer instruction on phones: the teacher opens step 1's vote; three students (ja, pt,
    en) each answer with a written reason; nothing one wrote is on another's screen; the
    teacher closes the vote, reads the three reasons and shows one: every phone then shows
    that one, as text, and still neither of the other two. She reveals the answer and opens
    the matched question; each phone answers it alone (no reason field); once revealed,
    her sidebar and the shares' CSV hold the first vote's share right and the matched
    question's (each option chosen once: a third right, whichever is right)."""
    import csv
    import io

    os.makedirs(ARTIFACTS, exist_ok=True)
    desk = browser.new_context(viewport={"width": 1400, "height": 1600}, locale="en-US")
    phones = {lang: browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True,
                                        has_touch=True) for lang in REASONS}
    try:
        teacher = desk.new_page()
        teacher.goto(tiny_url + "/?lang=en")
        wait_title(teacher, i18n.translate("en", "every_pair.title"))
        teacher.locator('[data-testid="stSidebar"] summary', has_text=i18n.translate("en", "class.heading")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "class.start")).click()
        said = teacher.locator('[data-testid="stSidebar"] strong').filter(has_text=re.compile(r"^\w{3} \w{3}$"))
        said.first.wait_for(timeout=60_000)
        code = said.first.inner_text().replace(" ", "")
        students = {}
        for lang, ctx in phones.items():
            pg = ctx.new_page()
            pg.goto(f"{tiny_url}/?lang={lang}&class={code}")
            wait_title(pg, i18n.translate(lang, "every_pair.title"))
            students[lang] = pg
        teacher.get_by_role("button", name=i18n.translate("en", "vote.open")).click()
        for i, (lang, pg) in enumerate(students.items()):  # each option once
            pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').first.wait_for(timeout=15_000)
            pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').nth(i).click()
            box = pg.locator('[class*="st-key-vote_reason_"] input')
            box.fill(REASONS[lang])
            box.press("Enter")
            pg.wait_for_function(SEND_ENABLED, timeout=15_000)
            if lang == "ja":
                pg.screenshot(path=os.path.join(ARTIFACTS, "class-phone-ja-1-reason.png"), full_page=True)
            pg.locator('[class*="st-key-vote_send_"] button').click()
            pg.get_by_text(i18n.translate(lang, "vote.sent", answer="§").split("§")[0].replace("**", "")).wait_for(
                timeout=15_000)
        for lang, pg in students.items():  # no student's words on another's screen
            body = pg.evaluate("() => document.body.innerText")
            assert not [other for other_lang, other in REASONS.items() if other_lang != lang and other in body], lang
        teacher.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
        shown = teacher.locator('[data-testid="stText"]', has_text=REASONS["pt"])
        shown.wait_for(timeout=15_000)
        for reason in REASONS.values():  # the teacher reads all three
            teacher.locator('[data-testid="stText"]', has_text=reason).wait_for(timeout=5_000)
        teacher.screenshot(path=os.path.join(ARTIFACTS, "class-teacher-reasons-en.png"), full_page=True)
        row = teacher.locator('[data-testid="stHorizontalBlock"]').filter(has=shown)
        row.get_by_role("button", name=i18n.translate("en", "vote.show_reason")).click()
        for lang, pg in students.items():
            pg.locator('[data-testid="stText"]', has_text=REASONS["pt"]).wait_for(timeout=15_000)
            pg.get_by_text(i18n.translate(lang, "vote.shown_heading")).wait_for(timeout=5_000)
            body = pg.evaluate("() => document.body.innerText")
            assert not [other for other_lang, other in REASONS.items() if other_lang != "pt" and other in body], lang
            assert pg.evaluate("() => document.documentElement.scrollWidth") <= 391
            pg.screenshot(path=os.path.join(ARTIFACTS, f"class-phone-{lang}-1-shown-reason.png"), full_page=True)

        # the reveal, then the matched question, answered alone
        teacher.get_by_role("button", name=i18n.translate("en", "vote.reveal")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "vote.matched_open")).click()
        for i, (lang, pg) in enumerate(students.items()):
            pg.get_by_text(i18n.translate(lang, "vote.matched_alone")).wait_for(timeout=30_000)
            picks = pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label')
            assert picks.count() == 3 and pg.locator('[class*="st-key-vote_reason_"]').count() == 0
            picks.nth(i).click()
            pg.wait_for_function(SEND_ENABLED, timeout=15_000)
            if lang == "ja":
                pg.screenshot(path=os.path.join(ARTIFACTS, "class-phone-ja-1-matched.png"), full_page=True)
            pg.locator('[class*="st-key-vote_send_"] button').click()
            pg.get_by_text(i18n.translate(lang, "vote.sent", answer="§").split("§")[0].replace("**", "")).wait_for(
                timeout=15_000)
        teacher.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "vote.reveal")).click()
        t = i18n.Translator("en")
        third = t("vote.result_cell", right=t.pct(1 / 3, 0), n="3")
        line = (f"{t('vote.col_first')}: {third} · {t('vote.col_second')}: — · "
                f"{t('vote.col_matched')}: {third}")
        teacher.locator('[data-testid="stSidebar"]').get_by_text(line).wait_for(timeout=30_000)
        for lang, pg in students.items():  # the matched answer revealed on every phone
            pg.get_by_text(i18n.translate(lang, "vote.matched_heading")).first.wait_for(timeout=30_000)
            assert pg.locator('[class*="st-key-vote_pick_"]').count() == 0
        teacher.locator("button", has_text=i18n.translate("en", "room.teacher_heading")).first.click()
        with teacher.expect_download(timeout=60_000) as info:
            teacher.get_by_role("button", name=i18n.translate("en", "room.download_shares")).click()
        path = tmp_path / "shares.csv"
        info.value.save_as(path)
        rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
        assert [(r["question"], r["first_right"], r["first_answered"], r["second_answered"], r["matched_question"],
                 r["matched_right"], r["matched_answered"]) for r in rows] == [
            ("s1.doubling", "0.3333", "3", "", "s1.tripling", "0.3333", "3")]
        teacher.screenshot(path=os.path.join(ARTIFACTS, "class-teacher-matched-en.png"), full_page=True)
    finally:
        desk.close()
        for ctx in phones.values():
            ctx.close()


def test_a_tap_on_the_strip_beside_a_grid_row_follows_that_token_on_a_phone(browser, tiny_url):
    """Step 1 on a phone: a finger on the strip beside the grid, a third of the way down
    (a first tap names the row, a second follows it: a touch screen has no hover to say
    which point is under the finger before it lands), makes that row's token the one
    followed below — the strip marks it, the row's chart and the drop-down say it — and a
    tap lower follows a later token. The rows are under a pixel apart on a phone, so the
    finger picks a row near the one aimed at."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True, has_touch=True)
    try:
        pg = ctx.new_page()
        pg.goto(tiny_url + "/?lang=en")
        wait_title(pg, i18n.translate("en", "every_pair.title"))
        chart = pg.locator(".st-key-s1_grid .js-plotly-plot")
        chart.scroll_into_view_if_needed()
        wait_idle(pg)
        picked = []
        for share in (1 / 3, 2 / 3):
            aim = pg.evaluate("""(share) => {
                const g = document.querySelector('.st-key-s1_grid .js-plotly-plot');
                const d = g._fullData[g._fullData.length - 1], i = Math.floor(d.y.length * share);
                const r = g.querySelector('.nsewdrag').getBoundingClientRect();
                return {x: r.left + g._fullLayout.xaxis.l2p(d.x[i]), y: r.top + g._fullLayout.yaxis.l2p(d.y[i]),
                        i: i, rows: d.y.length}; }""", share)
            before = pg.evaluate(MARKED)
            for _ in range(2):
                pg.touchscreen.tap(aim["x"], aim["y"])
                pg.wait_for_timeout(700)
            pg.wait_for_function(MARKED + "[0] !== " + str(before[0]), timeout=15_000)
            wait_idle(pg)
            row, token = pg.evaluate(MARKED)
            assert abs(row - aim["i"]) <= max(3, 0.05 * aim["rows"]), (row, aim)  # near the finger
            pg.get_by_text(i18n.translate("en", "every_pair.row_title", i=token)).first.wait_for(timeout=15_000)
            shown = pg.locator(".st-key-s1_token").evaluate("e => e.textContent + ' ' + [...e.querySelectorAll("
                                                             "'input')].map(i => i.value).join(' ')")
            assert f"{token} · " in shown, shown  # the drop-down follows it
            picked.append(token)
        assert picked[0] < picked[1]
        assert pg.evaluate("() => document.documentElement.scrollWidth") <= 391
        pg.screenshot(path=os.path.join(ARTIFACTS, "phone-en-1-tapped-row.png"))
    finally:
        ctx.close()


MARKED = """(() => { const g = document.querySelector('.st-key-s1_grid .js-plotly-plot');
    const d = g._fullData[g._fullData.length - 1], c = Array.from(d.marker.color);
    const i = c.findIndex(x => x !== '#BBBBBB'); return [i, i < 0 ? null : d.customdata[i][0]]; })()"""
