#!/usr/bin/env bash
# make test's last words when it fails: the failing tests and their
# messages, gathered from the three lanes' interleaved output (LOG, each
# line tagged with its lane). A CI log is often read from its end, and a
# lane that fails early is otherwise buried under the lanes that go on.
# usage: scripts/test-failures.sh LOG [EXIT_STATUS DEADLINE]: status 124
# (timeout's) says the lanes ran past DEADLINE and were ended.
set -uo pipefail
log=${1:?usage: scripts/test-failures.sh LOG [EXIT_STATUS DEADLINE]}
status=${2:-} deadline=${3:-}
# still_running LOG: per lane, the top-level tests with a "=== RUN" line
# and no verdict ("--- PASS/FAIL/SKIP") after it.
still_running() {
	awk '
		match($0, /^\[[^]]+\] /) {
			lane = substr($0, 2, RLENGTH - 3)
			rest = substr($0, RLENGTH + 1)
			if (rest ~ /^=== (RUN|CONT) +[^\/ ]+$/) { split(rest, f, / +/); open[lane " " f[3]] = 1 }
			else if (rest ~ /^--- (PASS|FAIL|SKIP): [^\/ ]+ /) { split(rest, f, / +/); delete open[lane " " f[3]] }
		}
		END { n = 0; for (k in open) { print "  " k; n++ } if (!n) print "  (none named: a step between tests)" }
	' "$1" | sort
}

echo "== make test failed; what failed, from $log:"
# go test's "--- FAIL" lines (with the messages a plain run prints after
# them), FAIL lines naming a package, panics, build errors, make's own
# error lines and a VM suite's stall verdict.
if ! grep -a -E -A6 -- '--- FAIL|\] FAIL|\] panic:|\] ok +[^ ]+ +\[build failed\]|\*\*\* \[|== stall: no output for [0-9]+ s: the suite is stuck|== suite .* was stuck' "$log" | head -n 300; then
	echo "(no failing test named: the lanes' output is above, and in $log)"
fi
if [[ $status == 124 ]]; then
	echo "== make test ran past its deadline ($deadline) and was ended; the tests still running then:"
	still_running "$log"
fi
