#!/usr/bin/env bash
# make release: what a user installs Carve from, every image pinned by
# digest, in OUT (default _output/release):
#   images/NAME.tar     OCI archives: carve (the Dockerfile, make image's
#                       build) and the four CSI sidecars at the versions
#                       Carve is tested with (the binaries the e2e runs,
#                       scripts/k8s/build.sh, on an empty base), each named
#                       REGISTRY/NAME:TAG inside;
#   images.txt          NAME REGISTRY/NAME:TAG REGISTRY/NAME@sha256:...,
#                       a line per image: its name in the archive, then as
#                       the manifests name it;
#   kubernetes/         deploy/kubernetes (base, crds, examples, overlays)
#                       with the base's images: pinned (newName@digest);
#   carve-X.Y.Z.tgz     the Helm chart, its values pinned the same way;
#   sbom.spdx.json      SPDX 2.3: Carve's image, its Go modules (read from
#                       the binary in the image) and Debian packages (the
#                       image's dpkg status);
#   SHA256SUMS          of every file above.
# Carve's image is built twice and the release is refused unless both
# builds give one digest (scripts/image/build.sh says what makes that so).
# With --from-image, make image's archive is taken as it is instead (the
# e2e installs from such a release: the same pinning, chart and loading
# steps as a user's, without the second build); its reference names the
# registry and version, REGISTRY/carve:VERSION.
# Nothing is pushed: deploy/README.md (Install from a release) says how to
# load the archives into the nodes' runtime or copy them to a registry.
#
# usage: scripts/release.sh [--from-image ARCHIVE] [OUT]
# Env: VERSION (Carve's tag, e.g. v0.1.0), REGISTRY (the images'
# repository prefix, e.g. registry.example.com/carve; the default
# localhost/carve names images nobody serves: load them), SOURCE_DATE_EPOCH.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$repo"
# shellcheck source=goenv.sh
source scripts/goenv.sh
# shellcheck source=k8s/versions.sh
source scripts/k8s/versions.sh
# shellcheck source=image/oci.sh
source scripts/image/oci.sh
from=
if [[ ${1:-} == --from-image ]]; then
	from=${2:?usage: release.sh [--from-image ARCHIVE] [OUT]}
	shift 2
fi
out=${1:-_output/release}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export SOURCE_DATE_EPOCH

log() { printf 'carve-release: [%ds] %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ref ARCHIVE: the reference an OCI archive's one image is named by.
ref() { tar -xOf "$1" index.json | jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]'; }

if [[ $from ]]; then
	carve_ref=$(ref "$from")
	[[ $carve_ref =~ ^(.+)/carve:(v[^:/]+)$ ]] || die "$from: reference $carve_ref is not REGISTRY/carve:VERSION"
	registry=${BASH_REMATCH[1]} version=${BASH_REMATCH[2]}
else
	version=${VERSION:?VERSION is not set: run make release}
	registry=${REGISTRY:-localhost/carve}
	registry=${registry%/}
	carve_ref=$registry/carve:$version
fi
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "version $version: want vX.Y.Z"
rm -rf "$out"
mkdir -p "$out/images"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ $from ]]; then
	cp "$from" "$out/images/carve.tar"
	first=$(oci_digest "$from")
	log "Carve's image $carve_ref, as built: $first"
else
	log "Carve's image $carve_ref, built twice"
	IMAGE=$carve_ref VERSION=$version scripts/image/build.sh "$out/images/carve.tar"
	first=$(oci_digest "$out/images/carve.tar")
	again=$(build_again "$out/images/carve.tar" "$carve_ref" "$version") || die "$carve_ref: the release is refused"
	log "$again"
fi

log "the sidecars, from the binaries the e2e runs"
bin=$(scripts/k8s/build.sh | tail -n 1)
for s in provisioner:$PROVISIONER_VERSION attacher:$ATTACHER_VERSION resizer:$RESIZER_VERSION snapshotter:$SNAPSHOTTER_VERSION; do
	name=csi-${s%%:*}
	oci_archive "$registry/$name:${s#*:}" "$out/images/$name.tar" "/$name" "$bin/$name:/$name"
done

log "the manifests and the chart, pinned by digest"
mkdir -p "$out/kubernetes" "$tmp/chart"
cp -r deploy/kubernetes/. "$out/kubernetes/"
cp -r deploy/helm/carve "$tmp/chart/"
go run ./scripts/release pin -images "$out/images" \
	-kustomization "$out/kubernetes/base/kustomization.yaml" -values "$tmp/chart/carve/values.yaml"
"$bin/helm" package "$tmp/chart/carve" -d "$out" >/dev/null

for a in "$out"/images/*.tar; do
	r=$(ref "$a")
	echo "$(basename "$a" .tar) $r ${r%:*}@$(oci_digest "$a")"
done >"$out/images.txt"

log "the software bill of materials"
c=$(buildah from -q "oci-archive:$out/images/carve.tar")
mnt=$(buildah mount "$c")
rc=0
go run ./scripts/release sbom -rootfs "$mnt" -binary "$mnt/usr/local/bin/carve" \
	-name carve -version "$version" -digest "$first" -out "$out/sbom.spdx.json" || rc=$?
buildah umount "$c" >/dev/null
buildah rm "$c" >/dev/null
((rc == 0)) || die "sbom failed"

(cd "$out" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs sha256sum) >"$out/SHA256SUMS"
log "release $version in $out:"
cat "$out/images.txt" >&2
