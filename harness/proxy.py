"""Several app processes behind HAProxy on this machine (and backends on others), the
layout of ``scripts/serve.sh``; also what the proxy test and bench/classroom.py start.

    .venv/bin/python -m harness.proxy --replicas 2 [--port 8501] [--backend host:port ...]

The configuration is deploy/haproxy.cfg with one ``server`` line per backend appended:
round robin, a cookie naming the replica (sticky sessions), health checks on
``/_stcore/health``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time

from .serve import ROOT, SERVER_PIDS, app_server, free_port, running

CONFIG = os.path.join(ROOT, "deploy", "haproxy.cfg")


def haproxy_config(backends: list[str]) -> str:
    """deploy/haproxy.cfg with a ``server`` line per ``host:port`` backend."""
    with open(CONFIG, encoding="utf-8") as f:
        base = f.read().rstrip("\n")
    lines = [f"    server r{i} {b} cookie r{i}" for i, b in enumerate(backends, 1)]
    return base + "\n" + "\n".join(lines) + "\n"


def haproxy_path() -> str | None:
    return shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and "/usr/sbin/haproxy") or None


@contextlib.contextmanager
def proxy(backends: list[str], port: int | None = None, timeout: float = 60):
    """HAProxy in front of ``backends``; yields its base URL once a backend answers."""
    exe = haproxy_path()
    if exe is None:
        raise RuntimeError("haproxy is not installed (Debian: apt-get install --no-install-recommends haproxy)")
    port = port or free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w", encoding="utf-8") as f:
            f.write(haproxy_config(backends))
        env = {**os.environ, "ATLAS_BIND": f"0.0.0.0:{port}"}
        with running([exe, "-db", "-f", cfg], f"http://127.0.0.1:{port}", name="haproxy", env=env,
                     timeout=timeout, stop_wait=10) as url:
            yield url


@contextlib.contextmanager
def replicas_behind_proxy(n: int, model: str = "gemma", port: int | None = None, extra: list[str] = (),
                          timeout: float = 900, envs: list[dict] | None = None, warm: bool = False):
    """n app processes on this machine (and ``extra`` host:port backends) behind one
    HAProxy; yields (proxy URL, the local replicas' pids). Each replica gets its share
    of the cores for torch (``ATLAS_TORCH_THREADS``, unless set), and ``envs[i]`` (when
    given) on top of the environment (e.g. a cache folder of its own, as on another
    machine). ``warm``: each replica loads its model from the start (launch.py)."""
    share = {"ATLAS_TORCH_THREADS": os.environ.get("ATLAS_TORCH_THREADS") or str(max(1, (os.cpu_count() or 1) // n))}
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(app_server(model, timeout=timeout, warm=warm,
                                               extra_env={**share, **(envs[i] if envs else {})})) for i in range(n)]
        backends = [u.removeprefix("http://") for u in urls] + list(extra)
        url = stack.enter_context(proxy(backends, port))
        yield url, [SERVER_PIDS[u] for u in urls]


def main() -> int:
    ap = argparse.ArgumentParser(description="N replicas of the app behind HAProxy")
    ap.add_argument("--replicas", type=int, default=2, help="app processes on this machine")
    ap.add_argument("--port", type=int, default=8501, help="the address readers open")
    ap.add_argument("--backend", action="append", default=[], help="host:port of a replica on another machine")
    ap.add_argument("--model", default=os.environ.get("ATLAS_MODEL", "gemma"))
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with replicas_behind_proxy(args.replicas, args.model, args.port, args.backend, warm=True) as (url, pids):
        print(f"Attention Atlas: {args.replicas} replica(s) (pids {', '.join(map(str, pids))})"
              f"{' + ' + ', '.join(args.backend) if args.backend else ''} behind HAProxy at "
              f"http://0.0.0.0:{args.port} (Ctrl+C stops them all)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while not stop:
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
