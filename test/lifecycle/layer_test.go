//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"

	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/test/csiflow"
)

// layerOf is the device-mapper name of the volume's linear layer.
func layerOf(t *testing.T, v *csiflow.Volume) string {
	t.Helper()
	name, err := mapper.Name(vg, filepath.Base(v.ID), mapper.LinearLayer)
	must(t, err)
	return name
}

// wantStagedOnLayer: the staging mount is the layer's, not the LV's.
func wantStagedOnLayer(t *testing.T, v *csiflow.Volume, staging string) {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	must(t, err)
	want := mapper.Path(layerOf(t, v))
	for _, mi := range infos {
		if mi.MountPoint == staging {
			if mi.Source != want {
				t.Fatalf("staging %s is mounted from %s, want the layer %s", staging, mi.Source, want)
			}
			return
		}
	}
	t.Fatalf("staging %s is not mounted", staging)
}

// TestSnapshotHoldsTheFilesystemAtOneInstant: a volume's filesystem lives
// on its layer, and a snapshot suspends the layer (lockfs) around lvm2's
// snapshot: a file written a moment before, not synced, is in the
// snapshot. Without the layer's suspend the snapshot holds the LV as a
// crash would leave it, without the file's dirty pages. The layer goes
// with the unstage.
func TestSnapshotHoldsTheFilesystemAtOneInstant(t *testing.T) {
	forThickAndThin(t, func(t *testing.T, e *env, thin bool) {
		ctx := context.Background()
		params := volParams(thin, "ext4")
		src, err := e.c.Create(ctx, "pvc-src", 64*mib, params, csiflow.MountCap(snw, ""))
		must(t, err)
		staging, target := e.path("src-staging"), e.path("src")
		must(t, src.Up(ctx, node, staging, target))
		wantStagedOnLayer(t, src, staging)
		data := randomBytes(t, mib)
		must(t, os.WriteFile(filepath.Join(target, "unsynced"), data, 0o644)) // no fsync

		snap := e.snapshot("snap-1", src.ID)
		restored := e.createFrom("pvc-restored", 64*mib, params, &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}})
		rt := e.path("restored")
		must(t, restored.Up(ctx, node, e.path("restored-staging"), rt))
		if got, err := os.ReadFile(filepath.Join(rt, "unsynced")); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the snapshot misses the file written just before it (%d bytes, %v): its filesystem was not flushed", len(got), err)
		}
		for _, v := range []struct {
			vol    *csiflow.Volume
			target string
		}{{restored, rt}, {src, target}} {
			must(t, v.vol.Down(ctx, v.target))
			if _, err := os.Stat(mapper.Path(layerOf(t, v.vol))); !os.IsNotExist(err) {
				t.Fatalf("layer of %s still there after the unstage (%v)", v.vol.ID, err)
			}
			must(t, v.vol.Delete(ctx))
		}
		_, err = e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
		must(t, err)
	})
}

// TestLayerLeftSuspendedIsResumed: a carve killed inside a snapshot's
// freeze leaves the layer suspended and the volume's writers stalled; the
// next carve resumes it at its start, before any lvm2 command (which would
// hang reading it).
func TestLayerLeftSuspendedIsResumed(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v := e.create("pvc-a", 16*mib, nil)
	target := e.path("a")
	must(t, v.Up(ctx, node, e.path("a-staging"), target))
	layer := layerOf(t, v)
	if out, err := exec.Command("dmsetup", "suspend", layer).CombinedOutput(); err != nil {
		t.Fatalf("dmsetup suspend %s: %v: %s", layer, err, out)
	}
	e.c = start(t)
	out, err := exec.Command("dmsetup", "info", "-c", "--noheadings", "-o", "suspended", layer).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "Active" {
		t.Fatalf("layer %s after carve's start: %q (%v), want Active", layer, out, err)
	}
	writeSynced(t, filepath.Join(target, "after"), []byte("resumed"))
	v.NodeID = node
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

// TestLayerHalfMadeIsFinished: carve makes a layer with device-mapper's
// ioctls (mapper.Kernel); one cut short after the device's create leaves
// a device of the layer's name and uuid with no table, which the kernel
// does not describe in sysfs until a table is loaded, and maybe a node in
// /dev/mapper (a repair such as vgmknodes makes one). The next NodeStage
// takes that device as the layer, loads its table, makes it live and
// stages on it (the crash matrix found every retry failing there). While
// mounted, the layer cannot be removed (EBUSY); the unstage removes it.
func TestLayerHalfMadeIsFinished(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v := e.create("pvc-half", 16*mib, nil)
	must(t, v.Attach(ctx, node))
	var lv unix.Stat_t
	must(t, unix.Stat(filepath.Join("/dev", vg, filepath.Base(v.ID)), &lv))
	layer := layerOf(t, v)
	uuid := mapper.LinearUUID(lv.Rdev)
	if out, err := exec.Command("dmsetup", "create", layer, "--uuid", uuid, "--notable").CombinedOutput(); err != nil {
		t.Fatalf("dmsetup create %s --notable: %v: %s", layer, err, out)
	}
	out, err := exec.Command("dmsetup", "info", "-c", "--noheadings", "-o", "major,minor", layer).CombinedOutput()
	var major, minor uint32
	if _, serr := fmt.Sscanf(strings.TrimSpace(string(out)), "%d:%d", &major, &minor); err != nil || serr != nil {
		t.Fatalf("dmsetup info %s: %v %v: %s", layer, err, serr, out)
	}
	if err := unix.Mknod(mapper.Path(layer), unix.S_IFBLK|0o600, int(unix.Mkdev(major, minor))); err != nil && !errors.Is(err, unix.EEXIST) {
		t.Fatal(err)
	}

	staging := e.path("half-staging")
	must(t, v.Stage(ctx, staging))
	wantStagedOnLayer(t, v, staging)
	var dev unix.Stat_t
	must(t, unix.Stat(mapper.Path(layer), &dev))
	if err := (mapper.Kernel{}).Remove(ctx, layer, dev.Rdev); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("removing the mounted layer: %v, want EBUSY", err)
	}
	must(t, v.Unstage(ctx))
	if _, err := os.Stat(mapper.Path(layer)); !os.IsNotExist(err) {
		t.Fatalf("layer %s still there after the unstage (%v)", layer, err)
	}
	must(t, v.Detach(ctx))
	must(t, v.Delete(ctx))
}
