#!/bin/bash
# Stage 2 of the carve-vm guest: runs as root under the host's own bash in
# the chroot that init.sh built (the host's / over 9p plus a tmpfs overlay).
# run.sh copies this file and config.sh into the "carvejob" share.
#
# Finishes the guest environment, runs the caller's COMMAND with its output
# on the virtio ports that reach run.sh's stdout and stderr, and leaves the
# exit status in the job share. Errors before COMMAND go to the console log.
# shellcheck disable=SC2154 # the vm_* variables come from config.sh
set -uo pipefail

job=/run/carve-vm/job
host=/run/carve-vm/host

fail() {
  echo "carve-vm guest: $*" >&2
  exit 1
}

# Declares vm_cwd, vm_argv, vm_env, vm_shares, vm_overlays, vm_moddir and
# vm_modules (written by run.sh with declare -p).
# shellcheck source=/dev/null
source "$job/config.sh" || fail "cannot read $job/config.sh"

# The Debian kernel's modules, where modprobe looks for them. Reached through
# the host view: the cache dir may sit under the host's /tmp, which the
# guest's own /tmp hides.
kver=$(uname -r)
mkdir -p "/lib/modules/$kver"
mount --bind "$host$vm_moddir" "/lib/modules/$kver" || fail "cannot bind the module tree"

# Directories of the caller that the guest's fresh /tmp or /run hide (its
# working dir, COMMAND's dir): overlay them from the host view, so they look
# like the rest of / (host content, writes kept in RAM).
for i in "${!vm_overlays[@]}"; do
  d=${vm_overlays[i]}
  o=/run/carve-vm/overlay/$i
  mkdir -p "$o/upper" "$o/work" "$d"
  mount -t overlay -o "lowerdir=$host$d,upperdir=$o/upper,workdir=$o/work" overlay "$d" 2>/dev/null ||
    mount --bind -o ro "$host$d" "$d" || fail "cannot expose $d"
done

# --share dirs: writable 9p mounts at their host paths (sorted parents first).
for i in "${!vm_shares[@]}"; do
  d=${vm_shares[i]}
  mkdir -p "$d"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap "carveshare$i" "$d" ||
    fail "cannot mount share $d"
done

# stripped_profile: no udev runs in the guest: LVM must create device nodes
# itself and not wait for udev. DM_DISABLE_UDEV=1 does that too, but
# programs may build their own environment for children; the config file
# holds regardless. The host's lvm.conf (filters, devices file) must not
# apply to the scratch disks.
stripped_profile() {
  mkdir -p /etc/lvm
  cat >/etc/lvm/lvm.conf <<'EOF'
# Written by carve-vm (scripts/vm/guest.sh) for a guest without udev.
devices {
	obtain_device_list_from_udev = 0
	external_device_info_source = "none"
	use_devicesfile = 0
}
activation {
	udev_sync = 0
	udev_rules = 0
	monitoring = 0
}
global {
	use_lvmpolld = 0
}
EOF
  : >/etc/lvm/lvmlocal.conf
}

