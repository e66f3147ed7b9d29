#!/usr/bin/env bash
# Install the real Claude Code CLI (pinned) from npm into the repo's .cache/npm, for end-to-end tests.
# Idempotent: a no-op (a few ms) when the pinned version is already there.
# Prints the absolute path of the `claude` executable on stdout (npm's chatter goes to stderr).
#
#   CLAUDE_CODE_VERSION   version to install        (default: the pin below)
#   CLAUDE_NPM_PREFIX     npm --prefix to install to (default: <repo>/.cache/npm)
#
# The npm package ships the native binary in a per-platform optional dependency
# (@anthropic-ai/claude-code-linux-x64, ...); its postinstall hard-links that over bin/claude.exe.
# Nothing is downloaded outside the npm registry. Node >= 22 is "required" by package.json, but the
# binary is self-contained, so the EBADENGINE warning under Node 20 is harmless.
set -euo pipefail

VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${CLAUDE_NPM_PREFIX:-$ROOT/.cache/npm}"
MODULES="$PREFIX/node_modules/@anthropic-ai"

# The first candidate that runs offline and reports the pinned version.
find_claude() {
    local bin
    for bin in "$PREFIX/node_modules/.bin/claude" "$MODULES"/claude-code-*/claude; do
        [ -x "$bin" ] || continue
        if [ "$(HOME="${TMPDIR:-/tmp}" "$bin" --version 2>/dev/null | cut -d' ' -f1)" = "$VERSION" ]; then
            (cd "$(dirname "$bin")" && echo "$(pwd -P)/$(basename "$bin")")
            return 0
        fi
    done
    return 1
}

if find_claude; then
    exit 0
fi

command -v npm >/dev/null || { echo "fetch_claude.sh: npm not found" >&2; exit 1; }
mkdir -p "$PREFIX"
echo "fetch_claude.sh: installing @anthropic-ai/claude-code@$VERSION into $PREFIX" >&2
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$VERSION" >&2

if ! find_claude; then
    # An npm that skipped the postinstall leaves a placeholder in bin/claude.exe: run it by hand.
    (cd "$MODULES/claude-code" && node install.cjs >&2) || true
    find_claude || { echo "fetch_claude.sh: no working claude $VERSION under $PREFIX" >&2; exit 1; }
fi
