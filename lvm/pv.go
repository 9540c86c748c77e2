package lvm

import (
	"context"
	"fmt"
)

// PV is one row of `pvs`. A missing PV is reported with Name "[unknown]".
type PV struct {
	Name, VGName, UUID string
	Size, Free         uint64
	Missing            bool
	Attr               string
}

type rawPV struct {
	Name    string `json:"pv_name"`
	VGName  string `json:"vg_name"`
	UUID    string `json:"pv_uuid"`
	Size    string `json:"pv_size"`
	Free    string `json:"pv_free"`
	Missing string `json:"pv_missing"`
	Attr    string `json:"pv_attr"`
}

func parsePVs(out []byte) ([]PV, error) {
	rows, err := decodeReport[rawPV](out, "pv")
	if err != nil {
		return nil, err
	}
	pvs := make([]PV, 0, len(rows))
	for _, r := range rows {
		var p fieldParser
		pv := PV{
			Name: r.Name, VGName: r.VGName, UUID: r.UUID, Attr: r.Attr,
			Size:    p.uint("pv_size", r.Size),
			Free:    p.uint("pv_free", r.Free),
			Missing: r.Missing == "missing" || attrAt(r.Attr, 2) == 'm',
		}
		if p.err != nil {
			return nil, fmt.Errorf("pv %s: %w", r.Name, p.err)
		}
		pvs = append(pvs, pv)
	}
	return pvs, nil
}

// ListPVs reports every physical volume LVM sees, in a VG or not.
func (c *Client) ListPVs(ctx context.Context) ([]PV, error) {
	out, err := c.run(ctx, append([]string{"pvs"}, reportArgs(pvFields)...)...)
	if err != nil {
		return nil, fmt.Errorf("pvs: %w", err)
	}
	return parsePVs(out)
}

// ListVGPVs reports the physical volumes of one VG, missing ones included
// (Name "[unknown]", Missing set). It filters ListPVs: pvs takes PV names,
// not VG names, as arguments.
func (c *Client) ListVGPVs(ctx context.Context, vg string) ([]PV, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	all, err := c.ListPVs(ctx)
	if err != nil {
		return nil, err
	}
	var pvs []PV
	for _, pv := range all {
		if pv.VGName == vg {
			pvs = append(pvs, pv)
		}
	}
	return pvs, nil
}

// Allocatable reports whether lvm2 may put new extents on the PV: it is
// present and not excluded with pvchange -x n (pv_attr bit 0).
func (pv PV) Allocatable() bool { return !pv.Missing && attrAt(pv.Attr, 0) == 'a' }

// RemovePVs wipes the LVM labels from devices that belong to no VG.
func (c *Client) RemovePVs(ctx context.Context, devices ...string) error {
	if len(devices) == 0 {
		return nil
	}
	if _, err := c.run(ctx, append([]string{"pvremove", "--yes"}, devices...)...); err != nil {
		return fmt.Errorf("pvremove %v: %w", devices, err)
	}
	return nil
}
