//go:build vmtest

package lvm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/lvm/runner"
	fixtures "carve.dev/carve/test/fixture"
)

// What the node agent does with a declared disk: a VG is made of it, or
// grows by it, only while lvm2 finds it blank. A disk holding a
// filesystem is refused by both, its filesystem intact and the VG as it
// was; wiped, it becomes a PV of the VG, whose space grows by it; the
// same vgextend again is refused, changing nothing.
func TestVMTakeOnlyBlankDisks(t *testing.T) {
	disk, disk2 := os.Getenv("CARVE_TEST_DISK"), os.Getenv("CARVE_TEST_DISK2")
	if disk == "" || disk2 == "" {
		fixtures.Missing(t, "CARVE_TEST_DISK or CARVE_TEST_DISK2 is unset: taking a disk needs two blank disks")
	}
	ctx := context.Background()
	var c *Client
	// Registered first, so it runs after newVMClient's cleanup has
	// removed the VG.
	t.Cleanup(func() {
		if err := c.RemovePVs(ctx, disk2); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	c, _ = newVMClient(t, disk)
	tools := runner.New(time.Minute)
	if _, err := tools.Run(ctx, "mkfs.ext4", "-q", "-F", "-L", "precious", disk2); err != nil {
		t.Fatal(err)
	}
	before, err := c.GetVG(ctx, vmVG)
	if err != nil {
		t.Fatal(err)
	}
	for what, take := range map[string]func() error{
		"vgcreate": func() error { return c.CreateVGOnBlank(ctx, vmVG+"2", disk2) },
		"vgextend": func() error { return c.ExtendVGOnBlank(ctx, vmVG, disk2) },
	} {
		err := take()
		t.Logf("%s of a disk holding ext4: %v", what, err)
		// lvm2's own words: it found the signature and, asked, did not
		// wipe it (not a refusal for some other reason).
		if err == nil || !strings.Contains(err.Error(), "Aborted wiping of ext4") {
			t.Errorf("%s of a disk holding a filesystem: %v, want lvm2 declining to wipe it", what, err)
		}
	}
	if out, err := tools.Run(ctx, "blkid", "-p", "-o", "value", "-s", "LABEL", disk2); err != nil || strings.TrimSpace(string(out)) != "precious" {
		t.Fatalf("the refused disk's filesystem after the refusals: %q, %v", out, err)
	}
	if again, err := c.GetVG(ctx, vmVG); err != nil || again.Size != before.Size {
		t.Fatalf("a refusal changed the VG: %+v, %v", again, err)
	}

	if _, err := tools.Run(ctx, "wipefs", "-q", "-a", disk2); err != nil {
		t.Fatal(err)
	}
	if err := c.ExtendVGOnBlank(ctx, vmVG, disk2); err != nil {
		t.Fatal(err)
	}
	after, err := c.GetVG(ctx, vmVG)
	if err != nil {
		t.Fatal(err)
	}
	pvs, err := c.ListPVs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var added *PV
	for i := range pvs {
		if pvs[i].Name == disk2 {
			added = &pvs[i]
		}
	}
	if added == nil || added.VGName != vmVG || after.Size != before.Size+added.Size || after.Free != before.Free+added.Free {
		t.Fatalf("after vgextend: VG %+v (was %+v), PV %+v", after, before, added)
	}
	if err := c.ExtendVGOnBlank(ctx, vmVG, disk2); err == nil {
		t.Error("a second vgextend with the same disk succeeded")
	}
	if again, err := c.GetVG(ctx, vmVG); err != nil || again.Size != after.Size {
		t.Errorf("the refused vgextend changed the VG: %+v, %v", again, err)
	}
}
