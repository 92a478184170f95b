"""A later start, to the first chart, in a real browser (the model already converted):
the server started plainly (``streamlit run``: the model loads on the first visit) and as
scripts/run.sh starts it (``launch.py``: the model loaded and the sample text's pages
built from the start), back to back in one run, each beside a step switch.

    .venv/bin/python -m bench.first_chart [--model gemma] [--whole-only] [--runs 2]

Rows, for each way of starting: the start until the health check answers; a page opened
at once then → its first chart; a page opened once the server has had time to get ready
(the warmed server's "ready" line, the same wait for the plain one) → its first chart;
a step switch (step 2 → step 1, median of 3) → its chart; and Streamlit's own floor, a
trivial page with one heatmap (bench/floor_app.py) in a new tab → its chart (a new tab
loads Streamlit's and Plotly's code in the browser, which a step switch does not). Times with the machine's
matmul rate beside them: trust the ratios.

Then the whole start, as a reader meets it: ``bash scripts/run.sh`` (its set-up check, the
converted copy's check, the server) from the command to the first chart of a page opened as
soon as the server answers its health check, against Streamlit's own trivial page started
and opened the same way (``streamlit run bench/floor_app.py``), alternately, ``--runs`` of
each."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import pages  # noqa: F401 (importing it fills the walk: ui.walk)
from attn.bench import matmul_gflops
from harness.serve import ROOT, app_server, free_port, launch, ready_after, running, wait_idle
from ui import i18n, walk

CHART = ".js-plotly-plot"


def first_chart(browser, url: str, query: str = "/?lang=en") -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    t = time.perf_counter()
    page.goto(url + query)
    page.wait_for_selector(CHART, timeout=600_000)
    took = time.perf_counter() - t
    if query:  # the app's run ends (the floor page has no navigation to wait for)
        wait_idle(page, 300_000)
    page.close()
    return took


def step_switch(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    page.goto(url + "/?lang=en")
    page.wait_for_selector(CHART, timeout=600_000)
    wait_idle(page, 300_000)
    nav = page.locator('[data-testid="stSidebarNav"] a')
    title = i18n.translate("en", walk.pages()[0].title_key)
    times = []
    for _ in range(3):
        nav.nth(1).click()
        wait_idle(page, 300_000)
        t = time.perf_counter()
        nav.nth(0).click()
        page.wait_for_function("""(title) => { const h = document.querySelector('h1');
            return h && h.innerText.trim() === title && !document.querySelector('[data-testid="stStatusWidget"]')
                && document.querySelectorAll('.js-plotly-plot').length >= 1; }""", arg=title, timeout=300_000,
                               polling=25)
        times.append(time.perf_counter() - t)
        wait_idle(page)
    page.close()
    return statistics.median(times)


def whole_start(browser, floor: bool, model: str) -> tuple[float, float]:
    """From the command to the health check, and to the first chart of a page opened then:
    ``bash scripts/run.sh`` or (``floor``) ``streamlit run bench/floor_app.py``."""
    port = free_port()
    serve = ["--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false"]
    cmd = ([sys.executable, "-m", "streamlit", "run", os.path.join(ROOT, "bench", "floor_app.py"), *serve] if floor
           else ["bash", os.path.join(ROOT, "scripts", "run.sh"), *serve])
    env = {**os.environ, "ATLAS_MODEL": model, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    with running(cmd, f"http://127.0.0.1:{port}", name="the start", env=env, timeout=600) as url:
        healthy = time.perf_counter() - t0
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(url + ("" if floor else "/?lang=en"))
        page.wait_for_selector(CHART, timeout=600_000)
        chart = time.perf_counter() - t0
        page.close()
    return healthy, chart


def whole(browser, model: str, runs: int) -> None:
    print(f"  the whole start (command → first chart, a page opened at the health check; {runs} of each, "
          "alternately)")
    found = {False: [], True: []}
    for _ in range(runs):
        for floor in (False, True):
            found[floor].append(whole_start(browser, floor, model))
    for floor in (False, True):
        name = "streamlit run bench/floor_app.py" if floor else "bash scripts/run.sh"
        rows = "  ".join(f"{h:.1f} s → {c:.1f} s" for h, c in found[floor])
        print(f"    {name:<34} healthy → chart: {rows}")
    app, base = (statistics.median(c for _, c in found[f]) for f in (False, True))
    print(f"    run.sh to the first chart {app:.1f} s, the floor {base:.1f} s (medians): {app / base:.1f}× the floor")


def main() -> int:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gemma")
    ap.add_argument("--whole-only", action="store_true", help="only the whole start, against the floor")
    ap.add_argument("--runs", type=int, default=2, help="whole starts of each")
    args = ap.parse_args()
    print(f"a later start to the first chart ({args.model}; matmul {matmul_gflops('cpu'):.0f} GFLOP/s)")
    rows, ready_wait = {}, None
    with sync_playwright() as p:
        browser = launch(p)
        whole(browser, args.model, args.runs)
        if args.whole_only:
            browser.close()
            return 0
        for warm in (True, False):  # the warmed server first: its ready time is the plain one's wait
            for opened in ("at once", "once ready"):
                t0 = time.perf_counter()
                with app_server(args.model, warm=warm) as url:
                    healthy = time.perf_counter() - t0
                    if opened == "once ready":
                        if warm:
                            ready_wait = ready_after(url, t0)
                        else:
                            time.sleep(max(0.0, (ready_wait or 0) - (time.perf_counter() - t0)))
                    chart = first_chart(browser, url)
                    switch = step_switch(browser, url) if opened == "at once" else None
                rows[(warm, opened)] = (healthy, chart, switch)
        with app_server(args.model, script="bench/floor_app.py") as url:  # Streamlit's own floor
            floor = statistics.median(first_chart(browser, url, "") for _ in range(3))
        browser.close()
    print(f"  the warmed server said it was ready {ready_wait:.1f} s after its start")
    print(f"  {'started':<28}{'opened':<12}{'healthy':>9}{'first chart':>13}{'step switch':>13}{'ratio':>7}")
    for warm in (False, True):
        switch = rows[(warm, "at once")][2]
        for opened in ("at once", "once ready"):
            healthy, chart, _ = rows[(warm, opened)]
            name = "launch.py (warmed)" if warm else "streamlit run (plain)"
            print(f"  {name:<28}{opened:<12}{healthy:>8.1f}s{chart:>12.2f}s{switch:>12.2f}s{chart / switch:>6.1f}×")
    print(f"  Streamlit's floor (bench/floor_app.py: a trivial page, one heatmap), a new tab → its chart: "
          f"{floor:.2f} s (median of 3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
