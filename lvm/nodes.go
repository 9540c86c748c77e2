package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"carve.dev/carve/lvm/runner"
)

// MakeNodes makes the /dev nodes of vg's active LVs that are missing, and
// removes those of LVs no longer active (`vgmknodes`). Where no udev runs
// (Carve's container), lvm2 makes the nodes itself at the end of an
// activation: an lvchange -ay killed before that end (a SIGKILLed carve
// takes its lvm2 children along) leaves the LV active in the kernel, so
// reported active, with no /dev/VG/LV to open.
//
// Its result is what it is for: every active LV that has a path has its
// node. lvm2 2.03's vgmknodes exits 5 with no message of its own in states
// a kill leaves behind (seen at carve's start in the soak, after kills
// during a thick snapshot's copy and a raid1 create), having made the
// nodes all the same: that exit alone is no failure, a node still missing
// afterwards is.
func (c *Client) MakeNodes(ctx context.Context, vg string) error {
	if err := ValidateVGName(vg); err != nil {
		return err
	}
	_, err := c.run(ctx, "vgmknodes", vg)
	if err != nil && !isBareFailure(err) {
		return fmt.Errorf("vgmknodes %s: %w", vg, err)
	}
	lvs, lerr := c.ListLVs(ctx, vg)
	if lerr != nil {
		return errors.Join(err, fmt.Errorf("vgmknodes %s: read back its LVs: %w", vg, lerr))
	}
	var missing []string
	for _, lv := range lvs {
		if !lv.Active || lv.Path == "" {
			continue
		}
		if _, serr := os.Stat(lv.Path); serr != nil {
			missing = append(missing, lv.Path)
		}
	}
	if len(missing) > 0 {
		return errors.Join(fmt.Errorf("vgmknodes %s: active LVs still without a device node: %s", vg, strings.Join(missing, ", ")), err)
	}
	return nil
}

// isBareFailure: lvm2 failed with no message of its own, only the final
// "Command failed with status code N." line.
func isBareFailure(err error) bool {
	var rerr *runner.Error
	if !errors.As(err, &rerr) || rerr.ExitCode <= 0 {
		return false
	}
	for _, l := range strings.Split(rerr.Stderr, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "Command failed with status code") {
			return false
		}
	}
	return true
}
