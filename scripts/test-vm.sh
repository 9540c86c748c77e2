#!/usr/bin/env bash
# Runs the suites that need real LVM (build tag vmtest) in ONE VM boot:
# the lvm package, the node lifecycle over CSI, csi-sanity against
# `carve standalone`, and the node's refusals of wrong IDs and paths
# (nodesafety), a crash at every step (crash), failing disks (faults) and
# chaos under load (soak).
# Test binaries and carve are built static on the host; the
# VM runs them from the repository (the guest sees the host's /).
#
# usage: scripts/test-vm.sh [go test flags for every suite, e.g. -test.run X]
#        scripts/test-vm.sh --build-only   (build the binaries, boot nothing)
# Logs of carve processes land in _output/vmtest/logs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=_output/vmtest
rm -rf "$out" && mkdir -p "$out/logs"

# shellcheck source=goenv.sh
source scripts/goenv.sh
echo "== building carve and the vmtest suites"
go build -o "$out/carve" ./cmd/carve
runs=${CARVE_SUITES:-"lvm lifecycle sanity:^TestSanityMount\$ sanity:^TestSanityBlock\$ sanity:^TestSanityThin\$ nodesafety crash faults soak"}
# The crash matrix's bounded run: four operations, a crash after every
# second command (about 7 minutes in the VM); make test-crash runs every
# operation with a crash after every command (hours).
export CARVE_CRASH_EVERY=${CARVE_CRASH_EVERY:-2}
export CARVE_CRASH_OPS=${CARVE_CRASH_OPS:-'^(CreateVolume/thick|CreateVolume/thin|DeleteVolume/thick|NodeStageVolume)$'}
# The soak's bounded run: 90 s of random calls and kills (make soak: 10
# minutes).
export CARVE_SOAK_DURATION=${CARVE_SOAK_DURATION:-90s}
suites=(lvm:./lvm lifecycle:./test/lifecycle sanity:./test/sanity nodesafety:./test/nodesafety crash:./test/crash faults:./test/faults soak:./test/soak)
for s in "${suites[@]}"; do
	# Only the suites that will run: each build is minutes on a busy machine.
	[[ " $runs " =~ \ ${s%%:*}[:\ ] ]] || continue
	go test -tags vmtest -c -o "$out/${s%%:*}.test" "${s#*:}"
done

# The crash suite's carve kills itself at chosen points (driver/crashpoint).
if [[ " $runs " =~ \ crash[:\ ] ]]; then
	go build -tags crashpoints -o "$out/carve-crash" ./cmd/carve
fi

[[ ${1:-} == --build-only ]] && exit 0

echo "== booting the VM"
CARVE_BIN="$repo/$out/carve" CARVE_CRASH_BIN="$repo/$out/carve-crash" CARVE_TEST_LOGS="$repo/$out/logs" \
CARVE_SUITES="$runs" \
	scripts/vm/run.sh --disks 6 --disk-size 4G --timeout "${CARVE_VM_TIMEOUT:-3000}" --share "$repo/$out/logs" \
	-- bash scripts/vm-suites.sh "$repo/$out" "$@"
