//go:build vmtest

package nodesafety

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/test/csiflow"
)

// misuse is one call a CO could make by mistake and the code it must get.
type misuse struct {
	name string
	want codes.Code
	call func(ctx context.Context) error
}

func id(vg, lv string) string { return node + "/" + vg + "/" + lv }

// TestMisusesChangeNothing runs every misuse against the scene of setup,
// each a subtest: the code is checked, then everything guarded (check).
// Then the canary, the victim and small come down and are deleted normally.
func TestMisusesChangeNothing(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for _, group := range [][]misuse{e.stageMisuses(), e.publishMisuses(), e.unmountMisuses(), e.readMisuses()} {
		for _, m := range group {
			t.Run(m.name, func(t *testing.T) {
				err := m.call(ctx)
				if got := status.Code(err); got != m.want {
					t.Errorf("code %v (%v), want %v", got, err, m.want)
				}
				e.check(t)
			})
		}
	}
	t.Run("idempotency", e.idempotency)
}

// The scene's calls, with everything a misuse does not vary filled in.

func (e *env) stage(volumeID, staging string, vc *csi.VolumeCapability) error {
	_, err := e.c.Node.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: volumeID, StagingTargetPath: staging, VolumeCapability: vc})
	return err
}

func (e *env) publish(volumeID, staging, target string, vc *csi.VolumeCapability) error {
	_, err := e.c.Node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: volumeID, StagingTargetPath: staging, TargetPath: target, VolumeCapability: vc})
	return err
}

func (e *env) unstage(volumeID, staging string) error {
	_, err := e.c.Node.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: volumeID, StagingTargetPath: staging})
	return err
}

func (e *env) unpublish(volumeID, target string) error {
	_, err := e.c.Node.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target})
	return err
}

var ext4 = csiflow.MountCap(snw, "ext4")

// stageMisuses: IDs that name no Carve volume of this node, and paths and
// mount flags no CO hands out, for NodeStageVolume (which formats blank
// devices: a wrong device here would be formatted).
func (e *env) stageMisuses() []misuse {
	fresh := e.root + "/staging"
	byID := func(name, volumeID string, want codes.Code) misuse {
		return misuse{"stage/" + name, want, func(context.Context) error { return e.stage(volumeID, fresh, ext4) }}
	}
	at := func(name, path string, want codes.Code) misuse {
		return misuse{"stage/" + name, want, func(context.Context) error { return e.stage(e.victim.ID, path, ext4) }}
	}
	flags := func(name string, want codes.Code, f ...string) misuse {
		return misuse{"stage/flags " + name, want, func(context.Context) error {
			return e.stage(e.victim.ID, fresh, csiflow.MountCap(snw, "ext4", f...))
		}}
	}
	return []misuse{
		byID("LV of a VG carve does not serve", id(foreignVG, "x"), codes.NotFound),
		byID("raw disk through VG .", id(".", filepath.Base(e.rawDisk)), codes.InvalidArgument),
		byID("device node outside /dev through VG ..", id("..", filepath.Base(rawAlias)), codes.InvalidArgument),
		byID("canary under its mapper name", id("mapper", vg+"-canary"), codes.NotFound),
		byID("LV without Carve's tag", id(vg, "plain"), codes.NotFound),
		byID("thin pool's hidden data LV", id(vg, "pool_tdata"), codes.InvalidArgument),
		byID("canary of another node", "other-node/"+vg+"/canary", codes.NotFound),
		byID("LV path in the LV name", node+"/"+vg+"/canary/../plain", codes.NotFound),
		at("relative path", "staging", codes.InvalidArgument),
		at("path with ..", e.root+"/../escape", codes.InvalidArgument),
		at("path with a newline", e.root+"/a\nb", codes.InvalidArgument),
		at("path longer than PATH_MAX", e.root+"/"+strings.Repeat("d/", 2100), codes.InvalidArgument),
		at("name longer than NAME_MAX", e.root+"/"+strings.Repeat("n", 300), codes.InvalidArgument),
		at("path outside the root", e.outside+"/staging", codes.InvalidArgument),
		at("the root itself", e.root, codes.InvalidArgument),
		at("/proc/sys", "/proc/sys", codes.InvalidArgument),
		at("/etc", "/etc", codes.InvalidArgument),
		at("/", "/", codes.InvalidArgument),
		at("inside the canary's filesystem", e.canaryTarget+"/sub", codes.FailedPrecondition),
		at("over a directory with content", e.root+"/full", codes.FailedPrecondition),
		at("through a symlink", e.root+"/link", codes.InvalidArgument),
		at("in a directory that does not exist", e.root+"/no/such/dir", codes.FailedPrecondition),
		at("at the canary's staging mount", e.canaryStaging, codes.AlreadyExists),
		flags("bind", codes.InvalidArgument, "bind"),
		flags("remount,ro", codes.InvalidArgument, "remount,ro"),
		flags("rbind", codes.InvalidArgument, "rbind"),
		flags("with shell characters", codes.InvalidArgument, "noatime;touch /pwned", "$(reboot)"),
		flags("with a control character", codes.InvalidArgument, "noatime\nro"),
		// mkfs.xfs refuses the blank 16 MiB volume: xfs needs 300 MiB.
		{"stage/device mkfs refuses", codes.FailedPrecondition, func(context.Context) error {
			return e.stage(e.small.ID, e.root+"/small-staging", csiflow.MountCap(snw, "xfs"))
		}},
	}
}

