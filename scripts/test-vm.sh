#!/usr/bin/env bash
# Runs the suites that need real LVM (build tag vmtest) in ONE VM boot:
# the lvm package, the node lifecycle over CSI, and csi-sanity against
# `carve standalone`. Test binaries and carve are built static on the host;
# the VM runs them from the repository (the guest sees the host's /).
#
# usage: scripts/test-vm.sh [go test flags for every suite, e.g. -test.run X]
# Logs of carve processes land in _output/vmtest/logs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=_output/vmtest
rm -rf "$out" && mkdir -p "$out/logs"

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"
echo "== building carve and the vmtest suites"
go build -o "$out/carve" ./cmd/carve
suites=(lvm:./lvm lifecycle:./test/lifecycle sanity:./test/sanity)
for s in "${suites[@]}"; do
	go test -tags vmtest -c -o "$out/${s%%:*}.test" "${s#*:}"
done
runs="lvm lifecycle sanity:^TestSanityMount\$ sanity:^TestSanityBlock\$ sanity:^TestSanityThin\$"

echo "== booting the VM"
CARVE_BIN="$repo/$out/carve" CARVE_TEST_LOGS="$repo/$out/logs" \
CARVE_SUITES="${CARVE_SUITES:-$runs}" \
	scripts/vm/run.sh --disks 5 --disk-size 4G --timeout 3000 --share "$repo/$out/logs" \
	-- bash scripts/vm-suites.sh "$repo/$out" "$@"
