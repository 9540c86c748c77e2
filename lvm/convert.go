package lvm

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ConvertMirrors gives an active linear or raid1 LV mirrors extra legs:
// 0 makes it linear (`lvconvert -m 0`), N > 0 raid1 with N+1 images
// (`lvconvert --type raid1 -m N`), each new leg on a PV of its own. It is
// online: the LV stays active and open, and the kernel copies the data onto
// new legs in the background (SyncPercent shows how far). lvm2 refuses an
// inactive LV, and answers an LV that already has the asked count with a
// warning only, so a repeated call is harmless.
//
// The command's own work is metadata, but lvm2 may wait for the device to
// settle: callers run it under runner.DataWork, sized for the LV.
func (c *Client) ConvertMirrors(ctx context.Context, vg, name string, mirrors int) error {
	args, err := convertArgs(vg, name, mirrors)
	if err != nil {
		return err
	}
	if _, err := c.run(ctx, args...); err != nil {
		return fmt.Errorf("lvconvert %s/%s to %d mirrors: %w", vg, name, mirrors, err)
	}
	return nil
}

// RemoveStrayRAIDParts removes the legs an lvconvert of LV name left
// unlinked when it was cut short (StrayRAIDParts) and names them. lvm2
// refuses every later conversion of the LV while they are there
// ("Logical Volume ..._rimage_1 already exists"), and their extents
// count as used in CheckConversion's placement. They hold nothing of the
// LV: lvm2 links a leg into the LV, and copies data onto it, only after
// the wipe. lvm2 takes their reserved names on lvremove; Carve's name
// checks would not, so they are matched against name instead.
func (c *Client) RemoveStrayRAIDParts(ctx context.Context, vg, name string) ([]string, error) {
	if err := validateVGLV(vg, name); err != nil {
		return nil, err
	}
	all, err := c.ListAllLVs(ctx, vg)
	if err != nil {
		return nil, fmt.Errorf("read the raid parts of %s/%s: %w", vg, name, err)
	}
	stray := StrayRAIDParts(all, name)
	if len(stray) == 0 {
		return nil, nil
	}
	args := []string{"lvremove", "--yes"}
	for _, part := range stray {
		args = append(args, vg+"/"+part)
	}
	if _, err := c.run(ctx, args...); err != nil {
		return nil, fmt.Errorf("lvremove the legs a cut-short lvconvert of %s/%s left (%s): %w", vg, name, strings.Join(stray, ", "), err)
	}
	return stray, nil
}

// StrayRAIDParts names the LVs among all (a ListAllLVs report) that an
// lvconvert of LV name left when it was killed while it wiped new legs
// (raid_manip.c's _clear_lvs, lvm2 2.03.16; seen by killing lvconvert -m1
// at each of its writes): visible, public LVs named as name's raid
// images and metadata, linked into no LV. A leg lvm2 has linked is
// private (lv_role), even while visible (VisibleRAIDParts); a leg's own
// parts (integrity's _imeta) are not legs.
func StrayRAIDParts(all []LV, name string) []string {
	leg := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `_(rimage|rmeta)_[0-9]+$`)
	var out []string
	for _, lv := range all {
		if !lv.Hidden && leg.MatchString(lv.Name) && !strings.Contains(lv.Role, "private") {
			out = append(out, lv.Name)
		}
	}
	return out
}

func convertArgs(vg, name string, mirrors int) ([]string, error) {
	if err := validateVGLV(vg, name); err != nil {
		return nil, err
	}
	if mirrors < 0 || mirrors > maxMirrors {
		return nil, fmt.Errorf("lvconvert %s/%s: %w: mirrors %d is not within 0..%d", vg, name, ErrInvalidArgument, mirrors, maxMirrors)
	}
	args := []string{"lvconvert", "--yes"}
	if mirrors > 0 {
		args = append(args, "--type", "raid1")
	}
	return append(args, "-m", strconv.Itoa(mirrors), vg+"/"+name), nil
}

// Mirrors counts the extra legs of LV name among all (a ListAllLVs
// report): its raid1 images less one, 0 for a linear LV. An LV lvm2 has
// left raid1 with a single image (a conversion cut short) counts 0 too.
func Mirrors(all []LV, name string) int {
	image := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `_rimage_[0-9]+$`)
	n := 0
	for _, lv := range all {
		if lv.Hidden && image.MatchString(lv.Name) {
			n++
		}
	}
	return max(n-1, 0)
}

