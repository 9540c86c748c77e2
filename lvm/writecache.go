package lvm

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Write caches (dm-writecache): a small LV on fast PVs, the cachevol,
// attached in front of an LV so that writes land on the fast PVs first and
// reach the LV's own PVs in the background. lvm2 hides the cachevol once
// attached ("[name_cvol]") and the LV's own data ("[lv_wcorig]"); the LV
// keeps its name, path and device, so whatever has it open or mounted
// sees no change. Measured with lvm2 2.03.16 on Debian's 6.1 kernel: an
// attach and a detach work on active, mounted LVs and on inactive ones;
// lvextend and COW snapshots work on a cached LV; lvm2 refuses a thin LV
// and a raid conversion of a cached LV, and an active cachevol; lvremove
// of a cached LV removes its cachevol unflushed.

// cvolSuffix is what lvm2 appends to a cachevol's name while attached.
const cvolSuffix = "_cvol"

// pvTagRefRE is "@tag": the PVs carrying an lvm2 tag, as lvcreate takes
// them. Paths are checked as plain /dev paths (devicePathRE).
var pvTagRefRE = regexp.MustCompile(`^@[A-Za-z0-9_+.][A-Za-z0-9_+.=!:&#/-]*$`)

// ValidatePVRefs checks where a cachevol may go: PV paths ("/dev/nvme1n1")
// or "@tag" for every PV with that lvm2 tag (pvchange --addtag), as
// lvcreate takes them after the VG. Anything else is ErrInvalidArgument,
// before a command runs.
func ValidatePVRefs(refs []string) error {
	if len(refs) == 0 {
		return fmt.Errorf("%w: no PVs named for a write cache", ErrInvalidArgument)
	}
	for _, r := range refs {
		ok := devicePathRE.MatchString(r) || pvTagRefRE.MatchString(r) && len(r) <= maxTagLen+1
		if !ok {
			return fmt.Errorf("%w: %q is neither a PV path (/dev/...) nor a PV tag (@tag)", ErrInvalidArgument, r)
		}
	}
	return nil
}

// CreateCacheVol makes name, an inactive linear LV of size bytes (whole
// extents of extent, rounded up) on the PVs refs name (ValidatePVRefs),
// tagged with tags: the cachevol AttachWriteCache puts in front of an LV.
// It is made inactive, as lvm2 attaches only an inactive cachevol, and so
// without zeroing (lvm2 refuses -an with --zero y): dm-writecache keeps
// its own superblock, which lvm2 writes at the attach.
func (c *Client) CreateCacheVol(ctx context.Context, vg, name string, size, extent uint64, refs, tags []string) error {
	args, err := cacheVolArgs(vg, name, size, extent, refs, tags)
	if err != nil {
		return err
	}
	if _, err := c.run(ctx, args...); err != nil {
		return fmt.Errorf("lvcreate cachevol %s/%s: %w", vg, name, err)
	}
	return nil
}

func cacheVolArgs(vg, name string, size, extent uint64, refs, tags []string) ([]string, error) {
	if err := validateVGLV(vg, name); err != nil {
		return nil, err
	}
	if err := ValidatePVRefs(refs); err != nil {
		return nil, err
	}
	if err := validateTags(tags); err != nil {
		return nil, err
	}
	o := CreateLVOptions{VG: vg, Name: name, Size: size}
	rounded := o.roundedSize(extent)
	if size == 0 || rounded == 0 {
		return nil, fmt.Errorf("lvcreate cachevol %s/%s: %w: size %d", vg, name, ErrInvalidArgument, size)
	}
	args := []string{"lvcreate", "--yes", "-an", "-Zn", "-n", name, "-L", bytesArg(rounded)}
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	return append(append(args, vg), refs...), nil
}

// AttachWriteCache puts cachevol (CreateCacheVol) in front of LV name as
// a dm-writecache (lvconvert --type writecache --cachevol). The LV may be
// active and in use. lvm2 renames the cachevol name_cvol and hides it.
func (c *Client) AttachWriteCache(ctx context.Context, vg, name, cachevol string) error {
	if err := validateVGLV(vg, name); err != nil {
		return err
	}
	if err := ValidateLVName(cachevol); err != nil {
		return err
	}
	if _, err := c.run(ctx, "lvconvert", "--yes", "--type", "writecache", "--cachevol", cachevol, vg+"/"+name); err != nil {
		return fmt.Errorf("lvconvert %s/%s: attach write cache %s: %w", vg, name, cachevol, err)
	}
	return nil
}

// SplitCache detaches LV name's cache (lvconvert --splitcache): lvm2 has
// dm-writecache write every dirty block back to the LV's own PVs first,
// so it takes as long as that data takes to write (callers run it as
// runner.DataWork), then leaves the cachevol as a visible, inactive LV
// under its own name again, holding copies of the LV's data.
func (c *Client) SplitCache(ctx context.Context, vg, name string) error {
	if err := validateVGLV(vg, name); err != nil {
		return err
	}
	if _, err := c.run(ctx, "lvconvert", "--yes", "--splitcache", vg+"/"+name); err != nil {
		return fmt.Errorf("lvconvert %s/%s: detach its cache: %w", vg, name, err)
	}
	return nil
}

// HasWriteCache tells an LV that has a write cache attached.
func (lv LV) HasWriteCache() bool {
	return lv.CacheVol != "" && strings.HasPrefix(lv.Layout, "writecache")
}

// AttachedCacheVol finds the hidden LV of the cachevol attached to LV
// name among all (ListAllLVs): its size and tags are the cachevol's.
func AttachedCacheVol(all []LV, name string) (LV, bool) {
	for _, lv := range all {
		if lv.Name != name || lv.Hidden || lv.CacheVol == "" {
			continue
		}
		for _, h := range all {
			if h.Hidden && h.Name == lv.CacheVol+cvolSuffix {
				return h, true
			}
		}
	}
	return LV{}, false
}
