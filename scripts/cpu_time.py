"""Run a command; afterwards print its wall time and the CPU time (user + sys) of every
process it started, at any depth: python scripts/cpu_time.py LABEL COMMAND [ARGS …]

This process is made the "child subreaper" of everything below it (Linux's prctl): a
process whose parent ended without waiting for it (a browser's renderers, a daemon that
forked away) is handed here instead of to init, and waited for, so that its time is
counted. A shell's ``times`` misses those. The command's exit status is returned."""

import ctypes
import os
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
LEFT_WAIT = 10.0  # seconds for what is still running after the command ended, then stopped


def main() -> int:
    label, cmd = sys.argv[1], sys.argv[2:]
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: orphans' time is missed, as by ``times``
    started = time.monotonic()
    proc = subprocess.Popen(cmd)
    rc = proc.wait()
    wall = time.monotonic() - started
    end, stopped = time.monotonic() + LEFT_WAIT, 0
    while True:  # orphans handed here: wait for each (their time joins ours)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            continue
        if time.monotonic() > end and not stopped:
            stopped = _stop_the_rest()
        time.sleep(0.1)
    t = os.times()
    user, system = round(t.children_user), round(t.children_system)
    left = f"; {stopped} left running afterwards, stopped" if stopped else ""
    print(f"{label}: {wall:.0f} s of wall time, {user + system} s of CPU (user {user} s + sys {system} s) "
          f"in every process they started{left}", flush=True)
    return rc


def _stop_the_rest() -> int:
    import signal

    kids = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
            kids.extend(int(c) for c in f.read().split())
    for pid in kids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return len(kids)


if __name__ == "__main__":
    sys.exit(main())
