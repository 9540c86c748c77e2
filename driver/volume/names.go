package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"carve.dev/carve/lvm"
)

// hashedPrefix starts every LV name derived by hashing. Readable names may not
// start with it, so a readable name never equals a hashed one.
const hashedPrefix = "csi-"

// snapshotPrefix starts every snapshot's LV name; volume names may not start
// with it, so volume and snapshot names never collide.
const snapshotPrefix = "snap-"

// readableName is what a CSI name must look like to be used as the LV name
// as is: Kubernetes PV names ("pvc-<uuid>") pass, so `lvs` shows the PV.
// Every LV name Carve derives is also a valid Kubernetes object name (a DNS
// subdomain), which cluster mode uses to name a volume's resource.
var readableName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// LVName derives the LV name of a CSI volume name, deterministically, so that
// CreateVolume is idempotent with no state outside LVM. Names that are not
// safe LV names (csi-sanity uses spaces, 128-byte names) are replaced by a
// hash of 128 bits.
func LVName(csiName string) string {
	// The pattern alone lets "0..0" through, which no object may be named
	// (found by FuzzLVName in CI's bounded run): the DNS subdomain rule
	// decides too.
	if readableName.MatchString(csiName) && len(validation.IsDNS1123Subdomain(csiName)) == 0 &&
		!strings.HasPrefix(csiName, hashedPrefix) && !strings.HasPrefix(csiName, snapshotPrefix) &&
		lvm.ValidateLVName(csiName) == nil {
		return csiName
	}
	sum := sha256.Sum256([]byte(csiName))
	return hashedPrefix + hex.EncodeToString(sum[:16])
}

// SnapshotLVName derives the LV name of a CSI snapshot name.
func SnapshotLVName(csiName string) string { return snapshotPrefix + LVName(csiName) }

// groupPrefix starts the name of every group snapshot (the last part of
// its ID, and its resource's name in cluster mode); no LV has it, members
// being snapshots (snap-…).
const groupPrefix = "group-"

// GroupKey derives the key of a CSI group snapshot name: 128 bits of its
// hash, safe in an LV tag and a resource name.
func GroupKey(csiName string) string {
	sum := sha256.Sum256([]byte(csiName))
	return hex.EncodeToString(sum[:16])
}

// GroupSnapshotName derives the name of a CSI group snapshot: the last
// part of its ID.
func GroupSnapshotName(csiName string) string { return GroupNameOfKey(GroupKey(csiName)) }

// GroupNameOfKey is the name of the group snapshot of key.
func GroupNameOfKey(key string) string { return groupPrefix + key }

// GroupKeyOf is GroupKey back from a GroupSnapshotName; ok is false for a
// name that is not one.
func GroupKeyOf(name string) (key string, ok bool) {
	key, ok = strings.CutPrefix(name, groupPrefix)
	return key, ok && len(key) == 32
}
