//go:build vmtest

package crash

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/csiflow"
)

// op is one operation of the matrix. prepare runs on an un-armed carve,
// makes what the call needs and returns the call, which is then made on
// an armed carve and, after the crash, repeated on a fresh one. check,
// when set, runs after the call on an un-armed carve: the data checks.
// atCrash, when set, runs right after the crash and returns a check for
// after the retry (NodeStage: no filesystem made twice).
type op struct {
	name    string
	method  string
	twoPVs  bool
	prepare func(e *env) (call func() error, check func())
	atCrash func(e *env) func()
}

var (
	thick   = map[string]string{}
	thin    = map[string]string{"thinPool": pool}
	striped = map[string]string{"stripes": "2"}
	raid1   = map[string]string{"mirrors": "1"}
	// encrypted volumes, and the node-stage secret that opens them.
	encrypted  = map[string]string{"encryption": "luks2"}
	encSecrets = map[string]string{"encryptionKey": "carve-crash-passphrase"}
)

func ops() []op {
	out := []op{
		createOp("thick", thick, false), createOp("thin", thin, false),
		createOp("striped", striped, true), createOp("raid1", raid1, true),
		restoreOp("thick", thick), restoreOp("thin", thin),
		cloneOp("thick", thick), cloneOp("thin", thin),
		deleteOp("thick", thick), deleteOp("thin", thin),
		snapshotOp("thick", thick), snapshotOp("thin", thin),
		deleteSnapshotOp("thick", thick),
		{name: "ControllerExpandVolume/thick", method: "ControllerExpandVolume", prepare: func(e *env) (func() error, func()) {
			id := e.volume("vol", thick)
			return func() error {
				return retry(e.alive, func() error {
					_, err := e.c.Controller.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{
						VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 32 * mib}, VolumeCapability: mountCap()})
					return err
				})
			}, nil
		}},
		{name: "ControllerPublishVolume", method: "ControllerPublishVolume", prepare: func(e *env) (func() error, func()) {
			id := e.volume("vol", thick)
			return func() error {
				return retry(e.alive, func() error { return e.handle(id).Attach(context.Background(), node) })
			}, nil
		}},
		{name: "ControllerUnpublishVolume", method: "ControllerUnpublishVolume", prepare: func(e *env) (func() error, func()) {
			id := e.volume("vol", thick)
			must(e.t, e.handle(id).Attach(context.Background(), node))
			return func() error { return retry(e.alive, func() error { return e.handle(id).Detach(context.Background()) }) }, nil
		}},
		stageOp(), nodeExpandOp(), unstageOp(), encryptedStageOp(), encryptedUnstageOp(),
		modifyOp("raid1", thick, "1"), modifyOp("linear", raid1, "0"),
		writeCacheOp("ControllerModifyVolume/writecache", false), writeCacheOp("ControllerModifyVolume/no-writecache", true),
		cachedDeleteOp(),
	}
	return out
}

// cacheOn is the mutable parameters of an 8 MiB write cache on the
// second PV.
func cacheOn(e *env) map[string]string {
	return map[string]string{"writeCache": "8Mi", "writeCachePVs": e.disks[1]}
}

// writeCacheOp attaches a write cache to an unpublished, written thick
// volume, or, detach, takes the one it was given away (written back,
// wiped, removed).
func writeCacheOp(name string, detach bool) op {
	return op{name: name, method: "ControllerModifyVolume", twoPVs: true, prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", thick)
		want := e.write(id)
		params := cacheOn(e)
		if detach {
			must(e.t, e.modify(id, params))
			params = map[string]string{"writeCache": "0"}
		}
		return func() error { return retry(e.alive, func() error { return e.modify(id, params) }) }, func() {
			if e.read(id) != want {
				e.t.Errorf("data changed by the modification")
			}
		}
	}}
}

// cachedDeleteOp deletes a thick volume with a write cache: the cache is
// written back, split off, wiped and removed before the volume's wipe.
func cachedDeleteOp() op {
	return op{name: "DeleteVolume/writecache", method: "DeleteVolume", twoPVs: true, prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", thick)
		e.write(id)
		must(e.t, e.modify(id, cacheOn(e)))
		return func() error {
			return retry(e.alive, func() error {
				_, err := e.c.Controller.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id})
				return err
			})
		}, nil
	}}
}

