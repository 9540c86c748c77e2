#!/usr/bin/env bash
# make test's last words when it fails: the failing tests and their
# messages, gathered from the three lanes' interleaved output (LOG, each
# line tagged with its lane). A CI log is often read from its end, and a
# lane that fails early is otherwise buried under the lanes that go on.
set -uo pipefail
log=${1:?usage: scripts/test-failures.sh LOG}
echo "== make test failed; what failed, from $log:"
# go test's "--- FAIL" lines (with the messages a plain run prints after
# them), FAIL lines naming a package, panics, build errors and make's own
# error lines.
if ! grep -a -E -A6 -- '--- FAIL|\] FAIL|\] panic:|\] ok +[^ ]+ +\[build failed\]|\*\*\* \[' "$log" | head -n 300; then
	echo "(no failing test named: the lanes' output is above, and in $log)"
fi
