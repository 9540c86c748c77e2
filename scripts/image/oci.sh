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