// VisibleRAIDParts names the raid images and metadata LVs of LV name
// among all (a ListAllLVs report) that are not hidden. lvm2 makes a new
// raid LV's metadata LVs visible and commits that, to activate and wipe
// them, then hides them again (raid_manip.c's _clear_lvs): an lvcreate
// killed in between leaves them visible, and lvm2 then refuses to
// activate the LV ("Refusing activation of RAID LV ... with visible
// SubLVs"). An lvconvert killed there leaves new legs visible that are
// not linked into the LV yet (StrayRAIDParts). Nothing else leaves a raid
// part visible.
func VisibleRAIDParts(all []LV, name string) []string {
	part := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `_(rimage|rmeta)_[0-9]+`)
	var out []string
	for _, lv := range all {
		if !lv.Hidden && part.MatchString(lv.Name) {
			out = append(out, lv.Name)
		}
	}
	return out
}

// CheckConversion tells whether lvm2 can give lv, which has have extra
// legs now, want: each leg it lacks needs a PV of its own, holding none of
// the LV yet, with a whole leg (the LV's size and its raid metadata)
// free, and with integrity (a raid1 LV with dm-integrity under its legs,
// which lvm2 gives each new leg too: measured on lvm2 2.03.16) the leg's
// integrity metadata; a linear LV turning raid1 also needs its own leg's
// metadata extent on a PV it already uses. vg is the LV's VG as just read
// (its extent size). It returns nil, or an error wrapping ErrNoSpace that says
// what is missing. Fewer legs always fit, and it reads nothing for them.
//
// As CheckPlacement, the rule is the simple, safe one: lvm2 could
// sometimes split a leg over several PVs where this refuses.
func (c *Client) CheckConversion(ctx context.Context, vg VG, lv LV, have, want int, integrity bool) error {
	if want <= have {
		return nil
	}
	pvs, err := c.ListVGPVs(ctx, vg.Name)
	if err != nil {
		return fmt.Errorf("conversion placement %s/%s: %w", vg.Name, lv.Name, err)
	}
	used, err := c.LVDevices(ctx, vg.Name, lv.Name)
	if err != nil {
		return fmt.Errorf("conversion placement %s/%s: %w", vg.Name, lv.Name, err)
	}
	return conversionFit(vg.Name, lv.Name, lv.Size, vg.ExtentSize, have, want, integrity, pvs, used)
}

// conversionFit is CheckConversion's rule over what it read: the LV's size
// and current mirrors, the VG's PVs and the ones holding the LV.
func conversionFit(vg, name string, size, extent uint64, have, want int, integrity bool, pvs []PV, used []string) error {
	if want <= have {
		return nil
	}
	leg := LegFootprint(CreateLVOptions{Size: size, Mirrors: 1, Integrity: integrity}, extent)
	meta := mulSat(raidMetaExtents(size, extent), extent)
	fit, metaRoom := 0, have > 0
	for _, pv := range pvs {
		if !pv.Allocatable() {
			continue
		}
		if slices.Contains(used, pv.Name) {
			metaRoom = metaRoom || pv.Free >= meta
			continue
		}
		if pv.Free >= leg {
			fit++
		}
	}
	if need := want - have; fit < need {
		return fmt.Errorf("conversion placement %s/%s: %w: raid1 with %d legs needs %d more PVs holding none of it with %s free each; %s has %d",
			vg, name, ErrNoSpace, want+1, need, FormatSize(leg), vg, fit)
	}
	if !metaRoom {
		return fmt.Errorf("conversion placement %s/%s: %w: its own leg needs %s of raid metadata on a PV it uses, and none has that free",
			vg, name, ErrNoSpace, FormatSize(meta))
	}
	return nil
}

// LVDevices lists the PVs holding any part of LV name: its own segments
// and those of its hidden sub-LVs (raid images and metadata), as
// `lvs -a -o devices` reports them, one row per segment.
func (c *Client) LVDevices(ctx context.Context, vg, name string) ([]string, error) {
	out, err := c.run(ctx, append(append([]string{"lvs", "-a"}, reportArgs("lv_name,devices")...), vg)...)
	if err != nil {
		return nil, fmt.Errorf("lvs devices %s: %w", vg, err)
	}
	return parseDevices(out, name)
}

var deviceExtent = regexp.MustCompile(`\([0-9]+\)$`)

// parseDevices reads the PVs of LV name and its sub-LVs from an
// `lvs -a -o lv_name,devices` JSON report. Devices that are LVs (a raid
// LV's images) are skipped: their own rows name their PVs.
func parseDevices(out []byte, name string) ([]string, error) {
	rows, err := decodeReport[struct {
		Name    string `json:"lv_name"`
		Devices string `json:"devices"`
	}](out, "lv")
	if err != nil {
		return nil, err
	}
	var pvs []string
	for _, row := range rows {
		lv, _ := unbracket(row.Name)
		if lv != name && !strings.HasPrefix(lv, name+"_r") {
			continue
		}
		for _, d := range strings.Split(row.Devices, ",") {
			d = deviceExtent.ReplaceAllString(strings.TrimSpace(d), "")
			if strings.HasPrefix(d, "/") && !slices.Contains(pvs, d) {
				pvs = append(pvs, d)
			}
		}
	}
	return pvs, nil
}
