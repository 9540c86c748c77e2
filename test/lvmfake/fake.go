// Package lvmfake is an in-memory stand-in for the lvm commands lvmvol
// uses, for unit tests of the logic around LVM: idempotency, crash
// recovery, error mapping. The real lvm2 is exercised by the VM suites.
package lvmfake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"carve.dev/carve/lvm"
)

// ExtentSize of every fake VG: lvm2's default.
const ExtentSize = 4 << 20

// LVM holds volume groups and their LVs in memory. Fail, when set, is
// consulted before each call ("CreateLV", "Deactivate", ...) and its error
// returned, to simulate failures and crashes between steps.
type LVM struct {
	mu    sync.Mutex
	vgs   map[string]*lvm.VG
	lvs   map[string]map[string]*lvm.LV
	Calls []string
	Fail  func(call string) error
	// Wiped lists the device of each Zero call, in order; Zeroed the
	// ranges.
	Wiped  []string
	Zeroed []Range
	// minors numbers the device-mapper devices of activations.
	minors int
	// Copied lists the ranges of each Copy, by destination device.
	Copied   []Range
	copyGate chan struct{}
	made     int // LVs made so far, for their UUIDs
	// pvs: PVs per VG where not 1 (SetPVCount); images: raid images per
	// raid1 LV, by vg/name.
	pvs    map[string]int
	images map[string]int
	// cachevols: the cachevol attached to an LV, by vg/name, out of lvs
	// while attached (lvm2 hides it).
	cachevols map[string]*lvm.LV
	// ConvertSync, when set, is how far new legs of a conversion are in
	// sync when ConvertMirrors returns (else at once: 100).
	ConvertSync float64
	// thin: the thin LVs' mapped chunks (thinblocks.go); OnThinRange,
	// when set, is called before each range ThinAllocated or ThinDelta
	// hands on.
	thin        thinMaps
	OnThinRange func()
}

// uuid names a new LV uniquely, as lvm2 does. f.mu is held.
func (f *LVM) uuid() string {
	f.made++
	return fmt.Sprintf("fake-uuid-%d", f.made)
}

// Range is a part of a device: length bytes from offset.
type Range struct {
	Device         string
	Offset, Length int64
}

// dmMajor is the device-mapper major the fake hands out, as on most hosts.
const dmMajor = 253

// activate gives lv a device number, as the kernel does on activation,
// and the live state (attr bit 5): an activation completes one cut short
// (see lvm.LV.Live).
func (f *LVM) activate(lv *lvm.LV) {
	if !lv.Active || lv.KernelMajor <= 0 {
		f.minors++
		lv.KernelMajor, lv.KernelMinor = dmMajor, f.minors
	}
	lv.Active = true
	setState(lv, 'a')
}

func deactivate(lv *lvm.LV) {
	lv.Active, lv.KernelMajor, lv.KernelMinor = false, -1, -1
	setState(lv, '-')
}

// setState sets the state bit of lv's attr, when it has one.
func setState(lv *lvm.LV, state byte) {
	if len(lv.Attr) > 4 {
		b := []byte(lv.Attr)
		b[4] = state
		lv.Attr = string(b)
	}
}

// New returns a fake with one VG per name, each of size bytes.
func New(size uint64, vgs ...string) *LVM {
	f := &LVM{vgs: map[string]*lvm.VG{}, lvs: map[string]map[string]*lvm.LV{}}
	for _, name := range vgs {
		f.AddVG(name, size)
	}
	return f
}

func (f *LVM) call(name string) error {
	f.Calls = append(f.Calls, name)
	if f.Fail != nil {
		return f.Fail(name)
	}
	return nil
}

// Put stores lv as is (for LVs made "outside Carve" or left by a crash).
func (f *LVM) Put(lv lvm.LV) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := lv
	if l.ExtentSize == 0 {
		l.ExtentSize = ExtentSize
	}
	f.lvs[lv.VGName][lv.Name] = &l
	if lv.PoolLV == "" {
		f.vgs[lv.VGName].Free -= lv.Size
	}
}

// LV returns a copy of an LV and whether it exists.
func (f *LVM) LV(vg, name string) (lvm.LV, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lv, ok := f.lvs[vg][name]
	if !ok {
		return lvm.LV{}, false
	}
	return *lv, true
}

// SetOpen marks an LV open (mounted) or not.
func (f *LVM) SetOpen(vg, name string, open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lvs[vg][name].Open = open
}

// The fake has no cache: its reads answer from its state whatever
// lvm.Reads they are given.
func (f *LVM) GetVG(_ context.Context, _ lvm.Reads, vg string) (lvm.VG, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("GetVG"); err != nil {
		return lvm.VG{}, err
	}
	v, ok := f.vgs[vg]
	if !ok {
		return lvm.VG{}, fmt.Errorf("vgs %s: %w", vg, lvm.ErrNotFound)
	}
	return *v, nil
}

func (f *LVM) ListLVs(_ context.Context, _ lvm.Reads, vg string) ([]lvm.LV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListLVs"); err != nil {
		return nil, err
	}
	var out []lvm.LV
	for _, lv := range f.lvs[vg] {
		out = append(out, f.reported(lv))
	}
	return out, nil
}

