package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"carve.dev/carve/lvm/runner"
)

func lvmError(stderr string) *runner.Error {
	return &runner.Error{Name: "lvm", Args: []string{"x"}, ExitCode: 5, Stderr: stderr, Err: errors.New("exit status 5")}
}

// Messages as printed by lvm2 2.03.16 (captured on the host, where metadata
// commands work without device-mapper).
func TestClassifyMessages(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   error
	}{
		{"  Logical Volume \"a\" already exists in volume group \"vgh\"\n", ErrAlreadyExists},
		{"  Volume group \"vgh\" has insufficient free space (252 extents): 512 required.\n", ErrNoSpace},
		{"  Insufficient free space: 509 extents needed, but only 252 available\n", ErrNoSpace},
		{"  Insufficient suitable allocatable extents for logical volume x: 10 more required\n", ErrNoSpace},
		{"  Failed to find logical volume \"vgh/zz\"\n", ErrNotFound},
		{"  Volume group \"novg\" not found\n  Cannot process volume group novg\n", ErrNotFound},
		{"  Logical volume vg/lv in use.\n", ErrBusy},
		{"  Logical volume vg/lv contains a filesystem in use.\n", ErrBusy},
		{"  device-mapper: remove ioctl on vg-lv failed: Device or resource busy\n", ErrBusy},
		// A warning about a missing device must not hide the real failure.
		{"  WARNING: Couldn't find device with uuid abc.\n  WARNING: VG vg is missing PV abc (last written to /dev/vdb).\n" +
			"  Volume group \"vg\" has insufficient free space (1 extents): 5 required.\n", ErrNoSpace},
		{"  WARNING: Device for PV abc not found or rejected by a filter.\n  Cannot change VG vg while PVs are missing.\n", ErrPVMissing},
		{"  New size given (1 extents) not larger than existing size (3 extents)\n", nil},
		{"", nil},
	} {
		err := classify(lvmError(tc.stderr))
		for _, s := range []error{ErrNotFound, ErrAlreadyExists, ErrNoSpace, ErrBusy, ErrPVMissing} {
			if got := errors.Is(err, s); got != (s == tc.want) {
				t.Errorf("classify(%q): errors.Is(%v) = %v", tc.stderr, s, got)
			}
		}
		var rerr *runner.Error
		if !errors.As(err, &rerr) || rerr.Stderr != tc.stderr {
			t.Errorf("classify(%q) lost the *runner.Error", tc.stderr)
		}
	}
}

func TestClassifyKeepsOtherErrors(t *testing.T) {
	plain := errors.New("boom")
	if classify(plain) != plain || classify(nil) != nil {
		t.Error("classify changed an error that is not a *runner.Error")
	}
	timeout := &runner.Error{Name: "lvm", Err: context.DeadlineExceeded, ExitCode: -1}
	if err := classify(timeout); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout became %v", err)
	}
}

func TestClassifiedMessageHasContext(t *testing.T) {
	err := fmt.Errorf("lvcreate vg/x: %w", classify(lvmError("  Insufficient free space: 2 extents needed, but only 1 available\n")))
	want := "lvcreate vg/x: lvm x: exit status 5: Insufficient free space: 2 extents needed, but only 1 available"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Error("context wrapping lost ErrNoSpace")
	}
}

// TestClassifyCapturedStderr runs the classifier over the stderr that
// capture.sh recorded from real failures in the VM.
func TestClassifyCapturedStderr(t *testing.T) {
	want := map[string]error{
		"err-vg-notfound":       ErrNotFound,
		"err-lv-notfound":       ErrNotFound,
		"err-lvremove-notfound": ErrNotFound,
		"err-exists":            ErrAlreadyExists,
		"err-nospace-create":    ErrNoSpace,
		"err-nospace-extend":    ErrNoSpace,
		"err-thin-nospace":      ErrNoSpace,
		"err-busy-remove":       ErrBusy,
		"err-busy-deactivate":   ErrBusy,
		"err-partial-create":    ErrPVMissing,
		// Volume types.
		"err-thin-nopool":        ErrNotFound,
		"err-raid1-legs":         ErrNoSpace,
		"err-stripes-pvs":        ErrNoSpace,
		"err-busy-extend-origin": ErrBusy,
		// Taken on a loop device (no VM needed): 1066 LVs with Carve's
		// tags filled the default metadata area (TestMetadataFullIsNoSpace).
		"err-metadata-full": ErrMetadataFull,
		// From carve node in the e2e's VM before it loaded dm_writecache,
		// and from lvcreate on a host kernel without device-mapper.
		"err-writecache-nokernel": ErrKernelTarget,
		"err-striped-nokernel":    ErrKernelTarget,
		// A thin pool left ahead of its metadata by a cut command (the VM,
		// messages sent by hand): no sentinel, runThinCommand reads them.
		"err-thin-taken": nil,
		"err-thin-ahead": nil,
	}
	files, _ := filepath.Glob("testdata/err-*.stderr")
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".stderr")
		kind, ok := want[name]
		if !ok {
			t.Errorf("%s: no expectation for this fixture", f)
			continue
		}
		seen[name] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := kindOf(string(b))
		if got != kind {
			t.Errorf("%s: classified as %v, want %v\nstderr:\n%s", name, got, kind, b)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("fixture testdata/%s.stderr is missing", name)
		}
	}
}
