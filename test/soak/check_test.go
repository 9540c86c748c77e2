//go:build vmtest

package soak

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/testenv"
)

// poolParts are the thin pool and the hidden LVs lvm2 keeps for it.
var poolParts = []string{pool, pool + "_tdata", pool + "_tmeta", "lvol0_pmspare"}

// stateTags are the tags a settled volume or snapshot may carry: its
// identity, type and (a thin snapshot's) creation time. Any other of
// Carve's (pending, deleting, copying, frozen, held, progress records) is
// an intent left behind.
var stateTags = []string{"carve.dev/volume", "carve.dev/snapshot", "carve.dev/name=", "carve.dev/params=", "carve.dev/stripes=",
	"carve.dev/mirrors=", "carve.dev/source=", "carve.dev/created="}

// check runs every invariant while no call is in flight and no kill
// comes (the caller holds the gate and quiet).
func (s *soak) check(when string) {
	s.stats.count(&s.stats.checks)
	m := s.model
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := context.Background()
	s.checkLVs(ctx, when)
	s.checkCapacity(ctx, when)
	s.checkListings(ctx, when)
	s.checkMounts(when)
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		s.fail("drop caches: %v", err)
	}
	read := 0
	for _, name := range sortedKeys(m.vols) {
		if v := m.vols[name]; v.staged {
			if err := s.verify(v); err != nil {
				s.fail("%s check: %v", when, err)
			}
			read += len(v.files)
		}
	}
	s.t.Logf("%6.1fs %s check: %d volumes, %d snapshots, %d files read", time.Since(s.began).Seconds(), when, len(m.vols), len(m.snaps), read)
}

// checkLVs: LVM holds the model's volumes and snapshots as the model has
// them, and nothing else.
func (s *soak) checkLVs(ctx context.Context, when string) {
	m := s.model
	lvs, err := s.lvm.ListAllLVs(ctx, vg)
	if err != nil {
		s.fail("%s check: lvs: %v", when, err)
		return
	}
	known := map[string]bool{}
	for _, p := range poolParts {
		known[p] = true
	}
	for _, v := range m.vols {
		known[v.lv] = true
		if v.layout.name == "raid1" {
			for _, part := range []string{"_rimage_0", "_rimage_1", "_rmeta_0", "_rmeta_1"} {
				known[v.lv+part] = true
			}
		}
	}
	for _, sn := range m.snaps {
		known[sn.lv] = true
	}
	byName := map[string]lvm.LV{}
	for _, lv := range lvs {
		byName[lv.Name] = lv
		if !known[lv.Name] {
			s.leakf("%s check: LV %s (origin %q, tags %v) is no volume or snapshot the CO holds", when, lv.Name, lv.Origin, lv.Tags)
		}
	}
	for _, name := range sortedKeys(m.vols) {
		v := m.vols[name]
		lv, ok := byName[v.lv]
		if !ok {
			s.fail("%s check: volume %s (%s) has no LV %s", when, v.name, v.layout.name, v.lv)
			continue
		}
		what := fmt.Sprintf("%s check: volume %s (%s)", when, v.name, v.layout.name)
		if int64(lv.Size) != v.size {
			s.fail("%s: LV of %d bytes, the CO was told %d", what, lv.Size, v.size)
		}
		if lv.Active != v.attached {
			s.fail("%s: LV active=%v, published to the node=%v", what, lv.Active, v.attached)
		}
		if want := map[string]string{"thick": "linear", "thin": "thin", "striped": "striped", "raid1": "raid1"}[v.layout.name]; !strings.Contains(lv.Layout, want) {
			s.fail("%s: LV layout %q", what, lv.Layout)
		}
		if v.layout.thin() != (lv.PoolLV == pool) {
			s.fail("%s: LV in pool %q", what, lv.PoolLV)
		}
		s.checkTags(lv, what)
	}
	for _, name := range sortedKeys(m.snaps) {
		sn := m.snaps[name]
		lv, ok := byName[sn.lv]
		what := fmt.Sprintf("%s check: snapshot %s of %s", when, sn.name, sn.source)
		if !ok {
			s.fail("%s: no LV %s", what, sn.lv)
			continue
		}
		if int64(lv.Size) != sn.size || lv.Active {
			s.fail("%s: LV of %d bytes (told %d), active=%v", what, lv.Size, sn.size, lv.Active)
		}
		s.checkTags(lv, what)
	}
}

