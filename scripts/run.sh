#!/usr/bin/env bash
# Set up and start the app: bash scripts/run.sh [streamlit options]
# The first start converts the packaged model once (about a minute, ~3 GB of memory).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
# convert the packaged model before the server starts (nothing to do once converted)
.venv/bin/python -m attn.convert
exec .venv/bin/streamlit run app.py "$@"
