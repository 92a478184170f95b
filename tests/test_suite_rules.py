"""Rules the test suite keeps about itself: a failure anywhere in a test fails it."""

import subprocess
import sys
from pathlib import Path

from helpers import ROOT

PLANTED = '''
import threading


def test_a_failure_inside_a_worker_thread():
    def work():
        assert 1 == 2, "planted in a thread"

    th = threading.Thread(target=work)
    th.start()
    th.join()
'''


def test_an_assert_that_fails_in_a_worker_thread_fails_its_test(tmp_path):
    """pytest reports a thread's exception only as a warning; the project's pytest.ini
    turns that warning into an error, so a planted failure in a thread fails (it gave
    "1 passed, 1 warning" before)."""
    (tmp_path / "test_planted.py").write_text(PLANTED, encoding="utf-8")
    ini = str(Path(ROOT) / "pytest.ini")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", ini,
                          "--rootdir", str(tmp_path), str(tmp_path / "test_planted.py")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "1 failed" in run.stdout and "planted in a thread" in run.stdout
