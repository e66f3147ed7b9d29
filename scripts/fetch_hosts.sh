#!/usr/bin/env bash
# Install the pinned Gemini CLI and Codex CLI from npm into the repo's .cache/npm-hosts, for the test that
# has each of them list the kms server `kms mcp-config HOST --install` wrote. Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$ROOT/.cache/npm-hosts"
GEMINI="${GEMINI_CLI_VERSION:-0.61.0}"
CODEX="${CODEX_CLI_VERSION:-0.171.0}"
installed() { [ -f "$PREFIX/node_modules/$1/package.json" ] && grep -q "\"version\": \"$2\"" "$PREFIX/node_modules/$1/package.json"; }
if ! installed @google/gemini-cli "$GEMINI" || ! installed @openai/codex "$CODEX"; then
  mkdir -p "$PREFIX"
  npm install --no-audit --no-fund --prefix "$PREFIX" "@google/gemini-cli@$GEMINI" "@openai/codex@$CODEX" >&2
fi
echo "$PREFIX/node_modules/.bin"
