//go:build vmtest

package faults

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// writtenAll is written summed over the disks under the PVs.
func (e *env) writtenAll() int64 {
	var n int64
	for _, p := range e.pvs {
		n += written(e.t, p.disk)
	}
	return n
}

// midway waits until between a quarter and three quarters of size bytes
// have reached the disks since before (writtenAll's count), then fails the
// data sectors of every PV, as a disk going bad under the work does. The
// table swap waits for the requests already sent down (device-mapper
// finishes them before it suspends): the fault strikes the work's next
// request, not one in flight.
func (e *env) midway(before, size int64, what string) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		done := e.writtenAll() - before
		if done >= size/4 {
			if done > size*3/4 {
				e.t.Fatalf("%s: %d of %d bytes written before the fault could strike: not in its middle", what, done, size)
			}
			e.t.Logf("%s: the disks fail after %d of %d bytes", what, done, size)
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %d of %d bytes written within a minute", what, done, size)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range e.pvs {
		p.failData()
	}
}

func (e *env) hasTag(lv, tag string) bool {
	e.t.Helper()
	l, err := e.lvm.GetLV(context.Background(), vg, lv)
	must(e.t, err)
	return l.HasTag(tag)
}

// TestFaultInTheMiddleOfASnapshotCopy: the disks fail halfway through a
// thick snapshot's copy (after its freeze). The copy's failure is
// CreateSnapshot's error, the snapshot is never ready (CreateSnapshot,
// ListSnapshots), its LV keeps the copying mark and its frozen point;
// once the disks are back, and after the source has been overwritten, the
// CO's retries finish it, and its restore holds the data as it was when
// the snapshot was asked for.
func TestFaultInTheMiddleOfASnapshotCopy(t *testing.T) {
	// The copy writes 4 MiB at a time, each waited for: at 8 MiB/s a
	// 64 MiB copy takes 8 s.
	e := setupThrottled(t, 8*mib)
	ctx := context.Background()
	const size = 64 * mib
	src := e.create("src", size, nil)
	target := e.up(src, "src")
	data := randomBytes(16 * mib)
	must(t, testenv.WriteSynced(filepath.Join(target, "a"), data))
	must(t, src.Down(ctx, target))

	before := e.writtenAll()
	resp, err := e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src.ID})
	must(t, err)
	if resp.GetSnapshot().GetReadyToUse() {
		t.Fatal("a 64 MiB snapshot copied at 8 MiB/s was ready in its first answer: the throttle did not hold")
	}
	snapID := resp.GetSnapshot().GetSnapshotId()
	snapLV := snapID[strings.LastIndex(snapID, "/")+1:]
	e.midway(before, size, "snapshot copy")

	var failed error
	for deadline := time.Now().Add(time.Minute); failed == nil && time.Now().Before(deadline); {
		resp, err := e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src.ID})
		if resp.GetSnapshot().GetReadyToUse() {
			t.Fatal("a snapshot whose copy the disks cut is ready")
		}
		failed = err
	}
	t.Logf("CreateSnapshot after the copy failed: %v", failed)
	if failed == nil {
		t.Error("the failed copy is no call's error: to the CO it looks like a copy still running")
	}
	list, err := e.c.Controller.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: snapID})
	must(t, err)
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetSnapshot().GetReadyToUse() {
		t.Errorf("ListSnapshots of the cut snapshot: %v, want it not ready", list.GetEntries())
	}
	if !e.hasTag(snapLV, "carve.dev/copying") || !e.lvExists(snapLV+"-frz") {
		t.Error("the cut snapshot lost its copying mark or its frozen point")
	}

	for _, p := range e.pvs {
		p.heal()
	}
	// Overwritten now, the source differs from the frozen image the
	// retry must copy.
	target = e.up(src, "src2")
	newer := randomBytes(16 * mib)
	must(t, testenv.WriteSynced(filepath.Join(target, "a"), newer))
	must(t, src.Down(ctx, target))
	eventually(t, "snapshot ready after the disks came back", func() bool {
		resp, err := e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src.ID})
		if err != nil {
			t.Logf("CreateSnapshot retry: %v", err)
		}
		return err == nil && resp.GetSnapshot().GetReadyToUse()
	})
	if e.lvExists(snapLV + "-frz") {
		t.Error("the frozen point outlived the finished copy")
	}
	restored := e.restore("restored", snapID, size)
	rt := e.up(restored, "restored")
	if got, err := os.ReadFile(filepath.Join(rt, "a")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("restore of the snapshot cut by the fault: %v (the data at snapshot time: %v, the newer data: %v)",
			err, bytes.Equal(got, data), bytes.Equal(got, newer))
	}
	must(t, restored.Down(ctx, rt))
}

// TestFaultInTheMiddleOfAWipe: the disks fail halfway through a thick
// delete's zeroing. The delete fails and keeps the LV (never removed
// half wiped); once the disks are back its retry finishes, and where the
// volume had data the disk holds zeroes.
func TestFaultInTheMiddleOfAWipe(t *testing.T) {
	// One zeroing command covers 1 GiB and sends it down at once (the
	// disk counts it when the throttle lets it through, all at once), and
	// the table swap waits for what was sent: the fault seen after the
	// first command strikes the third. A volume of 2.25 GiB is wiped in
	// three, each GiB taking 8 s at 128 MiB/s.
	e := setupThrottled(t, 128*mib)
	ctx := context.Background()
	const size = 2304 * mib
	// A raw block volume with data in each GiB the wipe zeroes apart.
	v, err := e.c.Create(ctx, "wiped", size, nil, csiflow.BlockCap(snw))
	must(t, err)
	target := e.up(v, "wiped")
	dev, err := os.OpenFile(target, os.O_WRONLY, 0)
	must(t, err)
	spots := []int64{0, 1<<30 + 4*mib, 2<<30 + 4*mib}
	for _, at := range spots {
		_, err := dev.WriteAt(randomBytes(4*mib), at)
		must(t, err)
	}
	must(t, errors.Join(dev.Sync(), dev.Close()))
	must(t, v.Down(ctx, target))
	p, off, n := e.extentsOf("wiped")
	if n != size {
		t.Fatalf("LV of %d bytes, want %d", n, size)
	}

	before := e.writtenAll()
	errc := make(chan error, 1)
	go func() {
		_, err := e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
		errc <- err
	}()
	e.midway(before, size, "wipe")
	err = <-errc
	t.Logf("DeleteVolume cut by the fault: %v", err)
	if err == nil {
		t.Fatal("a delete whose wipe the disks cut succeeded")
	}
	if strings.Contains(err.Error(), "at byte 0 of") {
		t.Error("the wipe failed at its start, not in its middle")
	}
	if !e.lvExists("wiped") {
		t.Fatal("the LV of a delete whose wipe was cut is gone: removed half wiped")
	}
	for _, p := range e.pvs {
		p.heal()
	}
	must(t, retryAborted(func() error {
		_, err := e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
		return err
	}))
	if e.lvExists("wiped") {
		t.Error("the delete's retry left the LV")
	}
	dropCaches(t)
	f, err := os.Open(p.path())
	must(t, err)
	defer func() { _ = f.Close() }()
	buf := make([]byte, 4*mib)
	for _, at := range spots {
		if _, err := f.ReadAt(buf, off+at); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, make([]byte, len(buf))) {
			t.Errorf("the 4 MiB written at byte %d of the deleted volume are not zeroes on %s: the wipe's retry left data", at, p.name)
		}
	}
}