// publishMisuses: NodePublishVolume must expose only a mount of the
// volume's own filesystem, at a path fit to mount on.
func (e *env) publishMisuses() []misuse {
	pub := func(name, volumeID, staging, target string, vc *csi.VolumeCapability, want codes.Code) misuse {
		return misuse{"publish/" + name, want, func(context.Context) error { return e.publish(volumeID, staging, target, vc) }}
	}
	target := e.root + "/pods/p/mount"
	return []misuse{
		pub("the host's / as staging", e.canary.ID, "/", target, ext4, codes.InvalidArgument),
		pub("another volume's staging", e.victim.ID, e.canaryStaging, target, ext4, codes.FailedPrecondition),
		pub("staging that is no mount", e.canary.ID, e.root+"/empty", target, ext4, codes.FailedPrecondition),
		pub("target outside the root", e.canary.ID, e.canaryStaging, e.outside+"/t", ext4, codes.InvalidArgument),
		pub("target over a directory with content", e.canary.ID, e.canaryStaging, e.root+"/full", ext4, codes.FailedPrecondition),
		pub("target inside the canary's filesystem", e.canary.ID, e.canaryStaging, e.canaryTarget+"/sub", ext4, codes.FailedPrecondition),
		pub("target is the staging path", e.canary.ID, e.canaryStaging, e.canaryStaging, ext4, codes.InvalidArgument),
		pub("flag bind", e.canary.ID, e.canaryStaging, target, csiflow.MountCap(snw, "ext4", "rbind"), codes.InvalidArgument),
		pub("LV of a VG carve does not serve", id(foreignVG, "x"), e.canaryStaging, target, ext4, codes.NotFound),
	}
}

