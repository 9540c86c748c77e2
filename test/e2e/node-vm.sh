#!/usr/bin/env bash
# Guest side of the e2e test (runs as scripts/vm/run.sh's COMMAND): the
# node "carve-vm". Makes the volume group on the scratch disks, starts the
# fake CRI runtime and a real kubelet, then serves vmexec until the host
# test shuts it down. carve node itself is started by the test through
# vmexec, with the arguments of the rendered DaemonSet.
#
# usage: node-vm.sh WORKDIR K8S_BIN VMEXEC
# WORKDIR (a writable share) holds kubelet.yaml from the test and the
# cluster's cluster/guest.kubeconfig, and receives logs/.
set -euo pipefail
work=$1 kbin=$2 vmexec=$3
logs=$work/logs
mkdir -p "$logs"
log() { printf 'node-vm: %s\n' "$*" >&2; }

# The VG and thin pool the e2e overlay names (deploy/kubernetes base +
# test/e2e/overlay). The thin pool zeroes new blocks, as Carve requires.
pvcreate -q /dev/vda /dev/vdb
vgcreate -q e2e /dev/vda /dev/vdb
lvcreate -q --type thin-pool --zero y -L 1G -n thinpool e2e
log "VG e2e ready: $(vgs --noheadings -o vg_size,vg_free e2e)"

# kubelet wants cgroups; the guest has none mounted.
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
mkdir -p /var/lib/kubelet/plugins_registry /var/lib/kubelet/plugins

pids=()
"$kbin/fake-cri" >>"$logs/fake-cri.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S /run/carve-fake-cri/cri.sock ]] && break; sleep 0.1; done
"$kbin/kubelet" --config="$work/kubelet.yaml" --kubeconfig="$work/cluster/guest.kubeconfig" \
  --hostname-override=carve-vm --node-labels=lvm.carve.dev/storage-node=true --root-dir=/var/lib/kubelet --v=2 >>"$logs/kubelet.log" 2>&1 &
pids+=($!)
log "kubelet and fake-cri started"

rc=0
"$vmexec" --listen=:7070 --log-dir="$logs" >>"$logs/vmexec.log" 2>&1 || rc=$?

kill -TERM "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
log "stopped (vmexec exit $rc)"
exit "$rc"
