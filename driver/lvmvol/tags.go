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
	// tagReadBPSPrefix and the like + a number record the volume's IO
	// limits (volume.IOLimits), each only when set: the node reads them
	// when it publishes the volume into a pod, and ModifyVolume changes
	// them. They are the limits' one record, on the LV itself, so that
	// every node call sees the limits the LV has now.
	tagReadBPSPrefix   = "carve.dev/rbps="
	tagWriteBPSPrefix  = "carve.dev/wbps="
	tagReadIOPSPrefix  = "carve.dev/riops="
	tagWriteIOPSPrefix = "carve.dev/wiops="
)

// limitTags are the tags that record l: none for no limit.
func limitTags(l volume.IOLimits) []string {
	var tags []string
	for _, f := range limitFields(&l) {
		if *f.value > 0 {
			tags = append(tags, f.prefix+strconv.FormatUint(*f.value, 10))
		}
	}
	return tags
}

// limitsOf reads a volume's IO limits from its LV's tags; a tag that does
// not read as a number (only lvm2 by hand makes one) limits nothing.
func limitsOf(lv lvm.LV) volume.IOLimits {
	var l volume.IOLimits
	for _, f := range limitFields(&l) {
		*f.value, _ = strconv.ParseUint(tagValue(lv, f.prefix), 10, 64)
	}
	return l
}

func limitFields(l *volume.IOLimits) []struct {
	prefix string
	value  *uint64
} {
	return []struct {
		prefix string
		value  *uint64
	}{{tagReadBPSPrefix, &l.ReadBPS}, {tagWriteBPSPrefix, &l.WriteBPS}, {tagReadIOPSPrefix, &l.ReadIOPS}, {tagWriteIOPSPrefix, &l.WriteIOPS}}
}

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
	return append(tags, limitTags(req.Limits)...)
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