# production_profile: the guest set up as users' nodes are (run.sh
# --profile production; scripts/vm/README.md says which host setting each
# piece mirrors). lvm.conf as Debian's lvm2 package writes it (every
# setting at lvm2's default: udev sync and rules, monitoring, event
# autoactivation on); lvmlocal.conf adds what RHEL 9 and
# a careful administrator add: the devices file, in use and listing the
# scratch disks, and a thin pool autoextend policy for dmeventd.
production_profile() {
  [[ -n ${vm_udev_tree:-} ]] || fail "the production profile needs the udev tree (setup.sh --udev)"
  # udev's files over the guest's / (the tmpfs overlay: RAM only), directory
  # symlinks of a merged /usr kept.
  tar -C "$host$vm_udev_tree" -c . | tar -C / -x --keep-directory-symlink ||
    fail "cannot lay udev's files over /"
  # The node's own /etc/lvm, a fresh tmpfs: the host's, seen through 9p,
  # may be anything (the e2e's host node binds its private configuration
  # there in its namespace). lvm.conf as Debian's lvm2 package ships it:
  # empty sections, every setting at lvm2's default (lvm2 refuses a file
  # with no section at all).
  mkdir -p /etc/lvm
  mount -t tmpfs -o mode=0755 tmpfs /etc/lvm || fail "cannot mount a tmpfs on /etc/lvm"
  cat >/etc/lvm/lvm.conf <<'EOF'
# Written by carve-vm (scripts/vm/guest.sh), production profile: every
# setting at lvm2's default, as Debian ships lvm.conf (its sections hold
# only comments).
config {
}
devices {
}
allocation {
}
log {
}
backup {
}
shell {
}
global {
}
activation {
}
dmeventd {
}
EOF
  cat >/etc/lvm/lvmlocal.conf <<'EOF'
# Written by carve-vm (scripts/vm/guest.sh), production profile.
devices {
	use_devicesfile = 1
}
activation {
	thin_pool_autoextend_threshold = 80
	thin_pool_autoextend_percent = 20
}
EOF
  # The command profiles lvm2's package installs beside lvm.conf
  # (/etc/lvm/profile), lvmdbusd.profile among them, which Carve's lvm2
  # shells run with: a node has them, and without them every shell fails
  # to start and Carve runs its commands as processes.
  cp -r "$host/etc/lvm/profile" /etc/lvm/profile || fail "cannot copy lvm2's command profiles"
  [[ -f /etc/lvm/profile/lvmdbusd.profile ]] || fail "lvm2's lvmdbusd.profile is missing from the host's /etc/lvm/profile"
  # The devices file lists the scratch disks, as a RHEL 9 node's lists the
  # disks its administrator gave lvm2; listed at every boot, since the
  # guest's /etc is RAM (a node rebooted on its kept disks finds them
  # listed, as a real one finds its /etc).
  mkdir -p /etc/lvm/devices
  : >/etc/lvm/devices/system.devices
  local d
  for d in /dev/vd[a-z]; do
    [[ -b $d ]] || continue
    lvm lvmdevices -q --adddev "$d" || fail "lvm lvmdevices --adddev $d failed"
  done
  # dmeventd as dm-event.service starts it; lvm2 hands it the thin pools to
  # monitor (and extend, by the policy above).
  dmeventd || fail "dmeventd did not start"
  /lib/systemd/systemd-udevd --daemon || fail "systemd-udevd did not start"
  # What udevadm trigger does at boot (it refuses to run in a chroot): an
  # add event for every block device, so that udev's database knows each
  # one and lvm2's rules see the disks (autoactivating a complete VG).
  local u
  for u in /sys/class/block/*/uevent; do echo add >"$u"; done
  udevadm settle --timeout=120 || fail "udevadm settle timed out"
}

case ${vm_profile:-stripped} in
  production) production_profile ;;
  *) stripped_profile ;;
esac
echo carve-vm >/etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\tcarve-vm\n::1\tlocalhost ip6-localhost ip6-loopback\n' >/etc/hosts

# shellcheck disable=SC2086 # vm_modules is a space-separated list
[[ -z $vm_modules ]] || modprobe -a $vm_modules || fail "modprobe $vm_modules failed"

# nic_up brings up the interface with MAC $1 and gives it address $2. In the production profile udevd renames a new NIC
# (eth0 to enp0s2...) some moment after it appears: a name read before
# that is gone by the next command. The kernel renames no interface that
# is up, so once "ip link set up" has succeeded on a name, that name
# stays; until then, look it up again and retry.
nic_up() {
  local n nic
  for _ in $(seq 100); do
    nic=''
    for n in /sys/class/net/*; do
      [[ -e $n/device && $(<"$n/address") == "$1" ]] && nic=${n##*/}
    done
    if [[ -n $nic ]] && ip link set "$nic" up 2>/dev/null; then
      ip addr add "$2" dev "$nic"
      return
    fi
    sleep 0.1
  done
  return 1
}

[[ ${vm_net:-0} = 0 && -z ${vm_link_address:-} ]] || modprobe virtio_net || fail "modprobe virtio_net failed"
# run.sh --forward: QEMU's user-mode network; the host's forwarded ports
# answer at 10.0.2.100.
if [[ ${vm_net:-0} = 1 ]]; then
  nic_up "$vm_user_mac" 10.0.2.15/24 || fail "cannot bring up and address the NIC with MAC $vm_user_mac"
fi
# run.sh --link: the NIC on the segment shared with another VM.
if [[ -n ${vm_link_address:-} ]]; then
  nic_up "$vm_link_mac" "$vm_link_address" || fail "cannot bring up and address the NIC with MAC $vm_link_mac (--link)"
fi

out='' err=''
for p in /sys/class/virtio-ports/*; do
  case $(<"$p/name") in
    carve.stdout) out=/dev/${p##*/} ;;
    carve.stderr) err=/dev/${p##*/} ;;
  esac
done
[[ -n $out && -n $err ]] || fail "virtio ports carve.stdout/carve.stderr not found"

read -r uptime _ </proc/uptime
echo "$uptime" >"$job/started"

# env -i: COMMAND sees only what run.sh passed (CARVE_*, GO*, PATH, HOME,
# DM_DISABLE_UDEV); env then finds COMMAND along that PATH.
(cd -- "$vm_cwd" && exec env -i "${vm_env[@]}" "${vm_argv[@]}") </dev/null >"$out" 2>"$err"
rc=$?

read -r uptime _ </proc/uptime
echo "$uptime" >"$job/finished"
# Write then rename: run.sh must never read a half-written status.
echo "$rc" >"$job/rc.tmp" && mv "$job/rc.tmp" "$job/rc"
sync
