package lvm

import (
	"context"
	"errors"
	"fmt"
)

// VG is one row of `vgs`.
type VG struct {
	Name, UUID                          string
	Size, Free, ExtentSize, ExtentCount uint64
	FreeCount                           uint64
	PVCount, MissingPVCount, LVCount    int
	Partial                             bool // a PV is missing (vg_attr bit 4)
	Attr                                string
	Tags                                []string
	// MetadataSize and MetadataFree are the VG's metadata area and the
	// part of it a new version of the metadata can still take (lvm2 keeps
	// the last version beside the new one, so a new one gets about half
	// the area): every LV takes some, and once it is full lvm2 refuses
	// new LVs however much data space is free (ErrMetadataFull).
	MetadataSize, MetadataFree uint64
}

type rawVG struct {
	Name           string `json:"vg_name"`
	UUID           string `json:"vg_uuid"`
	Size           string `json:"vg_size"`
	Free           string `json:"vg_free"`
	ExtentSize     string `json:"vg_extent_size"`
	ExtentCount    string `json:"vg_extent_count"`
	FreeCount      string `json:"vg_free_count"`
	PVCount        string `json:"pv_count"`
	MissingPVCount string `json:"vg_missing_pv_count"`
	LVCount        string `json:"lv_count"`
	Attr           string `json:"vg_attr"`
	Tags           string `json:"vg_tags"`
	MDASize        string `json:"vg_mda_size"`
	MDAFree        string `json:"vg_mda_free"`
}

func parseVGs(out []byte) ([]VG, error) {
	rows, err := decodeReport[rawVG](out, "vg")
	if err != nil {
		return nil, err
	}
	vgs := make([]VG, 0, len(rows))
	for _, r := range rows {
		var p fieldParser
		vg := VG{
			Name: r.Name, UUID: r.UUID, Attr: r.Attr, Tags: splitTags(r.Tags),
			Size:           p.uint("vg_size", r.Size),
			Free:           p.uint("vg_free", r.Free),
			ExtentSize:     p.uint("vg_extent_size", r.ExtentSize),
			ExtentCount:    p.uint("vg_extent_count", r.ExtentCount),
			FreeCount:      p.uint("vg_free_count", r.FreeCount),
			PVCount:        p.int("pv_count", r.PVCount),
			MissingPVCount: p.int("vg_missing_pv_count", r.MissingPVCount),
			LVCount:        p.int("lv_count", r.LVCount),
			Partial:        attrAt(r.Attr, 3) == 'p',
			MetadataSize:   p.uint("vg_mda_size", r.MDASize),
			MetadataFree:   p.uint("vg_mda_free", r.MDAFree),
		}
		if p.err != nil {
			return nil, fmt.Errorf("vg %s: %w", r.Name, p.err)
		}
		vgs = append(vgs, vg)
	}
	return vgs, nil
}

// ListVGs reports every volume group.
func (c *Client) ListVGs(ctx context.Context) ([]VG, error) {
	out, err := c.run(ctx, append([]string{"vgs"}, reportArgs(vgFields)...)...)
	if err != nil {
		return nil, fmt.Errorf("vgs: %w", err)
	}
	return parseVGs(out)
}

// GetVG reports one volume group; ErrNotFound when there is none so named.
func (c *Client) GetVG(ctx context.Context, vg string) (VG, error) {
	if err := ValidateVGName(vg); err != nil {
		return VG{}, err
	}
	args := append(append([]string{"vgs"}, reportArgs(vgFields)...), vg)
	out, err := c.run(ctx, args...)
	if err != nil {
		return VG{}, fmt.Errorf("vgs %s: %w", vg, err)
	}
	vgs, err := parseVGs(out)
	if err != nil {
		return VG{}, fmt.Errorf("vgs %s: %w", vg, err)
	}
	for _, v := range vgs {
		if v.Name == vg {
			return v, nil
		}
	}
	return VG{}, fmt.Errorf("vgs %s: volume group %w", vg, ErrNotFound)
}

// CreateVG creates a volume group on devices, initialising them as PVs.
// lvm2 refuses devices that are already PVs of another VG.
func (c *Client) CreateVG(ctx context.Context, vg string, devices ...string) error {
	return c.vgWithDevices(ctx, "vgcreate", "--yes", vg, devices)
}

// CreateVGOnBlank and ExtendVGOnBlank make a volume group of devices, or
// add them to one, only if lvm2 finds each one blank: the node agent's way
// of taking the disks a declaration gives it (driver/disks decides which).
// Where lvm2 finds a signature (a filesystem, a partition table, another
// PV's label) it asks before wiping it, and -qq answers no: the command
// fails and the device is left as it was. CreateVG's --yes would wipe it.
// So a disk that gained data after the agent probed it is refused, not
// overwritten. lvm2 also refuses a device that is a PV of a VG already,
// this one included: a caller that retries after a cut must first see what
// the VG holds.
func (c *Client) CreateVGOnBlank(ctx context.Context, vg string, devices ...string) error {
	return c.vgWithDevices(ctx, "vgcreate", "-qq", vg, devices)
}

// ExtendVGOnBlank: see CreateVGOnBlank.
func (c *Client) ExtendVGOnBlank(ctx context.Context, vg string, devices ...string) error {
	return c.vgWithDevices(ctx, "vgextend", "-qq", vg, devices)
}

// vgWithDevices runs cmd (vgcreate, vgextend) with its one option on VG
// vg and devices, which must be some.
func (c *Client) vgWithDevices(ctx context.Context, cmd, option, vg string, devices []string) error {
	if err := ValidateVGName(vg); err != nil {
		return err
	}
	if len(devices) == 0 {
		return errors.New(cmd + " " + vg + ": no devices")
	}
	args := append([]string{cmd, option, vg}, devices...)
	if _, err := c.run(ctx, args...); err != nil {
		return fmt.Errorf("%s %s: %w", cmd, vg, err)
	}
	return nil
}

// RemoveVG removes a volume group together with every LV in it; its PVs stay
// labelled (see RemovePVs).
func (c *Client) RemoveVG(ctx context.Context, vg string) error {
	if err := ValidateVGName(vg); err != nil {
		return err
	}
	if _, err := c.run(ctx, "vgremove", "--yes", vg); err != nil {
		return fmt.Errorf("vgremove %s: %w", vg, err)
	}
	return nil
}
