package volume

import (
	"slices"

	"carve.dev/carve/lvm"
)

// Capacity is what a volume group (or thin pool) can still give.
type Capacity struct {
	// AvailableBytes is the space left for volumes of the asked type.
	AvailableBytes int64
	// MaximumVolumeBytes is the largest single volume of that type that
	// fits now; the scheduler's capacity tracking compares requests to it.
	MaximumVolumeBytes int64
}

// CapacityOf is what volumes of type t can still get from a VG's space:
//   - linear: the VG's free space, all of it usable by one LV.
//   - raid1 with N legs: each leg needs its own PV, so the largest volume is
//     the N-th largest PV's free space less the leg's raid metadata (an
//     extent) and, with integrity, its integrity metadata; all legs
//     together may take the VG's free space divided by N.
//   - raid5, raid6, raid10 with N data stripes: K images (N+1, N+2, 2N),
//     each on its own PV, so the largest volume is N times the K-th
//     largest PV's free space less an image's raid metadata (an extent);
//     all images together may take the VG's free space times N/K.
//   - striped over N PVs: N times the N-th largest PV's free space.
//   - thin: the pool's free data space times the over-provisioning ratio
//     (nothing from a pool that is not reported).
//   - none of any type from a VG whose metadata area is (nearly) full:
//     lvm2 refuses every new LV there, whatever data space is free.
//
// Standalone mode applies it to what it reads from LVM; the controller in
// cluster mode to what the node agents report.
func CapacityOf(vg VGSpace, t Type, overprovision float64) Capacity {
	if vg.MetadataFull() || vg.Unchangeable() {
		return Capacity{}
	}
	if t.IsThin() {
		for _, p := range vg.Pools {
			if p.Name == t.ThinPool {
				room := int64(ThinRoom(p.Free, overprovision))
				return Capacity{AvailableBytes: room, MaximumVolumeBytes: room}
			}
		}
		return Capacity{}
	}
	legs := max(t.Mirrors+1, t.Stripes, 1)
	if t.RAID != "" {
		legs = lvm.RAIDImages(t.RAID, t.Stripes)
	}
	if legs == 1 {
		return Capacity{AvailableBytes: int64(vg.Free), MaximumVolumeBytes: int64(vg.Free)}
	}
	if len(vg.PVFree) < legs {
		return Capacity{}
	}
	free := slices.Clone(vg.PVFree)
	slices.Sort(free)
	slices.Reverse(free)
	perLeg := free[legs-1]
	if t.Mirrors > 0 || t.RAID != "" {
		// The largest size whose leg (data, raid metadata, integrity
		// metadata) fits the legs-th largest PV: lvm's own rule for what a
		// leg takes, which CheckPlacement applies before lvcreate, so the
		// promise and the check cannot disagree.
		o := lvm.CreateLVOptions{Mirrors: t.Mirrors, Integrity: t.Integrity, RAID: t.RAID, Stripes: t.Stripes}
		if t.RAID == "" {
			o.Stripes = 0
		}
		data := max(o.Stripes, 1)
		largest := largestFitting(vg.ExtentSize*uint64(data), func(size uint64) bool {
			o.Size = size
			return lvm.LegFootprint(o, vg.ExtentSize) <= perLeg
		})
		// What the data of all legs may take: a data share of the free space.
		return Capacity{AvailableBytes: int64(vg.Free / uint64(legs) * uint64(data)), MaximumVolumeBytes: int64(largest)}
	}
	return Capacity{AvailableBytes: int64(vg.Free), MaximumVolumeBytes: int64(perLeg) * int64(legs)}
}

// largestFitting is the largest multiple of unit for which fits holds, 0
// for none; fits must hold for every size below one that it holds for.
func largestFitting(unit uint64, fits func(uint64) bool) uint64 {
	if unit == 0 {
		return 0
	}
	lo, hi := uint64(0), uint64(1)
	for fits(hi*unit) && hi < 1<<62/unit {
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // fits(lo*unit), not fits(hi*unit)
		mid := lo + (hi-lo)/2
		if fits(mid * unit) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo * unit
}

// VGSpace is a volume group's space as the capacity rules need it; the
// node agent publishes it in its NodeStorage resource.
type VGSpace struct {
	Name                   string
	Size, Free, ExtentSize uint64
	// Tags are the VG's lvm2 tags (a class may choose VGs by one).
	Tags []string
	// PVFree is each allocatable PV's free space.
	PVFree []uint64
	Pools  []PoolSpace
	// MetadataSize and MetadataFree are the VG's metadata area and what
	// is left of it for the next version (lvm.VG); a size of 0 is not
	// reported (an agent from before the field).
	MetadataSize, MetadataFree uint64
	// Health lists the VG's problems, empty when it is healthy: PVs
	// missing, or the VG unreadable (then it reports no space at all).
	Health []Problem
}

// MetadataReserve is the metadata room below which a VG counts as full.
// One of Carve's volumes takes about 480 bytes of it (a thick linear one
// with its tags; a raid1 one a few times that, for its hidden images),
// so it is room for a few dozen: the scheduler stops sending volumes
// before lvm2 starts refusing them, with room left for the snapshots and
// changes of the volumes already there.
const MetadataReserve = 16 << 10

// Unchangeable tells a VG with a health problem (a PV missing, or the VG
// unreadable): lvm2 writes no metadata there and Carve answers UNAVAILABLE
// to every change, so it has no capacity for the scheduler to send
// volumes to, whatever space its report shows.
func (vg VGSpace) Unchangeable() bool { return len(vg.Health) > 0 }

// MetadataFull tells a VG whose metadata area has less than
// MetadataReserve left.
func (vg VGSpace) MetadataFull() bool {
	return vg.MetadataSize > 0 && vg.MetadataFree < MetadataReserve
}

// PoolSpace is a thin pool's data space.
type PoolSpace struct {
	Name                         string
	Size, Free                   uint64
	DataPercent, MetadataPercent float64
}
