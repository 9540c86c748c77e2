# shellcheck shell=bash disable=SC2034 # variables are used by the sourcing scripts
# Helpers shared by setup.sh and run.sh. Sourced, never executed.

# The directory holding these scripts, whatever the caller's working directory.
VM_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)

# Everything downloaded or built lives here; kernels are keyed by package and
# version below it, so a kernel update never clobbers a kernel in use.
VM_CACHE=${CARVE_VM_CACHE:-${HOME:?HOME must be set}/.cache/carve-vm}

# Debian packages the harness needs on the host: QEMU itself, the tools the
# guest runs from the host's own / (lvm2, thin tools, mkfs, cryptsetup for
# encrypted volumes, SELinux's policy and load_policy for the boot with
# SELinux on, strace to kill an lvm2 command at a chosen write), and what
# setup.sh uses to build the boot files. The policy
# changes nothing on a host whose kernel runs without SELinux.
VM_PACKAGES=(qemu-system-x86 lvm2 thin-provisioning-tools e2fsprogs xfsprogs
  cryptsetup-bin busybox-static kmod cpio xz-utils binutils zstd
  selinux-policy-default strace)

# The initramfs depends on init.sh and on how setup.sh assembles it; hashing
# both lets run.sh notice that a rebuild is due after either one was edited.
vm_initramfs_stamp() {
  cat -- "$VM_DIR/init.sh" "$VM_DIR/setup.sh" | sha256sum | cut -c1-16
}

vm_log() {
  printf 'carve-vm: %s\n' "$*" >&2
}

vm_die() {
  vm_log "error: $*"
  exit 1
}
