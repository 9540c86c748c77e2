#!/usr/bin/env bash
# Records the lvm2 report fixtures in this directory from real LVM.
#
# Run it as root in a throw-away VM whose blank disks it may destroy, with
# this directory shared writable, from the repository root:
#
#   scripts/vm/run.sh --disks 2 --share "$PWD/lvm/testdata" -- bash lvm/testdata/capture.sh
#
# Each scenario builds a volume group on the scratch disks, runs exactly the
# report commands lvm.Client runs (same -o field lists: keep them in step
# with lvm/report.go, which TestCaptureScriptUsesClientFields checks) and
# saves stdout as <scenario>-<report>.json. Failures the Client classifies
# are provoked on purpose and their stderr saved as err-<what>.stderr.
# capture.log lists every fixture with the command that produced it.
set -euo pipefail

PV_FIELDS="pv_name,vg_name,pv_uuid,pv_size,pv_free,pv_missing,pv_attr"
VG_FIELDS="vg_name,vg_uuid,vg_size,vg_free,vg_extent_size,vg_extent_count,vg_free_count,pv_count,vg_missing_pv_count,lv_count,vg_attr,vg_tags,vg_mda_size,vg_mda_free"
LV_FIELDS="lv_name,vg_name,lv_uuid,lv_path,lv_dm_path,lv_size,lv_attr,lv_tags,lv_layout,lv_role,lv_active,lv_device_open,pool_lv,origin,data_percent,metadata_percent,lv_health_status,copy_percent,vg_extent_size,raid_sync_action,raid_mismatch_count,lv_when_full,lv_metadata_size,lv_check_needed,lv_time,lv_kernel_major,lv_kernel_minor,vg_missing_pv_count"
REPORT=(--reportformat json --units b --nosuffix --config 'report/time_format="%s" report/binary_values_as_numeric=0 report/mark_hidden_devices=1 report/list_item_separator=","')

out=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
D1=${CARVE_CAPTURE_DISK1:-/dev/vda}
D2=${CARVE_CAPTURE_DISK2:-/dev/vdb}
log=$out/capture.log

[[ $(id -u) == 0 ]] || { echo "capture.sh: must run as root (in a VM)" >&2; exit 2; }
for d in "$D1" "$D2"; do
	[[ -b $d ]] || { echo "capture.sh: $d is not a block device" >&2; exit 2; }
done

# A private LVM configuration, like lvm.WritePrivateConfig's: the VM has no
# udev, and nothing must be written to the host's /etc/lvm.
conf=$(mktemp -d)
mkdir -p "$conf/lock"
cat >"$conf/lvm.conf" <<EOF
global { locking_dir = "$conf/lock" event_activation = 0 }
activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 0 monitoring = 0 }
devices { obtain_device_list_from_udev = 0 external_device_info_source = "none" use_devicesfile = 0 }
backup { backup = 0 archive = 0 }
EOF
export LVM_SYSTEM_DIR=$conf DM_DISABLE_UDEV=1 LVM_SUPPRESS_FD_WARNINGS=1

note() { echo "$*" | tee -a "$log"; }

# report NAME ARGS...: save `lvm ARGS...` stdout as NAME.json.
report() {
	local name=$1
	shift
	note "$name.json: lvm $*"
	lvm "$@" >"$out/$name.json"
}
pvs_() { report "$1" pvs "${REPORT[@]}" -o "$PV_FIELDS" "${@:2}"; }
vgs_() { report "$1" vgs "${REPORT[@]}" -o "$VG_FIELDS" "${@:2}"; }
lvs_() { report "$1" lvs "${REPORT[@]}" -o "$LV_FIELDS" "${@:2}"; }

# fails NAME ARGS...: `lvm ARGS...` must fail; save its stderr as NAME.stderr.
fails() {
	local name=$1 rc=0
	shift
	lvm "$@" >/dev/null 2>"$out/$name.stderr" || rc=$?
	note "$name.stderr (exit $rc): lvm $*"
	if ((rc == 0)); then
		echo "capture.sh: expected lvm $* to fail" >&2
		return 1
	fi
}

# Writes zeros into an LV so that thin and snapshot usage is not 0%.
fill() { dd if=/dev/zero of="$1" bs=1M count="$2" oflag=direct status=none; }

# Waits (up to a minute) until a raid LV is in sync.
synced() {
	local i
	for ((i = 0; i < 120; i++)); do
		[[ $(lvm lvs --noheadings -o copy_percent "$1" | xargs) == 100.00 ]] && return 0
		sleep 0.5
	done
	echo "capture.sh: $1 did not sync" >&2
	return 1
}

wipe() {
	local vg=$1
	lvm vgreduce --removemissing --force "$vg" >/dev/null 2>&1 || true
	lvm vgremove --yes --force "$vg" >/dev/null 2>&1 || true
	lvm pvremove --yes --force --force "$D1" "$D2" >/dev/null 2>&1 || true
	wipefs -q -a "$D1" "$D2" >/dev/null 2>&1 || true
}

