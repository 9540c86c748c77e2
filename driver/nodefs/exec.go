package nodefs

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"

	"carve.dev/carve/lvm/runner"
)

// nodeExec adapts the project's exec for one mount-utils call, which only
// ever uses Command (no context), and gives each command its class (see
// lvm/runner):
//   - Quick probes (blkid, blockdev, btrfs inspect-internal) are metadata
//     commands bound to ctx: they only read, so killing them is harmless,
//     and the runner's short timeout notices a hang.
//   - Everything else (mkfs.*, fsck, resize2fs, xfs_growfs, btrfs
//     filesystem resize) is data work, whose time grows with the device.
//     It runs under data: detached from ctx, with a deadline sized for the
//     device (deviceBudget). A format cut short could leave a partial
//     signature, and then the device would be refused forever instead of
//     formatted; a fsck or resize cut short leaves the same work to redo,
//     and would be cut again. So neither the caller's cancellation nor the
//     metadata timeout stops them, only a hang that outlasts the budget.
//     Unknown tools count as data: taking a probe for data work only
//     delays noticing its hang; taking data work for a probe kills it.
//
// An operation that runs no data work (data is nil) runs everything as a
// probe. mkfs is logged at level 0, whoever decided to run it.
type nodeExec struct {
	utilexec.Interface
	ctx  context.Context
	data context.Context
	// probe, when set, judges the blkid of its device (FormatAndMount).
	probe *probeGuard
}

// probeExec is the exec of an operation that only probes.
func (m *Mounter) probeExec(ctx context.Context) nodeExec {
	return nodeExec{Interface: m.exec, ctx: ctx}
}

// dataExec is the exec of an operation that may do data work on device;
// done ends its data budget.
func (m *Mounter) dataExec(ctx context.Context, device string) (e nodeExec, done context.CancelFunc, err error) {
	size, err := BlockSize(device)
	if err != nil {
		return nodeExec{}, nil, fmt.Errorf("size the work on %s: %w", device, err)
	}
	data, cancel := runner.DataWork(context.WithoutCancel(ctx), runner.DataBudget(size))
	return nodeExec{Interface: m.exec, ctx: ctx, data: data}, cancel, nil
}

// isProbe tells the quick, read-only commands mount-utils runs.
func isProbe(name string, args []string) bool {
	switch name {
	case "blkid", "blockdev":
		return true
	case "btrfs":
		return len(args) > 0 && args[0] == "inspect-internal"
	}
	return false
}

// Command gives the command its class and logs mkfs; see nodeExec.
func (e nodeExec) Command(name string, args ...string) utilexec.Cmd {
	if e.probe != nil && name == "blkid" && len(args) > 0 && args[len(args)-1] == e.probe.device {
		return &guardedProbe{Cmd: e.CommandContext(e.ctx, name, args...), g: e.probe}
	}
	if e.data == nil || isProbe(name, args) {
		return e.CommandContext(e.ctx, name, args...)
	}
	cmd := e.CommandContext(e.data, name, args...)
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

// guardedProbe is a blkid whose result its probeGuard judges.
type guardedProbe struct {
	utilexec.Cmd
	g *probeGuard
}

// CombinedOutput is what mount-utils uses to run blkid.
func (c *guardedProbe) CombinedOutput() ([]byte, error) {
	out, err := c.Cmd.CombinedOutput()
	return out, c.g.check(out, err)
}

// replayExec answers mount-utils' reading of a blkid (GetDiskFormat, which
// only runs Command(...).CombinedOutput()) with a result already had. Its
// other methods are the nil embedded ones: nothing calls them.
type replayExec struct {
	utilexec.Interface
	out []byte
	err error
}

func (r *replayExec) Command(string, ...string) utilexec.Cmd {
	return replayCmd{out: r.out, err: r.err}
}

type replayCmd struct {
	utilexec.Cmd
	out []byte
	err error
}

func (c replayCmd) CombinedOutput() ([]byte, error) { return c.out, c.err }
