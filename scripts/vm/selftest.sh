#!/usr/bin/env bash
# Self-test of the carve-vm harness: one VM boot that exercises real LVM on
# the scratch disks (PVs, VG, linear LV, ext4, thin pool and thin LV, COW
# snapshot, removal), with the time of the boot and of each step.
#
# Usage: scripts/vm/selftest.sh
# Exit status: 0 when every step passed.
set -euo pipefail

SELF=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)/$(basename -- "${BASH_SOURCE[0]}")
VG=carve_selftest

now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

# ---------------------------------------------------------------- in the VM --

failures=0
# step NAME COMMAND...: run COMMAND, print its time; show its output on failure.
step() {
  local name=$1 t0 t1 log
  shift
  log=$(mktemp)
  t0=$(now_ms)
  if "$@" >"$log" 2>&1; then
    t1=$(now_ms)
    printf 'step %-38s ok   %6d ms\n' "$name" $((t1 - t0))
  else
    t1=$(now_ms)
    printf 'step %-38s FAIL %6d ms\n' "$name" $((t1 - t0))
    sed 's/^/    | /' "$log"
    failures=$((failures + 1))
  fi
  rm -f -- "$log"
}

check_env() {
  [[ $(hostname) == carve-vm ]] || { echo "hostname is $(hostname)"; return 1; }
  [[ ${DM_DISABLE_UDEV:-} == 1 ]] || { echo "DM_DISABLE_UDEV is not 1"; return 1; }
  [[ -b /dev/vda && -b /dev/vdb ]] || { echo "no /dev/vda, /dev/vdb"; return 1; }
  [[ -c /dev/mapper/control ]] || { echo "no /dev/mapper/control"; return 1; }
  # Already loaded at boot: must be a quick no-op.
  modprobe -a dm_thin_pool dm_snapshot dm_mirror raid1 dm_raid loop
}

write_file() { # write_file FILE MIB: random data, remember its checksum
  dd if=/dev/urandom of="$1" bs=1M count="$2" status=none
  sync
  sha256sum <"$1" >/tmp/selftest.sum
}

same_file() { # same_file FILE: content still matches what write_file wrote
  sha256sum <"$1" | cmp -s - /tmp/selftest.sum || { echo "checksum of $1 differs"; return 1; }
}

remount_and_read() {
  umount /tmp/linear
  mount /dev/$VG/linear /tmp/linear
  same_file /tmp/linear/data
}

write_thin() {
  dd if=/dev/urandom of=/tmp/thin.bin bs=1M count=8 status=none
  dd if=/tmp/thin.bin of=/dev/$VG/thin bs=1M oflag=direct status=none
  cmp -n $((8 << 20)) /tmp/thin.bin /dev/$VG/thin
  local used
  used=$(lvs --noheadings -o data_percent $VG/thin | tr -d ' ')
  [[ $used != 0.00 ]] || { echo "thin LV shows no data after writing"; return 1; }
}

snapshot_check() {
  mkdir -p /tmp/snap
  # ro,noload: the snapshot holds the journal of a mounted ext4; do not replay.
  mount -o ro,noload /dev/$VG/snap /tmp/snap
  same_file /tmp/snap/data
  # Change the origin: the snapshot must keep the old content.
  dd if=/dev/urandom of=/tmp/linear/data bs=1M count=1 conv=notrunc status=none
  sync
  same_file /tmp/snap/data
  umount /tmp/snap
}

in_vm() {
  local results=$1 view=$2
  echo "selftest: guest up"
  step "environment (hostname, env, devices)" check_env
  # The guest's own /tmp hides the host's; --view shows a host dir there.
  step "--view dir under /tmp visible" grep -qx seen "$view/file"
  # setns into a mount namespace roots the caller at what is mounted over
  # the namespace's root (runc exec relies on it): the job's root, not
  # the initramfs.
  step "setns lands in the job's root" nsenter --mount=/proc/self/ns/mnt test -d /run/carve-vm/job
  step "lvm version" lvm version
  step "pvcreate /dev/vda /dev/vdb" pvcreate -q /dev/vda /dev/vdb
  step "vgcreate" vgcreate -q $VG /dev/vda /dev/vdb
  step "lvcreate linear 256M" lvcreate -q -y -n linear -L 256M $VG
  step "mkfs.ext4" mkfs.ext4 -q /dev/$VG/linear
  step "mount ext4 (module autoload)" bash -c "mkdir -p /tmp/linear && mount /dev/$VG/linear /tmp/linear"
  step "write 16 MiB" write_file /tmp/linear/data 16
  step "remount + read back" remount_and_read
  step "lvcreate thin pool 512M" lvcreate -q -y -T -L 512M $VG/pool
  step "lvcreate thin LV 1G" lvcreate -q -y -V 1G -T $VG/pool -n thin
  step "write + read thin LV" write_thin
  step "lvcreate COW snapshot" lvcreate -q -y -s -L 128M -n snap $VG/linear
  step "snapshot keeps old data" snapshot_check
  step "lvs" lvs -a $VG
  step "umount" umount /tmp/linear
  step "lvremove snapshot" lvremove -q -y $VG/snap
  step "lvremove thin LV + pool" lvremove -q -y $VG/thin $VG/pool
  step "lvremove linear" lvremove -q -y $VG/linear
  step "vgremove + pvremove" bash -c "vgremove -q -y $VG && pvremove -q -y /dev/vda /dev/vdb"
  # Prove that --share writes reach the host.
  echo "failures=$failures" >"$results/result"
  [[ $failures -eq 0 ]]
}

# ---------------------------------------------------------------- on the host --

on_host() {
  local t0 t1 results rc=0 line
  t0=$(now_ms)
  "$(dirname -- "$SELF")/setup.sh" >/dev/null
  t1=$(now_ms)
  printf '%-48s%6d ms\n' setup.sh $((t1 - t0))

  results=$(mktemp -d) view=$(mktemp -d)
  echo seen >"$view/file"
  # shellcheck disable=SC2064 # expand now: results is local
  trap "rm -rf -- '$results' '$view'" EXIT
  t0=$(now_ms)
  # Boot time: from starting run.sh to the guest's first line, as seen here.
  while IFS= read -r line; do
    if [[ $line == 'selftest: guest up' ]]; then
      printf '%-48s%6d ms\n' 'boot to first guest output' $(($(now_ms) - t0))
    else
      printf '%s\n' "$line"
    fi
  done < <("$(dirname -- "$SELF")/run.sh" --timeout 600 --share "$results" --view "$view" -- \
    bash "$SELF" --in-vm "$results" "$view" 2>&1 || echo "run.sh exit status $?")
  t1=$(now_ms)
  printf '%-48s%6d ms\n' 'whole VM run' $((t1 - t0))

  if [[ $(cat -- "$results/result" 2>/dev/null) != failures=0 ]]; then
    echo "selftest: FAILED"
    rc=1
  else
    echo "selftest: PASSED"
  fi
  return "$rc"
}

if [[ ${1:-} == --in-vm ]]; then
  in_vm "${2:?}" "${3:?}"
else
  on_host
fi
