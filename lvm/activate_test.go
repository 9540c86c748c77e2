package lvm

import (
	"errors"
	"strings"
	"testing"

	"carve.dev/carve/lvm/runner"
)

const refusedByTmeta = "  Activation of logical volume soakvg/pool is prohibited while logical volume soakvg/pool_tmeta is active.\n"

// An activation cut short leaves a thin pool's components active without
// the pool; lvm2 then refuses the pool for good. Activate deactivates each
// leftover component it is told of and activates again.
func TestActivateDeactivatesLeftoverComponents(t *testing.T) {
	c := newFake(t,
		step{args: []string{"lvchange", "-ay", "-K", "soakvg/pool"}, stderr: refusedByTmeta},
		step{args: []string{"lvchange", "-an", "soakvg/pool_tmeta"}},
		step{args: []string{"lvchange", "-ay", "-K", "soakvg/pool"},
			stderr: "  Activation of logical volume soakvg/pool is prohibited while logical volume soakvg/pool_tdata is active.\n"},
		step{args: []string{"lvchange", "-an", "soakvg/pool_tdata"}},
		step{args: []string{"lvchange", "-ay", "-K", "soakvg/pool"}},
	)
	if err := c.Activate(ctx, "soakvg", "pool"); err != nil {
		t.Fatal(err)
	}
}

// RetagAndActivate repairs the same way, its tag changes made again (lvm2
// takes an added tag it has, and a removed one it lacks, as done).
func TestRetagAndActivateDeactivatesLeftoverComponents(t *testing.T) {
	c := newFake(t,
		step{args: []string{"lvchange", "--addtag", "carve.dev/held", "-ay", "vg/r1"},
			stderr: "  Activation of logical volume vg/r1 is prohibited while logical volume vg/r1_rimage_1 is active.\n"},
		step{args: []string{"lvchange", "-an", "vg/r1_rimage_1"}},
		step{args: []string{"lvchange", "--addtag", "carve.dev/held", "-ay", "vg/r1"}},
	)
	if err := c.RetagAndActivate(ctx, "vg", "r1", []string{"carve.dev/held"}, nil, true); err != nil {
		t.Fatal(err)
	}
}

// A failed repair ends the activation with both errors.
func TestActivateReportsAFailedRepair(t *testing.T) {
	c := newFake(t,
		step{args: []string{"lvchange", "-ay", "-K", "soakvg/pool"}, stderr: refusedByTmeta},
		step{args: []string{"lvchange", "-an", "soakvg/pool_tmeta"}, stderr: "  Logical volume soakvg/pool_tmeta in use.\n"},
	)
	err := c.Activate(ctx, "soakvg", "pool")
	if err == nil || !strings.Contains(err.Error(), "prohibited while") || !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want the refusal and the failed deactivation (ErrBusy)", err)
	}
}

// lvm2 keeps refusing: the repairs stop after a bound.
func TestActivateStopsRepairing(t *testing.T) {
	var steps []step
	for range maxLeftoverComponents {
		steps = append(steps, step{args: []string{"lvchange", "-ay", "-K", "soakvg/pool"}, stderr: refusedByTmeta},
			step{args: []string{"lvchange", "-an", "soakvg/pool_tmeta"}})
	}
	c := newFake(t, steps...)
	if err := c.Activate(ctx, "soakvg", "pool"); err == nil || !strings.Contains(err.Error(), "still refused") {
		t.Fatalf("err = %v, want a refusal after %d repairs", err, maxLeftoverComponents)
	}
}

// Only a hidden component of the very LV being activated is ever
// deactivated: not another LV, not one of another VG, not a name that is
// no component's.
func TestLeftoverComponent(t *testing.T) {
	refused := func(stderr string) error {
		return &runner.Error{Name: "lvm", ExitCode: 5, Stderr: stderr, Err: errors.New("exit status 5")}
	}
	for _, tc := range []struct {
		err      error
		vg, name string
		want     string
	}{
		{refused(refusedByTmeta), "soakvg", "pool", "pool_tmeta"},
		{refused("  Activation of logical volume vg/r is prohibited while logical volume vg/r_rmeta_0 is active."), "vg", "r", "r_rmeta_0"},
		{refused(refusedByTmeta), "soakvg", "poo", ""},        // pool_tmeta is not poo's
		{refused(refusedByTmeta), "othervg", "pool", ""},      // another VG
		{refused(refusedByTmeta), "soakvg", "pool_tmeta", ""}, // not a sub-LV of itself
		{refused(strings.Replace(refusedByTmeta, "pool_tmeta", "pool_x/../y", 1)), "soakvg", "pool", ""},
		{refused(strings.Replace(refusedByTmeta, "pool_tmeta", "pool_", 1)), "soakvg", "pool", ""},
		{refused(strings.Replace(refusedByTmeta, "pool_tmeta", "pool_TMETA", 1)), "soakvg", "pool", ""},
		{refused("  Logical volume soakvg/pool in use."), "soakvg", "pool", ""},
		{errors.New(refusedByTmeta), "soakvg", "pool", ""}, // not lvm2's stderr
		{nil, "soakvg", "pool", ""},
	} {
		got, ok := leftoverComponent(tc.err, tc.vg, tc.name)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("leftoverComponent(%v, %s, %s) = %q, %v; want %q", tc.err, tc.vg, tc.name, got, ok, tc.want)
		}
	}
}

// Live tells an LV whose device serves it from one lvm2 merely reports
// active. The raid1 row is what an lvchange -ay killed 0.2-0.3 s in left
// (lvm2 2.03.16 in the VM): "active", attr state X, no device number.
func TestLive(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lv    LV
		want  bool
		cause string
	}{
		{"active linear", LV{Active: true, Attr: "-wi-a-----", KernelMajor: 253}, true, ""},
		{"open raid1", LV{Active: true, Attr: "Rwi-aor---", KernelMajor: 253}, true, ""},
		{"thin pool, check needed", LV{Active: true, Attr: "twi-c-tz--", KernelMajor: 253}, true, ""},
		{"inactive", LV{Attr: "-wi-------", KernelMajor: -1}, false, "not active"},
		{"raid1 activation killed", LV{Active: true, Attr: "Rwi-XXr-r-", KernelMajor: -1}, false, "no device number"},
		{"state unknown", LV{Active: true, Attr: "-wi-X-----", KernelMajor: 253}, false, "X"},
		{"suspended", LV{Active: true, Attr: "-wi-s-----", KernelMajor: 253}, false, "s"},
		{"no tables", LV{Active: true, Attr: "-wi-d-----", KernelMajor: 253}, false, "d"},
		{"inactive table only", LV{Active: true, Attr: "-wi-i-----", KernelMajor: 253}, false, "i"},
		{"suspended invalid snapshot", LV{Active: true, Attr: "swi-S-s---", KernelMajor: 253}, false, "S"},
	} {
		if got := tc.lv.Live(); got != tc.want {
			t.Errorf("%s (%s): Live() = %v, want %v %s", tc.name, tc.lv.Attr, got, tc.want, tc.cause)
		}
	}
}
