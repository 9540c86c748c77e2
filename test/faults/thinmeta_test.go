//go:build vmtest

package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// writeDirect writes len(buf) bytes (page-aligned memory: directBuffer) at
// each offset of device, around the page cache, and returns the first
// error: what the kernel answers the writer, not a later writeback.
func writeDirect(device string, buf []byte, offsets ...int64) error {
	f, err := os.OpenFile(device, os.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	for _, off := range offsets {
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
	}
	// The flush makes the pool commit its metadata transaction: until then
	// its usage counts the btree blocks the writes shadowed twice, and the
	// commit frees the old copies. Read before it, the usage can drop below
	// lvm2's limit by the time Carve reads it.
	return f.Sync()
}

// directBuffer is n bytes of page-aligned memory for O_DIRECT.
func directBuffer(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	must(t, err)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// TestThinPoolMetadataFull: a thin pool with the smallest metadata LV is
// filled up by writes that break the sharing between a thin LV and its
// thin snapshots (each costs metadata, little data). Once its metadata is
// at lvm2's limit, Carve refuses new thin volumes and snapshots there
// before lvcreate (RESOURCE_EXHAUSTED); then writes to new blocks fail as
// the kernel fails them (the pool errors when full instead of queueing);
// Carve's volume in the pool keeps what was written and reports the pool's
// state; after `lvextend --poolmetadatasize` the pool serves new volumes
// and snapshots again.
func TestThinPoolMetadataFull(t *testing.T) {
	e := setup(t, "--thin-overprovision-ratio=10")
	ctx := context.Background()
	// --poolmetadatasize 2m: lvm2 rounds it up to one 4 MiB extent.
	e.lvmRun("lvcreate", "-q", "--type", "thin-pool", "-L", "2g", "--poolmetadatasize", "2m", "--zero", "y", "-n", "mpool", vg)
	e.lvmRun("lvchange", "--errorwhenfull", "y", vg+"/mpool")
	pool := func() lvm.LV {
		p, err := e.lvm.GetLV(ctx, vg, "mpool")
		must(t, err)
		return p
	}
	thin := map[string]string{"thinPool": "mpool"}
	keep := e.create("keep", 16*mib, thin)
	target := e.up(keep, "keep")
	data := randomBytes(2 * mib)
	must(t, testenv.WriteSynced(filepath.Join(target, "a"), data))

	// An administrator's thin LV, mapped all over, and thin snapshots of
	// it, made while the metadata has room (lvm2 refuses them at its limit).
	const fillerSize = 800 * mib
	e.lvmRun("lvcreate", "-q", "-V", fmt.Sprint(fillerSize/mib)+"m", "-T", vg+"/mpool", "-n", "filler")
	big := directBuffer(t, 4*mib)
	var all []int64
	for off := int64(0); off < fillerSize; off += int64(len(big)) {
		all = append(all, off)
	}
	must(t, writeDirect("/dev/"+vg+"/filler", big, all...))
	devices := []string{"filler"}
	for i := range 24 {
		name := fmt.Sprintf("fill%d", i)
		e.lvmRun("lvcreate", "-q", "-s", "-n", name, vg+"/filler")
		e.lvmRun("lvchange", "-q", "-ay", "-K", vg+"/"+name)
		devices = append(devices, name)
	}
	t.Logf("metadata %.2f%% of %s used after the filler and its snapshots", pool().MetadataPercent, lvm.FormatSize(pool().MetadataSize))

	// One 4 KiB write in each 4 MiB of each LV: a new block for it, and new
	// copies of the btree leaves that mapped it for two LVs.
	small := directBuffer(t, 4096)
	small[0] = 1
	var writeErr error
	refusedAtLimit := false
	for i, dev := range devices {
		var offs []int64
		for off := int64(i+1) * 4096; off < fillerSize; off += 4 * mib {
			offs = append(offs, off)
		}
		writeErr = writeDirect("/dev/"+vg+"/"+dev, small, offs...)
		p := pool()
		t.Logf("after writing %s: metadata %.2f%%, data %.2f%%, health %q, write: %v", dev, p.MetadataPercent, p.DataPercent, p.Health, writeErr)
		if !refusedAtLimit && p.MetadataPercent >= 75 && writeErr == nil {
			refusedAtLimit = true
			e.refusedInFullPool(keep, thin, "metadata at lvm2's limit")
		}
		if writeErr != nil {
			break
		}
	}
	if writeErr == nil {
		t.Fatalf("every write went through: the pool's metadata never filled (%.2f%%)", pool().MetadataPercent)
	}
	if !refusedAtLimit {
		t.Error("the metadata went from below lvm2's limit to full in one step: Carve's refusal at the limit went unchecked")
	}
	out, _ := exec.Command("dmsetup", "status", vg+"-mpool-tpool").CombinedOutput()
	p := pool()
	t.Logf("full: a write failed with %v; pool metadata %.2f%%, data %.2f%%, health %q, check needed %v; dm status %s",
		writeErr, p.MetadataPercent, p.DataPercent, p.Health, p.CheckNeeded, out)
	if !errors.Is(writeErr, unix.EIO) && !errors.Is(writeErr, unix.ENOSPC) {
		t.Errorf("a write to a pool out of metadata failed with %v, want EIO or ENOSPC as the kernel answers", writeErr)
	}
	e.refusedInFullPool(keep, thin, "metadata full")
	hs := e.volumeHealth(keep.ID)
	t.Logf("health of a volume in the full pool: %v", hs)
	if len(hs) == 0 {
		t.Error("a volume in a pool out of metadata reports no health problem")
	}
	dropCaches(t)
	if got, err := os.ReadFile(filepath.Join(target, "a")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("data written before the pool filled: %v (equal: %v)", err, bytes.Equal(got, data))
	}

	e.lvmRun("lvextend", "-q", "--poolmetadatasize", "+8m", vg+"/mpool")
	p = pool()
	t.Logf("after lvextend: metadata %.2f%% of %s, health %q", p.MetadataPercent, lvm.FormatSize(p.MetadataSize), p.Health)
	if err := writeDirect("/dev/"+vg+"/"+devices[len(devices)-1], small, 4096); err != nil {
		t.Errorf("a write to a new block after the metadata grew: %v", err)
	}
	more := e.create("more", 8*mib, thin)
	must(t, more.Delete(ctx))
	snap, err := e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "after", SourceVolumeId: keep.ID})
	must(t, err)
	_, err = e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()})
	must(t, err)
	must(t, testenv.WriteSynced(filepath.Join(target, "b"), randomBytes(mib)))
	if hs := e.volumeHealth(keep.ID); len(hs) != 0 {
		t.Errorf("health after the metadata grew: %v", hs)
	}
	must(t, keep.Down(ctx, target))
}

// refusedInFullPool checks that a new thin volume and a snapshot of keep
// in the pool are RESOURCE_EXHAUSTED and leave no LV.
func (e *env) refusedInFullPool(keep *csiflow.Volume, thin map[string]string, when string) {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.c.Create(ctx, "more", 8*mib, thin, csiflow.MountCap(snw, "ext4"))
	e.t.Logf("CreateVolume, %s: %v", when, err)
	if status.Code(err) != codes.ResourceExhausted {
		e.t.Errorf("a thin volume in a pool with %s: %v, want RESOURCE_EXHAUSTED", when, err)
	}
	_, err = e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "after", SourceVolumeId: keep.ID})
	if status.Code(err) != codes.ResourceExhausted {
		e.t.Errorf("a thin snapshot in a pool with %s: %v, want RESOURCE_EXHAUSTED", when, err)
	}
	for _, n := range []string{"more", "snap-after"} {
		if e.lvExists(n) {
			e.t.Errorf("a refused thin LV %s was made (%s)", n, when)
			e.lvmRun("lvremove", "-q", "-y", vg+"/"+n) // so the next check stands alone
		}
	}
}