scenario_empty() {
	lvm vgcreate --yes carve-empty "$D1"
	vgs_ empty-vgs
	vgs_ empty-vg carve-empty
	lvs_ empty-lvs carve-empty
	pvs_ empty-pvs
	fails err-vg-notfound vgs "${REPORT[@]}" -o "$VG_FIELDS" carve-nosuchvg
	wipe carve-empty
}

scenario_linear() {
	local vg=carve-linear
	lvm vgcreate --yes --addtag carve.dev/node=node-a "$vg" "$D1"
	lvm lvcreate -n vol1 -L 12582912b --zero y --wipesignatures y --yes \
		--addtag carve.dev/volume=pvc-1 --addtag owner=node-a "$vg"
	lvm lvcreate -n vol-2.x+y -L 8m --zero y --wipesignatures y --yes --addtag 'a/b=c!:&#' "$vg"
	lvm lvcreate -n vol3 -L 4m --zero y --wipesignatures y --yes "$vg"
	lvm lvchange -an "$vg/vol-2.x+y"
	exec 3<"/dev/$vg/vol1" # hold vol1 open: lv_device_open, and the busy errors below
	lvs_ linear-lvs "$vg"
	lvs_ linear-lv-vol1 "$vg/vol1"
	vgs_ linear-vg "$vg"
	fails err-lv-notfound lvs "${REPORT[@]}" -o "$LV_FIELDS" "$vg/nosuchlv"
	fails err-lvremove-notfound lvremove --yes "$vg/nosuchlv"
	fails err-exists lvcreate -n vol1 -L 4m --zero y --wipesignatures y --yes "$vg"
	fails err-nospace-create lvcreate -n big -L 100g --zero y --wipesignatures y --yes "$vg"
	fails err-nospace-extend lvextend -L 100g "$vg/vol3"
	fails err-busy-remove lvremove --yes "$vg/vol1"
	fails err-busy-deactivate lvchange -an "$vg/vol1"
	exec 3<&-
	wipe "$vg"
}

scenario_thin() {
	local vg=carve-thin
	lvm vgcreate --yes "$vg" "$D1"
	# The commands lvm.Client runs (CreateThinPool, CreateLV, CreateThinSnapshot).
	lvm lvcreate --type thin-pool -n pool0 -L 67108864b --zero y --yes "$vg"
	lvm lvcreate -n thin1 -V 33554432b --thinpool pool0 --yes --addtag carve.dev/volume=pvc-t "$vg"
	fill "/dev/$vg/thin1" 8
	lvm lvcreate -s -n thinsnap1 --addtag carve.dev/snapshot=snap-1 "$vg/thin1" # skip-activation, inactive
	lvm lvcreate -s -n thinsnap2 -kn --yes "$vg/thin1"                           # active
	lvs_ thin-lvs "$vg"
	lvs_ thin-lvs-all -a "$vg"
	lvs_ thin-lv-pool0 "$vg/pool0"
	vgs_ thin-vg "$vg"
	fails err-thin-nospace lvcreate --type thin-pool -L 100g -n pool1 "$vg"
	wipe "$vg"
}

# A thin snapshot that outlives its origin, an extended thin LV, and a pool
# with tags, reported active and inactive.
scenario_thinops() {
	local vg=carve-thinops
	lvm vgcreate --yes "$vg" "$D1"
	lvm lvcreate --type thin-pool -n pool0 -L 67108864b --zero y --yes --addtag carve.dev/pool=p0 "$vg"
	lvm lvcreate -n thin1 -V 33554432b --thinpool pool0 --yes "$vg"
	lvm lvcreate -n thin2 -V 4194304b --thinpool pool0 --yes "$vg"
	fill "/dev/$vg/thin1" 16
	lvm lvcreate -s -n snap1 -kn --yes --addtag carve.dev/snapshot=s1 "$vg/thin1"
	lvm lvextend -L 50331648b "$vg/thin2"
	lvm lvremove --yes "$vg/thin1"
	lvs_ thinops-lvs "$vg"
	lvs_ thinops-lv-pool0 "$vg/pool0"
	vgs_ thinops-vg "$vg"
	fails err-thin-nopool lvcreate -n thin3 -V 4194304b --thinpool nopool --yes "$vg"
	lvm lvchange -an "$vg/snap1" "$vg/thin2"
	lvm lvchange -an "$vg/pool0"
	lvs_ thinops-lv-pool0-inactive "$vg/pool0"
	wipe "$vg"
}

