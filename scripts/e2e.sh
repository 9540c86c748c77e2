#!/usr/bin/env bash
# make e2e: Carve in cluster mode on real Kubernetes components.
# Builds (or takes from the cache) etcd, Kubernetes, the CSI sidecars and
# snapshot-controller (scripts/k8s/build.sh), carve, and the test; then the
# test (test/e2e) starts a loopback control plane, the controller side on
# the host and a VM node with kubelet and carve node on real LVM.
#
# usage: scripts/e2e.sh [test binary flags, e.g. -test.run 'TestE2E/resize']
# Logs of every component land in _output/e2e/logs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"
out=$repo/_output/e2e

scripts/vm/setup.sh
# shellcheck source-path=SCRIPTDIR source=k8s/versions.sh
source scripts/k8s/versions.sh

# A run killed half-way may have left its control plane up.
if [[ -d $out/cluster ]]; then scripts/k8s/cluster.sh down "$out/cluster" || true; fi
rm -rf "$out" && mkdir -p "$out/logs"

# Ours first: in CI the Kubernetes build is still running in the
# background, and build.sh below waits for it.
# shellcheck source=goenv.sh
source scripts/goenv.sh
echo "== building carve, vmexec and the e2e test"
go build -o "$out/bin/carve" ./cmd/carve
go build -o "$out/bin/vmexec" ./test/e2e/vmexec
go test -tags e2e -c -o "$out/bin/e2e.test" ./test/e2e

scripts/k8s/build.sh

echo "== running the e2e test"
cd test/e2e
CARVE_E2E_WORK=$out CARVE_E2E_K8S_BIN=$K8S_BIN CARVE_E2E_K8S_CRD=$K8S_CRD \
CARVE_E2E_CARVE=$out/bin/carve CARVE_E2E_VMEXEC=$out/bin/vmexec \
	"$out/bin/e2e.test" -test.v -test.timeout 60m "$@"
