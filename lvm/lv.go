package lvm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// LV is one row of `lvs`.
type LV struct {
	Name, VGName, UUID, Path, DMPath string // Path = lv_path (/dev/vg/lv), DMPath = lv_dm_path
	Size                             uint64
	Attr                             string
	Tags                             []string
	Layout, Role                     string // lv_layout ("linear", "thin,pool", "raid,raid1"...), lv_role
	Active, Open                     bool   // lv_active == "active", lv_device_open == "open"
	PoolLV, Origin                   string
	DataPercent, MetadataPercent     float64 // thin pools, thin LVs, snapshots ("" -> 0)
	SnapshotInvalid, Partial         bool    // attr bits 5 (I/S) and 9 (p)
	Health                           string  // lv_health_status ("", "partial", "refresh needed", ...)
	SyncPercent                      float64 // raid (copy_percent)

	// Additions beyond the first sketch of this API:

	// Hidden marks an internal LV (reported as "[name]" by `lvs -a`, e.g.
	// [lvol0_pmspare] or [pool_tdata]); only ListAllLVs returns them.
	Hidden bool
	// SkipActivation is attr bit 10 (k): plain `lvchange -ay` skips the LV
	// (thin snapshots get it by default); Activate overrides it.
	SkipActivation bool
	// ExtentSize is the VG's extent size; sizes are multiples of it.
	ExtentSize uint64
	// VGMissingPVs is vg_missing_pv_count: how many of the VG's PVs lvm2
	// cannot find. lvm2 refuses lvcreate and lvextend then, but takes tag
	// changes and lvremove (see ErrPVMissing); an operation that read the
	// LV tells it from this report, without a vgs.
	VGMissingPVs int

	// Health of RAID LVs and thin pools, beyond Health and the percents:

	// SyncAction is raid_sync_action: "idle" when in sync, "resync" or
	// "recover" while legs are being (re)built, "check", "repair",
	// "frozen"; "" for non-RAID LVs. lvm2 also reports "repair" while it
	// syncs the new part of an extended raid1.
	SyncAction string
	// MismatchCount is raid_mismatch_count: blocks a scrub found differing
	// between legs.
	MismatchCount uint64
	// WhenFull is lv_when_full for thin pools: "queue" (writes wait for
	// the pool to be extended, the default) or "error"; "" otherwise.
	WhenFull string
	// MetadataSize is lv_metadata_size: the size of a thin pool's metadata
	// LV, which MetadataPercent is a share of.
	MetadataSize uint64
	// CheckNeeded is lv_check_needed: the kernel flagged a thin pool's
	// metadata for thin_check (repair with lvconvert --repair).
	CheckNeeded bool
	// CreationTime is lv_time (zero when lvm2 does not know it).
	CreationTime time.Time
	// KernelMajor and KernelMinor are the device number of the LV's
	// device-mapper device (lv_kernel_major, lv_kernel_minor), -1 when it
	// has none (inactive). They tell whether a device node is this LV's,
	// whatever path led to it.
	KernelMajor, KernelMinor int
	// CacheVol is the cachevol attached to the LV (see writecache.go), by
	// the name it had before lvm2 attached it. lvm2 reports a cachevol as
	// the LV's pool_lv ("[name_cvol]"); it is kept apart from PoolLV,
	// which tells a thin LV everywhere else.
	CacheVol string
}

// HasTag reports whether the LV carries tag t.
func (lv LV) HasTag(t string) bool { return slices.Contains(lv.Tags, t) }

// IsThinPool reports whether the LV is a thin pool (attr type 't').
func (lv LV) IsThinPool() bool { return attrAt(lv.Attr, 0) == 't' }

// IsThinVolume reports whether the LV is a thin volume (attr type 'V'),
// thin snapshots included.
func (lv LV) IsThinVolume() bool { return attrAt(lv.Attr, 0) == 'V' }