scenario_cow() {
	local vg=carve-cow
	lvm vgcreate --yes "$vg" "$D1"
	lvm lvcreate -n origin1 -L 32m --zero y --wipesignatures y --yes "$vg"
	# The command lvm.Client runs (CreateCOWSnapshot).
	lvm lvcreate -s -n snap1 -L 25165824b --yes "$vg/origin1"
	lvm lvcreate -s -n snap2 -L 4194304b --yes "$vg/origin1"
	fill "/dev/$vg/origin1" 12 # overflows snap2, which becomes invalid
	lvs_ cow-lvs "$vg"
	lvs_ cow-lvs-all -a "$vg"
	fails err-busy-extend-origin lvextend -L 67108864b "$vg/origin1"
	wipe "$vg"
}

scenario_striped() {
	local vg=carve-striped
	lvm vgcreate --yes "$vg" "$D1" "$D2"
	vgs_ striped-vg-empty "$vg" # VG free before and after: Footprint
	# The commands lvm.Client runs (CreateLV with Stripes, ExtendLV).
	lvm lvcreate -n stripe2 -i 2 -L 8388608b --zero y --wipesignatures y --yes "$vg"
	lvm lvcreate -n stripe1 -i 2 -I 65536b -L 16777216b --zero y --wipesignatures y --yes "$vg"
	lvm lvextend -L 16777216b "$vg/stripe2" # a second segment: must stay one row
	lvs_ striped-lvs "$vg"
	vgs_ striped-vg "$vg"
	pvs_ striped-pvs
	fails err-stripes-pvs lvcreate -n stripe3 -i 3 -L 12582912b --zero y --wipesignatures y --yes "$vg"
	wipe "$vg"
}

scenario_raid1() {
	local vg=carve-raid1
	lvm vgcreate --yes "$vg" "$D1" "$D2"
	vgs_ raid1-vg-empty "$vg" # VG free before and after: Footprint
	# The command lvm.Client runs (CreateLV with Mirrors).
	lvm lvcreate -n mirror1 --type raid1 -m 1 -L 16777216b --zero y --wipesignatures y --yes "$vg"
	synced "$vg/mirror1"
	lvs_ raid1-lvs "$vg"
	vgs_ raid1-vg "$vg"
	lvs_ raid1-lvs-all -a "$vg"
	fails err-raid1-legs lvcreate -n mirror3 --type raid1 -m 2 -L 16777216b --zero y --wipesignatures y --yes "$vg"
	# Large enough to be still syncing when reported.
	lvm lvcreate -n mirror2 --type raid1 -m 1 -L 1073741824b --zero y --wipesignatures y --yes "$vg"
	lvs_ raid1-syncing-lv "$vg/mirror2"
	wipe "$vg"
}

# An active and an inactive LV, and the device number of the active one's
# device node (hex major:minor, as stat prints it): lv_kernel_major and
# lv_kernel_minor must name that node, and be -1 for the inactive LV.
scenario_kernel() {
	local vg=carve-kernel
	lvm vgcreate --yes "$vg" "$D1"
	lvm lvcreate -n on -L 4m --zero y --wipesignatures y --yes "$vg"
	lvm lvcreate -n off -L 4m --zero y --wipesignatures y --yes "$vg"
	lvm lvchange -an "$vg/off"
	lvs_ kernel-lvs "$vg"
	note "kernel-on.devnum: stat -L -c %t:%T /dev/$vg/on"
	stat -L -c '%t:%T' "/dev/$vg/on" >"$out/kernel-on.devnum"
	wipe "$vg"
}

scenario_partial() {
	local vg=carve-partial
	lvm vgcreate --yes "$vg" "$D1" "$D2"
	lvm lvcreate -n ona -L 8m --yes "$vg" "$D1"
	lvm lvcreate -n onb -L 8m --yes "$vg" "$D2"
	lvm lvcreate -n both -l 100%FREE --yes "$vg" # spans both disks
	lvm vgchange -an "$vg"
	# Lose the second disk: wipe its PV label and metadata.
	dd if=/dev/zero of="$D2" bs=1M count=4 oflag=direct status=none
	lvs_ partial-lvs "$vg" 2>"$out/partial-lvs.stderr"
	vgs_ partial-vg "$vg"
	pvs_ partial-pvs
	fails err-partial-create lvcreate -n new -L 4m --zero y --wipesignatures y --yes "$vg"
	wipe "$vg"
}

: >"$log"
note "# $(lvm version | head -n1 | xargs), kernel $(uname -r)"
failed=()
# CARVE_CAPTURE_SCENARIOS records only some scenarios, e.g. "kernel".
for s in ${CARVE_CAPTURE_SCENARIOS:-empty linear thin thinops cow striped raid1 partial kernel}; do
	echo "=== $s"
	# Not `if ! (...)`: errexit does not apply inside a condition.
	set +e
	(scenario_$s)
	rc=$?
	set -e
	if ((rc != 0)); then
		failed+=("$s")
		wipe "carve-$s"
	fi
done
rm -rf "$conf"
if ((${#failed[@]})); then
	echo "capture.sh: failed scenarios: ${failed[*]}" >&2
	exit 1
fi
echo "capture.sh: all scenarios recorded"
