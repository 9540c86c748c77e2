#!/usr/bin/env bash
# make image: Carve's image as an OCI archive, built by buildah from the
# repository's own Dockerfile, with no Docker daemon and no registry.
#
# The Dockerfile's two base images are made here instead of pulled:
#   debian:bookworm-slim   mmdebstrap (minbase) from this machine's apt
#                          sources, made slim the way Debian's slim image is:
#                          dpkg path excludes for docs, man pages and locales
#                          (kept in the image, so the Dockerfile's own
#                          apt-get install leaves them out too) and no apt
#                          lists;
#   golang:<ver>-bookworm  that plus the Go toolchain this machine builds
#                          with (its version must be the Dockerfile's).
# Both are tagged under localhost/, where `FROM debian:bookworm-slim`
# finds them with --pull=never: nothing is ever pulled.
#
# The build stage's `go mod download` and `go build` use this machine's Go
# module cache (mounted, GOPROXY=off: the build never reaches the network
# for Go) and build cache (mounted: the same toolchain and flags reuse it).
#
# Reproducible: two builds of one commit on one day give one digest (make
# release checks it). Every time written into the image is
# SOURCE_DATE_EPOCH (default: the commit's time): the files' and the
# configs' (buildah --timestamp); the base's, which is the day's, is that
# day's midnight (UTC), whichever commit made it first; the Go build is
# -trimpath; the Dockerfile removes the one file that recorded inode times.
# The Debian packages are the mirror's of the day, as the base is.
#
# usage: scripts/image/build.sh [OUT]   (default _output/image/carve.tar)
# Env: IMAGE (the reference; the Makefile passes deploy/'s), VERSION,
# SOURCE_DATE_EPOCH.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$repo"
# The build stage compiles with the machine's build cache mounted, and with
# the flags of every other build here it finds carve compiled already.
# shellcheck source=../goenv.sh
source scripts/goenv.sh
out=${1:-_output/image/carve.tar}
image=${IMAGE:?IMAGE is not set: run make image}
version=${VERSION:-dev}
cache=${CARVE_IMAGE_CACHE:-$HOME/.cache/carve-image}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH

log() { printf 'carve-image: [%ds] %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }

for t in buildah mmdebstrap; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install buildah mmdebstrap)"
done
# The only build stage's base and the Go release it names.
golang_ref=$(awk 'toupper($1)=="FROM" && $2 ~ /^golang:/ {print $2; exit}' Dockerfile)
[[ $golang_ref =~ ^golang:([0-9]+\.[0-9]+)-bookworm$ ]] || die "Dockerfile: build stage FROM $golang_ref, want golang:X.Y-bookworm"
go_minor=${BASH_REMATCH[1]}
go_version=$(go env GOVERSION)
[[ $go_version == "go$go_minor" || $go_version == go$go_minor.* ]] ||
	die "the Dockerfile builds with Go $go_minor, this machine has $go_version"

bud=(--pull=never --isolation=chroot)

# This machine's apt sources (deb822 or one-line), which the base image
# keeps: the Dockerfile's apt-get install uses them.
apt_sources() {
	local f
	for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
		[[ -s $f ]] && { echo "$f"; return; }
	done
	die "no Debian apt sources on this machine"
}

# label REF KEY: the value of an image's label, empty if it has none or
# there is no such image. (A grep of `buildah inspect` for KEY=VALUE never
# matched its JSON, so both bases were made again at every build.)
label() {
	buildah inspect --type image -f "{{index .OCIv1.Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}

# The slim Debian base, cached as a tar per recipe (this script) and day:
# Debian's security updates arrive daily, a stale base would keep old ones.
base_image() {
	local ref=localhost/debian:bookworm-slim key tar day
	day=$(date -u +%Y-%m-%d)
	key=$({ declare -f base_image; cat "$(apt_sources)"; } | sha256sum | cut -c1-12)-${day//-/}
	day=$(date -u -d "$day" +%s)
	if [[ $(label "$ref" carve.base.key) == "$key" ]]; then
		return
	fi
	tar=$cache/base-$key.tar
	if [[ ! -s $tar ]]; then
		mkdir -p "$cache"
		log "making debian:bookworm-slim with mmdebstrap"
		# --dpkgopt and --aptopt lines stay in the image (dpkg.cfg.d and
		# apt.conf.d/99mmdebstrap), so the Dockerfile's apt-get install leaves
		# docs out as well, and tries a failed download again (Retries).
		# merged-usr: /usr merged at setup, as Debian's images are; without
		# it bookworm pulls usrmerge and with it the whole of perl (40 MB).
		SOURCE_DATE_EPOCH=$day mmdebstrap --variant=minbase --mode=root --format=tar \
			--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
			--aptopt='Acquire::Languages "none"' \
			--aptopt='Acquire::Retries "3"' \
			--dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-include=/usr/share/doc/*/copyright' \
			--dpkgopt='path-exclude=/usr/share/man/*' \
			--dpkgopt='path-exclude=/usr/share/info/*' \
			--dpkgopt='path-exclude=/usr/share/locale/*' \
			--dpkgopt='path-include=/usr/share/locale/locale.alias' \
			--dpkgopt='path-exclude=/usr/share/lintian/*' \
			--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/apt "$1"/var/log/dpkg.log' \
			bookworm "$tar.tmp" "$(apt_sources)"
		mv "$tar.tmp" "$tar"
	fi
	local c
	c=$(buildah from --pull=never scratch)
	buildah add "$c" "$tar" / >/dev/null
	buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd bash --label "carve.base.key=$key" "$c"
	buildah commit -q --rm --timestamp "$day" "$c" "$ref" >/dev/null
	log "base image $ref (key $key)"
}

# The build stage's base: the Debian base and this machine's Go toolchain.
golang_image() {
	local ref=localhost/${golang_ref} key goroot c
	goroot=$(go env GOROOT)
	key=$(buildah inspect --type image -f '{{.FromImageID}}' localhost/debian:bookworm-slim)-$go_version
	if [[ $(label "$ref" carve.golang.key) == "$key" ]]; then
		return
	fi
	c=$(buildah from --pull=never localhost/debian:bookworm-slim)
	buildah copy "$c" "$goroot" /usr/local/go >/dev/null
	buildah config --env GOPATH=/go --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env GOTOOLCHAIN=local --workingdir /go --label "carve.golang.key=$key" "$c"
	buildah commit -q --rm "$c" "$ref" >/dev/null
	log "build image $ref ($go_version)"
}

base_image
golang_image

log "building $image from the Dockerfile"
buildah bud "${bud[@]}" --layers=false --timestamp "$SOURCE_DATE_EPOCH" \
	--volume "$(go env GOMODCACHE):/go/pkg/mod" \
	--volume "$(go env GOCACHE):/root/.cache/go-build" \
	--build-arg GOPROXY=off --build-arg "GOFLAGS=-mod=mod $GOFLAGS" \
	--build-arg "VERSION=$version" \
	-t "$image" -f Dockerfile .

mkdir -p "$(dirname "$out")"
rm -f "$out"
buildah push -q "$image" "oci-archive:$out:$image" >/dev/null
# Earlier builds' images, now untagged: gone, or the storage only grows.
buildah rmi --prune >/dev/null 2>&1 || true
log "$image: $out ($(du -h "$out" | cut -f1) archive)"
