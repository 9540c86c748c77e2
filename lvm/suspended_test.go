package lvm

import (
	"context"
	"slices"
	"testing"

	"carve.dev/carve/lvm/runner"
)

// TestSuspendedLayersReachTheScan: a command run withSuspendedLayers gets
// lvm2's ignore_suspended_devices, in its one --config when it has one;
// any other command runs as given. Such commands run as processes, never
// in an lvm2 shell (where the setting did not keep a scan off the layer).
func TestSuspendedLayersReachTheScan(t *testing.T) {
	plain := []string{"lvcreate", "-s", "-n", "snap", "vg0/lv"}
	report := []string{"lvs", "--config", "report/x=1", "-o", "lv_name"}
	ctx := withSuspendedLayers(context.Background())
	if !runner.RunsAsProcess(ctx) || runner.RunsAsProcess(context.Background()) {
		t.Error("withSuspendedLayers does not make its commands run as processes")
	}
	for _, tc := range []struct {
		ctx       context.Context
		args, out []string
	}{
		{context.Background(), plain, plain},
		{ctx, plain, []string{"lvcreate", "--config", ignoreSuspended, "-s", "-n", "snap", "vg0/lv"}},
		{ctx, report, []string{"lvs", "--config", "report/x=1 " + ignoreSuspended, "-o", "lv_name"}},
	} {
		orig := slices.Clone(tc.args)
		if got := withScanConfig(tc.ctx, tc.args); !slices.Equal(got, tc.out) {
			t.Errorf("withScanConfig(%q) = %q, want %q", tc.args, got, tc.out)
		}
		if !slices.Equal(tc.args, orig) {
			t.Errorf("withScanConfig changed its argument slice: %q", tc.args)
		}
	}
	f := newFake(t, step{args: []string{"lvremove", "--config", ignoreSuspended, "-y", "vg0/x"}})
	if _, err := f.run(ctx, "lvremove", "-y", "vg0/x"); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotWithSuspendedLayers: a snapshot asked with
// SnapshotOptions.SuspendedLayers runs its lvcreate with the setting; one
// without, as given.
func TestSnapshotWithSuspendedLayers(t *testing.T) {
	thick := LV{VGName: "carve-cow", Name: "origin1", Attr: "-wi-a-----", Size: 8 * mib, ExtentSize: 4 * mib}
	c := newFake(t,
		step{args: []string{"lvcreate", "--config", ignoreSuspended, "-s", "-n", "f1", "-L", "8388608b", "--yes", "carve-cow/origin1"}},
		step{args: []string{"lvcreate", "-s", "-n", "f2", "-L", "8388608b", "--yes", "carve-cow/origin1"}},
	)
	o := SnapshotOptions{COWSize: 5 * mib, SkipReadBack: true, SuspendedLayers: true}
	if _, err := c.CreateSnapshotOf(context.Background(), thick, "f1", o); err != nil {
		t.Fatal(err)
	}
	o.SuspendedLayers = false
	if _, err := c.CreateSnapshotOf(context.Background(), thick, "f2", o); err != nil {
		t.Fatal(err)
	}
}
