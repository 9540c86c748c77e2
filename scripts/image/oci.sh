# shellcheck shell=bash
# oci_archive REF OUT ENTRYPOINT [FILE:DEST ...] -- an OCI image archive of
# static files on an empty base (the way distroless sidecar images are
# made): each FILE copied to DEST, ENTRYPOINT as the image's entrypoint,
# named REF in the archive. Sourced by the scripts that make the e2e's
# images; buildah, no daemon, no registry. The build container and image
# are removed from buildah's storage afterwards: the archive is the product.
oci_archive() {
	local ref=$1 out=$2 entrypoint=$3 c spec
	shift 3
	c=$(buildah from --pull=never scratch)
	for spec in "$@"; do
		buildah copy "$c" "${spec%%:*}" "${spec#*:}" >/dev/null
	done
	buildah config --entrypoint "[\"$entrypoint\"]" \
		--env PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin "$c"
	buildah commit -q --rm --timestamp "${SOURCE_DATE_EPOCH:-0}" "$c" "$ref" >/dev/null
	mkdir -p "$(dirname "$out")"
	rm -f "$out"
	buildah push -q "$ref" "oci-archive:$out:$ref" >/dev/null
	buildah rmi "$ref" >/dev/null
}

# oci_digest ARCHIVE -- the manifest digest of an OCI archive's one image:
# what a registry or a runtime knows it by (its name is no part of it).
oci_digest() {
	tar -xOf "$1" index.json | jq -er '.manifests | if length == 1 then .[0].digest else error("not one image") end'
}

# build_again ARCHIVE REF VERSION -- builds Carve's image once more, named
# REF, with VERSION (the first build's: a tree made dirty meanwhile would
# change the binary), and fails unless its digest is ARCHIVE's: two
# builds, one digest, or the build is not reproducible (scripts/image/
# build.sh says what makes it so). make test (image-again) and make
# release both check it here.
build_again() {
	local archive=$1 ref=$2 version=$3 tmp first second
	tmp=$(mktemp -d)
	IMAGE=$ref VERSION=$version "$(dirname "${BASH_SOURCE[0]}")/build.sh" "$tmp/again.tar" || { rm -rf "$tmp"; return 1; }
	first=$(oci_digest "$archive") second=$(oci_digest "$tmp/again.tar")
	rm -rf "$tmp"
	if [[ $first != "$second" ]]; then
		echo "two builds of Carve's image gave two digests, $first and $second: the build is not reproducible; unpack both archives' last layers and compare them" >&2
		return 1
	fi
	echo "two builds, one digest $first"
}