// Live reports whether the LV is active with its device-mapper device
// serving it: a device number, a live table, not suspended. lvm2 reports
// an LV active once its device exists, and an lvm2 command cut short (a
// SIGKILL of carve takes its children along; the runner's timeout kills
// one) can leave that device without a table or suspended. Measured with
// lvm2 2.03.16: an lvchange -ay of a raid1 LV killed 0.2-0.3 s in leaves
// it "active" with attr Rwi-XXr-r-, no device number and no table; the
// next lvchange -ay completes it. So whoever needs the device up asks
// Live, not Active, before deciding an activation is not needed.
func (lv LV) Live() bool {
	if !lv.Active || lv.KernelMajor < 0 {
		return false
	}
	// attr bit 5, the state: (s)uspended, invalid (S)uspended snapshot,
	// suspended snapshot (M)erge failed, suspended thin pool (C)heck
	// needed, mapped (d)evice present without tables, mapped device with
	// (i)nactive table only, (X) unknown.
	return !strings.ContainsRune("sSMCdiX", rune(attrAt(lv.Attr, 4)))
}

// IsCOWSnapshot reports whether the LV is an old-style (COW) snapshot.
func (lv LV) IsCOWSnapshot() bool { t := attrAt(lv.Attr, 0); return t == 's' || t == 'S' }

// HasCOWSnapshots reports whether the LV is the origin of COW snapshots,
// which lvremove would delete along with it.
func (lv LV) HasCOWSnapshots() bool { t := attrAt(lv.Attr, 0); return t == 'o' || t == 'O' }

type rawLV struct {
	Name            string `json:"lv_name"`
	VGName          string `json:"vg_name"`
	UUID            string `json:"lv_uuid"`
	Path            string `json:"lv_path"`
	DMPath          string `json:"lv_dm_path"`
	Size            string `json:"lv_size"`
	Attr            string `json:"lv_attr"`
	Tags            string `json:"lv_tags"`
	Layout          string `json:"lv_layout"`
	Role            string `json:"lv_role"`
	Active          string `json:"lv_active"`
	DeviceOpen      string `json:"lv_device_open"`
	PoolLV          string `json:"pool_lv"`
	Origin          string `json:"origin"`
	DataPercent     string `json:"data_percent"`
	MetadataPercent string `json:"metadata_percent"`
	Health          string `json:"lv_health_status"`
	CopyPercent     string `json:"copy_percent"`
	ExtentSize      string `json:"vg_extent_size"`
	VGMissingPVs    string `json:"vg_missing_pv_count"`
	SyncAction      string `json:"raid_sync_action"`
	MismatchCount   string `json:"raid_mismatch_count"`
	WhenFull        string `json:"lv_when_full"`
	MetadataSize    string `json:"lv_metadata_size"`
	CheckNeeded     string `json:"lv_check_needed"`
	Time            string `json:"lv_time"`
	KernelMajor     string `json:"lv_kernel_major"`
	KernelMinor     string `json:"lv_kernel_minor"`
}

// unbracket strips the brackets lvm2 puts around hidden LV names.
func unbracket(name string) (string, bool) {
	if len(name) >= 2 && name[0] == '[' && name[len(name)-1] == ']' {
		return name[1 : len(name)-1], true
	}
	return name, false
}

func parseLVs(out []byte) ([]LV, error) {
	rows, err := decodeReport[rawLV](out, "lv")
	if err != nil {
		return nil, err
	}
	lvs := make([]LV, 0, len(rows))
	for _, r := range rows {
		lv, err := convertLV(r)
		if err != nil {
			return nil, fmt.Errorf("lv %s/%s: %w", r.VGName, r.Name, err)
		}
		lvs = append(lvs, lv)
	}
	return lvs, nil
}

