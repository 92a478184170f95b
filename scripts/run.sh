#!/usr/bin/env bash
# Set up and start the app: bash scripts/run.sh [streamlit options]
# The first start converts the packaged model once (about a minute, ~3 GB of memory).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
# convert the packaged model before the server starts, once: a later start checks the copy by
# its recorded sizes and times (attn/converted.py, no torch: a fraction of a second)
.venv/bin/python -m attn.converted || .venv/bin/python -m attn.convert
# two malloc arenas: a class's threads otherwise keep ≈ 1 GB more resident (docs/deploy.md)
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec .venv/bin/python -m launch app.py "$@"  # streamlit run app.py, the model loaded from the start (ui/warm.py)