func (e *env) modify(id string, params map[string]string) error {
	_, err := e.c.Controller.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{
		VolumeId: id, MutableParameters: params})
	return err
}

// modifyOp changes an unpublished volume's mirrors: to raid1, lvm2 needs
// it held active for the conversion and its sync, then released; back to
// linear, the same without a sync.
func modifyOp(kind string, params map[string]string, mirrors string) op {
	return op{name: "ControllerModifyVolume/" + kind, method: "ControllerModifyVolume", twoPVs: true, prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", params)
		want := e.write(id)
		return func() error {
				return retry(e.alive, func() error { return e.modify(id, map[string]string{"mirrors": mirrors}) })
			}, func() {
				if e.read(id) != want {
					e.t.Errorf("data changed by the modification")
				}
			}
	}}
}

func createOp(kind string, params map[string]string, twoPVs bool) op {
	return op{name: "CreateVolume/" + kind, method: "CreateVolume", twoPVs: twoPVs, prepare: func(e *env) (func() error, func()) {
		return func() error { return e.createVolume("vol", 16*mib, params, nil) }, nil
	}}
}

// restoreOp: the source is written, snapshotted, then overwritten, so
// that a restore of the snapshot must show the first data.
func restoreOp(kind string, params map[string]string) op {
	return op{name: "CreateVolume/restore-" + kind, method: "CreateVolume", prepare: func(e *env) (func() error, func()) {
		src := e.volume("src", params)
		want := e.write(src)
		snap := e.snapshot("snap", src)
		e.write(src)
		from := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}}
		return func() error { return e.createVolume("restored", 16*mib, params, from) }, func() {
			if got := e.read(e.idOf("restored")); got != want {
				e.t.Errorf("restored data differs from the snapshot's")
			}
		}
	}}
}

func cloneOp(kind string, params map[string]string) op {
	return op{name: "CreateVolume/clone-" + kind, method: "CreateVolume", prepare: func(e *env) (func() error, func()) {
		src := e.volume("src", params)
		want := e.write(src)
		from := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}}
		return func() error { return e.createVolume("clone", 16*mib, params, from) }, func() {
			if e.read(e.idOf("clone")) != want || e.read(src) != want {
				e.t.Errorf("clone or source data differs from what was written")
			}
		}
	}}
}

func deleteOp(kind string, params map[string]string) op {
	return op{name: "DeleteVolume/" + kind, method: "DeleteVolume", prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", params)
		e.write(id)
		return func() error {
			return retry(e.alive, func() error {
				_, err := e.c.Controller.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id})
				return err
			})
		}, nil
	}}
}

func snapshotOp(kind string, params map[string]string) op {
	return op{name: "CreateSnapshot/" + kind, method: "CreateSnapshot", prepare: func(e *env) (func() error, func()) {
		src := e.volume("src", params)
		want := e.write(src)
		return func() error { return e.snapshotCall("snap", src) }, func() {
			if e.read(src) != want {
				e.t.Errorf("source data changed by the snapshot")
			}
		}
	}}
}

func deleteSnapshotOp(kind string, params map[string]string) op {
	return op{name: "DeleteSnapshot/" + kind, method: "DeleteSnapshot", prepare: func(e *env) (func() error, func()) {
		src := e.volume("src", params)
		snap := e.snapshot("snap", src)
		return func() error {
			return retry(e.alive, func() error {
				_, err := e.c.Controller.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: snap})
				return err
			})
		}, nil
	}}
}

// stageOp: NodeStage formats a blank volume and mounts it. A crash after
// mkfs must not lead to a second mkfs.
func stageOp() op {
	return firstStageOp("NodeStageVolume", thick, nil, "filesystem made twice")
}

// encryptedStageOp: NodeStage of a blank encrypted volume runs luksFormat,
// open, mkfs and mount. A crash after luksFormat must not lead to a second
// one (its LUKS UUID stays), nor one after open to a stuck mapping.
func encryptedStageOp() op {
	return firstStageOp("NodeStageVolume/encrypted", encrypted, encSecrets, "LUKS2 formatted twice")
}

