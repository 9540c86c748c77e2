package nodefs

import (
	"context"
	"strings"

	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// nodeExec adapts the project's exec for one mount-utils call, which only
// ever uses Command (no context):
//   - blkid is bound to ctx: it only reads, so killing it is harmless.
//   - mkfs.* is never bound to ctx: a format cut short could leave a partial
//     signature, and then the device would be refused forever instead of
//     formatted. It is logged at level 0, whoever decided to run it.
//   - fsck and resize tools run to completion for the same reason.
type nodeExec struct {
	utilexec.Interface
	ctx context.Context
}

func (m *Mounter) execFor(ctx context.Context) utilexec.Interface {
	return nodeExec{Interface: m.exec, ctx: ctx}
}

// Command runs blkid with ctx and logs mkfs; see nodeExec.
func (e nodeExec) Command(name string, args ...string) utilexec.Cmd {
	if name == "blkid" {
		return e.CommandContext(e.ctx, name, args...)
	}
	cmd := e.Interface.Command(name, args...)
	fsType, isMkfs := strings.CutPrefix(name, "mkfs.")
	if !isMkfs {
		return cmd
	}
	device := ""
	if len(args) > 0 {
		device = args[len(args)-1] // mount-utils puts the device last
	}
	klog.InfoS("formatting", "device", device, "fsType", fsType, "args", args)
	return &formatCmd{Cmd: cmd, device: device, fsType: fsType}
}

// formatCmd logs the outcome of an mkfs run at level 0.
type formatCmd struct {
	utilexec.Cmd
	device, fsType string
}

// CombinedOutput is what mount-utils uses to run mkfs.
func (c *formatCmd) CombinedOutput() ([]byte, error) {
	out, err := c.Cmd.CombinedOutput()
	if err != nil {
		klog.ErrorS(err, "format failed", "device", c.device, "fsType", c.fsType, "output", string(out))
		return out, err
	}
	klog.InfoS("formatted", "device", c.device, "fsType", c.fsType)
	return out, nil
}