func convertLV(r rawLV) (LV, error) {
	var p fieldParser
	name, hidden := unbracket(r.Name)
	pool, _ := unbracket(r.PoolLV)
	origin, _ := unbracket(r.Origin)
	state := attrAt(r.Attr, 4)
	lv := LV{
		Name: name, VGName: r.VGName, UUID: r.UUID, Path: r.Path, DMPath: r.DMPath,
		Size: p.uint("lv_size", r.Size), Attr: r.Attr, Tags: splitTags(r.Tags),
		Layout: r.Layout, Role: r.Role,
		Active: r.Active == "active", Open: r.DeviceOpen == "open",
		PoolLV: pool, Origin: origin,
		DataPercent:     p.percent("data_percent", r.DataPercent),
		MetadataPercent: p.percent("metadata_percent", r.MetadataPercent),
		SnapshotInvalid: state == 'I' || state == 'S',
		Partial:         attrAt(r.Attr, 8) == 'p',
		Health:          r.Health,
		SyncPercent:     p.percent("copy_percent", r.CopyPercent),
		Hidden:          hidden,
		SkipActivation:  attrAt(r.Attr, 9) == 'k',
		ExtentSize:      p.uint("vg_extent_size", r.ExtentSize),
		VGMissingPVs:    p.int("vg_missing_pv_count", r.VGMissingPVs),
		SyncAction:      r.SyncAction,
		MismatchCount:   p.uint("raid_mismatch_count", r.MismatchCount),
		WhenFull:        r.WhenFull,
		MetadataSize:    p.uint("lv_metadata_size", r.MetadataSize),
		CheckNeeded:     r.CheckNeeded == "check needed",
		CreationTime:    p.unixTime("lv_time", r.Time),
		KernelMajor:     p.deviceNumber("lv_kernel_major", r.KernelMajor),
		KernelMinor:     p.deviceNumber("lv_kernel_minor", r.KernelMinor),
	}
	if strings.HasSuffix(pool, cvolSuffix) {
		lv.CacheVol, lv.PoolLV = strings.TrimSuffix(pool, cvolSuffix), ""
	}
	return lv, p.err
}

func (c *Client) lvs(ctx context.Context, all bool, target string) ([]LV, error) {
	args := append([]string{"lvs"}, reportArgs(lvFields)...)
	if all {
		args = append(args, "-a")
	}
	out, err := c.run(ctx, append(args, target)...)
	if err != nil {
		return nil, fmt.Errorf("lvs %s: %w", target, err)
	}
	lvs, err := parseLVs(out)
	if err != nil {
		return nil, fmt.Errorf("lvs %s: %w", target, err)
	}
	return lvs, nil
}

// ListLVs reports the visible LVs of a VG (ErrNotFound when the VG is
// missing). Internal LVs such as [lvol0_pmspare] are left out.
func (c *Client) ListLVs(ctx context.Context, vg string) ([]LV, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	return c.lvs(ctx, false, vg)
}

// ListAllLVs is ListLVs including internal LVs (Hidden set).
func (c *Client) ListAllLVs(ctx context.Context, vg string) ([]LV, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	return c.lvs(ctx, true, vg)
}

// GetLV reports one LV; ErrNotFound when it (or its VG) does not exist.
func (c *Client) GetLV(ctx context.Context, vg, name string) (LV, error) {
	if err := validateVGLV(vg, name); err != nil {
		return LV{}, err
	}
	lvs, err := c.lvs(ctx, false, vg+"/"+name)
	if err != nil {
		return LV{}, err
	}
	for _, lv := range lvs {
		if lv.Name == name && lv.VGName == vg {
			return lv, nil
		}
	}
	return LV{}, fmt.Errorf("lvs %s/%s: logical volume %w", vg, name, ErrNotFound)
}

// dependents lists the LVs that `lvremove --yes vg/name` would delete too:
// COW snapshots of an origin, thin volumes of a pool.
func dependents(target LV, all []LV) []string {
	var deps []string
	for _, lv := range all {
		if lv.Name == target.Name {
			continue
		}
		if target.IsThinPool() && lv.PoolLV == target.Name ||
			target.HasCOWSnapshots() && lv.IsCOWSnapshot() && lv.Origin == target.Name {
			deps = append(deps, lv.Name)
		}
	}
	return deps
}

func joinNames(names []string) string { return strings.Join(names, ", ") }
