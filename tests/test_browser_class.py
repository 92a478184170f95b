"""A live class and readers at once in a real browser (the shared fixtures: tests/
browser_parts.py), all on the tiny model: a share link opened in another browser, three
readers in three languages at once, a teacher and phones in three languages through every
page with a vote on each step, the room on phones, reasons and the matched question, a tap
on step 1's grid. Presenter mode on the real model's pages: tests/test_browser.py."""

import os
import re

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from browser_parts import ARTIFACTS, SEND_ENABLED, axe_violations, h1, screenshots_on_failure, wait_title
from helpers import WALK
from harness.serve import FIRST_METRIC, POLL_MS, app_server, paste, wait_idle
from ui import i18n

pytestmark = pytest.mark.browser

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
                arg=own[lang], timeout=300_000, polling=POLL_MS)
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


HAS_TEXT = "t => { const a = document.querySelector('[data-testid=stSidebar] textarea'); return a && a.value === t; }"
OWN_TEXT = ("O rio atravessa a cidade velha devagar, passando por baixo de sete pontes de pedra. Nas manhãs de "
            "inverno, a névoa cobre as margens e os pescadores esperam em silêncio. Quando o sol aparece, as crianças "
            "correm para a escola e os barcos sobem o rio, carregados de frutas, peixe e notícias das aldeias.")


def test_students_in_three_languages_follow_the_teacher_through_every_page_with_a_vote_on_each_step(
        browser, tiny_url):
    """A class as a teacher runs one: she starts it on the sample, on a projector (presenter
    mode), and three students on phones, in ja, pt and en, join by the link; after step 1's
    vote she pastes her own text (a Portuguese paragraph), and the phones take it up still
    following. They follow her PageDown through the seven steps, the closing page and the
    playground; on each step she opens the vote, every phone answers, she closes and
    reveals it. No student is ever switched to exploring: what their page sets itself (a
    default worked out on the text, a token picker's labels for the new text) is no change
    of theirs. The phones are checked as a room uses them: no sideways scrolling, axe at a
    phone's size, the vote's controls large and on the first screen, the count live on the
    join slide; screenshots kept."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    desk = browser.new_context(viewport={"width": 1920, "height": 1080}, locale="en-US")
    phones = {lang: browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True,
                                        has_touch=True) for lang in ("ja", "pt", "en")}
    try:
        teacher = desk.new_page()
        teacher.goto(tiny_url + "/?lang=en&present=1")
        wait_title(teacher, i18n.translate("en", "every_pair.title"))
        controls = teacher.locator('[data-testid="stSidebar"] [data-testid="stExpander"] summary',
                                   has_text=i18n.translate("en", "sidebar.controls"))
        controls.click()
        teacher.wait_for_function(FIRST_METRIC, timeout=300_000, polling=POLL_MS)
        sample = teacher.locator('[data-testid="stSidebar"] textarea').input_value()
        assert sample and sample != OWN_TEXT
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
        teacher.get_by_role("button", name=i18n.translate("en", "class.show_slide")).click()
        teacher.locator('[role="dialog"]').get_by_text(i18n.translate("en", "class.present", n="3")).wait_for(
            timeout=10_000)  # live on the slide
        teacher.screenshot(path=os.path.join(ARTIFACTS, "class-join-slide-en.png"))
        teacher.keyboard.press("Escape")
        for pg in students.values():
            assert pg.locator('[data-testid="stSidebar"] textarea').input_value() == sample  # the class's text
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
                wait_title(pg, i18n.translate(lang, page.title_key), 30_000, idle=False)  # followed
            if not page.questions:
                continue
            slug = page.questions[0].replace(".", "_")
            # her page's own run (the class's pages are built in the background beside it, and the
            # other test process runs its own browsers): up to a minute on a busy 2-core machine
            teacher.get_by_role("button", name=i18n.translate("en", "vote.open")).click(timeout=60_000)
            for pg in students.values():  # every phone picks an option as soon as the vote reaches it
                pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').first.wait_for(timeout=15_000)
                # nothing answers it yet: the step's numbers leave as the held page's run ends (Streamlit
                # removes the elements a run did not draw again only at its end)
                pg.wait_for_function(NO_NUMBERS, timeout=15_000, polling=POLL_MS)
                pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').first.click()
            for lang, pg in students.items():  # then sends it, once Send is enabled
                send = pg.locator('[class*="st-key-vote_send_"] button')
                pg.wait_for_function(SEND_ENABLED, timeout=15_000, polling=POLL_MS)
                if page.id == "hubs":  # the vote's own controls, checked on a phone
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
                if page.id == "hubs":
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
                shown = pg.locator('[data-testid="stSidebar"] textarea').input_value()
                assert shown == (sample if i == 0 else OWN_TEXT), (page.id, lang)  # the class's text, kept
                if page.id == "hubs":
                    wait_idle(pg)
                    assert not axe_violations(pg)  # WCAG 2 A/AA at a phone's size
                    pg.screenshot(path=os.path.join(ARTIFACTS, f"class-phone-{lang}-4-revealed.png"), full_page=True)
            teacher.locator(f".st-key-vote_chart_{slug} .js-plotly-plot").wait_for(timeout=30_000)  # her run too
            bars = teacher.evaluate(f"""() => {{
                const g = document.querySelector('.st-key-vote_chart_{slug} .js-plotly-plot');
                return g.data.map(t => t.y.reduce((a, b) => a + b, 0)); }}""")
            assert bars == [3]  # one vote, the three answers counted
            if i == 0:  # her own text, pasted mid-class: every phone takes it up, still following
                if not teacher.locator('[data-testid="stSidebar"] textarea').is_visible():
                    controls.click()  # her controls, folded again since the class began
                paste(teacher, OWN_TEXT)
                for pg in students.values():
                    pg.wait_for_function(HAS_TEXT, arg=OWN_TEXT, timeout=30_000, polling=POLL_MS)
    except Exception:
        screenshots_on_failure("class-walk", desk, *phones.values(), url=tiny_url)
        raise
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
        code = start_class(tiny_url, teacher)
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
                    .reduce((a, t) => a + t.x.length, 0) >= 2 * 2; }""",  # 2 texts × 2 kinds of layer
                timeout=60_000, polling=POLL_MS)
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


