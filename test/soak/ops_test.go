//go:build vmtest

package soak

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/soakmodel"
	"carve.dev/carve/test/testenv"
)

var snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

func mountCap() *csi.VolumeCapability { return csiflow.MountCap(snw, "ext4") }

// handle is a csiflow view of v on client c, with what the CO recorded
// of it (its publish context, its staging path).
func (w *worker) handle(c *csiflow.Client, v *vol) *csiflow.Volume {
	h := c.Wrap(&csi.Volume{VolumeId: v.ID, CapacityBytes: v.Size, VolumeContext: v.context}, mountCap())
	h.NodeID, h.PublishContext, h.Staging = node, v.publishContext, w.s.path(v.staging())
	return h
}

// callThen makes a call, then records its outcome in the model.
func (w *worker) callThen(kind string, fn func(ctx context.Context, c *csiflow.Client) error, then func()) error {
	if err := w.s.call(kind, fn); err != nil {
		return err
	}
	w.s.model.set(then)
	return nil
}

// onHandle is callThen through v's handle.
func (w *worker) onHandle(kind string, v *vol, fn func(h *csiflow.Volume, ctx context.Context) error, then func()) error {
	return w.callThen(kind, func(ctx context.Context, c *csiflow.Client) error { return fn(w.handle(c, v), ctx) }, then)
}

func (w *worker) create(name string, l *soakmodel.Layout, size int64, from *soakmodel.Snapshot) error {
	req := &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, Parameters: l.Params,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap()}}
	kind := "CreateVolume"
	if from != nil {
		req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: from.ID}}}
		kind = "CreateVolume from a snapshot"
	}
	var resp *csi.CreateVolumeResponse
	err := w.s.call(kind, func(ctx context.Context, c *csiflow.Client) error {
		var err error
		resp, err = c.Controller.CreateVolume(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	got := resp.GetVolume()
	if got.GetCapacityBytes() < size {
		return fmt.Errorf("volume %s: capacity %d, asked for %d", name, got.GetCapacityBytes(), size)
	}
	v := &vol{Volume: soakmodel.Volume{Name: name, Layout: l, Writes: soakmodel.Writes{}}}
	if from != nil {
		v.Volume = from.Restore(name, l, 0)
	}
	v.ID, v.LV, v.Size, v.context = got.GetVolumeId(), lvOfID(got.GetVolumeId()), got.GetCapacityBytes(), got.GetVolumeContext()
	w.s.model.set(func() { w.s.model.soak.Add(v) })
	return nil
}

func (w *worker) deleteVolume(v *vol) error {
	return w.callThen("DeleteVolume", func(ctx context.Context, c *csiflow.Client) error {
		_, err := c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
		return err
	}, func() { w.s.model.soak.Remove(v) })
}

func (w *worker) attach(v *vol) error {
	return w.onHandle("ControllerPublishVolume", v, func(h *csiflow.Volume, ctx context.Context) error {
		if err := h.Attach(ctx, node); err != nil {
			return err
		}
		v.publishContext = h.PublishContext
		return nil
	}, func() { v.Attached = true })
}

func (w *worker) detach(v *vol) error {
	return w.onHandle("ControllerUnpublishVolume", v, (*csiflow.Volume).Detach, func() { v.Attached = false })
}

// stage formats a blank volume or mounts its filesystem, which must span
// the volume (grown to it after an expansion or a restore into a larger
// volume).
func (w *worker) stage(v *vol) error {
	staging := w.s.path(v.staging())
	err := w.onHandle("NodeStageVolume", v, func(h *csiflow.Volume, ctx context.Context) error { return h.Stage(ctx, staging) },
		func() { v.staged = true })
	if err != nil {
		return err
	}
	return w.checkFSSize(v, staging)
}

func (w *worker) unstage(v *vol) error {
	return w.onHandle("NodeUnstageVolume", v, (*csiflow.Volume).Unstage, func() { v.staged = false })
}

func (w *worker) publish(v *vol) error {
	target := w.s.path(v.target())
	return w.onHandle("NodePublishVolume", v, func(h *csiflow.Volume, ctx context.Context) error { return h.Publish(ctx, target, false) },
		func() { v.published = true })
}

func (w *worker) unpublish(v *vol) error {
	target := w.s.path(v.target())
	return w.onHandle("NodeUnpublishVolume", v, func(h *csiflow.Volume, ctx context.Context) error { return h.Unpublish(ctx, target) },
		func() { v.published = false })
}

// expand grows v to size (ControllerExpandVolume), then its filesystem
// when it is staged (NodeExpandVolume); an unstaged one is grown at its
// next stage.
func (w *worker) expand(v *vol, size int64) error {
	var capacity int64
	err := w.s.call("ControllerExpandVolume", func(ctx context.Context, c *csiflow.Client) error {
		resp, err := c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.ID,
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: mountCap()})
		capacity = resp.GetCapacityBytes()
		if err == nil && !resp.GetNodeExpansionRequired() {
			return errors.New("a filesystem volume's expansion needs the node's part")
		}
		return err
	})
	if err != nil {
		return err
	}
	if capacity < size {
		return fmt.Errorf("expanded to %d bytes, asked for %d", capacity, size)
	}
	w.s.model.set(func() { v.Size = capacity })
	if !v.staged {
		return nil
	}
	path := w.s.path(v.staging())
	if v.published {
		path = w.s.path(v.target())
	}
	err = w.s.call("NodeExpandVolume", func(ctx context.Context, c *csiflow.Client) error {
		_, err := c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.ID, VolumePath: path,
			StagingTargetPath: w.s.path(v.staging()), CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: mountCap()})
		return err
	})
	if err != nil {
		return err
	}
	return w.checkFSSize(v, path)
}