func (s *soak) checkTags(lv lvm.LV, what string) {
	for _, tag := range lv.Tags {
		if !slices.ContainsFunc(stateTags, func(p string) bool { return tag == p || strings.HasSuffix(p, "=") && strings.HasPrefix(tag, p) }) {
			s.leakf("%s: LV %s still carries %s once calls settled", what, lv.Name, tag)
		}
	}
}

// checkCapacity: the VG's free space is its base less what the model's
// volumes and thick snapshots take, and GetCapacity tells for each
// layout what the capacity rules make of LVM's state. Thin capacity may
// come from a report up to --lvm-cache-max-age old (a pool's usage moved
// by writes, mkfs discards and copies is no change to LVM's metadata, so
// no report is dropped for it), so it is bounded, not exact: above zero,
// at most the pool's size.
func (s *soak) checkCapacity(ctx context.Context, when string) {
	g, err := s.lvm.GetVG(ctx, vg)
	if err != nil {
		s.fail("%s check: vgs: %v", when, err)
		return
	}
	if want := int64(s.base.Free) - s.model.thickUse(); int64(g.Free) != want {
		s.fail("%s check: VG free %s, the model's volumes and snapshots leave %s (%+d bytes)", when, fmtMiB(int64(g.Free)),
			fmtMiB(want), int64(g.Free)-want)
	}
	space, poolLV, err := s.space(ctx, g)
	if err != nil {
		s.fail("%s check: %v", when, err)
		return
	}
	c, _, err := s.carve.current()
	if err != nil {
		s.fail("%s check: %v", when, err)
		return
	}
	for _, l := range layouts {
		resp, err := c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: l.params,
			VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
		if err != nil {
			s.fail("%s check: GetCapacity %s: %v", when, l.name, err)
			continue
		}
		want := volume.CapacityOf(space, typeOf(l), volume.DefaultOverprovision)
		got := resp.GetAvailableCapacity()
		if l.thin() {
			if got <= 0 || got > int64(poolLV.Size) {
				s.fail("%s check: GetCapacity thin %d bytes, the pool has %d free of %d", when, got, want.AvailableBytes, poolLV.Size)
			}
			continue
		}
		if got != want.AvailableBytes || resp.GetMaximumVolumeSize().GetValue() != want.MaximumVolumeBytes {
			s.fail("%s check: GetCapacity %s: %d bytes, largest volume %d; LVM's state gives %d and %d", when, l.name, got,
				resp.GetMaximumVolumeSize().GetValue(), want.AvailableBytes, want.MaximumVolumeBytes)
		}
	}
}

// space is the VG's space as the capacity rules take it, read by the test.
func (s *soak) space(ctx context.Context, g lvm.VG) (volume.VGSpace, lvm.LV, error) {
	sp := volume.VGSpace{Name: vg, Size: g.Size, Free: g.Free, ExtentSize: g.ExtentSize}
	pvs, err := s.lvm.ListVGPVs(ctx, vg)
	if err != nil {
		return sp, lvm.LV{}, err
	}
	for _, pv := range pvs {
		if pv.Allocatable() {
			sp.PVFree = append(sp.PVFree, pv.Free)
		}
	}
	p, err := s.lvm.GetLV(ctx, vg, pool)
	if err != nil {
		return sp, p, err
	}
	sp.Pools = []volume.PoolSpace{{Name: pool, Size: p.Size, Free: p.ThinPoolFree()}}
	return sp, p, nil
}

func typeOf(l layout) volume.Type {
	o := l.lvOptions(0)
	return volume.Type{Stripes: o.Stripes, Mirrors: o.Mirrors, ThinPool: o.ThinPool}
}

