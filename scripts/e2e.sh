#!/usr/bin/env bash
# make e2e: Carve in cluster mode on real Kubernetes components, installed
# from a release (deploy/ pinned by digest) as real pods under containerd.
# Builds (or takes from the cache) etcd, Kubernetes, the CSI sidecars and
# snapshot-controller (scripts/k8s/build.sh), the images of the last and of
# the test's pods (scripts/k8s/images.sh), the release of make image's image
# and the sidecars (scripts/release.sh --from-image), and the test.
# The test (test/e2e) then starts a loopback control plane, a node on the
# host (containerd, kubelet; the controller Deployment runs there) and two
# VM nodes on real LVM, all inside network, mount and PID namespaces of its
# own: nothing it starts, mounts or configures outlives it or reaches the
# machine's network.
#
# usage: scripts/e2e.sh [test binary flags, e.g. -test.run 'TestE2E/resize']
# Env: CARVE_E2E_IMAGE (default _output/image/carve.tar, from make image).
# Logs of every component land in _output/e2e/logs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"
out=$repo/_output/e2e

scripts/vm/setup.sh
# The VM nodes boot in the production profile, whose udev package run.sh
# would fetch on first use: fetch it here, since the test runs in a
# network namespace of its own, where nothing outside it is reachable.
scripts/vm/setup.sh --udev >/dev/null
# shellcheck source-path=SCRIPTDIR source=k8s/versions.sh
source scripts/k8s/versions.sh

image=${CARVE_E2E_IMAGE:-$repo/_output/image/carve.tar}
[[ -s $image ]] || { echo "e2e: $image missing: run make image (make e2e does)" >&2; exit 1; }
# A run killed half-way ends with its namespaces, all but the host node's
# loop device: detach it, or its VG would clash with the next one's.
losetup -l -n -O NAME,BACK-FILE | while read -r dev file _; do
	[[ $file == "$out/host/pv.img" ]] && losetup -d "$dev"
done || true
rm -rf "$out" && mkdir -p "$out/logs"

# Ours first: in CI the Kubernetes build is still running in the
# background, and build.sh below waits for it.
# shellcheck source=goenv.sh
source scripts/goenv.sh
echo "== building carve, vmexec and the e2e test"
go build -o "$out/bin/carve" ./cmd/carve
go build -o "$out/bin/vmexec" ./test/e2e/vmexec
go test -tags e2e -c -o "$out/bin/e2e.test" ./test/e2e
go build -o "$out/bin/pause" ./test/e2e/pause

scripts/k8s/build.sh
scripts/k8s/images.sh "$out/images" "$out/bin/pause"
# Carve is installed from a release of make image's image: deploy/'s
# manifests and chart with it and the sidecars pinned by digest.
scripts/release.sh --from-image "$image" "$out/release"

# The Kubernetes project's storage suite (e2e.test, agnhost) and its
# images, when CARVE_E2E_UPSTREAM asks for it (subset or full; make e2e,
# and so CI, asks for the subset; off when unset). Only
# TestUpstreamStorageSuite needs them, and it runs after the one-at-a-time
# scenarios, so they build in the background meanwhile (the scenarios
# mostly wait on the single-core VM). The test waits for the rc file.
# Its own process group (setsid), so that a test that ends first stops it.
upstream_rc=$out/upstream-build.rc
upstream_pid=
if [[ ${CARVE_E2E_UPSTREAM:-off} != off ]]; then
	setsid bash -c 'rc=0
		{ scripts/k8s/build.sh upstream && scripts/k8s/images.sh --upstream "$1"; } >"$2" 2>&1 || rc=$?
		echo "$rc" >"$3"' upstream-build "$out/images-upstream" "$out/logs/upstream-build.log" "$upstream_rc" &
	upstream_pid=$!
fi

# deploy/'s tests render the kustomize overlays and lint and render the
# Helm chart when they have kubectl and helm; here they always do, with the
# ones the cluster runs (a missing binary fails them, never skips).
echo "== deploy/ rendered by kubectl kustomize and helm"
CARVE_KUBECTL=$K8S_BIN/kubectl CARVE_HELM=$K8S_BIN/helm go test -count=1 ./deploy

echo "== running the e2e test in its own network, mount and PID namespaces"
# In there: lo up, with the kubernetes Service's ClusterIP on it (the
# harness forwards it to the apiserver: the cluster has no kube-proxy); /
# shared within the namespace (mount propagation for kubelet and carve
# node). bash as PID 1 reaps orphans (containerd's shims) and waits for
# the test; when it exits, the kernel ends whatever is left.
# -test.parallel stays at its default (GOMAXPROCS, 2 here): with all the
# side-by-side scenarios at once the single-core VM fell behind (a thick
# VolumeSnapshot not ready in 4 min, PV deletions over 3 min).
# The namespaces: 10.0.0.1, the kubernetes Service (the test proxies it to
# the apiserver); 10.0.1.1, the host node's InternalIP; the nodes' names
# resolve to loopback, where the apiserver finds every kubelet (the VMs'
# through QEMU's forwards): see test/e2e/vm_test.go.
printf '127.0.0.1 localhost carve-host carve-vm carve-vm2\n::1 localhost\n' >"$out/hosts"
cd test/e2e
rc=0
env CARVE_E2E_WORK="$out" CARVE_E2E_K8S_BIN="$K8S_BIN" CARVE_E2E_K8S_CRD="$K8S_CRD" \
	CARVE_E2E_K8S_ADDONS="$K8S_DIR/addons" \
	CARVE_E2E_UPSTREAM_BUILD_RC="$upstream_rc" CARVE_E2E_UPSTREAM_IMAGES="$out/images-upstream" \
	CARVE_E2E_RELEASE="$out/release" CARVE_E2E_IMAGES="$out/images" CARVE_E2E_VMEXEC="$out/bin/vmexec" \
	unshare --net --mount --pid --fork --mount-proc --propagation private -- bash -c '
		set -e
		ip link set lo up
		ip addr add 10.0.0.1/32 dev lo
		ip addr add 10.0.1.1/32 dev lo
		mount --bind "$CARVE_E2E_WORK/hosts" /etc/hosts
		mount --make-rshared /
		"$@" &
		wait $!
	' e2e-namespaces "$out/bin/e2e.test" -test.v -test.timeout 3h "$@" || rc=$?
if [[ -n $upstream_pid ]] && kill -0 "$upstream_pid" 2>/dev/null; then
	echo "== stopping the upstream suite's build (the test ended first)"
	kill -- -"$upstream_pid" 2>/dev/null || true
fi
exit "$rc"
