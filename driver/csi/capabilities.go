package csi

import (
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
)

// accessModes are the modes a node-local volume can honour: all single-node.
// Multi-node modes cannot work for an LV that lives on one node's disks.
var accessModes = []csi.VolumeCapability_AccessMode_Mode{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
}

// checkCapabilities refuses what Carve cannot honour, naming the reason.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return invalidArgument("volume capabilities missing")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return invalidArgument("volume capability missing")
	}
	mode := c.GetAccessMode().GetMode()
	if !slices.Contains(accessModes, mode) {
		return invalidArgument("access mode %s not supported: a Carve volume lives on one node (supported: %v)", mode, accessModes)
	}
	switch {
	case c.GetBlock() != nil:
		return nil
	case c.GetMount() != nil:
		if fs := c.GetMount().GetFsType(); fs != "" && !slices.Contains(volume.FSTypes, fs) {
			return invalidArgument("fsType %q not supported (supported: %v)", fs, volume.FSTypes)
		}
		return nil
	}
	return invalidArgument("access type missing: want block or mount")
}

// capsFsType is the filesystem the capabilities ask for, "" when none does.
// Two mount capabilities asking for different filesystems are refused.
func capsFsType(caps []*csi.VolumeCapability) (string, error) {
	fs := ""
	for _, c := range caps {
		t := c.GetMount().GetFsType()
		if t == "" {
			continue
		}
		if fs != "" && fs != t {
			return "", invalidArgument("capabilities ask for two filesystems: %q and %q", fs, t)
		}
		fs = t
	}
	return fs, nil
}

func readOnlyMode(c *csi.VolumeCapability) bool {
	return c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
}

func describeCap(c *csi.VolumeCapability) string {
	kind := "mount"
	if c.GetBlock() != nil {
		kind = "block"
	}
	return fmt.Sprintf("%s/%s", kind, c.GetAccessMode().GetMode())
}
