#!/usr/bin/env bash
# The e2e cluster's images besides the release's (Carve's and the CSI
# sidecars', scripts/release.sh), as OCI archives for `ctr images import`
# (no registry, no pull):
#   snapshot-controller, from the binary build.sh made, under the official
#     reference;
#   pause, the pod sandbox image (test/e2e/pause);
#   busybox, the workloads' image (Debian's static busybox and its applets).
#
# With --upstream, only the images the Kubernetes project's storage suite
# runs, under the references its e2e.test was built with
# (`e2e.test --list-images`) that the storage specs run: busybox and nginx
# (on busybox), agnhost (the static binary build.sh made, on the busybox
# rootfs) and glibc-dns-testing (Debian, as upstream).
#
# usage: scripts/k8s/images.sh OUTDIR PAUSE_BIN
#        scripts/k8s/images.sh --upstream OUTDIR
# Writes OUTDIR/<name>.tar and OUTDIR/refs (one "name ref" line per image).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$here/versions.sh"
# shellcheck source-path=SCRIPTDIR source=../image/oci.sh
source "$here/../image/oci.sh"
upstream=false
if [[ ${1:-} == --upstream ]]; then
	upstream=true
	shift
fi
usage="usage: images.sh OUTDIR PAUSE_BIN | --upstream OUTDIR"
out=${1:?$usage}
$upstream || pause=${2:?$usage}

# The official images' path; the tags are the versions built.
sig=registry.k8s.io/sig-storage
# The e2e's own images: localhost/ names, which no registry serves.
PAUSE_REF=localhost/carve-e2e/pause:1
BUSYBOX_REF=localhost/carve-e2e/busybox:1

mkdir -p "$out"
: >"$out/refs.tmp"
image() { # NAME REF ENTRYPOINT FILE:DEST...
	local name=$1 ref=$2
	shift 2
	oci_archive "$ref" "$out/$name.tar" "$@"
	echo "$name $ref" >>"$out/refs.tmp"
}

# debian_image NAME REF: the slim Debian base scripts/image/build.sh made
# (make image), under REF.
debian_image() {
	local base=localhost/debian:bookworm-slim c
	buildah inspect --type image "$base" >/dev/null 2>&1 ||
		{ echo "images.sh: no $base in buildah's storage: run make image first" >&2; exit 1; }
	c=$(buildah from --pull=never "$base")
	buildah commit -q --rm "$c" "$2" >/dev/null
	rm -f "$out/$1.tar"
	buildah push -q "$2" "oci-archive:$out/$1.tar:$2" >/dev/null
	buildah rmi "$2" >/dev/null
	echo "$1 $2" >>"$out/refs.tmp"
}

# busybox_rootfs DIR: Debian's static busybox and a link per applet.
busybox_rootfs() {
	mkdir -p "$1/bin" "$1/tmp"
	cp /bin/busybox "$1/bin/busybox"
	for a in $(/bin/busybox --list); do
		[[ -e $1/bin/$a ]] || ln -s busybox "$1/bin/$a"
	done
	chmod 1777 "$1/tmp"
}
bb=$(mktemp -d)
trap 'rm -rf "$bb"' EXIT
busybox_rootfs "$bb"

if $upstream; then
	# Every reference the suite's pods name (it names two busybox tags),
	# each its own archive (image NAME-TAG).
	suite_refs() {
		"$K8S_BIN/e2e.test" --list-images | grep -E "/e2e-test-images/$1:[^ ]+$" ||
			{ echo "images.sh: e2e.test lists no $1 image" >&2; exit 1; }
	}
	busybox_refs=$(suite_refs busybox)
	agnhost_refs=$(suite_refs agnhost)
	# nginx: upstream, nginx on Alpine (a busybox userland); the storage
	# specs only run shell commands in it (volumes' exec spec), never nginx.
	for ref in $busybox_refs $(suite_refs nginx); do
		n=${ref##*/}
		image "e2e-${n/:/-}" "$ref" /bin/sh "$bb:/"
	done
	# glibc-dns-testing: upstream, debian:bookworm-slim plus dnsutils and
	# coredns (test/images/glibc-dns-testing); the storage specs run shell
	# commands in it that busybox lacks (GNU dd's oflag=nocache). Made from
	# the slim Debian base make image built (what the DNS specs add is no
	# storage spec's business), with the base's command and no entrypoint.
	for ref in $(suite_refs glibc-dns-testing); do
		n=${ref##*/}
		debian_image "e2e-${n/:/-}" "$ref"
	done
	for ref in $agnhost_refs; do
		image "e2e-agnhost-${ref##*:}" "$ref" /agnhost "$bb:/" "$K8S_BIN/agnhost:/agnhost"
	done
	mv "$out/refs.tmp" "$out/refs"
	echo "carve-k8s: images in $out: $(cut -d' ' -f1 "$out/refs" | tr '\n' ' ')" >&2
	exit 0
fi

image snapshot-controller "$sig/snapshot-controller:$SNAPSHOTTER_VERSION" /snapshot-controller "$K8S_BIN/snapshot-controller:/snapshot-controller"
image pause "$PAUSE_REF" /pause "$pause:/pause"

# busybox: the workloads' image.
image busybox "$BUSYBOX_REF" /bin/sh "$bb:/"

mv "$out/refs.tmp" "$out/refs"
echo "carve-k8s: images in $out: $(cut -d' ' -f1 "$out/refs" | tr '\n' ' ')" >&2
