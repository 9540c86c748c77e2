#!/usr/bin/env bash
# Guest side of the e2e test (runs as scripts/vm/run.sh's COMMAND): one
# VM node (carve-vm, carve-vm2), a node as a user has it. Makes the volume
# group on the scratch disks, starts containerd (with runc and CNI) and a
# real kubelet, imports the images, then serves vmexec until the host test
# shuts it down.
# carve node runs as the DaemonSet's pod, started by kubelet.
#
# usage: node-vm.sh WORKDIR NODE K8S_BIN VMEXEC VMEXEC_PORT
# WORKDIR (a writable share) holds from the test: nodes/NODE/ (its
# kubelet.yaml, containerd.toml and cni/, the pod network; routes, to the
# other nodes' pods), vm-images/*.tar
# and cluster/guest.kubeconfig; it receives logs/NODE/.
set -euo pipefail
work=$1 node=$2 kbin=$3 vmexec=$4 port=$5
[[ $node =~ ^[a-z0-9-]+$ && $port =~ ^[0-9]+$ ]] || { echo "node-vm: bad node $node or port $port" >&2; exit 2; }
conf=$work/nodes/$node
logs=$work/logs/$node
mkdir -p "$logs"
log() { printf 'node-vm %s: %s\n' "$node" "$*" >&2; }
t0=$SECONDS
step() { log "$* (${SECONDS}s)"; }

# The VG and thin pool the e2e overlay names (deploy/kubernetes base +
# test/e2e/overlay). The thin pool zeroes new blocks, as Carve requires.
# A reboot (the test boots the VM again on the same disks) finds them
# there, and activates every LV as lvm2's autoactivation does at a real
# node's boot: carve node must deactivate those not published here.
if vgs e2e >/dev/null 2>&1; then
	vgchange -q -ay e2e
	step "rebooted: VG e2e found, its LVs activated as at boot: $(lvs --noheadings -o lv_name,lv_active e2e | tr -s ' \n' ' ')"
else
	pvcreate -q /dev/vda /dev/vdb
	vgcreate -q e2e /dev/vda /dev/vdb
	lvcreate -q --type thin-pool --zero y -L 1G -n thinpool e2e
	# The fast PV the carve-writecache class names (@carve-fast).
	pvchange -q --addtag carve-fast /dev/vdb
	step "VG e2e ready: $(vgs --noheadings -o vg_size,vg_free e2e)"
fi

# What a systemd host gives kubelet and the runtime: cgroups, and / as a
# shared mount, without which the DaemonSet's Bidirectional mount of
# /var/lib/kubelet cannot propagate carve's mounts back to kubelet.
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
mount --make-rshared /
# Its own kubelet dir: the host's / seen through 9p may have the host
# node's there (the test binds one over /var/lib/kubelet in its namespace).
mkdir -p /var/lib/kubelet
mount -t tmpfs -o mode=0755 tmpfs /var/lib/kubelet
mkdir -p /var/lib/kubelet/plugins_registry /var/lib/kubelet/plugins
# The guest's / is an overlay itself: containerd's overlay snapshots need a
# plain filesystem under them.
mkdir -p /var/lib/carve-containerd
mount -t tmpfs -o mode=0700 tmpfs /var/lib/carve-containerd
# Containers' logs land with the test's logs on the host.
mkdir -p /var/log/pods "$logs/vm-pods"
mount --bind "$logs/vm-pods" /var/log/pods

# The cluster has no kube-proxy: the kubernetes Service's ClusterIP is an
# address of this node, where vmexec forwards to the apiserver (QEMU's
# guestfwd at 10.0.2.100).
ip addr add 10.0.0.1/32 dev lo
sysctl -qw net.ipv4.ip_forward=1
# The other VM node's pods, through its end of the link (run.sh --link):
# one flat pod network over both nodes, as a user's cluster has, so that
# carve node reaches its peer at the pod address it publishes.
while read -r subnet via; do
	if [[ -n $subnet ]]; then ip route add "$subnet" via "$via"; fi
done <"$conf/routes"
step "routes to other nodes' pods: $(ip route | grep -c ' via ')"

pids=()
containerd --config "$conf/containerd.toml" >>"$logs/containerd.log" 2>&1 &
pids+=($!)
sock=/run/carve-containerd/containerd.sock
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
step "containerd started"

# Images: no registry, no pull. Names as the CRI looks them up (the test
# wrote beside each archive its normalized reference and repository@digest,
# one a line).
for f in "$work"/vm-images/*.tar; do
	ctr -a "$sock" -n k8s.io images import "$f" >>"$logs/images.log" 2>&1
	name=$(<"${f%.tar}.name")
	while read -r ref; do
		[[ $ref == "$name" ]] || ctr -a "$sock" -n k8s.io images tag --force "$name" "$ref" >>"$logs/images.log"
	done <"${f%.tar}.ref"
done
step "images imported: $(ctr -a "$sock" -n k8s.io images ls -q | grep -vc '^sha256:')"

"$kbin/kubelet" --config="$conf/kubelet.yaml" --kubeconfig="$work/cluster/guest.kubeconfig" \
	--hostname-override="$node" --node-labels=lvm.carve.dev/storage-node=true --root-dir=/var/lib/kubelet \
	--v=2 >>"$logs/kubelet.log" 2>&1 &
pids+=($!)
step "kubelet started"

rc=0
"$vmexec" --listen=":$port" --log-dir="$logs" --proxy=10.0.0.1:443=10.0.2.100:6443 >>"$logs/vmexec.log" 2>&1 || rc=$?

kill -TERM "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
log "stopped after $((SECONDS - t0))s (vmexec exit $rc)"
exit "$rc"
