package driver

import (
	"slices"
	"sort"
	"strings"
)

// StorageClass parameters Carve understands.
const (
	ParamVolumeGroup = "volumeGroup"
	ParamFsType      = "fsType"
)

var knownParams = []string{ParamVolumeGroup, ParamFsType}

// Parameters with this prefix are the CO's (csi-provisioner's metadata and
// secrets references); they are accepted and ignored.
const coParamPrefix = "csi.storage.k8s.io/"

// volumeParams are the parsed CreateVolume / GetCapacity parameters.
type volumeParams struct {
	VG     string
	FsType string
}

// parseParams validates params; an unknown key is an error (a typo in a
// StorageClass should fail loudly, not carve something else).
func parseParams(params map[string]string, vgs []string) (volumeParams, error) {
	var unknown []string
	for k := range params {
		if !slices.Contains(knownParams, k) && !strings.HasPrefix(k, coParamPrefix) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return volumeParams{}, invalidArgument("unknown parameters %v (known: %v)", unknown, knownParams)
	}
	p := volumeParams{VG: params[ParamVolumeGroup], FsType: params[ParamFsType]}
	if p.VG == "" && len(vgs) > 0 {
		p.VG = vgs[0]
	}
	if p.VG == "" {
		return volumeParams{}, invalidArgument("parameter %s missing and no default volume group", ParamVolumeGroup)
	}
	if p.FsType != "" && !slices.Contains(fsTypes, p.FsType) {
		return volumeParams{}, invalidArgument("parameter %s=%q not supported (supported: %v)", ParamFsType, p.FsType, fsTypes)
	}
	return p, nil
}
