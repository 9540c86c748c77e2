#!/usr/bin/env bash
# Proves the Kubernetes groundwork end to end: builds what is missing, brings
# a loopback control plane up in a temporary dir, checks it with kubectl
# (readyz, snapshot CRDs, a WaitForFirstConsumer StorageClass + PVC, a
# hand-made Node), starts fake-cri, snapshot-controller and csi-provisioner
# briefly, and brings everything down. Exits non-zero on the first failure
# (the state dir with its logs is then kept and named).
#
# usage: scripts/k8s/selftest.sh
# CARVE_K8S_KEEP=1 keeps the state dir (logs) even when all passed.
# The cluster.sh port variables (CARVE_K8S_*_PORT) apply, e.g. when another
# cluster already holds the default ports.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$here/versions.sh"

now() { printf '%s' "${EPOCHREALTIME/./}"; }
since() { local d=$(($(now) - $1)); printf '%d.%01ds' $((d / 1000000)) $((d / 100000 % 10)); }
timings=()
step() { # LABEL START: record how long a step took
  timings+=("$(printf '%-34s %s' "$1" "$(since "$2")")")
}
say() { printf '== %s\n' "$*"; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

t_all=$(now)
t=$(now)
say "build (skips what is built)"
"$here/build.sh" >/dev/null
step "build.sh" "$t"

state=$(mktemp -d "${TMPDIR:-/tmp}/carve-k8s-selftest.XXXXXX")
cluster() { "$here/cluster.sh" "$1" "$state" "${@:2}"; }
ok=
# Always bring the cluster (and whatever was started in it) down; keep the
# state dir for its logs when something failed.
finish() {
  local rc=$?
  if [[ -z $ok ]]; then
    cluster down || true
    printf 'selftest FAILED; logs in %s/logs\n' "$state" >&2
  elif [[ -n ${CARVE_K8S_KEEP:-} ]]; then
    printf 'state dir kept: %s\n' "$state"
  else
    rm -rf "$state"
  fi
  exit "$rc"
}
trap finish EXIT

# until TIMEOUT_S DESCRIPTION COMMAND...: poll COMMAND until it succeeds.
until_ok() {
  local timeout=$1 what=$2 t0
  shift 2
  t0=$(now)
  until "$@" >/dev/null 2>&1; do
    (($(now) - t0 < timeout * 1000000)) || fail "$what: not after ${timeout}s"
    sleep 0.25
  done
}

t=$(now)
say "cluster up in $state"
cluster up
step "cluster.sh up" "$t"
eval "$(cluster env)"
[[ $(command -v kubectl) == "$K8S_BIN/kubectl" ]] || fail "kubectl on PATH is not the cached one"

t=$(now)
say "kubectl checks"
[[ $(kubectl get --raw /readyz) == ok ]] || fail "/readyz is not ok"
kubectl version | grep -q "Server Version: $K8S_VERSION" || fail "server does not report $K8S_VERSION"

# The CRDs by name: the folder also holds a kustomization.yaml that
# `kubectl apply -f DIR` trips on.
crds=()
for g in "${SNAPSHOT_CRD_GLOBS[@]}"; do
  for f in "$K8S_CRD"/$g; do crds+=(-f "$f"); done
done
((${#crds[@]} >= 12)) || fail "expected 6 snapshot CRD files in $K8S_CRD"
kubectl apply "${crds[@]}" >/dev/null
kubectl wait --for=condition=Established --timeout=30s "${crds[@]}" >/dev/null
resources=$(kubectl api-resources -o name)
for r in volumesnapshots.snapshot.storage.k8s.io volumesnapshotcontents.snapshot.storage.k8s.io \
  volumesnapshotclasses.snapshot.storage.k8s.io volumegroupsnapshots.groupsnapshot.storage.k8s.io; do
  grep -qx "$r" <<<"$resources" || fail "api-resources does not list $r"
done

# A Node as kubelet would register it, incl. the annotation that makes the
# attach-detach controller (not kubelet) attach volumes.
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: carve-selftest-node
  labels: {kubernetes.io/hostname: carve-selftest-node}
  annotations: {volumes.kubernetes.io/controller-managed-attach-detach: "true"}
EOF
kubectl get node carve-selftest-node >/dev/null || fail "node not created"

kubectl apply -f - >/dev/null <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: carve-lvm}
provisioner: lvm.carve.dev
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: selftest-pvc, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: carve-lvm
  resources: {requests: {storage: 1Gi}}
EOF
# The PV binder controller (in kube-controller-manager) leaves the claim
# Pending and says why in an event.
wffc_event() {
  [[ -n $(kubectl get events -n default -o name --field-selector \
    involvedObject.kind=PersistentVolumeClaim,involvedObject.name=selftest-pvc,reason=WaitForFirstConsumer) ]]
}
until_ok 30 "WaitForFirstConsumer event on the PVC" wffc_event
[[ $(kubectl get pvc selftest-pvc -o jsonpath='{.status.phase}') == Pending ]] ||
  fail "PVC is not Pending"
step "kubectl checks" "$t"

# log_has NAME REGEX: the process is alive and its log matches.
log_has() {
  [[ -f $state/run/$1.pid ]] && grep -qE "$2" "$state/logs/$1.log"
}
alive() {
  local pid
  read -r pid _ <"$state/run/$1.pid" && [[ -d /proc/$pid ]] &&
    ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status"
}

t=$(now)
say "fake-cri: serves a socket, stops cleanly on SIGTERM"
cluster start fake-cri --endpoint="unix://$state/cri.sock"
until_ok 10 "fake-cri socket" test -S "$state/cri.sock"
cluster stop fake-cri
grep -q 'stopping on terminated' "$state/logs/fake-cri.log" || fail "fake-cri did not stop on SIGTERM"
step "fake-cri start/stop" "$t"

t=$(now)
say "snapshot-controller and csi-provisioner start against the cluster"
cluster start snapshot-controller --kubeconfig="$KUBECONFIG" --leader-election=false --v=3
# No CSI driver exists yet: the provisioner waits for this socket; --v=5
# makes it say so at once.
cluster start csi-provisioner --csi-address="$state/csi.sock" --kubeconfig="$KUBECONFIG" \
  --leader-election=false --v=5
until_ok 30 "snapshot-controller starting its controller" \
  log_has snapshot-controller 'Starting snapshot controller'
until_ok 30 "csi-provisioner connecting to the CSI socket" \
  log_has csi-provisioner "Connecting.*$state/csi.sock"
grep -q "version=\"$PROVISIONER_VERSION\"" "$state/logs/csi-provisioner.log" ||
  fail "csi-provisioner does not report $PROVISIONER_VERSION"
sleep 3 # long enough for a crash on a missing CRD or a bad flag to show
alive snapshot-controller || fail "snapshot-controller died; see $state/logs/snapshot-controller.log"
alive csi-provisioner || fail "csi-provisioner died; see $state/logs/csi-provisioner.log"
if grep -E 'could not find the requested resource' "$state/logs/snapshot-controller.log"; then
  fail "snapshot-controller misses an API (CRDs?)"
fi
cluster stop csi-provisioner
cluster stop snapshot-controller
step "sidecars start/stop" "$t"

t=$(now)
say "cluster down"
cluster down
step "cluster.sh down" "$t"
step "total" "$t_all"
ok=1
say "PASS; timings:"
printf '  %s\n' "${timings[@]}"