def test_three_phones_reason_see_the_one_shown_answer_the_matched_question_and_an_estimate(
        browser, tiny_url, tmp_path):
    """Peer instruction on phones: the teacher opens step 1's vote; three students (ja, pt,
    en) each answer with a written reason; nothing one wrote is on another's screen; the
    teacher closes the vote, reads the three reasons and shows one: every phone then shows
    that one, as text, and still neither of the other two. A second vote (no reasons), then
    she reveals the answer and opens the matched question; each phone answers it alone (no reason field); once revealed,
    her sidebar and the shares' CSV hold the three shares right — first vote, second vote,
    matched question (each option chosen once each time: a third right, whichever is right). On step 2 she
    asks for an estimate: each phone types a number; revealed, every phone draws the three
    numbers against one measured value and says how far its own was; her sidebar counts
    those within a factor of 1.5."""
    import csv
    import io

    os.makedirs(ARTIFACTS, exist_ok=True)
    desk = browser.new_context(viewport={"width": 1400, "height": 1600}, locale="en-US")
    phones = {lang: browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True,
                                        has_touch=True) for lang in REASONS}
    try:
        teacher = desk.new_page()
        code = start_class(tiny_url, teacher)
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
            pg.wait_for_function(SEND_ENABLED, timeout=15_000, polling=POLL_MS)
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

        # a second vote after the discussion (each option once again), the reveal, then the
        # matched question, answered alone
        teacher.get_by_role("button", name=i18n.translate("en", "vote.again")).click()
        for i, (lang, pg) in enumerate(students.items()):
            pg.get_by_text(i18n.translate(lang, "vote.second")).wait_for(timeout=30_000)
            picks = pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label')
            picks.nth(2).wait_for(timeout=15_000)
            assert pg.locator('[class*="st-key-vote_reason_"]').count() == 0  # reasons go with the first vote
            picks.nth((i + 1) % 3).click()
            pg.wait_for_function(SEND_ENABLED, timeout=15_000, polling=POLL_MS)
            pg.locator('[class*="st-key-vote_send_"] button').click()
            pg.get_by_text(i18n.translate(lang, "vote.sent", answer="§").split("§")[0].replace("**", "")).wait_for(
                timeout=15_000)
        teacher.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "vote.reveal")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "vote.matched_open")).click()
        for i, (lang, pg) in enumerate(students.items()):
            pg.get_by_text(i18n.translate(lang, "vote.matched_alone")).wait_for(timeout=30_000)
            picks = pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label')
            picks.nth(2).wait_for(timeout=15_000)  # the caption may come a moment before the options
            assert picks.count() == 3 and pg.locator('[class*="st-key-vote_reason_"]').count() == 0
            picks.nth(i).click()
            pg.wait_for_function(SEND_ENABLED, timeout=15_000, polling=POLL_MS)
            if lang == "ja":
                pg.screenshot(path=os.path.join(ARTIFACTS, "class-phone-ja-1-matched.png"), full_page=True)
            pg.locator('[class*="st-key-vote_send_"] button').click()
            pg.get_by_text(i18n.translate(lang, "vote.sent", answer="§").split("§")[0].replace("**", "")).wait_for(
                timeout=15_000)
        teacher.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "vote.reveal")).click()
        t = i18n.Translator("en")
        third = t("vote.result_cell", right=t.pct(1 / 3, 0), n="3")
        line = (f"{t('vote.col_first')}: {third} · {t('vote.col_second')}: {third} · "
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
        assert [(r["question"], r["first_right"], r["first_answered"], r["second_right"], r["second_answered"],
                 r["matched_question"], r["matched_right"], r["matched_answered"]) for r in rows] == [
            ("s1.doubling", "0.3333", "3", "0.3333", "3", "s1.tripling", "0.3333", "3")]
        teacher.screenshot(path=os.path.join(ARTIFACTS, "class-teacher-matched-en.png"), full_page=True)

        # step 2 asked as an estimate: a number from each phone, drawn against the measured one
        teacher.locator("h1").first.click()
        teacher.keyboard.press("PageDown")
        wait_title(teacher, i18n.translate("en", "nearly_empty.title"))
        for lang, pg in students.items():
            wait_title(pg, i18n.translate(lang, "nearly_empty.title"), 30_000, idle=False)
        ask = teacher.get_by_role("button", name=i18n.translate("en", "vote.estimate_open"))
        ask.scroll_into_view_if_needed()
        teacher.screenshot(path=os.path.join(ARTIFACTS, "class-teacher-2-ask-en.png"))  # both ways to ask, side by side
        ask.click()
        guesses = {"ja": 5, "pt": 1.5, "en": 500}
        typed = {"ja": "５", "pt": "1,5", "en": "500"}  # as each writes it: full-width, a decimal comma
        for lang, pg in students.items():
            box = pg.locator('[class*="st-key-vote_number_"] input')
            box.wait_for(timeout=30_000)
            box.fill(typed[lang])
            box.press("Enter")
            pg.wait_for_function(SEND_ENABLED, timeout=15_000, polling=POLL_MS)
            read = {"ja": "5", "pt": "1,5", "en": "500"}[lang]  # what the phone says it understood, before Send
            pg.get_by_text(i18n.translate(lang, "vote.estimate_read", number=read).replace("**", "")).wait_for(
                timeout=5_000)
            if lang == "pt":
                pg.screenshot(path=os.path.join(ARTIFACTS, "class-phone-pt-2-estimate.png"), full_page=True)
            pg.locator('[class*="st-key-vote_send_"] button').click()
            sent = i18n.translate(lang, "vote.estimate_sent", number="§").split("§")[0].replace("**", "")
            pg.get_by_text(sent).wait_for(timeout=15_000)
        teacher.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
        teacher.get_by_role("button", name=i18n.translate("en", "vote.reveal")).click()
        measured = None
        for lang, pg in students.items():
            name = i18n.translate(lang, "vote.estimate_measured")
            chart = pg.locator(".st-key-vote_chart_s2_cells_estimate")
            for attempt in range(5):  # the reveal's rerun may replace the chart's element under the scroll
                chart.wait_for(timeout=30_000)
                try:
                    chart.scroll_into_view_if_needed(timeout=10_000)  # Plotly draws a chart once it comes into view
                    break
                except PlaywrightError:
                    if attempt == 4:
                        raise
            traces = pg.wait_for_function(ESTIMATE_TRACES, arg=name, timeout=30_000, polling=POLL_MS).json_value()
            assert sorted(traces[i18n.translate(lang, "vote.estimate_guesses")]) == sorted(guesses.values())
            line = traces[name]
            assert line[0] == line[1] and (measured is None or line[0] == measured)  # one value on every phone
            measured = line[0]
            near = measured / 1.5 <= guesses[lang] <= measured * 1.5
            said = i18n.translate(lang, "vote.estimate_far_near" if near else "vote.estimate_far_off", number="§",
                                  times="§", f="§")
            pg.get_by_text(re.compile("^" + re.escape(said).replace("§", ".+?") + "$")).wait_for(timeout=15_000)
            assert pg.evaluate("() => document.documentElement.scrollWidth") <= 391
            pg.screenshot(path=os.path.join(ARTIFACTS, f"class-phone-{lang}-2-estimate-revealed.png"))  # chart in view
        near = sum(1 for x in guesses.values() if measured / 1.5 <= x <= measured * 1.5)
        cell = t("vote.result_cell", right=t.pct(near / 3, 0), n="3")
        teacher.locator('[data-testid="stSidebar"]').get_by_text(
            f"{t('vote.result_step', step=2)} · {t('vote.estimate_row')} · {t('vote.col_first')}: {cell}").wait_for(
            timeout=30_000)
    except Exception:
        screenshots_on_failure("phones", desk, *phones.values(), url=tiny_url)
        raise
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
            pg.wait_for_function(MARKED + "[0] !== " + str(before[0]), timeout=15_000, polling=POLL_MS)
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


NO_NUMBERS = "() => document.querySelectorAll('[data-testid=\"stMetricValue\"]').length === 0"
ESTIMATE_TRACES = """name => { const g = [...document.querySelectorAll('[class*="st-key-vote_chart_"] .js-plotly-plot')]
  .find(p => (p.data || []).some(t => t.name === name));
  return g ? Object.fromEntries(g.data.map(t => [t.name, [...t.x]])) : null; }"""
MARKED = """(() => { const g = document.querySelector('.st-key-s1_grid .js-plotly-plot');
    const d = g._fullData[g._fullData.length - 1], c = Array.from(d.marker.color);
    const i = c.findIndex(x => x !== '#BBBBBB'); return [i, i < 0 ? null : d.customdata[i][0]]; })()"""


def test_the_projector_shows_only_the_reasons_the_teacher_shows(browser, tmp_path):
    """The teacher's session in presenter mode is the projector. Two phones answer with a
    reason; once she closes the vote, the wall shows neither (her panel there is folded and
    marked private); she picks one on her own phone (her teacher link, no presenter mode):
    the wall then shows that one, never the other."""
    desk = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    own = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phones = [browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
              for _ in range(2)]
    written = ["the grid doubles each way", "unkind words about a classmate"]
    # a server and store of its own: the classes this run's other browser tests started from the
    # loopback have spent its starts (server.limits.STARTS)
    with app_server("tiny", extra_env={"ATLAS_STORE_PATH": str(tmp_path / "projector.sqlite3")}) as tiny_url:
        _projector(tiny_url, desk, own, phones, written)


def _projector(tiny_url, desk, own, phones, written) -> None:
    try:
        wall = desk.new_page()
        code = start_class(tiny_url, wall)
        link = ""
        for _ in range(4):  # a rerun right after the start (a loaded machine) may fold the popover again
            wall.get_by_role("button", name=i18n.translate("en", "class.resume_heading")).click()
            found = wall.locator('[data-testid="stCode"] code', has_text="host=").first
            try:
                found.wait_for(timeout=15_000)
            except PlaywrightTimeout:
                wall.keyboard.press("Escape")
                continue
            link = found.inner_text().strip()
            break
        assert link, "the teacher's resume link was never shown"
        wall.keyboard.press("Escape")
        wall.get_by_text(i18n.translate("en", "sidebar.presenter")).click()  # now the projector
        seated = []
        for ctx in phones:  # the class seated first, then the vote opens
            pg = ctx.new_page()
            pg.goto(f"{tiny_url}/?lang=en&class={code}")
            wait_title(pg, i18n.translate("en", "every_pair.title"))
            seated.append(pg)
        wall.get_by_role("button", name=i18n.translate("en", "vote.open")).click()
        for i, (pg, reason) in enumerate(zip(seated, written)):
            pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').first.wait_for(timeout=60_000)
            pg.locator('[class*="st-key-vote_pick_"] [role="radiogroup"] label').nth(i).click()
            box = pg.locator('[class*="st-key-vote_reason_"] input')
            box.fill(reason)
            box.press("Enter")
            pg.wait_for_function(SEND_ENABLED, timeout=15_000, polling=POLL_MS)
            pg.locator('[class*="st-key-vote_send_"] button').click()
            pg.get_by_text(i18n.translate("en", "vote.sent", answer="§").split("§")[0].replace("**", "")).wait_for(
                timeout=15_000)
        wall.get_by_role("button", name=i18n.translate("en", "vote.close")).click()
        private = i18n.translate("en", "vote.reasons_private", n=2).split(" · ")[0]
        wall.get_by_text(private).first.wait_for(timeout=15_000)
        wall.wait_for_timeout(1500)  # the closed vote drawn in full
        held = wall.evaluate("() => document.body.textContent")  # what is drawn, folded or not
        assert not [r for r in written if r in held]  # nothing written reaches the wall's browser unshown
        wall.screenshot(path=os.path.join(ARTIFACTS, "class-projector-reasons-private-en.png"), full_page=True)
        mine = own.new_page()  # her own phone: the teacher link, no presenter mode
        mine.goto(link + "&lang=en")
        shown = mine.locator('[data-testid="stText"]', has_text=written[0])
        shown.wait_for(timeout=60_000)  # the panel opens there, with both
        mine.locator('[data-testid="stText"]', has_text=written[1]).wait_for(timeout=5_000)
        row = mine.locator('[data-testid="stHorizontalBlock"]').filter(has=shown).last
        row.get_by_role("button", name=i18n.translate("en", "vote.show_reason")).click()
        wall.wait_for_function("([shown, kept]) => { const s = document.body.innerText;"
                               " return s.includes(shown) && !s.includes(kept); }", arg=written, timeout=15_000,
                               polling=POLL_MS)
        wall.wait_for_timeout(1500)
        seen = wall.evaluate("() => document.body.innerText")
        assert written[0] in seen and written[1] not in seen
    except BaseException:
        screenshots_on_failure("projector", desk, own, *phones)
        raise
    finally:
        for ctx in (desk, own, *phones):
            ctx.close()


def start_class(url: str, page) -> str:
    """The teacher opens step 1 in English and starts a class: its code."""
    page.goto(url + "/?lang=en")
    wait_title(page, i18n.translate("en", "every_pair.title"))
    page.locator('[data-testid="stSidebar"] summary', has_text=i18n.translate("en", "class.heading")).click()
    page.get_by_role("button", name=i18n.translate("en", "class.start")).click()
    said = page.locator('[data-testid="stSidebar"] strong').filter(has_text=re.compile(r"^\w{3} \w{3}$"))
    said.first.wait_for(timeout=60_000)
    return said.first.inner_text().replace(" ", "")
