#!/usr/bin/env bash
# Installs the real opencode the test suite drives (tests/it/real_opencode.rs): the pinned
# `opencode-ai` release from the npm registry, under target/opencode (ignored by git, removed by
# `cargo clean`). Quick and offline when that version is already there. Prints nothing on success.
#
# Without npm it says so and exits 0, so `cargo test` then skips the real-opencode tests with a
# message; when CI is set it exits 1 instead (CI must run them).
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.18.33
dir=target/opencode
bin="$dir/node_modules/.bin/opencode"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null || true)" = "$version" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  if [ -n "${CI:-}" ]; then
    echo ".ci/opencode.sh: npm is not installed and CI is set: cannot install opencode-ai@$version" >&2
    exit 1
  fi
  echo ".ci/opencode.sh: npm is not installed: the real-opencode tests will be SKIPPED" >&2
  exit 0
fi
mkdir -p "$dir"
# A package.json of its own, so npm installs here and not into an enclosing project.
[ -f "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error "opencode-ai@$version" >&2
got="$("$bin" --version 2>/dev/null || true)"
if [ "$got" != "$version" ]; then
  echo ".ci/opencode.sh: $bin --version printed '$got', expected $version" >&2
  exit 1
fi
