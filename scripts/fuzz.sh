#!/usr/bin/env bash
# Fuzzes one target: scripts/fuzz.sh PACKAGE:FuncName FUZZTIME [PARALLEL]
# (make fuzz runs it for every target of FUZZ_TARGETS).
#
# Go 1.26's fuzz coordinator can fail a target that found nothing: when
# -fuzztime's deadline ends while the machine is busy, a worker's
# cancellation can escape the check meant to treat it as a normal stop,
# and go test prints "context deadline exceeded" and fails (golang/go#75804,
# fixed in Go 1.27; seen in CI beside the e2e). A real finding
# always writes its input under testdata/fuzz/FuncName, so a failure that
# says only that and wrote no input is the race: the target runs once
# more, and fails only if that run fails too. Any other failure fails at
# once.
set -euo pipefail
target=${1:?usage: scripts/fuzz.sh PACKAGE:FuncName FUZZTIME [PARALLEL]}
fuzztime=${2:?fuzz time}
parallel=${3:-0}
pkg=${target%%:*} fn=${target##*:}
corpus="$pkg/testdata/fuzz/$fn"
args=(test "./$pkg" -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime")
[[ $parallel == 0 ]] || args+=(-parallel "$parallel")

inputs() { [[ ! -d $corpus ]] || find "$corpus" -type f | sort; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for attempt in 1 2; do
	before=$(inputs)
	echo "== fuzz $target for $fuzztime"
	if "${GO:-go}" "${args[@]}" 2>&1 | tee "$out"; then
		exit 0
	fi
	if [[ $attempt == 2 || $(inputs) != "$before" ]] ||
		! grep -qx '    context deadline exceeded' "$out" ||
		grep -q 'Failing input written to' "$out"; then
		exit 1
	fi
	echo "== fuzz $target: go's coordinator stopped at its deadline with no failing input (golang/go#75804); once more"
done
