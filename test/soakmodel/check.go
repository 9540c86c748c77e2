package soakmodel

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Checker gives the verdicts of a check: what a driver read (of LVM, of
// its CO's objects, of the mounts, of a volume's files) against what the
// model says. A verdict is a failure the driver reports (the soak goes on,
// to find more); what is there and the model does not hold is a leak, and
// at the end (Ending: the model is empty) every difference is one.
type Checker struct {
	Fail   func(msg string)
	Stats  *Stats
	Ending bool
}

// Same reports where got and want differ, key by key, in one failure; it
// tells whether they agree.
func Same[V comparable](c *Checker, what string, got, want map[string]V) bool {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		w, ok := want[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: have %v, want none", k, got[k]))
			c.Stats.Leak(what + ": " + k)
		case w != got[k]:
			diffs = append(diffs, fmt.Sprintf("%s: have %v, want %v", k, got[k], w))
			if c.Ending {
				c.Stats.Leak(what + ": " + k)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %v", k, want[k]))
		}
	}
	if len(diffs) > 0 {
		c.Fail(fmt.Sprintf("%s differ from the model:\n  %s", what, strings.Join(diffs, "\n  ")))
	}
	return len(diffs) == 0
}

// Free checks the VG's free space: its free space before the soak (base)
// less what the model takes (used). At the end a difference is a leak.
func (c *Checker) Free(vg string, base, used, free int64) {
	c.Stats.Checked("VG free space as the model")
	if want := base - used; free != want {
		c.Fail(fmt.Sprintf("VG %s has %d MiB free (%d bytes); the model's volumes and snapshots leave %d MiB (%+d bytes)",
			vg, free>>20, free, want>>20, free-want))
		if c.Ending || free < want {
			c.Stats.Leak(fmt.Sprintf("%d bytes of VG %s", want-free, vg))
		}
	}
}

// Read checks a read of a volume (what: the volume, as the driver names
// it) against its acknowledged writes (Writes.Check) and counts the files
// checked.
func (c *Checker) Read(what string, acked Writes, read map[string]Sum, exact bool) {
	checked, problems := acked.Check("file", read, exact)
	c.Problems(what, problems)
	c.Stats.Writes(0, checked)
}

// Problems reports the problems a read of volume what found, in one
// failure.
func (c *Checker) Problems(what string, problems []string) {
	if len(problems) > 0 {
		c.Fail(fmt.Sprintf("%s: %s", what, strings.Join(problems, "; ")))
	}
}
