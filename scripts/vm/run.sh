#!/usr/bin/env bash
# Run one COMMAND as root in a throw-away QEMU VM that boots Debian's kernel
# (with device-mapper) and uses the host's own / (read-only, tmpfs overlay),
# so real LVM, mkfs and mounts can be tested on a host kernel without them.
#
# Usage: scripts/vm/run.sh [OPTIONS] [--] COMMAND [ARGS...]
#   --disks N          blank scratch disks /dev/vda, /dev/vdb, ... (default 2)
#   --disk-size SIZE   size of each, as for truncate(1) (default 4G)
#   --disk-dir DIR     keep the disks in DIR (made if absent) and reuse the
#                      ones there: a second boot sees the first's disks, as
#                      a rebooted machine does (default: thrown away)
#   --mem M            guest memory, as for qemu -m (default 2G)
#   --cpus N           vCPUs (default 1)
#   --timeout SECONDS  kill the VM after this long (default 1800)
#   --share DIR        mount host DIR writable at the same path (repeatable)
#   --view DIR         make host DIR visible (read-only, writes stay in the
#                      guest) where the guest's own /tmp or /run would hide
#                      it, e.g. binaries under a HOME in /tmp (repeatable;
#                      the working dir and COMMAND's dir always are)
#   --forward PORT     let the guest reach the host's 127.0.0.1:PORT at
#                      10.0.2.100:PORT (repeatable). QEMU's user-mode network
#                      with restrict=on: the guest reaches nothing else.
#                      (10.0.2.2, QEMU's own host alias, refuses guestfwd.)
#   --expose PORT      let the host reach the guest's PORT at its own
#                      127.0.0.1:PORT (repeatable; QEMU hostfwd)
#   --link LOCAL:PEER  a second NIC, wired to another VM's: its Ethernet
#                      frames go as UDP datagrams from the host's
#                      127.0.0.1:LOCAL to 127.0.0.1:PEER, where the other
#                      VM (run with --link PEER:LOCAL) listens. Two VMs so
#                      linked share one Ethernet segment, as two machines
#                      on one switch do, and nothing else is on it.
#   --link-address CIDR  the linked NIC's address (e.g. 192.168.77.1/24);
#                      its MAC follows from the address's last byte, so
#                      the two ends differ
#   --profile P        stripped (default): no udev, no autoactivation, no
#                      dmeventd, no devices file, the fastest lvm2;
#                      production: set up as users' nodes are (systemd-udevd
#                      with lvm2's and device-mapper's rules, event
#                      autoactivation, dmeventd with a thin pool autoextend
#                      policy, lvm2's devices file listing the disks);
#                      scripts/vm/README.md says what each piece mirrors
#   --selinux          boot with SELinux enabled (security=selinux); no
#                      policy is loaded: COMMAND loads one (load_policy,
#                      from the host's selinux-policy-default) and the
#                      kernel starts permissive
#   --console          copy the guest's kernel console to stderr
#   --verbose          report boot and run times on stderr
# Exit status: COMMAND's; 124 on timeout; 125 when the VM failed before
# COMMAND finished (boot failure, guest setup failure, QEMU error).
# Env: CARVE_VM_CACHE (see setup.sh); CARVE_VM_MODULES replaces the list of
# modules loaded before COMMAND runs.
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

usage() {
  sed -n '/^# Usage:/,/^set -euo/{/^#/p}' "$VM_DIR/run.sh" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

disks=2
disk_size=4G
disk_dir=
mem=2G
cpus=1
timeout_s=1800
console=0
selinux=0
verbose=0
vm_profile=stripped
shares=()
views=()
forwards=()
exposes=()
link=''
link_address=''
while [[ $# -gt 0 ]]; do
  case $1 in
    --disks) disks=${2:?--disks needs a value}; shift 2 ;;
    --disk-size) disk_size=${2:?--disk-size needs a value}; shift 2 ;;
    --disk-dir) disk_dir=${2:?--disk-dir needs a value}; shift 2 ;;
    --mem) mem=${2:?--mem needs a value}; shift 2 ;;
    --cpus) cpus=${2:?--cpus needs a value}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
    --share) shares+=("${2:?--share needs a value}"); shift 2 ;;
    --view) views+=("${2:?--view needs a value}"); shift 2 ;;
    --forward) forwards+=("${2:?--forward needs a port}"); shift 2 ;;
    --expose) exposes+=("${2:?--expose needs a port}"); shift 2 ;;
    --link) link=${2:?--link needs LOCAL:PEER}; shift 2 ;;
    --link-address) link_address=${2:?--link-address needs an address/prefix}; shift 2 ;;
    --profile) vm_profile=${2:?--profile needs a value}; shift 2 ;;
    --selinux) selinux=1; shift ;;
    --console) console=1; shift ;;
    --verbose) verbose=1; shift ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) vm_log "unknown option: $1"; usage ;;
    # The first non-option starts COMMAND, so that "go test -exec run.sh"
    # works without a "--".
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { vm_log "no COMMAND given"; usage; }
[[ $disks =~ ^[0-9]+$ && $disks -le 20 ]] || vm_die "--disks must be 0..20"
[[ $timeout_s =~ ^[0-9]+$ && $timeout_s -gt 0 ]] || vm_die "--timeout must be a positive number of seconds"
[[ $cpus =~ ^[1-8]$ ]] || vm_die "--cpus must be 1..8"
[[ $vm_profile == stripped || $vm_profile == production ]] || vm_die "--profile must be stripped or production"
for p in "${forwards[@]}" "${exposes[@]}"; do
  [[ $p =~ ^[0-9]+$ && $p -gt 0 && $p -lt 65536 ]] || vm_die "--forward needs a port number, got '$p'"
