#!/usr/bin/env bash
# Dead code, module-wide: functions no test, no e2e test and no command can
# reach (golang.org/x/tools/cmd/deadcode, pinned by make lint). deadcode
# cannot see cgo's //export entry points, so it calls every function of
# spank/golib unreachable, and spank.UserName, which only golib calls;
# those are left out here. staticcheck's U1000 (also in make lint) does see
# the exports, so golib's own unused code is still caught there.
set -euo pipefail
cd "$(dirname "$0")/.."
DEADCODE=${DEADCODE:-golang.org/x/tools/cmd/deadcode@v0.52.0}
out=$(${GO:-go} run "$DEADCODE" -test -tags e2e ./...)
left=$(grep -v -E '^spank/golib/|^spank/userio\.go:[0-9]+:[0-9]+: unreachable func: UserName$' <<<"$out" || true)
if [ -n "$left" ]; then
	echo "deadcode: unreachable functions (delete them, or call them from a test that checks them):"
	echo "$left"
	exit 1
fi
