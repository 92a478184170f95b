"""The CPU each test file costs, printed at the end of a run (a pytest plugin, loaded by
conftest.py): what the test process and everything it started (servers, the browser, its
renderers) spent during each test, read from /proc before and after it.

A process's time is its own (utime + stime) and its reaped children's (cutime + cstime):
summed over the test process and its live descendants, a server stopped or a renderer
closed during a test is still counted, through the parent that waited for it. Module
fixtures are counted in the test that sets them up or tears them down, so a file's sum
holds them. A process whose parent ended without waiting for it (a browser's renderer
when its zygote closes) would be handed to init and its time lost: the test process is
made its "child subreaper" (Linux's prctl), so that it is handed here and, waited for by
nobody until the run ends, its time stays readable in /proc (scripts/cpu_time.py waits for
it then). Linux only; elsewhere the table is not printed."""

import ctypes
import os
import time

import pytest

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children(pid):
    kids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return kids


def _own_and_reaped(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    # after the name: state ppid … utime (14th field of stat) is index 11 here
    return sum(int(v) for v in fields[11:15])


def tree_cpu(root=None):
    """CPU seconds spent so far by a process and its descendants (live, or reaped by one)."""
    root = root or os.getpid()
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _own_and_reaped(pid)
        todo.extend(_children(pid))
    return total / TICK


AVAILABLE = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
if AVAILABLE:
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


_START = pytest.StashKey()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if AVAILABLE:
        item.stash[_START] = (tree_cpu(), time.monotonic())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and _START in item.stash:
        cpu, wall = item.stash[_START]
        report = outcome.get_result()
        report.user_properties.append(("cpu", round(tree_cpu() - cpu, 2)))
        report.user_properties.append(("wall", round(time.monotonic() - wall, 2)))


_spent = {}


def pytest_runtest_logreport(report):
    props = dict(report.user_properties)
    if report.when == "teardown" and "cpu" in props:
        name = report.nodeid.split("::")[0]
        cpu, wall, n = _spent.get(name, (0.0, 0.0, 0))
        _spent[name] = (cpu + props["cpu"], wall + props["wall"], n + 1)


def pytest_terminal_summary(terminalreporter):
    if not _spent:
        return
    total = sum(c for c, _, _ in _spent.values()) or 1.0  # a run of tests that cost no measurable CPU
    terminalreporter.section("CPU by test file (the test process and all it started)")
    for name, (cpu, wall, n) in sorted(_spent.items(), key=lambda kv: -kv[1][0])[:15]:
        terminalreporter.write_line(f"{cpu:7.1f} s CPU {wall:7.1f} s wall {n:4d} tests  {cpu / total:5.1%}  {name}")
    terminalreporter.write_line(f"{total:7.1f} s CPU in all, by this count")
