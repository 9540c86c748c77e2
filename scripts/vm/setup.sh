#!/usr/bin/env bash
# Prepare everything run.sh needs to boot a throw-away VM with real
# device-mapper: host packages, Debian's kernel (unpacked, never installed),
# an uncompressed vmlinux, a depmod'ed module tree and a busybox initramfs.
#
# Idempotent: when everything is in place it only checks and prints the paths.
# Network: only apt-get, against the machine's configured Debian mirror.
#
# Usage: scripts/vm/setup.sh
#        scripts/vm/setup.sh --udev  (the udev package for the production
#                                     profile, unpacked; prints its tree)
# Env:   CARVE_VM_CACHE  cache directory (default ~/.cache/carve-vm)
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

# The kernel is emulated (TCG) in the guest, so every module loaded at boot
# costs time: the initramfs carries only what is needed to reach the host's /
# over 9p, see the disks, talk back to the host, and use device-mapper.
INITRAMFS_MODULES=(virtio_pci virtio_blk virtio_console virtio_rng
  9pnet_virtio 9p overlay dm_mod)

# Run a command as root: directly when we are root (the CI case), else through
# sudo when there is one.
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo -- "$@"
  else
    vm_die "need root to run: $*"
  fi
}

apt_updated=0
apt_update_once() {
  if [[ $apt_updated -eq 0 ]]; then
    vm_log "apt-get update"
    as_root apt-get -o Acquire::Retries=3 update -qq >&2
    apt_updated=1
  fi
}

ensure_packages() {
  local missing=() pkg status
  for pkg in "${VM_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [[ $status == installed ]] || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  vm_log "installing: ${missing[*]}"
  # apt-get update only when something must be installed: it is the slow,
  # network-bound part and a no-op run must stay fast.
  apt_update_once
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# Print "PACKAGE VERSION" of the kernel package linux-image-amd64 currently
# depends on, e.g. "linux-image-6.1.0-56-amd64 6.1.192-2". Empty when apt's
# package lists do not know it (a fresh machine that never ran apt-get update).
resolve_kernel() {
  local dep pkg ver
  dep=$(apt-cache show --no-all-versions linux-image-amd64 2>/dev/null |
    awk '/^Depends:/ && !n++ { sub(/^Depends: */, ""); print }')
  # "linux-image-6.1.0-56-amd64 (= 6.1.192-2)"
  [[ $dep =~ ^(linux-image-[^ ,]+)( \(= ([^\)]+)\))? ]] || return 0
  pkg=${BASH_REMATCH[1]}
  ver=${BASH_REMATCH[3]}
  if [[ -z $ver ]]; then
    ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" && !n++ { print $2 }')
  fi
  [[ -n $ver && $ver != "(none)" ]] || return 0
  printf '%s %s\n' "$pkg" "$ver"
}

# resolve_kernel, memoised: apt-cache takes about a second per call (this
# machine's apt keeps no binary package cache), which would dominate a no-op
# run. The answer only changes when apt-get update rewrites the lists dir.
resolve_kernel_cached() {
  local memo=$VM_CACHE/resolved lists_mtime line
  lists_mtime=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
  if [[ -f $memo ]]; then
    line=$(<"$memo")
    if [[ $line == "$lists_mtime "* ]]; then
      printf '%s\n' "${line#* }"
      return 0
    fi
  fi
  line=$(resolve_kernel)
  [[ -z $line ]] || printf '%s %s\n' "$lists_mtime" "$line" >"$memo"
  printf '%s\n' "$line"
}