// reported is lv as lvs reports it: with its VG's missing PVs.
func (f *LVM) reported(lv *lvm.LV) lvm.LV {
	out := *lv
	if vg, ok := f.vgs[lv.VGName]; ok {
		out.VGMissingPVs = vg.MissingPVCount
	}
	return out
}

func (f *LVM) GetLV(_ context.Context, _ lvm.Reads, vg, name string) (lvm.LV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("GetLV"); err != nil {
		return lvm.LV{}, err
	}
	lv, ok := f.lvs[vg][name]
	if !ok {
		return lvm.LV{}, fmt.Errorf("lvs %s/%s: %w", vg, name, lvm.ErrNotFound)
	}
	return f.reported(lv), nil
}

// CreateLV creates an LV, active unless o.Inactive (thin only), as
// lvcreate does.
func (f *LVM) CreateLV(_ context.Context, o lvm.CreateLVOptions) (lvm.LV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateLV"); err != nil {
		return lvm.LV{}, err
	}
	vet("CreateLV", o.Tags)
	vg := f.vgs[o.VG]
	if err := o.Validate(); err != nil {
		return lvm.LV{}, err
	}
	if _, ok := f.lvs[o.VG][o.Name]; ok {
		return lvm.LV{}, fmt.Errorf("lvcreate %s/%s: %w", o.VG, o.Name, lvm.ErrAlreadyExists)
	}
	size := lvm.RoundUp(o.Size, vg.ExtentSize)
	lv := &lvm.LV{Name: o.Name, VGName: o.VG, UUID: f.uuid(), Size: size, Tags: slices.Clone(o.Tags),
		Path: "/dev/" + o.VG + "/" + o.Name, Layout: "linear", ExtentSize: vg.ExtentSize}
	f.activate(lv)
	if o.ThinPool != "" {
		if _, ok := f.lvs[o.VG][o.ThinPool]; !ok {
			return lvm.LV{}, fmt.Errorf("lvcreate %s/%s: pool %w", o.VG, o.Name, lvm.ErrNotFound)
		}
		lv.PoolLV, lv.Layout, lv.Attr = o.ThinPool, "thin,sparse", "Vwi-a-tz--"
		if o.Inactive {
			deactivate(lv)
		}
	} else {
		take := size * uint64(o.Mirrors+1) // every raid1 leg
		if o.RAID != "" {
			// Every image: a share of the data each.
			take = size / uint64(o.Stripes) * uint64(lvm.RAIDImages(o.RAID, o.Stripes))
			lv.Layout = "raid," + o.RAID
		}
		if take > vg.Free {
			return lvm.LV{}, fmt.Errorf("lvcreate %s/%s: %w", o.VG, o.Name, lvm.ErrNoSpace)
		}
		vg.Free -= take
		if o.Mirrors > 0 {
			f.setMirrors(lv, o.Mirrors)
		}
	}
	f.lvs[o.VG][o.Name] = lv
	return *lv, nil
}

// RemoveLVOf is RemoveLV; the fake checks dependents on its own state.
func (f *LVM) RemoveLVOf(ctx context.Context, lv lvm.LV) error {
	return f.remove("RemoveLVOf", lv.VGName, lv.Name)
}

// RetagAndActivate changes the tags, then the activation, as lvm2 does;
// an LV with the activation-skip flag is refused (lvm2 would skip it).
func (f *LVM) RetagAndActivate(_ context.Context, vg, name string, add, remove []string, active bool) error {
	return f.change("RetagAndActivate", vg, name, func(lv *lvm.LV) error {
		vet("RetagAndActivate", add)
		if active && lv.SkipActivation {
			return fmt.Errorf("activation skip flag set: %w", lvm.ErrInvalidArgument)
		}
		lv.Tags = slices.DeleteFunc(lv.Tags, func(t string) bool { return slices.Contains(remove, t) })
		for _, t := range add {
			if !slices.Contains(lv.Tags, t) {
				lv.Tags = append(lv.Tags, t)
			}
		}
		cows := f.cowSnapshotsOf(vg, lv.Name)
		if !active {
			for _, l := range append(cows, lv) {
				if l.Open {
					return lvm.ErrBusy
				}
			}
		}
		for _, l := range append(cows, lv) {
			if active {
				f.activate(l)
			} else {
				deactivate(l)
			}
		}
		return nil
	})
}

// MakeNodes is recorded: the fake has no /dev to repair.
func (f *LVM) MakeNodes(_ context.Context, vg string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("MakeNodes"); err != nil {
		return err
	}
	if _, ok := f.lvs[vg]; !ok {
		return fmt.Errorf("vgmknodes %s: %w", vg, lvm.ErrNotFound)
	}
	return nil
}

func (f *LVM) RemoveLV(_ context.Context, vg, name string) error {
	return f.remove("RemoveLV", vg, name)
}

