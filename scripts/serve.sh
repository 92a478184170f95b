#!/usr/bin/env bash
# Serve a class: N app processes behind HAProxy, one address.
#   bash scripts/serve.sh --replicas 2 [--port 8501] [--backend host:port ...]
# Replicas on other machines (each started with scripts/run.sh --server.address 0.0.0.0)
# join with --backend host:port. Installs Debian's haproxy when missing and installable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
source scripts/common.sh
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
  echo "Installing haproxy with apt-get (--no-install-recommends) …"
  apt_install haproxy || { echo "haproxy is needed: sudo apt-get install --no-install-recommends haproxy" >&2; exit 1; }
fi
# convert the packaged model once, before the replicas start (once converted: check its files, ≈ 1 s)
.venv/bin/python -m attn.converted || .venv/bin/python -m attn.convert  # a later start: sizes and times only
# two malloc arenas per replica: a class's threads otherwise keep ≈ 1 GB more resident
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec .venv/bin/python -m harness.proxy "$@"
