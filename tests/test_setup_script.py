"""scripts/setup.sh, the set-up both README commands run: it installs each requirements
file once, and the app's own set once for both (run.sh after test.sh, or the other way,
installs nothing it already has). Run on a copy of the scripts with a stand-in for the
virtual environment's Python that only records what it is asked to do."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls.log"
case "$*" in
  *sysconfig*) echo /nonexistent ;;
esac
exit 0
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    for name in ("setup.sh", "common.sh"):
        shutil.copy(ROOT / "scripts" / name, root / "scripts" / name)
    for name in ("requirements.txt", "requirements-test.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, root / name)
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return root


def _setup(root: Path, req: str) -> list[str]:
    """What setup.sh asked pip to install this time."""
    log = root / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    subprocess.run(["bash", "scripts/setup.sh", req], cwd=root, check=True, capture_output=True,
                   env={**os.environ, "PYTHON": sys.executable})
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if c.startswith("-m pip install") and "--upgrade pip" not in c]


def test_run_after_test_and_test_after_run_install_nothing_twice(tmp_path):
    root = _project(tmp_path)
    first = _setup(root, "requirements-test.txt")  # scripts/test.sh on a fresh clone
    assert first == ["-m pip install -q --no-compile -r requirements-test.txt", "-m pip install -q -e . --no-deps"]
    assert _setup(root, "requirements.txt") == []  # then scripts/run.sh: everything is there
    assert _setup(root, "requirements-test.txt") == []

    other = _project(tmp_path / "other")  # the other way round
    assert _setup(other, "requirements.txt") == ["-m pip install -q --no-compile -r requirements.txt",
                                                  "-m pip install -q -e . --no-deps"]
    # the tests' extras are installed, the project itself is not installed again
    assert _setup(other, "requirements-test.txt") == ["-m pip install -q --no-compile -r requirements-test.txt"]
    assert _setup(other, "requirements.txt") == [] and _setup(other, "requirements-test.txt") == []


def test_a_changed_requirement_installs_again(tmp_path):
    root = _project(tmp_path)
    _setup(root, "requirements-test.txt")
    with open(root / "requirements.txt", "a") as f:
        f.write("# a new pin\n")
    assert _setup(root, "requirements.txt") == ["-m pip install -q --no-compile -r requirements.txt",
                                                 "-m pip install -q -e . --no-deps"]
    assert _setup(root, "requirements-test.txt") == ["-m pip install -q --no-compile -r requirements-test.txt"]
    assert len(list((root / ".venv").glob(".installed-*"))) == 2  # the older hash's stamps are gone