done

if [[ -n $link || -n $link_address ]]; then
  [[ $link =~ ^([0-9]+):([0-9]+)$ && ${BASH_REMATCH[1]} -gt 0 && ${BASH_REMATCH[1]} -lt 65536 &&
    ${BASH_REMATCH[2]} -gt 0 && ${BASH_REMATCH[2]} -lt 65536 ]] || vm_die "--link needs LOCAL:PEER ports, got '$link'"
  [[ $link_address =~ ^(([0-9]{1,3})\.){3}([0-9]{1,3})/[0-9]{1,2}$ ]] ||
    vm_die "--link needs --link-address ADDRESS/PREFIX, got '$link_address'"
  # The MAC's last byte is the address's: two ends with different
  # addresses on one /24 never share a MAC.
  link_mac=$(printf '52:54:00:ca:01:%02x' "${BASH_REMATCH[3]}")
fi

# Build or refresh the boot files when missing or when init.sh/setup.sh changed.
if [[ ! -f $VM_CACHE/current/.complete ||
  $(cat -- "$VM_CACHE/current/initramfs.stamp" 2>/dev/null) != "$(vm_initramfs_stamp)" ]]; then
  "$VM_DIR/setup.sh" >&2 || vm_die "setup.sh failed"
fi
kdir=$(cd -- "$VM_CACHE/current" && pwd -P)
vm_udev_tree=
if [[ $vm_profile == production ]]; then
  vm_udev_tree=$("$VM_DIR/setup.sh" --udev) || vm_die "setup.sh --udev failed"
fi
kver=$(<"$kdir/kver")

job=$(mktemp -d "${TMPDIR:-/tmp}/carve-vm.XXXXXX")
qemu_pid=''
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  if [[ -n $qemu_pid ]] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill -TERM "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
  rm -rf -- "$job"
}
trap cleanup EXIT
# Turn signals into a normal exit so the EXIT trap kills QEMU and cleans up.
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p -- "$job/share" "$job/disks"

# The guest's /tmp and /run are fresh tmpfs, hiding the host's. The caller's
# working dir and COMMAND's dir (go test -exec puts test binaries under /tmp)
# are overlaid back from the host unless a --share covers them.
is_hidden() { [[ $1 == /tmp || $1 == /tmp/* || $1 == /run || $1 == /run/* ]]; }
under() { [[ $1 == "$2" || $1 == "$2"/* ]]; }

cwd=$(pwd -P)
vm_shares=()
for s in "${shares[@]}"; do
  [[ -d $s ]] || vm_die "--share $s: not a directory"
  vm_shares+=("$(cd -- "$s" && pwd -P)")
done
# Parents sort before their children, so nested shares mount in order.
if [[ ${#vm_shares[@]} -gt 0 ]]; then
  mapfile -t vm_shares < <(printf '%s\n' "${vm_shares[@]}" | LC_ALL=C sort -u)
fi

candidates=("$cwd")
for v in "${views[@]}"; do
  [[ -d $v ]] || vm_die "--view $v: not a directory"
  candidates+=("$(cd -- "$v" && pwd -P)")
done
if [[ $1 == */* && -e $1 ]]; then
  candidates+=("$(cd -- "$(dirname -- "$1")" && pwd -P)")
fi
vm_overlays=()
# Sorted, so that a parent comes first and covers its children.
mapfile -t candidates < <(printf '%s\n' "${candidates[@]}" | LC_ALL=C sort -u)
for d in "${candidates[@]}"; do
  is_hidden "$d" || continue
  covered=0
  for s in "${vm_shares[@]}" "${vm_overlays[@]}"; do
    under "$d" "$s" && covered=1
  done
  [[ $covered -eq 1 ]] || vm_overlays+=("$d")
done

# The environment contract: CARVE_*, GO*, PATH and HOME from the caller, and
# DM_DISABLE_UDEV=1 when the guest has no udev (the stripped profile).
vm_env=()
while IFS= read -r name; do
  case $name in
    CARVE_* | GO* | PATH | HOME) vm_env+=("$name=${!name}") ;;
  esac
