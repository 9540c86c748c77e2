package lvm

import (
	"errors"
	"fmt"
	"strings"

	"carve.dev/carve/lvm/runner"
)

// Sentinel errors. Command failures wrap one of them together with the
// *runner.Error that carries lvm2's stderr, so both errors.Is and errors.As
// work on the same error.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrNoSpace       = errors.New("insufficient free space")
	ErrBusy          = errors.New("in use")
	ErrInvalidName   = errors.New("invalid name")
	// ErrInvalidArgument refuses a request before any command runs: a size
	// of zero, conflicting volume types, a stripe size lvm2 would not take,
	// a snapshot of the wrong kind of origin.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrPVMissing: lvm2 changes no LV of a VG while one of its PVs is
	// missing (`Cannot change VG vg while PVs are missing.`), until the
	// disk is back or an administrator removes it from the VG.
	ErrPVMissing = errors.New("physical volume missing")
	// ErrKernelTarget: the node's kernel lacks the device-mapper target an
	// LV type needs (dm-writecache, dm-thin-pool, dm-raid...), which
	// lvm2 could not load ("writecache target support missing from
	// kernel?", "Required device-mapper target(s) not detected in your
	// kernel"). A node matter: load the module on the host.
	ErrKernelTarget = errors.New("device-mapper target missing from the node's kernel (load its module: modprobe dm-writecache, dm-thin-pool, dm-raid...)")
	// ErrMetadataFull is a VG whose metadata area has no room for the
	// change (lvm2: "exceeds maximum metadata size"). It is a lack of
	// space (errors.Is ErrNoSpace): more data space does not help, a PV
	// with a larger metadata area (pvcreate --metadatasize) does.
	ErrMetadataFull = fmt.Errorf("VG metadata area full, a PV with a larger metadata area (pvcreate --metadatasize) makes room: %w", ErrNoSpace)
)

// classified joins a sentinel to the error it was read from.
type classified struct {
	kind error
	err  error
}

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.kind, c.err} }

// stderrRule maps a fragment of lvm2's (lower-cased) error output to a
// sentinel. Order matters: the first rule that matches wins, and the more
// specific outcomes (no space, exists, busy) come before "not found", which
// lvm2 also prints about unrelated devices.
type stderrRule struct {
	fragment string
	kind     error
}

var stderrRules = []stderrRule{
	// `VG vg 1068 metadata on /dev/sdb (521650 bytes) exceeds maximum
	// metadata size (521472 bytes)`, then `Failed to write VG vg.`
	{"exceeds maximum metadata size", ErrMetadataFull},
	{"target support missing from kernel", ErrKernelTarget},
	{"not detected in your kernel", ErrKernelTarget},
	{"insufficient free space", ErrNoSpace},           // lvcreate, lvextend
	{"insufficient suitable allocatable", ErrNoSpace}, // striped/raid/thin pool allocation
	// `Number of stripes (3) must not exceed number of physical volumes (2)`:
	// too few PVs is a lack of (placeable) space too.
	{"must not exceed number of physical volumes", ErrNoSpace},
	{"while pvs are missing", ErrPVMissing}, // `Cannot change VG vg while PVs are missing.`
	{"already exists", ErrAlreadyExists},    // `Logical Volume "x" already exists in volume group "vg"`
	{" in use", ErrBusy},                    // `Logical volume vg/lv in use.`, `... contains a filesystem in use.`
	{"is open", ErrBusy},                    // older lvm2: `Can't remove open logical volume`, `LV is open`
	{"open logical volume", ErrBusy},
	{"device or resource busy", ErrBusy},
	// `Snapshot origin volumes can be resized only while inactive`: the LV
	// is in use by its COW snapshots.
	{"resized only while inactive", ErrBusy},
	{"failed to find logical volume", ErrNotFound}, // `Failed to find logical volume "vg/lv"`
	{"not found", ErrNotFound},                     // `Volume group "vg" not found`
}

// classify wraps a failed lvm command's error with the sentinel its stderr
// names; errors it cannot read are returned unchanged.
func classify(err error) error {
	var rerr *runner.Error
	if err == nil || !errors.As(err, &rerr) {
		return err
	}
	if kind := kindOf(rerr.Stderr); kind != nil {
		return &classified{kind: kind, err: err}
	}
	return err
}

// kindOf reads lvm2's error lines. Lines starting with "WARNING:" are
// skipped: lvm2 prints them on success too (e.g. "WARNING: Couldn't find
// device with uuid ..." for a VG with a missing PV, which must not turn a
// no-space failure into "not found").
func kindOf(stderr string) error {
	var msgs []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.ToLower(strings.TrimSpace(l))
		if l != "" && !strings.HasPrefix(l, "warning:") {
			msgs = append(msgs, l)
		}
	}
	text := strings.Join(msgs, "\n")
	for _, r := range stderrRules {
		if strings.Contains(text, r.fragment) {
			return r.kind
		}
	}
	return nil
}