// checkFSSize: the filesystem at path must have most of v's bytes (ext4
// keeps some for its metadata and journal).
func (w *worker) checkFSSize(v *vol, path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	if fs := int64(st.Blocks) * st.Bsize; fs < v.Size*3/4 || fs > v.Size {
		return fmt.Errorf("volume %s (%s, %s): its filesystem has %d bytes", v.Name, v.Layout.Name, fmtMiB(v.Size), fs)
	}
	return nil
}

func (w *worker) snapshot(v *vol, name string) error {
	var got *csi.Snapshot
	err := w.s.call("CreateSnapshot", func(ctx context.Context, c *csiflow.Client) error {
		resp, err := c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: v.ID})
		if err != nil {
			return err
		}
		if got = resp.GetSnapshot(); !got.GetReadyToUse() {
			return errAgain // the CO polls until it is ready
		}
		return nil
	})
	if err != nil {
		return err
	}
	sn := soakmodel.NewSnapshot(name, &v.Volume)
	sn.ID, sn.LV, sn.Size = got.GetSnapshotId(), lvOfID(got.GetSnapshotId()), got.GetSizeBytes()
	w.s.model.set(func() { w.s.model.soak.AddSnapshot(sn) })
	return nil
}

func (w *worker) deleteSnapshot(sn *soakmodel.Snapshot) error {
	return w.callThen("DeleteSnapshot", func(ctx context.Context, c *csiflow.Client) error {
		_, err := c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: sn.ID})
		return err
	}, func() { w.s.model.soak.RemoveSnapshot(sn) })
}

// write puts a file of random bytes in a published volume (a new one, or
// one of its files overwritten) and records it once fsync of the file and
// of its directory returned.
func (w *worker) write(v *vol) error {
	name := fmt.Sprintf("f%d", v.nextFile)
	if names := v.Writes.Names(); len(names) > 0 && w.r.IntN(4) == 0 {
		name = names[w.r.IntN(len(names))]
	} else {
		v.nextFile++
	}
	data := make([]byte, (16+w.r.IntN(240))<<10)
	var seed [32]byte
	for i := 0; i < len(seed); i += 8 {
		binary.LittleEndian.PutUint64(seed[i:], w.r.Uint64())
	}
	_, _ = rand.NewChaCha8(seed).Read(data)
	dir := w.s.path(v.target())
	write := func() error { return testenv.WriteSynced(filepath.Join(dir, name), data) }
	if err := w.s.watchIO(fmt.Sprintf("write of %d bytes to %s", len(data), v.Name), write); err != nil {
		return fmt.Errorf("volume %s (%s): %w", v.Name, v.Layout.Name, err)
	}
	w.s.model.set(func() { v.Writes[name] = soakmodel.SumOf(data) })
	w.s.stats.Writes(1, 0)
	return nil
}

func (w *worker) verifyOp(v *vol) error {
	return w.s.watchIO("read of the files of "+v.Name, func() error { return w.s.verify(v) })
}

// verify reads every file of a staged volume (through its staging path,
// the mount its publications bind) and has the checker compare it with
// what was acknowledged: the same names, the same bytes. It returns an
// error when the files cannot be read; what they hold is the checker's
// verdict.
func (s *soak) verify(v *vol) error {
	dir := s.path(v.staging())
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	read := map[string]soakmodel.Sum{}
	for _, e := range ents {
		if e.Name() == "lost+found" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		read[e.Name()] = soakmodel.SumOf(b)
	}
	s.verdicts.Read(fmt.Sprintf("volume %s (%s)", v.Name, v.Layout.Name), v.Writes, read, true)
	return nil
}

// set changes the model under its lock.
func (m *model) set(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}
