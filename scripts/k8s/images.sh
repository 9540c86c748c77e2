#!/usr/bin/env bash
# The e2e cluster's images besides Carve's, as OCI archives for
# `ctr images import` (no registry, no pull):
#   the CSI sidecars and snapshot-controller, from the binaries build.sh
#     made, under the official references deploy/ names (so the manifests
#     run exactly as a user gets them);
#   pause, the pod sandbox image (test/e2e/pause);
#   busybox, the workloads' image (Debian's static busybox and its applets).
#
# usage: scripts/k8s/images.sh OUTDIR PAUSE_BIN
# Writes OUTDIR/<name>.tar and OUTDIR/refs (one "name ref" line per image).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$here/versions.sh"
# shellcheck source-path=SCRIPTDIR source=../image/oci.sh
source "$here/../image/oci.sh"
out=${1:?usage: images.sh OUTDIR PAUSE_BIN}
pause=${2:?usage: images.sh OUTDIR PAUSE_BIN}

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

image csi-provisioner "$sig/csi-provisioner:$PROVISIONER_VERSION" /csi-provisioner "$K8S_BIN/csi-provisioner:/csi-provisioner"
image csi-attacher "$sig/csi-attacher:$ATTACHER_VERSION" /csi-attacher "$K8S_BIN/csi-attacher:/csi-attacher"
image csi-resizer "$sig/csi-resizer:$RESIZER_VERSION" /csi-resizer "$K8S_BIN/csi-resizer:/csi-resizer"
image csi-snapshotter "$sig/csi-snapshotter:$SNAPSHOTTER_VERSION" /csi-snapshotter "$K8S_BIN/csi-snapshotter:/csi-snapshotter"
image snapshot-controller "$sig/snapshot-controller:$SNAPSHOTTER_VERSION" /snapshot-controller "$K8S_BIN/snapshot-controller:/snapshot-controller"
image pause "$PAUSE_REF" /pause "$pause:/pause"

# busybox: the static binary and a link per applet, in a folder.
bb=$(mktemp -d)
trap 'rm -rf "$bb"' EXIT
mkdir -p "$bb/bin" "$bb/tmp"
cp /bin/busybox "$bb/bin/busybox"
for a in $(/bin/busybox --list); do
	[[ -e $bb/bin/$a ]] || ln -s busybox "$bb/bin/$a"
done
chmod 1777 "$bb/tmp"
image busybox "$BUSYBOX_REF" /bin/sh "$bb:/"

mv "$out/refs.tmp" "$out/refs"
echo "carve-k8s: images in $out: $(cut -d' ' -f1 "$out/refs" | tr '\n' ' ')" >&2
