package lvm

import (
	"errors"
	"strings"
	"testing"
)

const bareFailure = "  Command failed with status code 5.\n"

// vgmknodes's bare exit 5 (lvm2 2.03, after some kills) is no
// failure when every active LV with a path has its node; a node still
// missing is, whatever vgmknodes said.
func TestMakeNodesJudgesByTheNodes(t *testing.T) {
	c := newFake(t,
		step{args: []string{"vgmknodes", "carve-thin"}, stderr: bareFailure},
		step{args: lvsArgs("carve-thin"), out: "@empty-lvs"},
		// The fixture's active LVs have paths under /dev/carve-linear,
		// which this host lacks: still missing after vgmknodes.
		step{args: []string{"vgmknodes", "carve-linear"}},
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
		step{args: []string{"vgmknodes", "carve-linear"}, stderr: bareFailure},
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
	)
	if err := c.MakeNodes(ctx, "carve-thin"); err != nil {
		t.Errorf("bare exit 5, no active LV with a path: %v", err)
	}
	for range 2 {
		err := c.MakeNodes(ctx, "carve-linear")
		if err == nil || !strings.Contains(err.Error(), "/dev/carve-linear/vol1, /dev/carve-linear/vol3") ||
			strings.Contains(err.Error(), "vol-2") {
			t.Errorf("active LVs without nodes: %v; want both active ones named, not the inactive one", err)
		}
	}
}

// A failure lvm2 explains is one, with no read-back.
func TestMakeNodesReportsLVM2sFailure(t *testing.T) {
	c := newFake(t, step{args: []string{"vgmknodes", "nosuchvg"}, stderr: "@err-vg-notfound"})
	if err := c.MakeNodes(ctx, "nosuchvg"); !errors.Is(err, ErrNotFound) {
		t.Errorf("MakeNodes of a missing VG: %v, want ErrNotFound", err)
	}
	if err := c.MakeNodes(ctx, "bad/vg"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("MakeNodes of a bad name: %v", err)
	}
}