// checkListings: a restarted carve knows every volume (and whether it is
// published) and every snapshot, and no other.
func (s *soak) checkListings(ctx context.Context, when string) {
	m := s.model
	c, _, err := s.carve.current()
	if err != nil {
		s.fail("%s check: %v", when, err)
		return
	}
	want, got := map[string]bool{}, map[string]bool{}
	for _, v := range m.vols {
		want[v.id] = v.attached
	}
	if err := listAll(func(token string) (string, error) {
		resp, err := c.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: token})
		for _, e := range resp.GetEntries() {
			got[e.GetVolume().GetVolumeId()] = slices.Contains(e.GetStatus().GetPublishedNodeIds(), node)
		}
		return resp.GetNextToken(), err
	}); err != nil {
		s.fail("%s check: ListVolumes: %v", when, err)
	}
	s.compare(when, "ListVolumes (volume: published)", want, got)
	want, got = map[string]bool{}, map[string]bool{}
	for _, sn := range m.snaps {
		want[sn.id] = true
	}
	if err := listAll(func(token string) (string, error) {
		resp, err := c.Controller.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: token})
		for _, e := range resp.GetEntries() {
			got[e.GetSnapshot().GetSnapshotId()] = e.GetSnapshot().GetReadyToUse()
		}
		return resp.GetNextToken(), err
	}); err != nil {
		s.fail("%s check: ListSnapshots: %v", when, err)
	}
	s.compare(when, "ListSnapshots (snapshot: ready)", want, got)
}

func listAll(page func(token string) (string, error)) error {
	token := ""
	for {
		next, err := page(token)
		if err != nil || next == "" {
			return err
		}
		token = next
	}
}

func (s *soak) compare(when, what string, want, got map[string]bool) {
	if !mapsEqual(want, got) {
		s.fail("%s check: %s answers %v, the CO holds %v", when, what, got, want)
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkMounts: the mounts under the test directory are the staged
// volumes' staging paths and the published ones' targets.
func (s *soak) checkMounts(when string) {
	var want []string
	for _, v := range s.model.vols {
		if v.staged {
			want = append(want, v.staging())
		}
		if v.published {
			want = append(want, v.target())
		}
	}
	var got []string
	for _, mi := range testenv.MountsUnder(s.t, s.dir) {
		got = append(got, strings.TrimPrefix(mi.MountPoint, s.dir+"/"))
	}
	slices.Sort(want)
	slices.Sort(got)
	for i, g := range got {
		if !slices.Contains(want, g) || i > 0 && got[i-1] == g {
			s.leakf("%s check: mount %s is no staging or target path of the CO's (or is mounted twice)", when, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			s.fail("%s check: %s is not mounted", when, w)
		}
	}
}

func (s *soak) leakf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.stats.leak(msg)
	s.fail("%s", msg)
}

// finish brings every volume with files up and reads them, then deletes
// every volume and snapshot as a CO would, and checks that the VG is back to
// its base: only the thin pool, all its space free, nothing mounted.
func (s *soak) finish() {
	if s.hasFailed() {
		s.t.Log("not finishing: the run failed")
		return
	}
	s.check("final")
	w := &worker{s: s, t: s.t}
	for _, name := range sortedKeys(s.model.vols) {
		v := s.model.vols[name]
		read := len(v.files) > 0
		steps := []struct {
			when bool
			do   func(*vol) error
		}{
			{read && !v.attached, w.attach}, {read && !v.staged, w.stage}, {v.published, w.unpublish},
			{read, s.verify}, {read || v.staged, w.unstage}, {read || v.attached, w.detach}, {true, w.deleteVolume},
		}
		for _, step := range steps {
			if !step.when {
				continue
			}
			if err := step.do(v); err != nil {
				s.fail("final: volume %s (%s): %v", v.name, v.layout.name, err)
				return
			}
		}
	}
	for _, name := range sortedKeys(s.model.snaps) {
		if err := w.deleteSnapshot(s.model.snaps[name]); err != nil {
			s.fail("final: %v", err)
			return
		}
	}
	s.check("after deleting everything")
	ctx := context.Background()
	lvs, err := s.lvm.ListAllLVs(ctx, vg)
	if err != nil {
		s.fail("final: lvs: %v", err)
	}
	for _, lv := range lvs {
		if !slices.Contains(poolParts, lv.Name) {
			s.leakf("final: LV %s left", lv.Name)
		}
	}
	for _, name := range testenv.Layers(s.t, vg) {
		s.leakf("final: layer %s left", name)
	}
	if g, err := s.lvm.GetVG(ctx, vg); err != nil || g.Free != s.base.Free {
		s.fail("final: VG free %d bytes (%v), %d before the soak", g.Free, err, s.base.Free)
	}
}
