package volume

import (
	"fmt"
	"slices"
	"strings"

	"carve.dev/carve/lvm"
)

// VGPolicy is how a volume's VG is picked among a class's several.
type VGPolicy string

const (
	// Spread picks the VG with the most room for the volume's type: the
	// VGs fill evenly, and each volume gets the most room to grow.
	Spread VGPolicy = "spread"
	// Pack picks the VG with the least room that still fits the volume:
	// the others stay empty for large volumes (or to be taken out).
	Pack VGPolicy = "pack"
)

// VGChoice names the VGs a volume may go in (a StorageClass's
// volumeGroup or volumeGroups) and how one is picked: listed names, in
// the order ties go, or the served VGs that carry an lvm2 tag.
type VGChoice struct {
	Names  []string
	Tag    string
	Policy VGPolicy
}

// OneVG is the choice of exactly the VG name.
func OneVG(name string) VGChoice { return VGChoice{Names: []string{name}} }

// Single is the one VG a choice names, when it names exactly one by name.
func (c VGChoice) Single() (string, bool) {
	if c.Tag == "" && len(c.Names) == 1 {
		return c.Names[0], true
	}
	return "", false
}

// Matches tells whether the VG name, carrying tags, is one of the choice's.
func (c VGChoice) Matches(name string, tags []string) bool {
	if c.Tag != "" {
		return slices.Contains(tags, c.Tag)
	}
	return slices.Contains(c.Names, name)
}

// Includes tells whether the VG vg is one of the choice's, its tags as
// spaces report them (a name-only choice needs no report).
func (c VGChoice) Includes(vg string, spaces []VGSpace) bool {
	var tags []string
	if i := slices.IndexFunc(spaces, func(s VGSpace) bool { return s.Name == vg }); i >= 0 {
		tags = spaces[i].Tags
	}
	return c.Matches(vg, tags)
}

func (c VGChoice) String() string {
	if c.Tag != "" {
		return "the volume groups tagged " + c.Tag
	}
	return "volume groups " + strings.Join(c.Names, ",")
}

// Validate checks every name and the tag as lvm2 would take them: they
// come from a StorageClass and may reach a command.
func (c VGChoice) Validate() error {
	if (c.Tag == "") == (len(c.Names) == 0) {
		return fmt.Errorf("want volume group names or one @tag: %w", ErrInvalidArgument)
	}
	if c.Tag != "" {
		if err := lvm.ValidateTag(c.Tag); err != nil {
			return fmt.Errorf("volume group tag: %v: %w", err, ErrInvalidArgument) //nolint:errorlint // the request is what is invalid: lvm's error is told, not its class
		}
	}
	for i, n := range c.Names {
		if err := lvm.ValidateVGName(n); err != nil {
			return fmt.Errorf("volume group %q: %v: %w", n, err, ErrInvalidArgument) //nolint:errorlint // as above
		}
		if slices.Contains(c.Names[:i], n) {
			return fmt.Errorf("volume group %q named twice: %w", n, ErrInvalidArgument)
		}
	}
	switch c.Policy {
	case "", Spread, Pack:
		return nil
	}
	return fmt.Errorf("policy %q (want %s or %s): %w", c.Policy, Spread, Pack, ErrInvalidArgument)
}

// candidates are the VGs of spaces the choice names, in its order (a
// tag's in the node's order).
func (c VGChoice) candidates(spaces []VGSpace) []VGSpace {
	var out []VGSpace
	if c.Tag != "" {
		for _, s := range spaces {
			if c.Matches(s.Name, s.Tags) {
				out = append(out, s)
			}
		}
		return out
	}
	for _, n := range c.Names {
		if i := slices.IndexFunc(spaces, func(s VGSpace) bool { return s.Name == n }); i >= 0 {
			out = append(out, spaces[i])
		}
	}
	return out
}

// CapacityOfChoice is what volumes of type t can still get from the
// choice's VGs on one node: their room added up, and the largest volume
// one of them can hold (a volume lives in one VG).
func CapacityOfChoice(c VGChoice, spaces []VGSpace, t Type, overprovision float64) Capacity {
	var sum Capacity
	for _, s := range c.candidates(spaces) {
		one := CapacityOf(s, t, overprovision)
		sum.AvailableBytes += one.AvailableBytes
		sum.MaximumVolumeBytes = max(sum.MaximumVolumeBytes, one.MaximumVolumeBytes)
	}
	return sum
}

// PickVG picks the VG of a new volume of type t and at least need bytes
// among the choice's VGs in spaces, by its policy; ties go to the first
// in the choice's order. A VG that cannot hold the volume now is never
// picked: none that can is ErrResourceExhausted, naming what each has,
// so that the CO tries another node.
//
// The pick is not recorded anywhere before the volume exists: callers
// look for the volume's name in every candidate first, so that a retry
// finds the VG an earlier call carved in, whatever the space says now.
func PickVG(c VGChoice, spaces []VGSpace, t Type, overprovision float64, need int64) (string, error) {
	cands := c.candidates(spaces)
	if len(cands) == 0 {
		return "", fmt.Errorf("no %s on this node: %w", c, ErrResourceExhausted)
	}
	best, bestRoom := "", int64(0)
	var seen []string
	for _, s := range cands {
		capy := CapacityOf(s, t, overprovision)
		seen = append(seen, fmt.Sprintf("%s: %s", s.Name, lvm.FormatSize(uint64(capy.MaximumVolumeBytes))))
		if capy.MaximumVolumeBytes < need {
			continue
		}
		better := capy.AvailableBytes > bestRoom
		if c.Policy == Pack {
			better = capy.AvailableBytes < bestRoom
		}
		if best == "" || better {
			best, bestRoom = s.Name, capy.AvailableBytes
		}
	}
	if best == "" {
		return "", fmt.Errorf("none of %s fits %s (largest volume each: %s): %w",
			c, lvm.FormatSize(uint64(need)), strings.Join(seen, ", "), ErrResourceExhausted)
	}
	return best, nil
}
