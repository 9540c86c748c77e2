#!/bin/sh
# /init of the carve-vm initramfs, run by busybox sh as PID 1 in the guest.
#
# Builds the guest's root: the host's / (virtio-9p, read-only) under a tmpfs
# overlay, with fresh /dev, /proc, /sys, /run and /tmp, then runs stage 2
# (guest.sh, handed in by run.sh through the writable "carvejob" 9p share)
# inside it with the host's own bash, and powers off. PID 1 stays here so that
# power-off happens whatever stage 2 does.
# shellcheck shell=sh

export PATH=/bin:/sbin
/bin/busybox --install -s /bin

# Every failure ends in power-off: nobody can type into this console, and
# run.sh reports a missing exit status as a boot failure, showing this log.
fail() {
  echo "carve-vm init: $*" >/dev/console
  sync
  poweroff -f
  sleep 10
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Keep the console quiet: only emergencies reach it from now on.
dmesg -n 1

# Modules were copied in dependency order by setup.sh (NNN- prefixes).
# One retry: once, on a loaded host, the signature check of an unchanged
# dm-mod.ko failed ("Key was rejected by service") and the next boot loaded
# it; a whole CI run must not be lost to that.
for m in /lib/carve-modules/*.ko; do
  insmod "$m" || { sleep 1 && insmod "$m"; } || fail "insmod $m failed"
done

# msize: the largest the kernel's virtio 9p transport takes (125 pages);
# bigger messages mean fewer round trips through the emulated device.
p9='trans=virtio,version=9p2000.L,msize=512000'
mkdir -p /mnt/host /mnt/rw
# cache=loose: the host's / does not change under a job (writes go to the
# overlay); caching pages and dentries saves most 9p traffic.
mount -t 9p -o "$p9,cache=loose,ro" hostroot /mnt/host || fail "cannot mount the host's / over 9p"
mount -t tmpfs -o mode=0755 tmpfs /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay -o lowerdir=/mnt/host,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work overlay /newroot ||
  fail "cannot mount the overlay root"

r=/newroot
mount -t devtmpfs devtmpfs $r/dev || fail "cannot mount /dev"
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts $r/dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $r/dev/shm
# devtmpfs has no /dev/fd links; bash process substitution needs them.
ln -sf /proc/self/fd $r/dev/fd
ln -sf /proc/self/fd/0 $r/dev/stdin
ln -sf /proc/self/fd/1 $r/dev/stdout
ln -sf /proc/self/fd/2 $r/dev/stderr
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs $r/run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $r/tmp
mkdir -p $r/run/lock $r/run/carve-vm/job $r/run/carve-vm/host
chmod 1777 $r/run/lock
# A second view of the host's /, not hidden by the guest's /tmp and /run:
# stage 2 reaches the module tree and the caller's /tmp dirs through it.
mount -o bind /mnt/host $r/run/carve-vm/host
# cache=mmap: writes reach the host at once (the exit status must survive
# power-off) while mmap still works.
mount -t 9p -o "$p9,cache=mmap" carvejob $r/run/carve-vm/job || fail "cannot mount the job share"

echo /sbin/carve-modprobe >/proc/sys/kernel/modprobe
hostname carve-vm
ip link set lo up

# Put the new root over the initramfs' own, as switch_root does on a real
# machine, rather than only chroot into it: a mount namespace entered with
# setns (nsenter, `runc exec` into a container) is rooted at what is mounted
# over its root, and runc's pivot_root needs a root that is not the
# initramfs. PID 1 keeps the initramfs as its root (busybox, poweroff); its
# working directory, which the kernel's threads share, is the new root
# (see carve-modprobe in setup.sh).
cd $r || fail "cannot enter the new root"
mount --move . / || fail "cannot move the new root over the initramfs"
chroot . /bin/bash /run/carve-vm/job/guest.sh || echo "carve-vm init: stage 2 exited with status $?" >/dev/console
# Kept disks (run.sh --disk-dir) need the sync; a device the kernel hung
# on never finishes one, so it gets 60 s and power-off then comes
# without it (the exit status is on the 9p share already).
sync &
i=0
while [ $i -lt 60 ] && kill -0 $! 2>/dev/null; do
  sleep 1
  i=$((i + 1))
done
[ $i -lt 60 ] || echo "carve-vm init: sync did not finish in 60 s; powering off without it" >/dev/console
poweroff -f -n
# poweroff -f returns before the machine is off; PID 1 must not exit first,
# or the kernel panics.
sleep 60
