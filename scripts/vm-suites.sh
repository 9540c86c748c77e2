#!/usr/bin/env bash
# Guest side of test-vm.sh: runs each suite with its own scratch disk, keeps
# going after a failure, prints a summary and fails if any suite did.
# usage (in the VM): vm-suites.sh OUTDIR [go test flags]
# $CARVE_SUITES lists runs as BINARY or BINARY:TESTPATTERN; csi-sanity's
# Ginkgo suite can run once per process, so each access type is its own run.
set -uo pipefail
out=$1; shift
declare -A disk=([lvm]=/dev/vda [lifecycle]=/dev/vdb [sanity]=/dev/vdc [nodesafety]=/dev/vdc [crash]=/dev/vdb [faults]=/dev/vda [soak]=/dev/vdc)
# Suites that need two PVs (raid1, stripes; csi-sanity's ModifyVolume
# specs turn thick volumes raid1) get a second disk; nodesafety
# puts a VG Carve does not serve on it. Suites run one after the other and
# remove their VGs, so a later suite may reuse an earlier one's disk.
declare -A disk2=([lvm]=/dev/vdd [lifecycle]=/dev/vde [sanity]=/dev/vdd [nodesafety]=/dev/vdd [crash]=/dev/vde [faults]=/dev/vdd [soak]=/dev/vdd)
# A raw disk no suite touches but nodesafety, which checks it stays so.
declare -A raw=([nodesafety]=/dev/vdf)
cd "$(dirname "$0")/.." || exit 1
failed=()
for run in $CARVE_SUITES; do
	bin=${run%%:*} pattern=
	[ "$bin" != "$run" ] && pattern=${run#*:}
	echo "== suite $run (disk ${disk[$bin]})"
	start=$(date +%s)
	CARVE_TEST_DISK=${disk[$bin]} CARVE_TEST_DISK2=${disk2[$bin]:-} CARVE_TEST_RAW=${raw[$bin]:-} "$out/$bin.test" -test.v -test.timeout 45m ${pattern:+-test.run "$pattern"} "$@" 2>&1
	rc=$?
	echo "== suite $run: exit $rc after $(( $(date +%s) - start )) s"
	[ "$rc" = 0 ] || failed+=("$run")
done
if [ "${#failed[@]}" -gt 0 ]; then
	echo "== FAILED suites: ${failed[*]}"
	exit 1
fi
echo "== all suites passed: $CARVE_SUITES"
