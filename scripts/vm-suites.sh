#!/usr/bin/env bash
# Guest side of test-vm.sh: runs each suite with its own scratch disk, keeps
# going after a failure, prints a summary and fails if any suite did.
# usage (in the VM): vm-suites.sh OUTDIR [go test flags]
# $CARVE_SUITES lists runs as BINARY or BINARY:TESTPATTERN; csi-sanity's
# Ginkgo suite can run once per process, so each access type is its own run.
# A run is judged by more than its exit status: one that ran no test (a
# pattern that matches none) fails, and each says how many of its tests
# passed and skipped. A test that misses a disk, binary or root fails
# rather than skips: test-vm.sh sets CARVE_REQUIRE_FIXTURES=1
# (test/fixture).
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

# watch_stall LOG PIDFILE: while a suite runs, whenever LOG (its output)
# has not grown for $CARVE_STALL_REPORT seconds, print what the kernel
# holds up: device-mapper devices (a suspended one, attr "s", blocks all
# its I/O), processes in uninterruptible sleep and their kernel stacks. A
# suite stuck in the kernel otherwise sits idle until its timeout and says
# nothing of why. Once the log has been quiet for $CARVE_STALL_ABORT
# seconds in all (no test here prints nothing for that long), the suite is
# stuck: its test binary (PID in PIDFILE) gets SIGQUIT, so that Go prints
# every goroutine (the test that hung and the command it waits for), and
# LOG.stuck tells the loop below to run no later suite; were the binary
# itself stuck in the kernel, where no signal reaches it, the VM powers
# off. A hung device-mapper device otherwise held the VM, and CI with it,
# until the suite's 45-minute guard and then the next suite's.
watch_stall() {
	local log=$1 pidfile=$2 last=-1 quiet=0 total=0 size
	while sleep 30; do
		size=$(stat -c %s "$log" 2>/dev/null || echo 0)
		if [ "$size" != "$last" ]; then
			last=$size quiet=0 total=0
			continue
		fi
		quiet=$((quiet + 30)) total=$((total + 30))
		if [ "$total" -ge "${CARVE_STALL_ABORT:-900}" ]; then
			stuck "$log" "$pidfile" "$total"
			return
		fi
		[ "$quiet" -ge "${CARVE_STALL_REPORT:-240}" ] || continue
		quiet=0
		# In the background, never waited for: reading a stuck task's
		# /proc files can block too, and the watch must go on.
		stall_report "$total" &
	done
}

# stall_report SECONDS: what the kernel holds up (see watch_stall).
stall_report() {
	echo "== stall: no output for $1 s; the kernel's state:"
	dmsetup info -c -o name,attr,open,segments 2>&1 | sed 's/^/== stall: /'
	dmsetup table 2>&1 | sed 's/^/== stall: table /'
	# Requests each device has in flight (reads, writes): where I/O stops.
	grep -H . /sys/block/*/inflight 2>/dev/null | sed 's/^/== stall: inflight /'
	dmsetup status 2>&1 | sed 's/^/== stall: status /'
	# blk-mq's view of the virtio disks: requests dispatched, busy in the
	# driver, or a queue stopped.
	[ -d /sys/kernel/debug/block ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	for f in /sys/kernel/debug/block/vd*/hctx*/busy /sys/kernel/debug/block/vd*/hctx*/dispatch \
		/sys/kernel/debug/block/vd*/hctx*/state /sys/kernel/debug/block/vd*/requeue_list; do
		[ -s "$f" ] && sed "s|^|== stall: ${f#/sys/kernel/debug/block/} |" "$f"
	done
	ps -eo pid,stat,wchan:32,etimes,args | awk 'NR == 1 || $2 ~ /^D/' | sed 's/^/== stall: /'
	for pid in $(ps -eo pid,stat | awk '$2 ~ /^D/ {print $1}'); do
		sed "s/^/== stall: $pid /" "/proc/$pid/stack" 2>/dev/null
	done
	# The kernel's own list of blocked tasks, with their stacks.
	echo w >/proc/sysrq-trigger 2>/dev/null &&
		dmesg | awk '/sysrq: Show Blocked State/ {n = NR} {l[NR] = $0} END {for (i = n; n && i <= NR && i < n + 150; i++) print l[i]}' |
		sed 's/^/== stall: dmesg /'
}

# stuck LOG PIDFILE SECONDS: ends a suite that printed nothing for SECONDS
# (see watch_stall).
stuck() {
	local log=$1 pid i sig
	pid=$(cat "$2" 2>/dev/null)
	: >"$log.stuck"
	echo "== stall: no output for $3 s: the suite is stuck; SIGQUIT to its test binary (pid $pid) for its goroutines"
	# The binary leads its own process group (setsid below): its
	# children, which may hold the output pipe open, go with it.
	# SIGKILL after 30 s: for what ignores SIGQUIT.
	[ -n "$pid" ] || return 0
	for sig in QUIT KILL; do
		kill -"$sig" -- "-$pid" 2>/dev/null
		for i in $(seq 30); do
			kill -0 -- "-$pid" 2>/dev/null || return 0
			sleep 1
		done
	done
	echo "== stall: the test binary's processes did not exit (stuck in the kernel); powering the VM off"
	echo o >/proc/sysrq-trigger
}
failed=()
for run in $CARVE_SUITES; do
	bin=${run%%:*} pattern=
	[ "$bin" != "$run" ] && pattern=${run#*:}
	echo "== suite $run (disk ${disk[$bin]:-none})"
	start=$(date +%s)
	log=$(mktemp)
	watch_stall "$log" "$log.pid" & watcher=$!
	# exec keeps the subshell's PID, which the watcher signals; setsid
	# (which execs too: the subshell leads no group) makes it a group's.
	(
		echo "$BASHPID" >"$log.pid"
		CARVE_TEST_DISK=${disk[$bin]:-} CARVE_TEST_DISK2=${disk2[$bin]:-} CARVE_TEST_RAW=${raw[$bin]:-} \
			exec setsid "$out/$bin.test" -test.v -test.timeout "${CARVE_SUITE_TIMEOUT:-45m}" ${pattern:+-test.run "$pattern"} "$@"
	) 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
	# Top-level tests only (subtests' lines are indented).
	passed=$(grep -c '^--- PASS: ' "$log") skipped=$(grep -c '^--- SKIP: ' "$log")
	if [ "$rc" = 0 ] && [ "$passed" = 0 ]; then
		echo "== suite $run ran no test that passed (a pattern that matches none?): failed"
		rc=1
	fi
	stuck=
	[ -e "$log.stuck" ] && stuck=1
	rm -f "$log" "$log.pid" "$log.stuck"
	echo "== suite $run: exit $rc after $(( $(date +%s) - start )) s; $passed tests passed, $skipped skipped"
	[ "$rc" = 0 ] || failed+=("$run")
	if [ -n "$stuck" ]; then
		echo "== suite $run was stuck: no later suite runs (a device the kernel cannot finish with would hold it up too)"
		failed+=("(and every suite after it)")
		break
	fi
done
if [ "${#failed[@]}" -gt 0 ]; then
	echo "== FAILED suites: ${failed[*]}"
	exit 1
fi
echo "== all suites passed: $CARVE_SUITES"
