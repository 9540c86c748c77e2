package lvmvol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// busyLVM is a VG whose lock is taken by a queue of Carve's own commands:
// a report waits until its caller gives up. alive is what lvm.Cache.Alive
// would say.
type busyLVM struct {
	*lvmfake.LVM
	alive   bool
	waited  int
	aliveOf []string
}

func (b *busyLVM) GetVG(ctx context.Context, _ lvm.Reads, _ string) (lvm.VG, error) {
	b.waited++
	<-ctx.Done()
	return lvm.VG{}, ctx.Err()
}

// DerivedFromLVs builds from the fake's LVs: busyLVM is a
// lvmvol.ReportCache for Alive's sake.
func (b *busyLVM) DerivedFromLVs(ctx context.Context, r lvm.Reads, vg, _ string, build func([]lvm.LV) (any, error)) (any, error) {
	lvs, err := b.ListAllLVs(ctx, r, vg)
	if err != nil {
		return nil, err
	}
	return build(lvs)
}

func (b *busyLVM) Alive(vg string, within time.Duration) bool {
	b.aliveOf = append(b.aliveOf, vg)
	return b.alive && within > 0
}

// TestProbeTakesRecentCommandsAsProof: on a node busy with a burst of
// claims, the liveness probe's own vgs waited for the VG's lock past the
// probe's deadline, three probes failed, and kubelet restarted carve node
// in the middle of the work (make bench-cluster, 50 replicas). A VG with a
// command that succeeded recently is alive without a read; one with none
// is read, and a read that cannot finish fails the probe, as a hung lvm2
// must.
func TestProbeTakesRecentCommandsAsProof(t *testing.T) {
	b := &busyLVM{LVM: lvmfake.New(100*mib, vg), alive: true}
	m := lvmvol.NewManager(lvmvol.Config{LVM: b, Cache: b, Wiper: b.LVM, Node: node, VolumeGroups: []string{vg}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := m.Probe(ctx); err != nil || b.waited != 0 || len(b.aliveOf) != 1 || b.aliveOf[0] != vg {
		t.Fatalf("probe of a VG busy with successful commands: %v, %d reads waited, Alive asked of %v", err, b.waited, b.aliveOf)
	}
	b.alive = false
	if err := m.Probe(ctx); !errors.Is(err, context.DeadlineExceeded) || b.waited != 1 {
		t.Fatalf("probe of a VG with no recent success and a read that cannot finish: %v, %d reads; want the deadline", err, b.waited)
	}
}
