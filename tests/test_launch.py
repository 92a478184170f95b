"""The serving process as scripts/run.sh starts it (launch.py, tiny model): the health
check answers before the model is loaded (it never waits for it), the model is loaded
and the sample texts' pages built with no visitor at all, and the app then serves a
page from what was built. The time to the first chart is bench/first_chart.py's."""

import asyncio
import time

from harness.readers import Reader
from harness.serve import ROOT, SERVER_LOGS, app_server

READY = "Attention Atlas: ready"


def test_the_server_is_healthy_at_once_and_ready_before_its_first_visitor():
    with app_server("tiny", warm=True) as url:
        with open(SERVER_LOGS[url], encoding="utf-8") as f:
            at_health = f.read()
        assert READY not in at_health  # healthy first: the check did not wait for the model
        end = time.monotonic() + 300
        said = ""
        while READY not in said and time.monotonic() < end:
            time.sleep(0.2)
            with open(SERVER_LOGS[url], encoding="utf-8") as f:
                said = f.read()
        assert READY in said, said[-2000:]  # with no visitor: no page run asked for any of it
        assert "Traceback" not in said, said[-3000:]

        async def visit():
            r = Reader(url, "en")
            await r.connect()
            run = await r.run("")
            await r.close()
            return run

        run = asyncio.run(visit())
        assert run.finished and not run.exceptions, run.exceptions
        assert run.charts, "step 1 draws its chart"


def test_the_start_build_waits_while_a_page_runs_and_not_otherwise():
    """ui.warm builds each piece only once no visitor's page runs (at most ``limit``)."""
    from ui import page_run

    assert page_run.wait_quiet(5.0) < 1.0  # no page runs: at once
    page_run.run_started()
    try:
        assert page_run.wait_quiet(0.3) >= 0.3  # a page runs: the whole limit
    finally:
        page_run.run_ended()
    assert page_run.wait_quiet(5.0) < 1.0


def test_build_all_pauses_before_each_piece(monkeypatch):
    import dataclasses

    from ui import summaries, walk

    calls = []
    steps = tuple(dataclasses.replace(s, ahead=None) for s in walk.steps())  # the summaries only
    monkeypatch.setattr(walk, "steps", lambda: steps)
    monkeypatch.setattr(summaries, "get", lambda step, t, *a, **k: calls.append(("built", step.id, t.lang)))
    monkeypatch.setattr(summaries.setting_table, "settings_for", lambda *a, **k: {})
    monkeypatch.setattr(summaries.measures, "setting_context", lambda *a, **k: None)
    monkeypatch.setattr(summaries, "inputs", lambda step, cfg: {})
    summaries.build_all(object(), "text", "tiny", {}, langs=("en", "ja"), pause=lambda: calls.append("pause"))
    built = [c for c in calls if c != "pause"]
    assert len(built) == 2 * len(walk.steps())
    assert calls[::2] == ["pause"] * len(built)  # one pause before each piece, none skipped


def test_a_page_opened_while_the_start_loads_the_model_says_what_it_reads_and_for_how_long(monkeypatch):
    """What the page says is what the start's thread reads now, with the seconds since it
    began; it stops saying it once the model is loaded."""
    from ui import served_model
    from ui.i18n import Translator

    said, clock = [], [100.0]

    class Slot:
        def info(self, text, icon=None):
            said.append(text)

        def empty(self):
            said.append(None)

    stages = iter([("", 1.0), ("tokenizer", 2.0), ("weights", 1.0)])

    def tick(seconds):  # each tick, the thread moves on; after the weights, loaded
        step = next(stages, None)
        if step is None:
            served_model.background.update(loading=None, stage="")
        else:
            served_model.background["stage"] = step[0]
            clock[0] += step[1]

    monkeypatch.setattr(served_model.st, "empty", Slot)
    monkeypatch.setattr(served_model.time, "sleep", tick)
    monkeypatch.setattr(served_model.time, "monotonic", lambda: clock[0])
    monkeypatch.setitem(served_model.background, "loading", "gemma")
    monkeypatch.setitem(served_model.background, "since", 97.0)
    monkeypatch.setitem(served_model.background, "stage", "")
    t = Translator("pt")
    served_model.loading_said(t)
    assert said[-1] is None and None not in said[:-1]  # emptied once loaded
    expected = [("model.stage_libraries", 3), ("model.stage_libraries", 4), ("model.stage_read_tokenizer", 6),
                ("model.stage_read_weights", 7)]
    assert said[:-1] == [t("model.loading", stage=t(key), seconds=t.int(s)) for key, s in expected]
    assert "lendo os pesos" in said[-2] and "7 s até agora" in said[-2]


def test_what_draws_step_1_before_the_model_imports_no_torch():
    """ui/first_view (and ui/warm, which saves its view) are imported by app.py and launch.py
    before the server has drawn anything: neither may bring torch in with it, or the first
    view would wait for it (a module of the walk does: ui.step_parts reads attn.methods)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import sys\nfrom ui import first_view, warm\n"
                          "print(sorted(m for m in ('torch', 'transformers', 'pages') if m in sys.modules))"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]"
