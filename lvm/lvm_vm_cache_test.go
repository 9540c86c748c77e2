//go:build vmtest

package lvm

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Two LVM nodes set up as users' nodes are: a Cache on a real VG sees what is done to the VG outside it
// (an administrator's lvcreate, lvextend and lvremove; dmeventd's
// lvextend of a thin pool is one more lvm2 command of another process) at
// the first query after printEvery, through the PVs' metadata headers,
// long before its max age; and a VG no one changes is answered from the
// report. With two nodes, a node where Carve did nothing kept reporting
// the space an administrator had freed for its max age (10 min).
func TestVMCacheSeesChangesMadeOutsideIt(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	x := NewCache(c, time.Hour)
	free := func() uint64 {
		t.Helper()
		vg, err := x.GetVG(ctx, Cached, vmVG)
		if err != nil {
			t.Fatal(err)
		}
		return vg.Free
	}
	names := func() []string {
		t.Helper()
		lvs, err := x.ListLVs(ctx, Cached, vmVG)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, lv := range lvs {
			out = append(out, lv.Name)
		}
		return out
	}
	if _, err := x.ListVGPVs(ctx, Cached, vmVG); err != nil { // the PVs' paths, as the storage report reads them
		t.Fatal(err)
	}
	before, none := free(), names()
	if p, err := metadataPrint(x.pvPaths[vmVG]); err != nil || p == "" {
		t.Fatalf("metadata print of %v: %q, %v", x.pvPaths[vmVG], p, err)
	}

	// By hand: the plain Client, another process as far as x knows.
	if _, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "by-hand", Size: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(printEvery + 100*time.Millisecond)
	if got := names(); !slices.Contains(got, "by-hand") || len(got) != len(none)+1 {
		t.Errorf("LVs after an lvcreate by hand: %v (before: %v)", got, none)
	}
	if got := free(); got != before-64<<20 {
		t.Errorf("VG free after an lvcreate by hand: %d, want %d", got, before-64<<20)
	}
	if err := c.ExtendLV(ctx, vmVG, "by-hand", 128<<20); err != nil {
		t.Fatal(err)
	}
	time.Sleep(printEvery + 100*time.Millisecond)
	if got := free(); got != before-128<<20 {
		t.Errorf("VG free after an lvextend by hand: %d, want %d", got, before-128<<20)
	}
	if err := c.RemoveLV(ctx, vmVG, "by-hand"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(printEvery + 100*time.Millisecond)
	if got := names(); slices.Contains(got, "by-hand") {
		t.Errorf("LVs after an lvremove by hand: %v", got)
	}
	if got := free(); got != before {
		t.Errorf("VG free after the lvremove by hand: %d, want %d", got, before)
	}

	// Unchanged: the report answers, the print does not move.
	x.mu.Lock()
	gen := x.gens[vmVG]
	x.mu.Unlock()
	time.Sleep(printEvery + 100*time.Millisecond)
	free()
	x.mu.Lock()
	after := x.gens[vmVG]
	x.mu.Unlock()
	if after != gen {
		t.Errorf("the generation moved from %d to %d with no change to the VG", gen, after)
	}
}
