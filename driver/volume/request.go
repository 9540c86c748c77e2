package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// CreateRequest is a volume to carve. Sizes follow CSI's capacity range:
// RequiredBytes is the least acceptable size (already defaulted by the
// caller), LimitBytes the most (0: no limit).
type CreateRequest struct {
	Name string
	// Node is where the CO wants the volume ("" : anywhere): the
	// accessibility requirement's preferred segment.
	Node string
	// OtherNodes are the further nodes the CO allows, in its order of
	// preference: an Immediate-binding claim's allowed topologies. A
	// WaitForFirstConsumer claim names its selected node only (the
	// provisioner's --strict-topology, which deploy/ sets), so that
	// the volume goes where the pod was scheduled. The cluster backend
	// places the volume on the first of Node and OtherNodes whose
	// reported space holds it (placement.go).
	OtherNodes []string
	// VG is the volume's VG, "" for the source's (a restore, a clone)
	// or, with VGs, one of those.
	VG string
	// VGs, when set, is a class's choice of several VGs: the backend
	// picks one (PickVG) where it knows their space, and sets VG.
	VGs           *VGChoice
	RequiredBytes int64
	LimitBytes    int64
	// Type of LV to carve.
	Type Type
	// Source, when set, gives the new volume its data (restore, clone).
	Source *ContentSource
	// ParamsDigest identifies the parameters (see ParamsDigest).
	ParamsDigest string
	// Encrypted asks for encryption at rest. A volume made from an
	// encrypted source is encrypted whatever this says: its data is the
	// source's ciphertext, under the source's key.
	Encrypted bool
	// Limits are the volume's first IO limits.
	Limits IOLimits
	// RecreateBlankWhenLost asks the node to recreate the volume blank
	// when its LV is lost (cluster mode: the LogicalVolume is the record
	// of what was lost).
	RecreateBlankWhenLost bool
}

// Source kinds, as recorded in the carve.dev/source tag of a volume.
const (
	SourceSnapshot = "snapshot"
	SourceVolume   = "volume"
)

// ContentSource is where a volume's initial data came from.
type ContentSource struct {
	Kind string // SourceSnapshot or SourceVolume
	ID   ID
}

// COParamPrefix starts the parameters that are the CO's, not Carve's:
// csi-provisioner's metadata (--extra-create-metadata) and secret
// references. They describe the request, not the volume: the CSI layer
// accepts and ignores them, and they stay out of the digest.
const COParamPrefix = "csi.storage.k8s.io/"

// ParamsDigest is a short, order-independent digest of the parameters that
// shape a volume.
func ParamsDigest(params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if !strings.HasPrefix(k, COParamPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(params[k]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
