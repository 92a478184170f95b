"""The serving process as scripts/run.sh starts it (ui/launch.py, tiny model): the health
check answers before the model is loaded (it never waits for it), the model is loaded
and the sample texts' pages built with no visitor at all, and the app then serves a
page from what was built. The time to the first chart is bench/first_chart.py's."""

import asyncio
import time

from harness.readers import Reader
from harness.serve import SERVER_LOGS, app_server

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
