package lvmvol

import (
	"strconv"
	"strings"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// The tag schema: an LV's state.
//
// Everything Carve knows about an LV is in lvm2: its name and its tags
// (see doc.go). This file is the one place that defines those tags: every
// tag Carve writes is a constant below, with its meaning, and a row of
// schema, which names the functions that write and clear it.
// test/layout fails on a "carve.dev/" string anywhere else in Carve's
// code, TestTagSchema on one here that schema does not list, and the unit
// tests' fake lvm2 records every tag written that schema does not know
// (see TestMain). A tag's string is on-disk state of users' volumes: it
// never changes.
//
// A tag is a flag (carve.dev/held), or a record: a prefix ending in "="
// and a value (carve.dev/mirrors=2).
//
// # Kinds of LVs and their states
//
// Each of Carve's LVs is one of four kinds, told by one tag:
//
//	kind          told by             other tags
//	volume        carve.dev/volume    name, params, stripes, mirrors, encrypted, IO limits,
//	                                  source (made from one), wcache (given a write cache)
//	snapshot      carve.dev/snapshot  source, name, created, encrypted, group, group-size
//	frozen point  carve.dev/frozen    created, group, group-size (a group's instant)
//	cachevol      carve.dev/cache-of=
//
// An LV with none of them is not Carve's: it is never touched. The states
// the tags encode, each left by one step of a multi-step operation so that
// a retry after a crash knows where to go on (doc.go, and the files named):
//
//	volume   pending            lvcreate done, settling not yet (create.go); with
//	                            copying: its data still comes from a source (source.go)
//	         settled            neither pending nor deleting (isSettled): the only
//	                            state calls on an existing volume see
//	         deleting           being wiped and removed; never handed out again (delete.go)
//	         published          active and not held (isPublished): attached
//	         held               active only for a copy or a conversion, not published
//	                            (freeze.go, modify.go)
//	         wiped=N, copied=…  how far its wipe or copy-in has got (progress.go)
//	         wcache=…           the write cache it was last given (writecache.go)
//	snapshot copying            not ready: its data is still being copied (snapshot.go)
//	         ready              no copying tag
//	         deleting           as a volume's
//	frozen point                exists from the freeze until the copy from it is done
//	                            (freeze.go, group.go); a crash leaves it for the retry
//	cachevol                    exists only while its volume's wcache tag is on or the
//	                            cache is attached (writecache.go)
const (
	// TagVolume marks an LV as a Carve volume: nothing without it (or one
	// of the other kinds' tags) is ever touched.
	TagVolume = "carve.dev/volume"
	// TagImport is the tag an administrator puts on an LV Carve did not
	// make (lvchange --addtag carve.dev/import VG/LV) to let a static
	// volume take it over (AdoptVolume): without it, Carve never touches
	// an LV that is not its own.
	TagImport = "carve.dev/import"
	// importedParams stands for the parameters of an imported LV, which
	// no CreateVolume gave (tagParamsPrefix): a create of the same name
	// never matches it (ErrNameConflict).
	importedParams = "imported"
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
	// tagRAIDPrefix + a level (raid5, raid6, raid10) records a volume of
	// that level, with its data stripes in the stripes tag; tagIntegrity
	// a raid1 volume with dm-integrity under its legs. Both are fixed at
	// creation, and tell an extension and a modify what the LV is.
	tagRAIDPrefix = "carve.dev/raid="
	tagIntegrity  = "carve.dev/integrity"
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

	// tagSnapshot marks an LV as a snapshot (snapshot.go): never a volume.
	tagSnapshot = "carve.dev/snapshot"
	// tagCopying: the LV's data is still being copied from its source.
	tagCopying = "carve.dev/copying"
	// tagSourcePrefix + the source LV name, for snapshots; for volumes made
	// from a source, + "snapshot:" or "volume:" and the LV name, or for a
	// snapshot of another node the whole ID, NODE/VG/LV (remote.go).
	tagSourcePrefix = "carve.dev/source="
	// tagCreatedPrefix + the Unix second a thin snapshot was made, written
	// by its own lvcreate: its creation time without reading it back.
	tagCreatedPrefix = "carve.dev/created="

	// tagFrozen marks the short-lived snapshot that freezes a live volume
	// while its data is copied into a thick snapshot or a clone (a frozen
	// point, freeze.go).
	tagFrozen = "carve.dev/frozen"
	// tagHeld marks a thick volume activated only so that it can be frozen
	// and copied: lvm2 keeps a COW snapshot active only with its origin. A
	// held volume is active but not published (see isPublished);
	// publishing it takes the activation over, and release deactivates it
	// only while it is still merely held.
	tagHeld = "carve.dev/held"

	// tagGroupPrefix + the group name's hash (volume.GroupKey) and
	// tagGroupSizePrefix + its member count are on every LV of a group
	// snapshot: members and their frozen points (group.go).
	tagGroupPrefix     = "carve.dev/group="
	tagGroupSizePrefix = "carve.dev/group-size="

	// tagWipedPrefix + N: the first N bytes of a deleting LV are zeroed;
	// tagCopiedPrefix + UUID:N: the first N bytes of a copying LV hold the
	// data of the source LV with that UUID (progress records, progress.go);
	// for another node's snapshot, + NODE/VG/LV:N (remote.go), and so on
	// a settled volume catching up to that snapshot (catchup.go).
	tagWipedPrefix  = "carve.dev/wiped="
	tagCopiedPrefix = "carve.dev/copied="

	// tagWriteCachePrefix + size ":" digest of the PVs: the cache the
	// volume was given (writecache.go).
	tagWriteCachePrefix = "carve.dev/wcache="
	// tagCacheOfPrefix + the volume's LV name marks Carve's cachevol.
	tagCacheOfPrefix = "carve.dev/cache-of="
)

// tagDef is a row of the schema: a tag, the kinds of LVs that carry it,
// the functions of this package that write it (lvcreate's tags, --addtag)
// and those that clear it (--deltag). No clearer: it goes with its LV
// (lvremove).
type tagDef struct {
	tag      string
	on       []string
	writers  []string
	clearers []string
}

// schema is every tag Carve writes (see the top of this file).
var schema = []tagDef{
	{TagVolume, []string{"volume"}, []string{"settledTags", "AdoptVolume"}, nil},
	{tagPending, []string{"volume"}, []string{"createTags", "createFromSource"}, []string{"finishCreate"}},
	{tagDeleting, []string{"volume", "snapshot"}, []string{"markDeleting", "deleteSnapshotLV"}, nil},
	{tagNamePrefix, []string{"volume", "snapshot"}, []string{"settledTags", "CreateSnapshot", "AdoptVolume"}, nil},
	{tagParamsPrefix, []string{"volume"}, []string{"settledTags", "AdoptVolume"}, nil},
	{tagStripesPrefix, []string{"volume"}, []string{"settledTags"}, nil},
	{tagMirrorsPrefix, []string{"volume"}, []string{"settledTags", "recordMirrors"}, []string{"recordMirrors"}},
	{tagRAIDPrefix, []string{"volume"}, []string{"settledTags"}, nil},
	{tagIntegrity, []string{"volume"}, []string{"settledTags"}, nil},
	{tagEncrypted, []string{"volume", "snapshot"}, []string{"settledTags", "CreateSnapshot", "memberTags"}, nil},
	{tagReadBPSPrefix, []string{"volume"}, []string{"settledTags", "changeLimits"}, []string{"changeLimits"}},
	{tagWriteBPSPrefix, []string{"volume"}, []string{"settledTags", "changeLimits"}, []string{"changeLimits"}},
	{tagReadIOPSPrefix, []string{"volume"}, []string{"settledTags", "changeLimits"}, []string{"changeLimits"}},
	{tagWriteIOPSPrefix, []string{"volume"}, []string{"settledTags", "changeLimits"}, []string{"changeLimits"}},
	{tagSnapshot, []string{"snapshot"}, []string{"CreateSnapshot", "memberTags"}, nil},
	{tagCopying, []string{"volume", "snapshot"}, []string{"createFromSource", "createThickSnapshot", "finishGroup"},
		[]string{"copyData", "finishSnapshotCopy"}},
	{tagSourcePrefix, []string{"volume", "snapshot"}, []string{"sourceTag", "CreateSnapshot", "memberTags"}, nil},
	{tagCreatedPrefix, []string{"snapshot", "frozen point"}, []string{"CreateSnapshot", "takeInstant", "finishGroup"}, nil},
	{tagFrozen, []string{"frozen point"}, []string{"freeze", "takeInstant"}, nil},
	{tagHeld, []string{"volume"}, []string{"hold", "UnpublishVolume", "recordMirrors"}, []string{"release", "PublishVolume"}},
	{tagGroupPrefix, []string{"snapshot", "frozen point"}, []string{"takeInstant", "memberTags"}, nil},
	{tagGroupSizePrefix, []string{"snapshot", "frozen point"}, []string{"takeInstant", "memberTags"}, nil},
	{tagWipedPrefix, []string{"volume", "snapshot", "cachevol"}, []string{"checkpoint"}, []string{"drop"}},
	{tagCopiedPrefix, []string{"volume", "snapshot"}, []string{"checkpoint"}, []string{"drop", "clear"}},
	{tagWriteCachePrefix, []string{"volume"}, []string{"attachCache"}, []string{"attachCache", "changeWriteCache"}},
	{tagCacheOfPrefix, []string{"cachevol"}, []string{"attachCache"}, nil},
	// Written by an administrator, not by Carve: a writer in parentheses
	// is someone outside this package.
	{TagImport, []string{"LV to import"}, []string{"(administrator: lvchange --addtag)"}, []string{"AdoptVolume"}},
}

// isRecord tells a record tag (a prefix and a value) from a flag.
func isRecord(tag string) bool { return strings.HasSuffix(tag, "=") }

// inSchema tells whether tag, as written on an LV, is one of schema's:
// a flag itself, or a record's prefix with a value.
func inSchema(tag string) bool {
	for _, d := range schema {
		if tag == d.tag && !isRecord(d.tag) || isRecord(d.tag) && strings.HasPrefix(tag, d.tag) {
			return true
		}
	}
	return false
}

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
	if req.Type.RAID != "" {
		tags = append(tags, tagRAIDPrefix+req.Type.RAID)
	}
	if req.Type.Integrity {
		tags = append(tags, tagIntegrity)
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
	return volume.Type{Stripes: stripes, Mirrors: mirrors, ThinPool: lv.PoolLV, RAID: tagValue(lv, tagRAIDPrefix),
		Integrity: lv.HasTag(tagIntegrity)}
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