# Download PACKAGE=VERSION into directory $3. apt drops privileges to _apt
# while downloading, so fetch into a scratch dir that user may write, to avoid
# an "unsandboxed download" warning.
download_deb() {
  local pkg=$1 ver=$2 dest=$3 scratch
  scratch=$(mktemp -d)
  if [[ $EUID -eq 0 ]] && getent passwd _apt >/dev/null; then
    chown _apt "$scratch"
  fi
  if ! (cd "$scratch" && apt-get -o Acquire::Retries=3 download -q "$pkg=$ver" >&2); then
    rm -rf -- "$scratch"
    return 1
  fi
  mv -- "$scratch"/*.deb "$dest/"
  rm -rf -- "$scratch"
}

# download_deb, once more after apt-get update when it fails: the package
# lists may name a version the mirror has since dropped.
fetch_deb() {
  download_deb "$@" && return
  apt_update_once
  download_deb "$@"
}

# Read a little-endian unsigned integer of $3 bytes at offset $2 of file $1.
read_le() {
  od -An -tu"$3" -j "$2" -N "$3" -- "$1" | tr -d ' '
}

# Turn a bzImage into the uncompressed ELF vmlinux it carries. QEMU boots that
# ELF through its PVH entry point, skipping the bzImage's self-decompression,
# which takes seconds under TCG. Layout (Documentation/x86/boot.rst): the
# protected-mode code starts after (setup_sects + 1) 512-byte sectors;
# payload_offset (0x248) and payload_length (0x24c), relative to it, locate the
# compressed kernel, which ends with its 4-byte uncompressed size.
extract_vmlinux() {
  local bzimage=$1 out=$2 setup_sects payload_offset payload_length start magic
  setup_sects=$(read_le "$bzimage" $((0x1f1)) 1)
  [[ $setup_sects -eq 0 ]] && setup_sects=4
  payload_offset=$(read_le "$bzimage" $((0x248)) 4)
  payload_length=$(read_le "$bzimage" $((0x24c)) 4)
  start=$(((setup_sects + 1) * 512 + payload_offset))
  magic=$(od -An -tx1 -j "$start" -N 6 -- "$bzimage" | tr -d ' \n')
  local decompress
  case $magic in
    fd377a585a00*) decompress=(xz -dc) ;;
    28b52ffd*) decompress=(zstd -dcq) ;;
    1f8b*) decompress=(gzip -dc) ;;
    5d00*) decompress=(xz -dc --format=lzma) ;;
    425a68*) decompress=(bzip2 -dc) ;;
    *) vm_die "unknown kernel payload compression (magic $magic) in $bzimage" ;;
  esac
  dd if="$bzimage" iflag=skip_bytes,count_bytes skip="$start" \
    count=$((payload_length - 4)) bs=1M status=none | "${decompress[@]}" >"$out"
  [[ $(od -An -tx1 -N 4 -- "$out" | tr -d ' \n') == 7f454c46 ]] ||
    vm_die "payload of $bzimage is not an ELF file"
  # Note type 0x12 is XEN_ELFNOTE_PHYS32_ENTRY, the PVH entry QEMU needs to
  # boot an ELF kernel with -kernel; without it QEMU would refuse the file.
  if command -v readelf >/dev/null; then
    local notes
    notes=$(readelf -n -- "$out")
    [[ $notes == *'note type: (0x00000012)'* ]] ||
      vm_die "$out has no PVH entry note; cannot boot it with -kernel"
  fi
}

# Unpack kernel package $1=$2 into $3 (a fresh directory) and prepare it.
build_kernel() {
  local pkg=$1 ver=$2 dir=$3 deb kver
  mkdir -p -- "$dir/tree"
  fetch_deb "$pkg" "$ver" "$dir"
  deb=$(echo "$dir"/*.deb)
  # dpkg-deb --fsys-tarfile rather than dpkg -i: installing would rewrite the
  # host's /boot and bootloader.
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir/tree"
  rm -f -- "$deb"
  local moddirs=("$dir"/tree/lib/modules/*/)
  [[ ${#moddirs[@]} -eq 1 ]] || vm_die "expected one module tree in $deb"
  kver=$(basename -- "${moddirs[0]}")
  [[ -f $dir/tree/boot/vmlinuz-$kver ]] || vm_die "no boot/vmlinuz-$kver in $deb"
  extract_vmlinux "$dir/tree/boot/vmlinuz-$kver" "$dir/vmlinux"
  # The package's postinst would run depmod; without it modules.dep is
  # missing and modprobe (host kmod, used in the guest) cannot resolve
  # dependencies.
  depmod -b "$dir/tree" "$kver"
  printf '%s\n' "$kver" >"$dir/kver"
  printf '%s %s\n' "$pkg" "$ver" >"$dir/package"
  touch -- "$dir/.complete"
}

# Build the initramfs for kernel dir $1: busybox, /init, and the modules of
# INITRAMFS_MODULES with their dependencies, decided by the host's modprobe
# against the unpacked tree and insmod'ed by /init in that order.
build_initramfs() {
  local dir=$1 stamp=$2 kver staging mod line path
  kver=$(<"$dir/kver")
  staging=$(mktemp -d)
  mkdir -p -- "$staging"/{bin,sbin,dev,proc,sys,mnt,newroot,lib/carve-modules}
  cp -- "$(command -v busybox)" "$staging/bin/busybox"
  ln -s busybox "$staging/bin/sh"
  cp -- "$VM_DIR/init.sh" "$staging/init"
  chmod 755 -- "$staging/init"
  # The kernel runs request_module() helpers (e.g. ext4 on first mount) in the
  # initramfs' root, not in the chroot the job runs in: point it at a wrapper
  # that runs the host's modprobe inside the job's root, where the modules
  # are. That root is mounted over the initramfs' / (init.sh), out of reach
  # of paths from the initramfs, but it is the helper's working directory:
  # kernel threads share init's, and init moved it there.
  printf '#!/bin/sh\nexec /bin/busybox chroot . /sbin/modprobe "$@"\n' \
    >"$staging/sbin/carve-modprobe"
  chmod 755 -- "$staging/sbin/carve-modprobe"
  local -A seen=()
  local n=0
  for mod in "${INITRAMFS_MODULES[@]}"; do
    while read -r line; do
      [[ $line == insmod\ * ]] || continue # "builtin X" needs no loading
      path=${line#insmod }
      path=${path%% *}
      [[ -n ${seen[$path]:-} ]] && continue
      seen[$path]=1
      n=$((n + 1))
      cp -- "$path" "$staging/lib/carve-modules/$(printf '%03d' "$n")-$(basename -- "$path")"
    done < <(modprobe -d "$dir/tree" -S "$kver" --show-depends "$mod")
  done
  # Uncompressed: the emulated kernel would spend longer inflating it than
  # QEMU spends loading the extra megabytes.
  (cd "$staging" && find . -print0 | LC_ALL=C sort -z |
    cpio --quiet --null -o -H newc --reproducible -R 0:0) >"$dir/initramfs.cpio.tmp"
  rm -rf -- "$staging"
  mv -f -- "$dir/initramfs.cpio.tmp" "$dir/initramfs.cpio"
  printf '%s\n' "$stamp" >"$dir/initramfs.stamp"
}

# The udev package for the production profile (run.sh --profile
# production), unpacked into the cache, never installed: installing it
# would start udevd on the host. Its version is the host's systemd's (udevd
# links libsystemd-shared of the same version, which the host has).
# Prints the tree's directory.
ensure_udev() {
  local ver dir
  ver=$(dpkg-query -W -f='${Version}' systemd 2>/dev/null) ||
    vm_die "the production profile needs the host's systemd package (for libsystemd-shared)"
  dir=$VM_CACHE/udev/$ver
  if [[ ! -f $dir/.complete ]]; then
    vm_log "unpacking udev $ver for the production profile"
    rm -rf -- "$dir" "$dir.partial"
    mkdir -p -- "$dir.partial/tree"
    fetch_deb udev "$ver" "$dir.partial"
    dpkg-deb --fsys-tarfile "$dir.partial"/*.deb | tar -x -C "$dir.partial/tree"
    rm -f -- "$dir.partial"/*.deb
    touch -- "$dir.partial/.complete"
    mv -- "$dir.partial" "$dir"
  fi
  printf '%s\n' "$dir/tree"
}

# Serialise concurrent setups (e.g. parallel run.sh calls on a cold cache):
# held until the script exits.
lock_cache() {
  mkdir -p -- "$VM_CACHE"
  exec 9>"$VM_CACHE/.lock"
  flock 9
}

main() {
  if [[ ${1:-} == --udev ]]; then
    lock_cache
    ensure_udev
    return
  fi
  ensure_packages
  mkdir -p -- "$VM_CACHE/kernel"
  lock_cache

  local resolved pkg ver dir
  resolved=$(resolve_kernel_cached)
  if [[ -z $resolved ]]; then
    apt_update_once
    resolved=$(resolve_kernel_cached)
  fi
  if [[ -z $resolved ]]; then
    [[ -f $VM_CACHE/current/.complete ]] ||
      vm_die "cannot resolve the package linux-image-amd64 depends on"
    vm_log "warning: apt cannot resolve linux-image-amd64; using cached kernel"
    dir=$(cd -- "$VM_CACHE/current" && pwd -P)
  else
    read -r pkg ver <<<"$resolved"
    dir=$VM_CACHE/kernel/${pkg#linux-image-}_$ver
    if [[ ! -f $dir/.complete ]]; then
      vm_log "preparing kernel $pkg $ver"
      rm -rf -- "$dir" "$dir.partial"
      # Build aside and rename, so an interrupted run leaves no half-made
      # directory that a later run would take for complete.
      build_kernel "$pkg" "$ver" "$dir.partial"
      mv -- "$dir.partial" "$dir"
    fi
  fi

  local stamp
  stamp=$(vm_initramfs_stamp)
  if [[ ! -f $dir/initramfs.cpio || $(cat -- "$dir/initramfs.stamp" 2>/dev/null) != "$stamp" ]]; then
    vm_log "building initramfs"
    build_initramfs "$dir" "$stamp"
  fi

  ln -sfn -- "kernel/$(basename -- "$dir")" "$VM_CACHE/current"
  # Drop kernels linux-image-amd64 no longer points to: each is ~400 MB.
  local old
  for old in "$VM_CACHE"/kernel/*; do
    [[ $old == "$dir" ]] || rm -rf -- "$old"
  done

  local kver
  kver=$(<"$dir/kver")
  printf 'cache:     %s\n' "$VM_CACHE"
  printf 'kernel:    %s\n' "$dir/vmlinux"
  printf 'initramfs: %s\n' "$dir/initramfs.cpio"
  printf 'modules:   %s\n' "$dir/tree/lib/modules/$kver"
}

main "$@"
