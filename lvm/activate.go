package lvm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"carve.dev/carve/lvm/runner"
)

// maxLeftoverComponents bounds the repairs of one activation: a thin pool
// has two components (_tmeta, _tdata), a raid1 LV two per leg, a cached LV
// its cache pool's or cachevol's too.
const maxLeftoverComponents = 12

// leftoverRE reads lvm2's refusal to activate an LV while one of its
// hidden components is active on its own: "Activation of logical volume
// vg/pool is prohibited while logical volume vg/pool_tmeta is active."
var leftoverRE = regexp.MustCompile(`prohibited while logical volume ([^/\s]+)/(\S+) is active`)

// activate runs an lvchange that activates vg/name, repairing what an
// interrupted activation of it left behind.
//
// lvm2 activates an LV with components (a thin pool's metadata and data,
// raid legs) as one device-mapper tree, components first. An activation
// cut short, by a SIGKILL of carve that takes its lvm2 children along or
// by the runner's timeout, can leave components active without their LV.
// lvm2 then reads them as components activated on their own (read-only, for
// inspection) and refuses to activate the LV while they are, on every later
// try: the pool's volumes, or the raid1 volume, could never be published
// again. Such a component of this very LV, active while the LV is not,
// serves nothing but that half-done activation (Carve never activates a
// component by itself), so it is deactivated and the activation run again.
func (c *Client) activate(ctx context.Context, what, vg, name string, args ...string) error {
	for range maxLeftoverComponents {
		err := c.lvchange(ctx, what, vg, name, args...)
		component, ok := leftoverComponent(err, vg, name)
		if !ok {
			return err
		}
		if _, derr := c.run(ctx, "lvchange", "-an", vg+"/"+component); derr != nil {
			return fmt.Errorf("%w; deactivating %s/%s, left active by an interrupted activation: %w", err, vg, component, derr)
		}
	}
	return fmt.Errorf("lvchange (%s) %s/%s: still refused after deactivating %d leftover components", what, vg, name, maxLeftoverComponents)
}

// leftoverComponent returns the component of vg/name that err says blocks
// its activation; only a hidden sub-LV of name itself counts, never another
// LV lvm2 might name.
func leftoverComponent(err error, vg, name string) (string, bool) {
	var rerr *runner.Error
	if err == nil || !errors.As(err, &rerr) {
		return "", false
	}
	m := leftoverRE.FindStringSubmatch(rerr.Stderr)
	if m == nil || m[1] != vg || !strings.HasPrefix(m[2], name+"_") || ValidateVGName(m[1]) != nil {
		return "", false
	}
	// A component's name is name_suffix with lvm2's reserved suffixes
	// (_tmeta, _tdata, _rimage_0, ...): letters, digits and underscores.
	suffix := m[2][len(name)+1:]
	if suffix == "" {
		return "", false
	}
	if strings.Trim(suffix, "_abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", false
	}
	return m[2], true
}
