package lvmvol

import (
	"strconv"
	"strings"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Tags carried by every LV Carve creates. They are the volume's state.
const (
	// TagVolume marks an LV as Carve's: nothing without it is ever touched.
	TagVolume = "carve.dev/volume"
	// tagPending: lvcreate done, deactivation not yet (see doc.go).
	tagPending = "carve.dev/pending"
	// tagDeleting: deletion started; the wipe and lvremove must finish.
	tagDeleting = "carve.dev/deleting"
	// tagNamePrefix + the CSI name, when the name is a valid tag (for people
	// reading `lvs -o +tags`; identity comes from the LV name).
	tagNamePrefix = "carve.dev/name="
	// tagParamsPrefix + a digest of the creation parameters, so that a
	// CreateVolume retry with other parameters is told ALREADY_EXISTS.
	tagParamsPrefix = "carve.dev/params="
	// tagStripesPrefix / tagMirrorsPrefix + a count record the layout, so
	// that an extension can tell what it will take without asking lvm2
	// for segment details.
	tagStripesPrefix = "carve.dev/stripes="
	tagMirrorsPrefix = "carve.dev/mirrors="
	// tagEncrypted: the LV holds LUKS2 (encryption at rest). A snapshot of
	// such a volume carries it too, and so does a volume restored or cloned
	// from either: their bytes are the source's, header and ciphertext, so
	// they open with the source's key, and the node must never take them
	// for a blank device.
	tagEncrypted = "carve.dev/encrypted"
)

// createTags are the tags lvcreate sets, atomically with the LV itself,
// when creation takes more steps (see finishCreate): settledTags and
// the pending tag.
func createTags(req volume.CreateRequest) []string {
	return append(settledTags(req), tagPending)
}

// settledTags are the tags of a settled volume made for req.
func settledTags(req volume.CreateRequest) []string {
	tags := []string{TagVolume, tagParamsPrefix + req.ParamsDigest}
	if t := tagNamePrefix + req.Name; lvm.ValidateTag(t) == nil {
		tags = append(tags, t)
	}
	if req.Type.Stripes > 1 {
		tags = append(tags, tagStripesPrefix+strconv.Itoa(req.Type.Stripes))
	}
	if req.Type.Mirrors > 0 {
		tags = append(tags, tagMirrorsPrefix+strconv.Itoa(req.Type.Mirrors))
	}
	if req.Encrypted {
		tags = append(tags, tagEncrypted)
	}
	return tags
}

// typeOf reads a volume's type back from its LV.
func typeOf(lv lvm.LV) volume.Type {
	stripes, _ := strconv.Atoi(tagValue(lv, tagStripesPrefix))
	mirrors, _ := strconv.Atoi(tagValue(lv, tagMirrorsPrefix))
	return volume.Type{Stripes: stripes, Mirrors: mirrors, ThinPool: lv.PoolLV}
}

// tagValue returns the value of the first tag with prefix, or "".
func tagValue(lv lvm.LV, prefix string) string {
	for _, t := range lv.Tags {
		if v, ok := strings.CutPrefix(t, prefix); ok {
			return v
		}
	}
	return ""
}