done < <(compgen -e)
[[ $vm_profile == production ]] || vm_env+=(DM_DISABLE_UDEV=1)

vm_cwd=$cwd
vm_argv=("$@")
vm_moddir=$kdir/tree/lib/modules/$kver
# raid456 (raid5, raid6), raid10 and dm_integrity (raid1 integrity) are
# loaded here rather than on first use, so that a test's first lvcreate
# of a level does not also time a module load.
vm_modules=${CARVE_VM_MODULES-dm_snapshot dm_thin_pool dm_mirror raid1 raid10 raid456 dm_raid dm_integrity dm_crypt dm_writecache loop}
vm_net=0
[[ ${#forwards[@]} -eq 0 && ${#exposes[@]} -eq 0 ]] || vm_net=1
# The guest tells its NICs apart by MAC: QEMU's user-mode one has
# QEMU's default, the link its own.
vm_user_mac=52:54:00:12:34:56
vm_link_mac=${link_mac:-}
vm_link_address=$link_address
declare -p vm_cwd vm_argv vm_env vm_shares vm_overlays vm_moddir vm_modules vm_net vm_profile vm_udev_tree \
  vm_user_mac vm_link_mac vm_link_address >"$job/share/config.sh"
cp -- "$VM_DIR/guest.sh" "$job/share/guest.sh"

# COMMAND's output arrives on two virtio-serial ports. QEMU writes each into a
# pipe read by a cat that copies it to our stdout/stderr: a pipe opens the
# same way whatever our stdout is (terminal, file, socket, /dev/null). If our
# reader goes away (run.sh ... | head), the second cat drains the rest (the
# "|| true" keeps set -e, inherited by the subshell, from ending it first):
# a full pipe would stall QEMU, and with it the guest, until the timeout.
exec {out_fd}> >(cat || true; exec cat >/dev/null)
out_cat=$!
exec {err_fd}> >(cat >&2 || true; exec cat >/dev/null)
err_cat=$!
if [[ $console -eq 1 ]]; then
  exec {con_fd}> >(sed -u 's/\r$//' >&2 || true; exec cat >/dev/null)
  console_path=/dev/fd/$con_fd
else
  console_path=$job/console.log
fi

# No network unless asked for: then only QEMU's user-mode network, with
# restrict=on (no route anywhere), and one guestfwd per port, each leading
# to the host's loopback. The forward is a command (busybox nc) that QEMU
# starts per guest connection: a tcp: chardev target is opened once and
# serves a single connection, so a second client (kubectl beside a
# kubelet's long watch) would hang in its TLS handshake.
net=()
if [[ ${#forwards[@]} -gt 0 || ${#exposes[@]} -gt 0 ]]; then
  nic=user,model=virtio-net-pci,mac=$vm_user_mac,restrict=on
  for p in "${forwards[@]}"; do nic+=",guestfwd=tcp:10.0.2.100:$p-cmd:busybox nc 127.0.0.1 $p"; done
  # hostfwd listens on the host's loopback only.
  for p in "${exposes[@]}"; do nic+=",hostfwd=tcp:127.0.0.1:$p-:$p"; done
  net+=(-nic "$nic")
fi
# The link: a point-to-point UDP socket on the host's loopback, carrying
# Ethernet frames between exactly two VMs (QEMU's socket netdev).
if [[ -n $link ]]; then
  net+=(-netdev "socket,id=link,udp=127.0.0.1:${link#*:},localaddr=127.0.0.1:${link%%:*}"
    -device "virtio-net-pci,netdev=link,mac=$vm_link_mac")
fi
[[ ${#net[@]} -gt 0 ]] || net=(-nic none)

# Debian's kernel builds SELinux in but enables AppArmor, the first major
# LSM of its list: security= picks SELinux instead. enforcing=0: a guest
# whose files (the host's, over 9p) carry no labels would be refused
# everything by an enforcing policy; permissive still checks and labels.
kernel_extra=
[[ $selinux -eq 0 ]] || kernel_extra=" security=selinux selinux=1 enforcing=0"

# shellcheck disable=SC2054 # commas belong to QEMU's option syntax
qemu=(qemu-system-x86_64
  -name carve-vm
  # The host's KVM cannot boot a stock kernel: emulate (TCG). One vCPU
  # boots and runs one job faster than two; a guest with much to do at
  # once (the e2e's node) can use a second, which TCG runs on a second
  # host thread.
  -machine q35,accel=tcg,vmport=off,smbus=off,sata=off,i8042=off
  -cpu qemu64 -smp "$cpus" -m "$mem"
  -nodefaults -nographic -no-reboot "${net[@]}"
  -kernel "$kdir/vmlinux" -initrd "$kdir/initramfs.cpio"
  # quiet/loglevel: keep the console log short; panic=-1 with -no-reboot
  # turns a guest panic into a QEMU exit instead of a hang.
  -append "console=ttyS0 quiet loglevel=1 panic=-1 mitigations=off 8250.nr_uarts=1$kernel_extra"
  -chardev "file,id=console,path=$console_path"
  -serial chardev:console
  -device virtio-serial-pci,id=vser
  -chardev "file,id=out,path=/dev/fd/$out_fd"
  -device virtserialport,bus=vser.0,nr=1,chardev=out,name=carve.stdout
  -chardev "file,id=err,path=/dev/fd/$err_fd"
  -device virtserialport,bus=vser.0,nr=2,chardev=err,name=carve.stderr
  # Feeds the guest's entropy pool, so getrandom() never waits at boot.
  -device virtio-rng-pci
  # multidevs=remap: / spans several host filesystems; keep inode numbers
  # unique in the guest.
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
  -fsdev "local,id=job,path=$job/share,security_model=none,multidevs=remap"
  -device virtio-9p-pci,fsdev=job,mount_tag=carvejob
)
for i in "${!vm_shares[@]}"; do
  qemu+=(-fsdev "local,id=share$i,path=${vm_shares[i]},security_model=none,multidevs=remap"
    -device "virtio-9p-pci,fsdev=share$i,mount_tag=carveshare$i")
done
[[ -z $disk_dir ]] || mkdir -p -- "$disk_dir" || vm_die "cannot make --disk-dir $disk_dir"
for ((i = 0; i < disks; i++)); do
  disk=${disk_dir:-$job/disks}/disk$i.raw
  # A kept disk is reused as it is (truncate would cut a larger one).
  [[ -n $disk_dir && -f $disk ]] || truncate -s "$disk_size" -- "$disk" || vm_die "bad --disk-size $disk_size"
  # cache=unsafe: the host never syncs the file, which matters only if the
  # host itself crashes; a write the guest saw done is in the file, so a
  # kept disk holds it even when QEMU is killed. discard/detect-zeroes=unmap:
  # zeroing (mkfs, lvcreate wiping) punches holes instead of writing zeros.
  qemu+=(-drive "if=none,id=disk$i,file=$disk,format=raw,cache=unsafe,discard=unmap,detect-zeroes=unmap"
    -device "virtio-blk-pci,drive=disk$i,serial=carve-disk$i")
done

start=$EPOCHREALTIME
# timeout(1) runs QEMU in its own process group and forwards TERM to it.
timeout -k 10 "$timeout_s" "${qemu[@]}" </dev/null &
qemu_pid=$!
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=''
end=$EPOCHREALTIME

# QEMU has closed its ends; close ours so the cats see EOF and drain.
exec {out_fd}>&- {err_fd}>&-
[[ $console -eq 1 ]] && exec {con_fd}>&-
wait "$out_cat" "$err_cat" 2>/dev/null || true

show_console() {
  [[ -s $job/console.log ]] || return 0
  vm_log "last console lines:"
  # Drop carriage returns and the firmware's terminal escape sequences.
  tail -n 30 -- "$job/console.log" |
    sed 's/\r//g; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g; s/^/  | /' >&2
}

if [[ $verbose -eq 1 ]]; then
  # EPOCHREALTIME has microseconds; drop the dot to do integer arithmetic.
  ms=$(((${end/./} - ${start/./}) / 1000))
  vm_log "VM ran $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s;" \
    "COMMAND ran from guest uptime $(cat "$job/share/started" 2>/dev/null || echo '?') s" \
    "to $(cat "$job/share/finished" 2>/dev/null || echo '?') s"
fi

if [[ -f $job/share/rc ]]; then
  rc=$(<"$job/share/rc")
  [[ $qemu_rc -eq 124 ]] && vm_log "warning: COMMAND finished but the VM did not power off before the timeout"
  exit "$rc"
fi
if [[ $qemu_rc -eq 124 ]]; then
  vm_log "timed out after $timeout_s s; QEMU killed"
  show_console
  exit 124
fi
vm_log "the VM stopped before COMMAND finished (QEMU exit status $qemu_rc): boot or guest setup failure"
show_console
exit 125