func (f *LVM) remove(call, vg, name string) error {
	return f.change(call, vg, name, func(lv *lvm.LV) error {
		if lv.Open || lv.HasCOWSnapshots() {
			return lvm.ErrBusy
		}
		if lv.PoolLV == "" {
			f.vgs[vg].Free += lv.Size * uint64(max(f.images[vg+"/"+name], 1))
		}
		delete(f.images, vg+"/"+name)
		f.dropCache(vg, name)
		if o, ok := f.lvs[vg][lv.Origin]; ok && lv.IsCOWSnapshot() {
			o.Attr = ""
		}
		delete(f.lvs[vg], name)
		delete(f.thin.chunk, vg+"/"+name)
		return nil
	})
}

// ErrChangesOrigin is what the fake answers, as lvm2 does without --yes
// (it asks, and a command without a terminal answers no), to activating a
// COW snapshot whose origin is inactive: lvm2 keeps a COW snapshot active
// only with its origin.
var ErrChangesOrigin = errors.New("change of snapshot would also change its origin: refused")

func (f *LVM) Activate(_ context.Context, vg, name string) error {
	return f.change("Activate", vg, name, func(lv *lvm.LV) error {
		if o, ok := f.lvs[vg][lv.Origin]; ok && lv.IsCOWSnapshot() && !o.Active {
			return ErrChangesOrigin
		}
		// An origin's COW snapshots are activated with it.
		for _, l := range append(f.cowSnapshotsOf(vg, lv.Name), lv) {
			f.activate(l)
		}
		return nil
	})
}

// Deactivate deactivates an LV and, as lvm2 does, the COW snapshots of an
// origin with it; busy while any of them is open.
func (f *LVM) Deactivate(_ context.Context, vg, name string) error {
	return f.change("Deactivate", vg, name, func(lv *lvm.LV) error {
		cows := f.cowSnapshotsOf(vg, lv.Name)
		for _, l := range append(cows, lv) {
			if l.Open {
				return lvm.ErrBusy
			}
		}
		for _, l := range append(cows, lv) {
			deactivate(l)
		}
		return nil
	})
}

// cowSnapshotsOf lists the COW snapshots of origin. f.mu is held.
func (f *LVM) cowSnapshotsOf(vg, origin string) []*lvm.LV {
	var out []*lvm.LV
	for _, l := range f.lvs[vg] {
		if l.IsCOWSnapshot() && l.Origin == origin {
			out = append(out, l)
		}
	}
	return out
}

func (f *LVM) AddTags(_ context.Context, vg, name string, tags ...string) error {
	return f.change("AddTags", vg, name, func(lv *lvm.LV) error {
		vet("AddTags", tags)
		for _, t := range tags {
			if !slices.Contains(lv.Tags, t) {
				lv.Tags = append(lv.Tags, t)
			}
		}
		return nil
	})
}

func (f *LVM) RemoveTags(_ context.Context, vg, name string, tags ...string) error {
	return f.change("RemoveTags", vg, name, func(lv *lvm.LV) error {
		lv.Tags = slices.DeleteFunc(lv.Tags, func(t string) bool { return slices.Contains(tags, t) })
		return nil
	})
}

func (f *LVM) change(call, vg, name string, do func(*lvm.LV) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(call); err != nil {
		return err
	}
	lv, ok := f.lvs[vg][name]
	if !ok {
		return fmt.Errorf("%s %s/%s: %w", call, vg, name, lvm.ErrNotFound)
	}
	if err := do(lv); err != nil {
		return fmt.Errorf("%s %s/%s: %w", call, vg, name, err)
	}
	return nil
}

// Zero records the range; with Flush, it implements lvmvol.Wiper. Its
// call is named "Wipe".
func (f *LVM) Zero(_ context.Context, device string, offset, length int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Wipe"); err != nil {
		return err
	}
	lv, err := f.activeDevice(device)
	if err != nil {
		return fmt.Errorf("zero %s: %w", device, err)
	}
	if offset < 0 || length <= 0 || uint64(offset+length) > lv.Size {
		return fmt.Errorf("zero %s: range %d+%d outside its %d bytes", device, offset, length, lv.Size)
	}
	f.Wiped = append(f.Wiped, device)
	f.Zeroed = append(f.Zeroed, Range{Device: device, Offset: offset, Length: length})
	return nil
}

// Flush checks the device; its call is named "Flush".
func (f *LVM) Flush(_ context.Context, device string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Flush"); err != nil {
		return err
	}
	if _, err := f.activeDevice(device); err != nil {
		return fmt.Errorf("flush %s: %w", device, err)
	}
	return nil
}

// activeDevice finds the active LV behind a /dev/vg/lv path.
func (f *LVM) activeDevice(device string) (*lvm.LV, error) {
	parts := strings.Split(device, "/") // "", "dev", vg, lv
	if len(parts) != 4 || parts[1] != "dev" {
		return nil, fmt.Errorf("not a /dev/vg/lv path")
	}
	if lv, ok := f.lvs[parts[2]][parts[3]]; ok && lv.Active {
		return lv, nil
	}
	return nil, fmt.Errorf("no such active device")
}
