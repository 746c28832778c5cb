#!/bin/sh
# ctest's entry for the dashboard test. Exits 77 (ctest: skipped) when what a browser test needs
# is missing; `scripts/dev.sh build` installs all of it. `node --test` cannot do this itself: it
# reports any exit of the test file as a failure.
HERE="$(cd "$(dirname "$0")" && pwd)"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
skip() {
  echo "SKIPPED web_dashboard: $* (scripts/dev.sh build installs it)" >&2
  exit 77
}
command -v node >/dev/null 2>&1 || skip "node is not on PATH"
[ -x "$CHROMIUM" ] || skip "no Chromium at $CHROMIUM"
[ -d "$HERE/node_modules/playwright-core" ] || skip "no $HERE/node_modules (npm ci --prefix tests/web)"
exec node --test "$HERE/dashboard.test.mjs"
