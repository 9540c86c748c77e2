//go:build bench

package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/bench/results"
)

// thinSnapshots compares CreateSnapshot of a thin volume, and
// CreateVolume from that snapshot (a restore), with lvcreate -s of the
// same LV and of the snapshot: both are thin snapshots in lvm2.
func (e *env) thinSnapshots() {
	ctx := context.Background()
	origin, err := e.create(ctx, e.name("pvc"), 256*mib, true, "")
	e.must(err)
	originLV := lvName(origin.ID)
	var snapK, restK cmdsPerOp
	var rawSnap, rawRest, carveSnap, carveRest []float64
	for range e.cfg.reps {
		snap, rest := e.name("raw-snap"), e.name("raw-rest")
		rawSnap = append(rawSnap, e.timed(func() error { return e.lvmCmd(ctx, "lvcreate", "-s", "-n", snap, vg+"/"+originLV) }))
		rawRest = append(rawRest, e.timed(func() error { return e.lvmCmd(ctx, "lvcreate", "-s", "-n", rest, vg+"/"+snap) }))
		e.must(e.rawRemove(ctx, rest))
		e.must(e.rawRemove(ctx, snap))

		var s *csi.Snapshot
		carveSnap = append(carveSnap, e.carveTimed(&snapK, func() (err error) {
			s, err = e.snapshot(ctx, e.name("snap"), origin.ID, 0)
			return err
		}))
		var restored string
		carveRest = append(carveRest, e.carveTimed(&restK, func() (err error) {
			restored, err = e.restore(ctx, e.name("pvc"), 256*mib, params(true), s.GetSnapshotId())
			return err
		}))
		e.must(e.deleteVolume(ctx, restored))
		e.must(e.deleteSnapshot(ctx, s.GetSnapshotId()))
	}
	e.add(results.Row{Section: "snapshots", Op: "thin CreateSnapshot vs lvcreate -s", Unit: "s",
		RawS: rawSnap, CarveS: carveSnap, Goal: ratioGoal("<=", 1.15)}, &snapK)
	e.add(results.Row{Section: "snapshots", Op: "thin restore (CreateVolume from snapshot) vs lvcreate -s", Unit: "s",
		RawS: rawRest, CarveS: carveRest, Goal: ratioGoal("<=", 1.15)}, &restK)
	e.must(origin.Delete(ctx))
}

// thickCopy compares the throughput of a thick snapshot (a frozen point
// copied into an independent LV; ready once copied) with dd of the same
// LV into a raw LV with direct IO, in 4 MiB blocks, Carve's copy chunk
// (driver/lvmvol/copy.go). The source holds random data: zeroes cost
// nothing on the VM's disks.
func (e *env) thickCopy() {
	ctx := context.Background()
	size := e.cfg.copySize
	src, err := e.create(ctx, e.name("pvc"), size, false, "")
	e.must(err)
	e.must(src.Attach(ctx, node))
	srcDev := src.PublishContext["devicePath"]
	e.must(fillRandom(srcDev, size))
	var k cmdsPerOp
	var phase []float64 // the copy loop's own throughput, from carve's metrics
	mb := float64(size) / mib
	raw, carve := e.pairs(e.cfg.reps, func() float64 {
		dst := e.name("raw-copy")
		e.must(e.rawLV(ctx, dst, size, false))
		d := e.timed(func() error {
			_, err := e.dataCmd("dd", "if="+srcDev, "of="+device(dst), "bs=4M", fmt.Sprintf("count=%d", size/(4*mib)),
				"iflag=direct", "oflag=direct", "status=none")
			return err
		})
		e.must(e.rawRemove(ctx, dst))
		return mb / d
	}, func() float64 {
		var s *csi.Snapshot
		d := e.carveTimed(&k, func() (err error) {
			s, err = e.snapshot(ctx, e.name("snap"), src.ID, time.Second)
			return err
		})
		e.must(e.deleteSnapshot(ctx, s.GetSnapshotId()))
		if k.last.copied != float64(size) || k.last.copySecs <= 0 {
			e.t.Fatalf("carve's copy metrics counted %v bytes in %v s for a snapshot of %d bytes", k.last.copied, k.last.copySecs, size)
		}
		phase = append(phase, k.last.copied/mib/k.last.copySecs)
		return mb / d
	})
	e.add(results.Row{Section: "snapshots", Op: fmt.Sprintf("thick snapshot copy of %d MiB vs dd direct", size/mib), Unit: "MiB/s",
		RawS: raw, CarveS: carve, Goal: ratioGoal(">=", 0.9),
		Note: "Carve: CreateSnapshot until ready_to_use, polled each second as a CO does; dd: the copy alone"}, &k)
	e.add(results.Row{Section: "snapshots", Op: fmt.Sprintf("thick snapshot copy loop of %d MiB vs dd direct", size/mib), Unit: "MiB/s",
		RawS: raw, CarveS: phase, Goal: ratioGoal(">=", 0.9),
		Note: "Carve: the copy alone (carve_copied_bytes_total / carve_copy_seconds_total), without the lvm2 commands around it"}, nil)
	e.must(src.Detach(ctx))
	e.must(src.Delete(ctx))
}

// snapshot calls CreateSnapshot, as the CO does, until the snapshot is
// ready, every poll.
func (e *env) snapshot(ctx context.Context, name, source string, poll time.Duration) (*csi.Snapshot, error) {
	deadline := time.Now().Add(30 * time.Minute)
	for {
		resp, err := e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
		if err != nil {
			return nil, fmt.Errorf("CreateSnapshot %s: %w", name, err)
		}
		if s := resp.GetSnapshot(); s.GetReadyToUse() {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("snapshot %s not ready after 30 minutes", name)
		}
		time.Sleep(poll)
	}
}

// restore is CreateVolume from snapshot; it returns the volume's ID.
func (e *env) restore(ctx context.Context, name string, size int64, p map[string]string, snapshot string) (string, error) {
	resp, err := e.c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, Parameters: p,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapshot}}},
	})
	if err != nil {
		return "", fmt.Errorf("CreateVolume %s from %s: %w", name, snapshot, err)
	}
	return resp.GetVolume().GetVolumeId(), nil
}

func (e *env) deleteVolume(ctx context.Context, id string) error {
	if _, err := e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		return fmt.Errorf("DeleteVolume %s: %w", id, err)
	}
	return nil
}

func (e *env) deleteSnapshot(ctx context.Context, id string) error {
	if _, err := e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id}); err != nil {
		return fmt.Errorf("DeleteSnapshot %s: %w", id, err)
	}
	return nil
}

// fillRandom writes size bytes of random data to device, one random MiB
// over and over (what matters is that no block is zero), and flushes it.
func fillRandom(device string, size int64) error {
	buf := make([]byte, mib)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	f, err := os.OpenFile(device, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("fill %s: %w", device, err)
	}
	for off := int64(0); off < size; off += mib {
		if _, err := f.Write(buf); err != nil {
			_ = f.Close()
			return fmt.Errorf("fill %s at %d: %w", device, off, err)
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fill %s: %w", device, err)
	}
	return f.Close()
}
