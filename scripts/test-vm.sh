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
# The VM provides every suite's disks, binaries and root: a test that finds
# one missing fails instead of skipping itself (test/fixture), so that a
# broken harness cannot pass with its tests skipped.
export CARVE_REQUIRE_FIXTURES=${CARVE_REQUIRE_FIXTURES:-1}
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

# Hang guards, never budgets: each run of a suite is ended by its own
# -test.timeout (CARVE_SUITE_TIMEOUT, 45m, or the caller's -test.timeout,
# the last one given winning as for go test), and the VM lives for all of
# them plus its boot. A loaded machine makes the suites later, never
# failed: a fixed VM lifetime (3000 s) once cut a cold run's suites off
# in the middle while each was still well within its own guard.
guard=${CARVE_SUITE_TIMEOUT:-45m}
prev=
for a in "$@"; do
	case $prev in -test.timeout | -timeout) guard=$a ;; esac
	case $a in -test.timeout=* | -timeout=*) guard=${a#*=} ;; esac
	prev=$a
done
# seconds DURATION: a Go duration of hours, minutes and seconds ("1h30m").
seconds() {
	local d=$1 n=0
	[[ $d =~ ^([0-9]+h)?([0-9]+m)?([0-9]+s)?$ && -n $d ]] || { echo "test-vm: cannot read the timeout $d" >&2; return 1; }
	[[ -n ${BASH_REMATCH[1]} ]] && n=$((n + ${BASH_REMATCH[1]%h} * 3600))
	[[ -n ${BASH_REMATCH[2]} ]] && n=$((n + ${BASH_REMATCH[2]%m} * 60))
	[[ -n ${BASH_REMATCH[3]} ]] && n=$((n + ${BASH_REMATCH[3]%s}))
	echo "$n"
}
guard_s=$(seconds "$guard")
# CARVE_VM_LANES VMs at once (default 1), each booted for its share of the
# runs: with two, the suites use both cores when nothing else needs them.
# The runs are shared out longest first by their weight, about their
# seconds in a quiet run (test/README.md), and keep their order within a
# lane (suites reuse the disks that earlier ones leave clean; a lane's VM
# starts with blank ones).
weight() {
	case $1 in
	lvm) echo 150 ;; lifecycle) echo 500 ;; nodesafety) echo 600 ;; crash) echo 420 ;;
	faults) echo 600 ;; soak) echo 250 ;; sanity:*Mount*) echo 540 ;; sanity:*Block*) echo 80 ;;
	sanity:*Thin*) echo 230 ;; *) echo 300 ;;
	esac
}
read -ra run_list <<<"$runs"
lanes=${CARVE_VM_LANES:-1}
[[ $lanes =~ ^[1-9]$ ]] || { echo "test-vm: CARVE_VM_LANES must be 1..9, got $lanes" >&2; exit 2; }
((lanes <= ${#run_list[@]})) || lanes=${#run_list[@]}
declare -a load lane_of
for ((l = 0; l < lanes; l++)); do load[l]=0; done
while read -r _ i; do
	best=0
	for ((l = 1; l < lanes; l++)); do ((load[l] < load[best])) && best=$l; done
	lane_of[i]=$best
	load[best]=$((load[best] + $(weight "${run_list[i]}")))
done < <(for i in "${!run_list[@]}"; do echo "$(weight "${run_list[i]}") $i"; done | sort -rn)

# boot_lane N RUNS: one VM for RUNS, its carve logs in logs/vmN when there
# are several lanes.
boot_lane() {
	local n=$1 lane_runs=$2 logs=$repo/$out/logs count
	((lanes == 1)) || logs=$logs/vm$n
	mkdir -p "$logs"
	read -ra count <<<"$lane_runs"
	local vm_timeout=${CARVE_VM_TIMEOUT:-$((guard_s * ${#count[@]} + 600))}
	echo "== booting VM $n for $lane_runs (each run ended by its own $guard guard; the VM's: $vm_timeout s)"
	CARVE_BIN="$repo/$out/carve" CARVE_CRASH_BIN="$repo/$out/carve-crash" CARVE_TEST_LOGS="$logs" \
	CARVE_SUITES="$lane_runs" CARVE_SUITE_TIMEOUT="$guard" \
		scripts/vm/run.sh --disks 6 --disk-size 4G --timeout "$vm_timeout" --share "$logs" --profile "$profile" "${selinux[@]}" \
		-- bash scripts/vm-suites.sh "$repo/$out" "${args[@]}"
}
args=("$@")
# CARVE_VM_PROFILE=production boots the VMs as users' nodes are set up
# (scripts/vm/run.sh --profile; test/testenv keeps the machine's lvm.conf
# then): make test-vm-production.
profile=${CARVE_VM_PROFILE:-stripped}
# CARVE_VM_SELINUX=1 boots them with SELinux on (run.sh --selinux), for
# the suites' SELinux tests, which skip in other boots: make
# test-vm-selinux.
selinux=()
[[ ${CARVE_VM_SELINUX:-} != 1 ]] || selinux=(--selinux)
if ((lanes == 1)); then
	boot_lane 1 "$runs"
	exit
fi
pids=()
for ((l = 0; l < lanes; l++)); do
	lane_runs=
	for i in "${!run_list[@]}"; do
		((lane_of[i] == l)) && lane_runs+="${lane_runs:+ }${run_list[i]}"
	done
	# Each line says its VM; pipefail keeps boot_lane's status.
	(set -o pipefail; boot_lane $((l + 1)) "$lane_runs" 2>&1 | sed -u "s/^/[vm$((l + 1))] /") &
	pids+=($!)
done
rc=0 failed=()
for l in "${!pids[@]}"; do
	wait "${pids[l]}" || { rc=1; failed+=("VM $((l + 1))"); }
done
((rc == 0)) && echo "== every VM's suites passed" || echo "== FAILED: ${failed[*]}"
exit "$rc"
