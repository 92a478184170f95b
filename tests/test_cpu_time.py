"""The test run's CPU is counted in full: a process whose parent ends without waiting for it
(as a browser's renderers do) is still counted by scripts/cpu_time.py, where the shell's
``times`` loses it, and by tests/cpu_share.py's reading of the process tree."""

import os
import re
import subprocess
import sys
import time

import pytest

from helpers import ROOT

# a parent that starts a grandchild burning ≈ 1.5 s of CPU and ends at once, never waiting
ORPHAN = """
import os, time
if os.fork() == 0:
    if os.fork() == 0:
        t = time.process_time()
        while time.process_time() - t < 1.5:
            pass
        os._exit(0)
    os._exit(0)
os.wait()
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc: Linux only")


def test_cpu_time_counts_the_time_of_a_process_its_parent_left():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "cpu_time.py"), "orphan",
                          sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60, check=True).stdout
    cpu = int(re.search(r"(\d+) s of CPU", out).group(1))
    assert cpu >= 1, out  # 1.5 s burnt by the grandchild (rounded), the rest is Python starting
    # the shell's count of the same command: the grandchild is handed to init, its time lost
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -c '{ORPHAN}'; sleep 2.5; times"],
                           capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()[-1]
    user, system = (float(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", shell))
    assert user + system < 1.0, shell


def test_the_test_process_keeps_the_time_of_what_a_child_left():
    from cpu_share import tree_cpu

    before = tree_cpu()
    subprocess.run([sys.executable, "-c", ORPHAN], check=True, timeout=60)
    end = time.monotonic() + 20
    while tree_cpu() - before < 1.5 and time.monotonic() < end:  # the grandchild still burning
        time.sleep(0.2)
    assert tree_cpu() - before >= 1.5  # handed to this process (its subreaper), kept as it ended
