package lvm

import (
	"context"
	"errors"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/lvm/runner"
)

// changing are the lvm2 subcommands Carve runs that change a VG: cut
// short, one may leave a device suspended, a table loaded, or a thin pool
// ahead of its metadata.
var changing = map[string]bool{"lvcreate": true, "lvchange": true, "lvremove": true, "lvextend": true, "lvconvert": true}

// repairAfterCutTimeout bounds afterCut, which runs on a context of its own:
// the caller's has often ended (that is what cut the command).
const repairAfterCutTimeout = 2 * time.Minute

// repairingKey marks the context of afterCut's own commands, so that one
// of them cut short does not start another repair.
type repairingKey struct{}

// cut tells a command that did not exit by itself: killed when its time
// or its caller's context ran out, perhaps half way.
func cut(err error) bool {
	var rerr *runner.Error
	return errors.As(err, &rerr) && rerr.ExitCode == -1
}

// afterCut repairs, before the failure is returned, what the changing
// command args (cut short) may have left in its VG, named by its last
// argument (vg or vg/lv): suspended devices and stale tables
// (RepairInterrupted), and its thin pools, checked again before their
// next thin command (thinrepair.go). Without it a device left suspended
// would block I/O until carve restarts.
func (c *Client) afterCut(ctx context.Context, args []string) {
	vg, _, _ := strings.Cut(args[len(args)-1], "/")
	if ValidateVGName(vg) != nil {
		return
	}
	c.thin.forgetVG(vg)
	rctx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), repairingKey{}, true), repairAfterCutTimeout)
	defer cancel()
	klog.InfoS("An lvm2 command was cut short; repairing what it may have left", "vg", vg, "command", args[0])
	if _, err := c.RepairInterrupted(rctx, vg); err != nil {
		klog.ErrorS(err, "Repairing after a cut lvm2 command failed; carve's restart repairs again", "vg", vg, "command", args[0])
	}
}