// unmountMisuses: NodeUnstageVolume and NodeUnpublishVolume undo only this
// volume's mounts and remove only what Carve makes.
func (e *env) unmountMisuses() []misuse {
	un := func(name string, unstage bool, volumeID, path string, want codes.Code) misuse {
		call := func(context.Context) error { return e.unpublish(volumeID, path) }
		if unstage {
			name, call = "unstage/"+name, func(context.Context) error { return e.unstage(volumeID, path) }
		} else {
			name = "unpublish/" + name
		}
		return misuse{name, want, call}
	}
	return []misuse{
		un("another volume's staging, published", true, e.victim.ID, e.canaryStaging, codes.FailedPrecondition),
		un("a file with content", true, e.canary.ID, e.root+"/content", codes.FailedPrecondition),
		un("a directory outside the root", true, e.canary.ID, e.outside+"/empty", codes.InvalidArgument),
		un("another volume's target", false, e.victim.ID, e.canaryTarget, codes.FailedPrecondition),
		un("the canary's target for an LV carve does not serve", false, id(foreignVG, "x"), e.canaryTarget, codes.FailedPrecondition),
		un("a file outside the root", false, e.canary.ID, e.outside+"/file", codes.InvalidArgument),
		un("an empty directory outside the root", false, e.canary.ID, e.outside+"/empty", codes.InvalidArgument),
		un("a file with content in the root", false, e.canary.ID, e.root+"/content", codes.FailedPrecondition),
		un("a directory with content in the root", false, e.canary.ID, e.root+"/full", codes.FailedPrecondition),
		un("a symlink leading out of the root", false, e.canary.ID, e.root+"/link", codes.InvalidArgument),
	}
}

// readMisuses: NodeExpandVolume grows, and NodeGetVolumeStats reports,
// only this volume's mount.
func (e *env) readMisuses() []misuse {
	expand := func(name, volumeID, path string, want codes.Code) misuse {
		return misuse{"expand/" + name, want, func(ctx context.Context) error {
			_, err := e.c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: volumeID, VolumePath: path, VolumeCapability: ext4})
			return err
		}}
	}
	stats := func(name, volumeID, path string, want codes.Code) misuse {
		return misuse{"stats/" + name, want, func(ctx context.Context) error {
			_, err := e.c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: volumeID, VolumePath: path})
			return err
		}}
	}
	return []misuse{
		expand("another volume's target", e.victim.ID, e.canaryTarget, codes.FailedPrecondition),
		expand("LV of a VG carve does not serve", id(foreignVG, "x"), e.canaryTarget, codes.NotFound),
		expand("a directory that is no mount", e.canary.ID, e.root+"/empty", codes.FailedPrecondition),
		expand("a path outside the root", e.canary.ID, e.outside, codes.InvalidArgument),
		stats("another volume's target", e.victim.ID, e.canaryTarget, codes.NotFound),
		stats("a path outside the root", e.canary.ID, e.outside, codes.NotFound),
	}
}

// idempotency: the CO's retries still succeed. An unpublish or unstage of
// a path that is gone is done; an unpublish for a volume deleted long ago
// removes the empty directory or file Carve left; the canary comes down
// and every step repeats harmlessly.
func (e *env) idempotency(t *testing.T) {
	ghost := id(vg, "deleted-long-ago")
	dir, file := e.root+"/pods/p/ghost-mount", e.root+"/pods/p/ghost-dev"
	must(t, os.Mkdir(dir, 0o750))
	must(t, os.WriteFile(file, nil, 0o640))
	for _, p := range []string{dir, file, dir} {
		if err := e.unpublish(ghost, p); err != nil {
			t.Errorf("unpublish %s of a deleted volume: %v", p, err)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", p, err)
		}
	}
	if err := e.unstage(ghost, e.root+"/pods/p/ghost-staging"); err != nil {
		t.Errorf("unstage of a missing path: %v", err)
	}
	e.check(t)
	e.teardown(t)
}

// teardown brings the canary down twice (the second time a retry that
// must succeed), detaches the victim and small, and deletes all three.
func (e *env) teardown(t *testing.T) {
	ctx := context.Background()
	for range 2 {
		must(t, e.canary.Down(ctx, e.canaryTarget))
	}
	for _, p := range []string{e.canaryTarget, e.canaryStaging} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
	must(t, e.canary.Delete(ctx))
	for _, v := range []*csiflow.Volume{e.victim, e.small} {
		must(t, v.Detach(ctx))
		must(t, v.Delete(ctx))
	}
}
