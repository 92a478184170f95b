"""How fast the app answers in a browser, on this machine.

    .venv/bin/python -m bench.app_latency

Prints: the cold start (server start to the first chart), the time from a page
switch to the page finished (title shown, every chart drawn, the script done)
for each page with a ~300-token text after a warm-up pass, and for a 2,048-token
text the attention grid's payload and the time until it is drawn.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import pages  # noqa: F401 (importing it fills the walk: ui.walk)
from harness.serve import SERVER_PIDS, app_server, launch, paste, peak_rss_mb, wait_idle
from ui import figures, i18n
from ui.samples import sample_text
from ui import walk

PAGES = walk.pages()
URLS = [walk.link(p) for p in PAGES]
TITLES = [p.title_key for p in PAGES]

DONE = """([title, plots]) => {
    const h = document.querySelector('h1');
    if (!h || h.innerText.trim() !== title) return false;
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    return document.querySelectorAll('.js-plotly-plot').length >= plots;
}"""


def finished(page, title: str, plots: int, timeout=300_000):
    page.wait_for_function(DONE, arg=[title, plots], timeout=timeout, polling=25)


def text_of_tokens(n: int) -> str:
    """About n tokens of the sample texts (the English one, repeated as needed)."""
    base = sample_text("en")
    words = (base + "\n\n") * (1 + n // 300)
    return " ".join(words.split(" ")[: int(n * 0.78)])


def main() -> int:
    from playwright.sync_api import sync_playwright

    print("cold start and page latency (real model, CPU)")
    with sync_playwright() as p:
        browser = launch(p)
        t0 = time.perf_counter()
        with app_server("gemma") as url:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.goto(url + "/?lang=en")
            page.wait_for_selector(".js-plotly-plot", timeout=600_000)
            print(f"  cold start to the first chart: {time.perf_counter() - t0:.1f} s (model already converted)")
            wait_idle(page)
            n_tokens = paste(page, text_of_tokens(300))
            print(f"  text: {n_tokens} tokens")
            nav = page.locator('[data-testid="stSidebarNav"] a')
            order = list(range(1, len(URLS))) + [0]
            plots = {}
            for i in order:  # warm-up pass: caches filled, charts counted
                t = time.perf_counter()
                nav.nth(i).click()
                finished(page, i18n.translate("en", TITLES[i]), 1 if PAGES[i].is_step else 0)
                wait_idle(page, 300_000)
                plots[i] = page.locator(".js-plotly-plot").count()
                print(f"  first visit of page {i + 1}: {time.perf_counter() - t:.2f} s (with its one-off computations)")
            rows = []
            for _ in range(3):
                for i in order:
                    t = time.perf_counter()
                    nav.nth(i).click()
                    finished(page, i18n.translate("en", TITLES[i]), plots[i])
                    rows.append((i, time.perf_counter() - t))
                    wait_idle(page)
            for i, path in enumerate(URLS):
                times = [s for j, s in rows if j == i]
                print(f"  page {i + 1} {path or 'every-pair':<14} warm switch: median {statistics.median(times):.2f} s"
                      f"  (runs: {', '.join(f'{s:.2f}' for s in times)})")
            print(f"  peak resident memory of the app process: {peak_rss_mb(SERVER_PIDS[url]):.0f} MB")

        print("\nthe grid of a 2,048-token text")
        with app_server("gemma", extra_env={"ATLAS_MAX_TOKENS": "2048"}) as url:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.goto(url + "/?lang=en")
            page.wait_for_selector(".js-plotly-plot", timeout=600_000)
            wait_idle(page)
            t = time.perf_counter()
            n_tokens = paste(page, text_of_tokens(2300))
            print(f"  {n_tokens} tokens: analysis and page 1 drawn: {time.perf_counter() - t:.2f} s")
            nav = page.locator('[data-testid="stSidebarNav"] a')
            nav.nth(1).click()
            finished(page, i18n.translate("en", TITLES[1]), 1)
            wait_idle(page, 300_000)
            times = []
            for _ in range(3):
                t = time.perf_counter()
                nav.nth(0).click()
                finished(page, i18n.translate("en", TITLES[0]), 2)
                times.append(time.perf_counter() - t)
                nav.nth(1).click()
                finished(page, i18n.translate("en", TITLES[1]), 1)
                wait_idle(page)
            print(f"  switch to page 1 until its grid is drawn: median {statistics.median(times):.2f} s")
            print(f"  peak resident memory of that app process: {peak_rss_mb(SERVER_PIDS[url]):.0f} MB")
        browser.close()

    grid = np.random.default_rng(0).random((2048, 2048)).astype(np.float32)
    fig, factor = figures.attention_heatmap(grid, ["x"] * 2048, title="", x_title="", y_title="", hover="",
                                            separators=".,")
    print(f"  payload of the grid figure at 2,048 tokens: {figures.payload_bytes(fig) / 2**20:.2f} MB "
          f"(pooled {factor}×{factor}; the full grid would be {2048 * 2048 * 8 / 2**20:.0f} MB as JSON numbers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
