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
	"carve.dev/carve/test/soakmodel"
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
	s.stats.FullCheck()
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
	for _, v := range m.soak.Volumes {
		if v.staged {
			if err := s.verify(v); err != nil {
				s.fail("%s check: %v", when, err)
			}
			read += v.Writes.Count()
		}
	}
	s.stats.Checked("acknowledged writes read back")
	s.t.Logf("%6.1fs %s check: %d volumes, %d snapshots, %d files read", time.Since(s.began).Seconds(), when, len(m.soak.Volumes), len(m.soak.Snapshots), read)
}

// checkLVs: LVM holds the model's volumes and snapshots as the model has
// them (layout, size, activation), and nothing else; thin volumes are in
// the pool, and no LV carries an intent tag.
func (s *soak) checkLVs(ctx context.Context, when string) {
	m := s.model
	lvs, err := s.lvm.ListAllLVs(ctx, vg)
	if err != nil {
		s.fail("%s check: lvs: %v", when, err)
		return
	}
	ignored := slices.Clone(poolParts)
	for _, v := range m.soak.Volumes {
		if v.Layout.Segtype == "raid1" {
			for _, part := range []string{"_rimage_0", "_rimage_1", "_rmeta_0", "_rmeta_1"} {
				ignored = append(ignored, v.LV+part)
			}
		}
	}
	thin := map[string]bool{}
	for _, v := range m.soak.Volumes {
		thin[v.LV] = v.Layout.Thin()
	}
	got := map[string]soakmodel.LVState{}
	for _, lv := range lvs {
		if slices.Contains(ignored, lv.Name) {
			continue
		}
		got[lv.Name] = soakmodel.LVState{Segtype: segtype(lv.Layout), Size: int64(lv.Size), Active: lv.Active}
		if isThin, ok := thin[lv.Name]; ok && isThin != (lv.PoolLV == pool) {
			s.fail("%s check: LV %s in pool %q", when, lv.Name, lv.PoolLV)
		}
		s.checkTags(lv, when+" check")
	}
	soakmodel.Same(s.verdicts, when+" check: LVs of "+vg+" (layout, size, activation)", got, m.soak.WantLVs(m.extent))
	s.stats.Checked("LVs as the model")
}

// segtype is the model's word for lvs's lv_layout: "thin,sparse" is
// thin, "raid,raid1" raid1.
func segtype(layout string) string {
	f := strings.Split(layout, ",")
	if f[0] == "thin" {
		return "thin"
	}
	return f[len(f)-1]
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
	s.verdicts.Free(vg, int64(s.base.Free), s.model.soak.ThickUse(s.model.extent), int64(g.Free))
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
		resp, err := c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: l.Params,
			VolumeCapabilities: []*csi.VolumeCapability{mountCap()}})
		if err != nil {
			s.fail("%s check: GetCapacity %s: %v", when, l.Name, err)
			continue
		}
		want := volume.CapacityOf(space, typeOf(l), volume.DefaultOverprovision)
		got := resp.GetAvailableCapacity()
		if l.Thin() {
			if got <= 0 || got > int64(poolLV.Size) {
				s.fail("%s check: GetCapacity thin %d bytes, the pool has %d free of %d", when, got, want.AvailableBytes, poolLV.Size)
			}
			continue
		}
		if got != want.AvailableBytes || resp.GetMaximumVolumeSize().GetValue() != want.MaximumVolumeBytes {
			s.fail("%s check: GetCapacity %s: %d bytes, largest volume %d; LVM's state gives %d and %d", when, l.Name, got,
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

func typeOf(l *soakmodel.Layout) volume.Type {
	o := l.LVOptions(0)
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
	for _, v := range m.soak.Volumes {
		want[v.ID] = v.Attached
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
	soakmodel.Same(s.verdicts, when+" check: ListVolumes (volume: published)", got, want)
	want, got = map[string]bool{}, map[string]bool{}
	for _, sn := range m.soak.Snapshots {
		want[sn.ID] = true
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
	soakmodel.Same(s.verdicts, when+" check: ListSnapshots (snapshot: ready)", got, want)
	s.stats.Checked("listings as the model")
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

// checkMounts: the mounts under the test directory are the staged
// volumes' staging paths and the published ones' targets.
func (s *soak) checkMounts(when string) {
	want, got := map[string]int{}, map[string]int{}
	for _, v := range s.model.soak.Volumes {
		if v.staged {
			want[v.staging()] = 1
		}
		if v.published {
			want[v.target()] = 1
		}
	}
	for _, mi := range testenv.MountsUnder(s.t, s.dir) {
		got[strings.TrimPrefix(mi.MountPoint, s.dir+"/")]++
	}
	soakmodel.Same(s.verdicts, when+" check: mounts under the test directory (path: times mounted)", got, want)
	s.stats.Checked("mounts as the model")
}

func (s *soak) leakf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.stats.Leak(msg)
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
	for _, v := range slices.Clone(s.model.soak.Volumes) {
		read := v.Writes.Count() > 0
		steps := []struct {
			when bool
			do   func(*vol) error
		}{
			{read && !v.Attached, w.attach}, {read && !v.staged, w.stage}, {v.published, w.unpublish},
			{read, s.verify}, {read || v.staged, w.unstage}, {read || v.Attached, w.detach}, {true, w.deleteVolume},
		}
		for _, step := range steps {
			if !step.when {
				continue
			}
			if err := step.do(v); err != nil {
				s.fail("final: volume %s (%s): %v", v.Name, v.Layout.Name, err)
				return
			}
		}
	}
	for _, sn := range slices.Clone(s.model.soak.Snapshots) {
		if err := w.deleteSnapshot(sn); err != nil {
			s.fail("final: %v", err)
			return
		}
	}
	s.verdicts.Ending = true
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
