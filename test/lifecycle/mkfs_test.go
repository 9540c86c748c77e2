//go:build vmtest

package lifecycle

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/test/csiflow"
)

// reportNumber runs a filesystem tool and reads the first number after
// pattern in its report.
func reportNumber(t *testing.T, pattern string, name string, args ...string) int64 {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	m := regexp.MustCompile(pattern + `\s*(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in %s's report:\n%s", pattern, name, out)
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 64)
	must(t, err)
	return n
}

// TestMkfsOptions: a class's mkfsOptions reach mkfs when Carve formats a
// new volume (what dumpe2fs and xfs_info read back), never touch it once
// it holds a filesystem, and are refused, outside the vetted set, at
// CreateVolume before any LV and at NodeStage from a forged volume
// context.
func TestMkfsOptions(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	ext4, err := e.c.Create(ctx, "pvc-mkfs-ext4", 64*mib, map[string]string{
		"fsType": "ext4", "mkfsOptions": "-N 20000 -b 2048 -E lazy_itable_init=0,root_owner=1000:1000",
	}, csiflow.MountCap(snw, ""))
	must(t, err)
	staging, target := e.path("ext4-staging"), e.path("ext4-target")
	must(t, ext4.Up(ctx, node, staging, target))
	dev := ext4.PublishContext["devicePath"]
	inodes := reportNumber(t, `Inode count:`, "dumpe2fs", "-h", dev)
	if inodes < 20000 || inodes > 30000 {
		t.Errorf("inode count %d, want about the 20000 asked", inodes)
	}
	if n := reportNumber(t, `Block size:`, "dumpe2fs", "-h", dev); n != 2048 {
		t.Errorf("block size %d, want 2048", n)
	}
	fi, err := os.Stat(target)
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("the volume's root is owned by %d:%d, want 1000:1000", st.Uid, st.Gid)
	}

	// Restaged with other (vetted) options in its context: mounted as it
	// is. Options outside the set: refused before anything.
	must(t, ext4.Unpublish(ctx, target))
	must(t, ext4.Unstage(ctx))
	ext4.Context["mkfsOptions"] = "-N 90000 -b 4096"
	must(t, ext4.Stage(ctx, staging))
	if n := reportNumber(t, `Inode count:`, "dumpe2fs", "-h", dev); n != inodes {
		t.Errorf("inode count %d after a restage with other options, was %d: the filesystem was changed", n, inodes)
	}
	must(t, ext4.Unstage(ctx))
	ext4.Context["mkfsOptions"] = "-J device=/dev/sdb"
	wantCode(t, "stage with options outside the set", ext4.Stage(ctx, staging), codes.InvalidArgument)
	must(t, ext4.Down(ctx, target))
	must(t, ext4.Delete(ctx))

	xfs, err := e.c.Create(ctx, "pvc-mkfs-xfs", 320*mib, map[string]string{"fsType": "xfs", "mkfsOptions": "-i size=1024 -m reflink=0"},
		csiflow.MountCap(snw, ""))
	must(t, err)
	target = e.path("xfs-target")
	must(t, xfs.Up(ctx, node, e.path("xfs-staging"), target))
	if n := reportNumber(t, `isize=`, "xfs_info", target); n != 1024 {
		t.Errorf("xfs isize %d, want 1024", n)
	}
	if n := reportNumber(t, `reflink=`, "xfs_info", target); n != 0 {
		t.Errorf("xfs reflink=%d, want 0", n)
	}
	must(t, xfs.Down(ctx, target))
	must(t, xfs.Delete(ctx))

	for what, params := range map[string]map[string]string{
		"outside the set":    {"mkfsOptions": "-J device=/dev/sdb"},
		"ext4's for an xfs":  {"fsType": "xfs", "mkfsOptions": "-N 1000"},
		"not a power of two": {"fsType": "xfs", "mkfsOptions": "-i size=768"},
	} {
		_, err := e.c.Create(ctx, "pvc-mkfs-bad", 320*mib, params, csiflow.MountCap(snw, ""))
		wantCode(t, what, err, codes.InvalidArgument)
	}
	if lvs, err := e.lvm.ListLVs(ctx, vg); err != nil || len(lvs) != 0 {
		t.Errorf("after the refused classes the VG holds %v (%v), want nothing", lvs, err)
	}
}
