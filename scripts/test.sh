#!/usr/bin/env bash
# Set up and run every test: bash scripts/test.sh [pytest options]
# Brings what pip cannot: Debian's chromium and fonts-ipafont-gothic (for the browser
# tests and for Japanese on screenshots), haproxy (the replicas tests) and postgresql
# (the store's tests on PostgreSQL), when missing and installable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements-test.txt

source scripts/common.sh

browser_ok() { [ -n "${ATLAS_CHROMIUM:-}" ] && [ -x "$ATLAS_CHROMIUM" ] || { command -v chromium >/dev/null 2>&1 && chromium --version >/dev/null 2>&1; }; }
font_ok() { command -v fc-list >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi "IPAGothic\|IPAゴシック"; }

need=()
browser_ok || need+=(chromium)
font_ok || need+=(fonts-ipafont-gothic)
haproxy_ok() { command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; }
haproxy_ok || need+=(haproxy)
postgres_ok() { command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
postgres_ok || need+=(postgresql)
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing ${need[*]} with apt-get (--no-install-recommends) …"
  if ! apt_install "${need[@]}"; then
    echo "apt-get could not install ${need[*]} (no root, or not in the archive)." >&2
  fi
fi
if ! browser_ok; then
  # e.g. Ubuntu, whose chromium package is only a snap stub: use Playwright's own build
  echo "No usable chromium from the system; trying Playwright's own download …"
  if .venv/bin/python -m playwright install --with-deps chromium >/dev/null 2>&1 ||
     .venv/bin/python -m playwright install chromium >/dev/null 2>&1; then
    export ATLAS_CHROMIUM=playwright
  else
    echo "No browser for the browser tests. Install one of: 'sudo apt-get install --no-install-recommends chromium fonts-ipafont-gothic'" >&2
    echo "or '.venv/bin/python -m playwright install --with-deps chromium'." >&2
  fi
fi

echo "ruff check …"
.venv/bin/ruff check .
# the packaged model converted once, before two test processes could both start on it (as
# scripts/run.sh checks it: sizes and times, no torch, a fraction of a second; hashing every
# file as attn.convert does took 17 s here, on every run)
.venv/bin/python -m attn.converted || .venv/bin/python -m attn.convert
# the machine's speed beside the run's time: these machines differ by 3× or more
.venv/bin/python -c "import torch; from attn.bench import matmul_gflops; print(f'this machine: one 2,048² float32 matmul at {matmul_gflops(\"cpu\"):.0f} GFLOP/s on {torch.get_num_threads()} threads')"
# two test processes, each test file in one of them (a file's servers and fixtures stay
# together): the browser tests' waits overlap the engine's work. ATLAS_TEST_WORKERS=0: one.
# Afterwards, the CPU time of the tests alone (user + sys of every process they started, a
# browser's renderers included: scripts/cpu_time.py waits for what their parents left).
exec .venv/bin/python scripts/cpu_time.py "the tests (set-up excluded)" \
  .venv/bin/python -m pytest -n "${ATLAS_TEST_WORKERS:-2}" --dist loadfile "$@"
