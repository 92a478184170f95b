#!/usr/bin/env bash
# Shared set-up for scripts/run.sh and scripts/test.sh: a virtual environment in
# .venv with the pinned requirements. Works where the system Python refuses global
# installs (PEP 668). Usage: scripts/setup.sh REQUIREMENTS_FILE
set -euo pipefail
cd "$(dirname "$0")/.."
req="${1:-requirements.txt}"
PY="${PYTHON:-python3}"

source scripts/common.sh

if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "Attention Atlas needs Python 3.11 or newer as '$PY' (set PYTHON=... to choose another)." >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    # Debian and Ubuntu ship venv separately
    pyver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    apt_install "python${pyver}-venv" || apt_install python3-venv || {
      echo "Cannot create a virtual environment: install python3-venv (sudo apt-get install python3-venv)." >&2
      exit 1
    }
    "$PY" -m venv .venv
  fi
fi

# One stamp per requirements file, under the hash of what every file shares (requirements.txt,
# pyproject.toml): every requirements file includes requirements.txt (-r), so the app's own set
# is installed once any stamp of that hash is there, and run.sh after test.sh (or the other
# way) installs nothing it has already installed; a change to the shared files starts afresh
base=$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
stamp=".venv/.installed-$base-$(sha256sum < "$req" | cut -c1-16)"
shared=$(ls .venv/.installed-"$base"-* 2>/dev/null | head -n 1 || true)
if [ ! -f "$stamp" ] && { [ "$req" != requirements.txt ] || [ -z "$shared" ]; }; then
  echo "Installing Python packages from $req into .venv …"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  # byte-compiled afterwards on every core at once (pip compiles one file after another):
  # 61 s → 39 s on 2 cores. Compiled they must be: PYTHONDONTWRITEBYTECODE, where set,
  # keeps every process from caching what it compiled (compileall skips what is compiled)
  .venv/bin/python -m pip install -q --no-compile -r "$req"
  .venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    >/dev/null 2>&1 || true  # a package's file that is not Python 3 (a template) is skipped, as pip skips it
  # the project itself, editable: attn, ui and harness import from the working tree (once per hash)
  if [ -z "$shared" ]; then
    if ! out=$(.venv/bin/python -m pip install -q -e . --no-deps 2>&1); then  # setuptools' notes only on failure
      echo "$out" >&2
      exit 1
    fi
  fi
  find .venv -maxdepth 1 -name '.installed-*' ! -name ".installed-$base-*" -delete
  touch "$stamp"
fi
