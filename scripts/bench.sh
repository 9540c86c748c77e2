#!/usr/bin/env bash
# The VM benchmark (test/bench): carve standalone against raw lvm2 and
# filesystem commands on one VG in ONE VM boot, then, on the host, the
# table and the plots from the run's results.json.
#
# usage: scripts/bench.sh [go test flags, e.g. -test.run 'TestBench/(provisioning|attach)']
# Environment: CARVE_BENCH_QUICK=1 (small counts: the whole run in 15
# minutes on a loaded machine), CARVE_BENCH_SCALE="10 100" (the ladder),
# CARVE_BENCH_REPS, CARVE_BENCH_PARALLEL, CARVE_BENCH_FIO_REPS, CARVE_BENCH_IDLE=2m,
# CARVE_BENCH_LVM_SHELLS=N (carve --lvm-shells N; see
# docs/performance.md), CARVE_BENCH_TOPOLVM_SRC (a TopoLVM source tree, a
# checkout or a git dir: lvmd is built from it for the lvmd section, the
# side by side with TopoLVM's lvmd; without it that section is skipped). Output in _output/bench (CARVE_BENCH_DIR: another
# directory under the repo, for two runs side by side): results.json, the
# PNG plots, carve's log in logs/.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=${CARVE_BENCH_DIR:-_output/bench}
case $out in /* | *..*) echo "CARVE_BENCH_DIR must be a path inside the repo" >&2; exit 2 ;; esac
rm -rf "$out" && mkdir -p "$out/bin" "$out/logs"
command -v fio >/dev/null || { echo "fio is missing: apt-get install fio (the VM runs the host's)" >&2; exit 1; }

# shellcheck source=goenv.sh
source scripts/goenv.sh
echo "== building carve and the benchmark"
go build -o "$out/bin/carve" ./cmd/carve
go test -tags bench -c -o "$out/bin/bench.test" ./test/bench
# The report is a module of its own (test/bench/report/go.mod: its plots
# need gonum/plot, which the driver's module does not carry); built before
# the run, so that a broken report fails now rather than after hours.
go -C test/bench/report build -o "$repo/$out/bin/report" .
if [ -n "${CARVE_BENCH_TOPOLVM_SRC:-}" ]; then
	src=$CARVE_BENCH_TOPOLVM_SRC
	if [ -f "$src/go.mod" ]; then
		tree=$src
		version=$(git -C "$src" describe --tags --always --dirty 2>/dev/null || echo "unknown version")
	elif git --git-dir="$src" rev-parse -q --verify 'HEAD^{commit}' >/dev/null 2>&1; then
		tree=$out/topolvm-src
		mkdir -p "$tree"
		git --git-dir="$src" archive HEAD | tar -x -C "$tree"
		version="$(git --git-dir="$src" rev-parse HEAD) ($(git --git-dir="$src" describe --tags --always 2>/dev/null))"
	else
		echo "CARVE_BENCH_TOPOLVM_SRC=$src is neither a TopoLVM source tree nor a git dir" >&2
		exit 2
	fi
	echo "== building lvmd from TopoLVM $version"
	(cd "$tree" && go build -o "$repo/$out/bin/lvmd" ./cmd/lvmd)
	export CARVE_BENCH_LVMD="$repo/$out/bin/lvmd"
else
	unset CARVE_BENCH_LVMD
	echo "== CARVE_BENCH_TOPOLVM_SRC is not set: the lvmd column (section lvmd) is skipped"
fi

# The full run's scale ladder makes a thousand volumes, about two hours
# of lvm2 runs in the VM; quick is over in a quarter of an hour.
timeout=21600
[ "${CARVE_BENCH_QUICK:-}" = 1 ] && timeout=5400
echo "== booting the VM"
rc=0
CARVE_BIN="$repo/$out/bin/carve" CARVE_TEST_LOGS="$repo/$out/logs" CARVE_BENCH_OUT="$repo/$out" \
CARVE_TEST_DISK=/dev/vda CARVE_TEST_DISK2=/dev/vdb \
	scripts/vm/run.sh --disks 2 --disk-size 12G --timeout "$timeout" --share "$repo/$out" \
	-- "$repo/$out/bin/bench.test" -test.v -test.timeout "$((timeout - 120))s" "$@" || rc=$?

# A failed run still reports the sections it finished.
if [ -f "$out/results.json" ]; then
	echo "== report"
	"$out/bin/report" -in "$out/results.json" -plots "$out"
fi
exit "$rc"