// firstStageOp is the first NodeStage of a blank volume made with params
// (staged with secrets): the UUID blkid reads on the LV (the filesystem's,
// or LUKS2's on an encrypted volume) after a crash must be the one after
// the retry, or the retry formatted it again (twice says what that means).
func firstStageOp(name string, params, secrets map[string]string, twice string) op {
	return op{name: name, method: "NodeStageVolume", prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", params)
		handle := func() *csiflow.Volume {
			v := e.handle(id)
			v.StageSecrets = secrets
			return v
		}
		must(e.t, handle().Attach(context.Background(), node))
		return func() error {
			return retry(e.alive, func() error { return handle().Stage(context.Background(), e.path("staging")) })
		}, nil
	}, atCrash: func(e *env) func() {
		before := fsUUID("vol")
		return func() {
			if after := fsUUID("vol"); before != "" && after != before {
				e.t.Errorf("%s: UUID %s after the crash, %s after the retry", twice, before, after)
			}
		}
	}}
}

// encryptedUnstageOp: a crash between the unmount and the close of the
// mapping; the retry finds the staging path gone and still closes it, so
// that the volume can be detached.
func encryptedUnstageOp() op {
	return op{name: "NodeUnstageVolume/encrypted", method: "NodeUnstageVolume", prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", encrypted)
		v := e.encHandle(id)
		must(e.t, v.Attach(context.Background(), node))
		must(e.t, v.Stage(context.Background(), e.path("staging")))
		return func() error {
			return retry(e.alive, func() error {
				v := e.encHandle(id)
				v.Staging = e.path("staging")
				if err := v.Unstage(context.Background()); err != nil {
					return err
				}
				v.NodeID = node
				return v.Detach(context.Background())
			})
		}, nil
	}}
}

// encHandle is handle with the node-stage secret of encrypted volumes.
func (e *env) encHandle(id string) *csiflow.Volume {
	v := e.handle(id)
	v.StageSecrets = encSecrets
	return v
}

func nodeExpandOp() op {
	return op{name: "NodeExpandVolume", method: "NodeExpandVolume", prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", thick)
		v := e.handle(id)
		ctx := context.Background()
		must(e.t, v.Attach(ctx, node))
		must(e.t, v.Stage(ctx, e.path("staging")))
		_, err := e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
			VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 32 * mib}, VolumeCapability: mountCap()})
		must(e.t, err)
		return func() error {
			return retry(e.alive, func() error {
				_, err := e.c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: e.path("staging"),
					StagingTargetPath: e.path("staging"), VolumeCapability: mountCap(), CapacityRange: &csi.CapacityRange{RequiredBytes: 32 * mib}})
				return err
			})
		}, nil
	}}
}

func unstageOp() op {
	return op{name: "NodeUnstageVolume", method: "NodeUnstageVolume", prepare: func(e *env) (func() error, func()) {
		id := e.volume("vol", thick)
		v := e.handle(id)
		must(e.t, v.Attach(context.Background(), node))
		must(e.t, v.Stage(context.Background(), e.path("staging")))
		return func() error {
			return retry(e.alive, func() error {
				v := e.handle(id) // a fresh handle, on the restarted carve's client, knows no staging path
				v.Staging = e.path("staging")
				return v.Unstage(context.Background())
			})
		}, nil
	}}
}

// snapshot takes a snapshot on an un-armed carve until it is ready.
func (e *env) snapshot(name, source string) string {
	e.t.Helper()
	must(e.t, e.snapshotCall(name, source))
	resp, err := e.c.Controller.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
	must(e.t, err)
	return resp.GetSnapshot().GetSnapshotId()
}

// snapshotCall is CreateSnapshot as the CO makes it: again until ready.
func (e *env) snapshotCall(name, source string) error {
	for range 120 {
		var ready bool
		err := retry(e.alive, func() error {
			resp, err := e.c.Controller.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
			ready = resp.GetSnapshot().GetReadyToUse()
			return err
		})
		if err != nil || ready {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return context.DeadlineExceeded
}

// idOf is the ID of the volume named name: a readable CSI name is its LV's
// name (volume.LVName), and the ID is node/VG/LV.
func (e *env) idOf(name string) string { return node + "/" + vg + "/" + name }
